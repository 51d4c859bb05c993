// HTTP/1.x request framing (RFC 9112 §2, §3, §5, §6): where the requests in a run of bytes begin
// and end, and what each one says about who may answer it (docs/http.md "Framing"). Every framing
// decision is llhttp's (the parser Node.js itself uses, native/third_party/llhttp): no header
// grammar of our own. Pure function; no sockets, no allocation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace skylark::http {

enum class Method : uint8_t { kGet, kHead, kOther };

// Where the bytes end, in RFC 9112 terms.
enum class FrameEnd : uint8_t {
  kExact,    // exactly where a request ends (§6.3: a request without Content-Length or
             // Transfer-Encoding ends with its head), or no bytes at all
  kPartial,  // inside a request (a head cut short, a body announced and not all there), or
             // after bytes that begin none (empty lines after the last request)
  kInvalid,  // the parser refused them (§5.1, §6.3: the server answers 400 and closes), or a
             // request switched protocols (Upgrade, CONNECT): what follows is not HTTP/1.1
};

// What a request's header fields mean for who may answer it (names compared case-insensitively).
enum class Fields : uint8_t {
  kPlain,  // only names on the plain list (Host exactly once, User-Agent, Accept*, Connection,
           // Origin, Referer, Cache-Control, Pragma, DNT, Sec-Fetch-*, Sec-CH-UA*, …) and a
           // persistent connection (§9.3): a stored immutable object may answer it
  kKnown,  // also names that change the answer but not the framing (Range, If-*, Authorization,
           // Cookie, forwarding fields), Host missing or repeated, or Connection: close
  kOther,  // a body announced (Content-Length or Transfer-Encoding, whatever the value), Expect,
           // Upgrade, or a name on neither list
};

// One request head: its request line (§3) and its fields' class. `target` points into the bytes.
struct RequestHead {
  Method method = Method::kOther;
  uint8_t http_major = 0;
  uint8_t http_minor = 0;
  Fields fields = Fields::kPlain;
  std::string_view target;
};

constexpr size_t kMaxFramedHeads = 8;  // heads reported one by one; more are only counted

struct Framing {
  FrameEnd end = FrameEnd::kExact;
  // kInvalid because the parser refused the bytes (RFC 9112 §5.1, §6.3: a server answers 400 and
  // closes), not because a request switched protocols.
  bool refused = false;
  // The first request line (method, target, version) is whole: heads[0] has all three (a line
  // without a version, which llhttp reads as HTTP/0.9, once its head has ended).
  bool line_complete = false;
  // Every line of the whole requests ends in CRLF (§2.2 lets a server take a bare LF; a stored
  // answer does not). Checked when no request announced a body (`fields` not kOther).
  bool crlf = true;
  // Requests whose head ended within the bytes.
  uint32_t heads_count = 0;
  // The worst class of every head seen (including one cut short).
  Fields fields = Fields::kPlain;
  // The first kMaxFramedHeads heads; heads[0] also while its head is cut short (line_complete).
  RequestHead heads[kMaxFramedHeads];
};

// Frames `data` (`size` bytes, any content) as the start of a request stream, as a server reads a
// connection from a message boundary (RFC 9112 §2.2, §9.3). Never throws; O(size).
Framing FrameRequests(const uint8_t* data, size_t size);

}  // namespace skylark::http
