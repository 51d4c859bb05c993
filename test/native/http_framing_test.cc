// Request framing by llhttp (core/http/framing.h, docs/http.md "Framing"): where requests begin
// and end in one read (RFC 9112 §2, §6), and which of them a stored media object may answer.
#include "check.h"

#include <string>

#include "core/http/framing.h"

using namespace skylark::http;

static Framing frame(const std::string& s) { return FrameRequests(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }
static const std::string kPart = "GET /hls/stm_1/a128/3.1.m4s HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nUser-Agent: x\r\nAccept: */*\r\n\r\n";

TEST(framing_one_plain_get) {
  const Framing f = frame(kPart);
  CHECK(f.end == FrameEnd::kExact);
  CHECK(f.line_complete);
  CHECK(f.crlf);
  CHECK_EQ(f.heads_count, 1u);
  CHECK(f.fields == Fields::kPlain);
  CHECK(f.heads[0].method == Method::kGet);
  CHECK_EQ(int{f.heads[0].http_major}, 1);
  CHECK_EQ(int{f.heads[0].http_minor}, 1);
  CHECK(f.heads[0].target == "/hls/stm_1/a128/3.1.m4s");
  CHECK(frame("GET /hls/a HTTP/1.1\r\nhost: a\r\nSec-Fetch-Mode: cors\r\nsec-ch-ua-mobile: ?0\r\nSec-CH-UA: \"x\"\r\nX-Playback-Session-Id: 1\r\n\r\n").fields == Fields::kPlain);
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHOST: a\r\nUSER-AGENT: x\r\nAccept-Language: en\r\nUpgrade-Insecure-Requests: 1\r\nDNT: 1\r\n\r\n").fields == Fields::kPlain);
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nHosts: b\r\n\r\n").fields == Fields::kOther);
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nSec-Fetch\r\n\r\n").end == FrameEnd::kInvalid);
}

TEST(framing_no_bytes_is_exact_and_empty) {
  const Framing f = frame("");
  CHECK(f.end == FrameEnd::kExact);
  CHECK_EQ(f.heads_count, 0u);
  CHECK(!f.line_complete);
}

TEST(framing_bodies_are_announced_whatever_the_spelling) {
  // A body announced: kOther, and the read ends inside it until it is all there.
  const Framing cl = frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n");
  CHECK(cl.end == FrameEnd::kPartial);
  CHECK(cl.fields == Fields::kOther);
  CHECK(cl.heads[0].fields == Fields::kOther);
  const Framing whole = frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nGET /");
  CHECK(whole.end == FrameEnd::kExact);
  CHECK_EQ(whole.heads_count, 1u);  // the five bytes are the body, not a request
  // The body looks like a request: still one request, still a body.
  const std::string body = "GET /hls/x HTTP/1.1\r\nHost: a\r\n\r\n";
  const Framing looks = frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  CHECK(looks.end == FrameEnd::kExact);
  CHECK_EQ(looks.heads_count, 1u);
  CHECK(looks.fields == Fields::kOther);
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n").fields == Fields::kOther);
  const Framing te = frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
  CHECK(te.end == FrameEnd::kExact);
  CHECK(te.fields == Fields::kOther);
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab").end == FrameEnd::kPartial);
}

TEST(framing_refuses_malformed_heads) {
  // RFC 9112 §5.1: no whitespace between a field name and the colon (a server answers 400).
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\nhello").end == FrameEnd::kInvalid);
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\nhello").refused);
  CHECK(frame("GARBAGE\r\n\r\n").refused);
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding\t: chunked\r\n\r\n").end == FrameEnd::kInvalid);
  // §6.3: Content-Length with Transfer-Encoding, two different lengths, a length that is no number.
  CHECK(frame("GET /a HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").end == FrameEnd::kInvalid);
  CHECK(frame("GET /a HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab").end == FrameEnd::kInvalid);
  CHECK(frame("GET /a HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\nab").end == FrameEnd::kInvalid);
  CHECK(frame("GET /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n").end != FrameEnd::kExact);
  CHECK(frame("GARBAGE\r\n\r\n").end == FrameEnd::kInvalid);
  const Framing spaced = frame("GET /a HTTP/1.1\r\nHo st: a\r\n\r\n");
  CHECK(spaced.end == FrameEnd::kInvalid || spaced.fields == Fields::kOther);
  CHECK(frame("GET /a HTTP/1.1\r\n folded: a\r\n\r\n").end == FrameEnd::kInvalid);
}

TEST(framing_upgrades_are_not_http_after_the_head) {
  CHECK(frame("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n").end == FrameEnd::kInvalid);
  CHECK(frame("CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n").end == FrameEnd::kInvalid);
  // Not refused: the library answers an upgrade (or refuses it) itself.
  CHECK(!frame("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n").refused);
  CHECK(!frame("CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n").refused);
  CHECK(!frame("GET /a HTTP/1.1\r\nHost: a\r\n\r\n").refused);
}

TEST(framing_cut_short_heads) {
  for (size_t cut = 1; cut < kPart.size(); ++cut) {
    const std::string bytes = kPart.substr(0, cut);
    const Framing f = frame(bytes);
    CHECK(f.end == FrameEnd::kPartial);
    CHECK_EQ(f.heads_count, 0u);
    CHECK(f.line_complete == (cut >= kPart.find("\r\n")));  // the version is known at its last digit
  }
  const Framing g = frame("G");
  CHECK(g.end == FrameEnd::kPartial);
  CHECK(!g.line_complete);
  const std::string v_bytes = "GET /v2/streams HTT";
  const Framing v = frame(v_bytes);
  CHECK(v.end == FrameEnd::kPartial);
  CHECK(!v.line_complete);
  const std::string line10_bytes = "GET /v2/streams HTTP/1.0\r\nHo";
  const Framing line10 = frame(line10_bytes);
  CHECK(line10.line_complete);
  CHECK_EQ(int{line10.heads[0].http_minor}, 0);
  CHECK(line10.heads[0].target == "/v2/streams");
}

TEST(framing_a_line_without_version) {
  // llhttp reads it as HTTP/0.9: the line is whole once the head ended, and it is not HTTP/1.x.
  const std::string bytes = "GET /hls/a\r\n\r\n";
  const Framing f = frame(bytes);
  CHECK(f.line_complete);
  CHECK(f.heads_count == 0 || f.heads[0].http_major == 0);
}

TEST(framing_pipelined_requests) {
  const Framing two = frame(kPart + kPart);
  CHECK(two.end == FrameEnd::kExact);
  CHECK_EQ(two.heads_count, 2u);
  const Framing cut = frame(kPart + kPart.substr(0, 10));
  CHECK(cut.end == FrameEnd::kPartial);
  CHECK_EQ(cut.heads_count, 1u);
  // Empty lines after the last request: bytes that begin none, so the read does not end exactly.
  CHECK(frame(kPart + "\r\n").end == FrameEnd::kPartial);
  std::string many;
  for (int i = 0; i < 12; ++i) many += "HEAD /hls/" + std::to_string(i) + " HTTP/1.1\r\nHost: a\r\n\r\n";
  const Framing m = frame(many);  // `many` outlives the targets read below
  CHECK(m.end == FrameEnd::kExact);
  CHECK_EQ(m.heads_count, 12u);
  CHECK(m.heads[7].target == "/hls/7");
  CHECK(m.heads[7].method == Method::kHead);
}

TEST(framing_fields_that_keep_a_stored_answer_away) {
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\n\r\n").fields == Fields::kKnown);
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"x\"\r\n\r\n").fields == Fields::kKnown);
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer x\r\n\r\n").fields == Fields::kKnown);
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nCookie: a=b\r\n\r\n").fields == Fields::kKnown);
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").fields == Fields::kKnown);
  CHECK(frame("GET /hls/a HTTP/1.1\r\n\r\n").fields == Fields::kKnown);                       // no Host
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").fields == Fields::kKnown);  // two
  CHECK(frame("GET /hls/a HTTP/1.0\r\nHost: a\r\n\r\n").fields == Fields::kKnown);             // not persistent
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n").fields == Fields::kOther);
  CHECK(frame("GET /hls/a HTTP/1.1\r\nHost: a\r\nX-Unknown: 1\r\n\r\n").fields == Fields::kOther);
  // The worst head decides for the read; each head keeps its own.
  const std::string mixed_bytes = kPart + "GET /hls/b HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\n\r\n";
  const Framing mixed = frame(mixed_bytes);
  CHECK(mixed.fields == Fields::kKnown);
  CHECK(mixed.heads[0].fields == Fields::kPlain);
  CHECK(mixed.heads[1].fields == Fields::kKnown);
}

TEST(framing_bare_line_ends) {
  // Taken by the parser or not, a bare LF never makes a read one a stored object answers.
  const Framing lf = frame("GET /hls/a HTTP/1.1\nHost: a\n\n");
  CHECK(lf.end != FrameEnd::kExact || !lf.crlf);
  const Framing lf2 = frame("GET /hls/a HTTP/1.1\r\nHost: a\n\r\n");
  CHECK(lf2.end != FrameEnd::kExact || !lf2.crlf);
  // A CR alone, anywhere: never a read that ends exactly with CRLF line ends.
  const std::string base = "GET /hls/a HTTP/1.1\r\nHost: a\r\nAccept: b\r\n\r\n";
  for (size_t i = 0; i <= base.size(); ++i) {
    for (int replace = 0; replace < 2; ++replace) {
      std::string bare = base;
      if (replace == 0) bare.insert(i, "\r");
      else if (i < bare.size() && bare[i] != '\r') bare[i] = '\r';
      else continue;
      const Framing f = frame(bare);
      CHECK(f.end != FrameEnd::kExact || !f.crlf || f.heads[0].method != Method::kGet || bare[0] != 'G');
    }
  }
  // A request line typed by hand (nc sends bare LFs) still says its version.
  const Framing typed = frame("GET / HTTP/1.0\n\n");
  CHECK(typed.line_complete);
  CHECK_EQ(int{typed.heads[0].http_minor}, 0);
  CHECK(frame(kPart).crlf);
}

TEST(framing_byte_at_a_time_prefixes_never_end_exactly) {
  const std::string two = kPart + "GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nab";
  for (size_t cut = 0; cut <= two.size(); ++cut) {
    const Framing f = frame(two.substr(0, cut));
    const bool at_end = cut == 0 || cut == kPart.size() || cut == two.size();
    CHECK((f.end == FrameEnd::kExact) == at_end);
  }
}

int main() { return skylark_test::run_all(); }
