#include "core/http/framing.h"

#include <cstring>
#include <iterator>

#include "llhttp.h"

namespace skylark::http {
namespace {

// Header names on the two lists (lower case, sorted by length). kPlain: the request is one a stored
// immutable object answers as the HLS routes would: they change neither the framing nor the
// answer (RFC 9110 §7.2, §10.1, §12.5; RFC 9111 §5.2, §5.4; Fetch Metadata; User-Agent Client
// Hints; HLS players' session ids). kKnown: they change the answer (ranges, conditions,
// credentials, the client's address) but not the framing: the HTTP server answers such a request,
// and the connection stays framed.
struct Named {
  std::string_view name;
  Fields fields;
};
constexpr Named kNames[] = {
    {"te", Fields::kKnown},
    {"dnt", Fields::kPlain},
    {"via", Fields::kKnown},
    {"host", Fields::kPlain},
    {"range", Fields::kKnown},
    {"accept", Fields::kPlain},
    {"cookie", Fields::kKnown},
    {"origin", Fields::kPlain},
    {"pragma", Fields::kPlain},
    {"referer", Fields::kPlain},
    {"sec-gpc", Fields::kPlain},
    {"if-match", Fields::kKnown},
    {"if-range", Fields::kKnown},
    {"priority", Fields::kPlain},
    {"forwarded", Fields::kKnown},
    {"x-real-ip", Fields::kKnown},
    {"connection", Fields::kPlain},
    {"keep-alive", Fields::kPlain},
    {"user-agent", Fields::kPlain},
    {"x-request-id", Fields::kKnown},
    {"authorization", Fields::kKnown},
    {"cache-control", Fields::kPlain},
    {"if-none-match", Fields::kKnown},
    {"accept-charset", Fields::kPlain},
    {"accept-encoding", Fields::kPlain},
    {"accept-language", Fields::kPlain},
    {"x-forwarded-for", Fields::kKnown},
    {"x-forwarded-host", Fields::kKnown},
    {"if-modified-since", Fields::kKnown},
    {"x-forwarded-proto", Fields::kKnown},
    {"if-unmodified-since", Fields::kKnown},
    {"x-playback-session-id", Fields::kPlain},
    {"upgrade-insecure-requests", Fields::kPlain},
};
constexpr std::string_view kPlainPrefixes[] = {"sec-fetch-", "sec-ch-ua"};
constexpr size_t kMaxName = 40;  // longer names are on no list

// kNames' entries of each length: [kByLength[n], kByLength[n + 1]).
struct ByLength {
  uint8_t first[kMaxName + 2] = {};
  constexpr ByLength() {
    size_t at = 0;
    for (size_t n = 0; n <= kMaxName + 1; ++n) {
      while (at < std::size(kNames) && kNames[at].name.size() < n) ++at;
      first[n] = static_cast<uint8_t>(at);
    }
  }
};
constexpr ByLength kByLength{};

inline char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

bool EqualsLower(const char* at, std::string_view lower) {
  for (size_t i = 0; i < lower.size(); ++i)
    if (Lower(at[i]) != lower[i]) return false;
  return true;
}

Fields Worse(Fields a, Fields b) { return a > b ? a : b; }

Fields Classify(const char* at, size_t length, bool* host) {
  *host = false;
  if (length == 0 || length > kMaxName) return Fields::kOther;
  for (size_t i = kByLength.first[length]; i < kByLength.first[length + 1]; ++i) {
    const Named& n = kNames[i];
    if (n.name[0] != Lower(at[0]) || !EqualsLower(at, n.name)) continue;
    *host = length == 4;  // "host" is the only name of four letters
    return n.fields;
  }
  for (std::string_view p : kPlainPrefixes)
    if (length >= p.size() && EqualsLower(at, p)) return Fields::kPlain;
  return Fields::kOther;  // Content-Length, Transfer-Encoding, Expect, Upgrade and every other name
}

struct Run {
  Framing* f;
  bool in_message = false;
  uint8_t hosts = 0;
  Fields fields = Fields::kPlain;
  RequestHead* Current() { return f->heads_count < kMaxFramedHeads ? &f->heads[f->heads_count] : nullptr; }
};
Run* RunOf(llhttp_t* p) { return static_cast<Run*>(p->data); }

int OnMessageBegin(llhttp_t* p) {
  Run* r = RunOf(p);
  r->in_message = true;
  r->hosts = 0;
  r->fields = Fields::kPlain;
  if (RequestHead* h = r->Current()) *h = RequestHead{};
  return 0;
}

int OnMethodComplete(llhttp_t* p) {
  if (RequestHead* h = RunOf(p)->Current()) h->method = p->method == HTTP_GET ? Method::kGet : p->method == HTTP_HEAD ? Method::kHead : Method::kOther;
  return 0;
}

int OnUrl(llhttp_t* p, const char* at, size_t length) {
  // One call per target: the bytes are framed in one pass, paused only between messages.
  if (RequestHead* h = RunOf(p)->Current()) h->target = std::string_view(at, length);
  return 0;
}

int OnVersionComplete(llhttp_t* p) {
  Run* r = RunOf(p);
  if (RequestHead* h = r->Current()) {
    h->http_major = p->http_major;
    h->http_minor = p->http_minor;
  }
  if (r->f->heads_count == 0) r->f->line_complete = true;
  return 0;
}

int OnHeaderField(llhttp_t* p, const char* at, size_t length) {
  Run* r = RunOf(p);
  bool host = false;
  r->fields = Worse(r->fields, Classify(at, length, &host));
  if (host && r->hosts < 255) ++r->hosts;
  r->f->fields = Worse(r->f->fields, r->fields);
  return 0;
}

int OnHeadersComplete(llhttp_t* p) {
  Run* r = RunOf(p);
  if (p->flags & (F_CONTENT_LENGTH | F_CHUNKED | F_TRANSFER_ENCODING)) r->fields = Fields::kOther;
  if (r->hosts != 1 || !llhttp_should_keep_alive(p)) r->fields = Worse(r->fields, Fields::kKnown);
  r->f->fields = Worse(r->f->fields, r->fields);
  if (RequestHead* h = r->Current()) {
    h->fields = r->fields;
    h->http_major = p->http_major;  // also when the line had no version (llhttp reads it as HTTP/0.9)
    h->http_minor = p->http_minor;
  }
  if (r->f->heads_count == 0) r->f->line_complete = true;
  ++r->f->heads_count;
  return 0;
}

int OnMessageComplete(llhttp_t* p) {
  RunOf(p)->in_message = false;
  return HPE_PAUSED;  // stop right after the message: llhttp_get_error_pos() is where it ended
}

llhttp_settings_t MakeSettings() {
  llhttp_settings_t s;
  llhttp_settings_init(&s);
  s.on_message_begin = OnMessageBegin;
  s.on_method_complete = OnMethodComplete;
  s.on_url = OnUrl;
  s.on_version_complete = OnVersionComplete;
  s.on_header_field = OnHeaderField;
  s.on_headers_complete = OnHeadersComplete;
  s.on_message_complete = OnMessageComplete;
  return s;
}
const llhttp_settings_t kSettings = MakeSettings();

// Whether every LF in `data` follows a CR and every CR precedes an LF.
// (llhttp in loose mode takes a CR alone in places, e.g. "\r\r" ending a head.)
bool AllCrlf(const char* data, size_t size) {
  const char* const end = data + size;
  for (const char* at = data; (at = static_cast<const char*>(std::memchr(at, '\n', static_cast<size_t>(end - at)))) != nullptr; ++at)
    if (at == data || at[-1] != '\r') return false;
  for (const char* at = data; (at = static_cast<const char*>(std::memchr(at, '\r', static_cast<size_t>(end - at)))) != nullptr; ++at)
    if (at + 1 == end || at[1] != '\n') return false;
  return true;
}

}  // namespace

Framing FrameRequests(const uint8_t* bytes, size_t size) {
  Framing f;
  Run run{&f};
  llhttp_t parser;
  llhttp_init(&parser, HTTP_REQUEST, &kSettings);
  parser.data = &run;
  const char* const data = reinterpret_cast<const char*>(bytes);
  const char* const end = data + size;
  const char* at = data;
  const char* last_end = data;  // where the last whole request ended
  while (at < end) {
    const llhttp_errno_t err = llhttp_execute(&parser, at, static_cast<size_t>(end - at));
    if (err == HPE_OK) break;  // every byte taken: inside a request, or empty lines after the last
    if (err != HPE_PAUSED || parser.upgrade) {
      f.end = FrameEnd::kInvalid;
      f.refused = err != HPE_PAUSED && err != HPE_PAUSED_UPGRADE && !parser.upgrade;
      return f;
    }
    last_end = llhttp_get_error_pos(&parser);
    llhttp_resume(&parser);
    at = last_end;
  }
  f.end = (run.in_message || last_end != end) ? FrameEnd::kPartial : FrameEnd::kExact;
  if (f.fields != Fields::kOther) f.crlf = AllCrlf(data, static_cast<size_t>(last_end - data));
  return f;
}

}  // namespace skylark::http
