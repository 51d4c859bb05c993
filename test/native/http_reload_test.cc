// Blocking playlist reloads as the native HTTP front reads them (core/http/reload.h, docs/http.md
// "Blocking reloads held in native code", docs/ll-hls.md "Delivery directives"): the one query
// form it answers (everything else is the HLS routes'), `reached` as the layer reads it
// (rfc8216bis §6.2.5.2), and the User-Agent of a head.
#include "check.h"

#include <string>
#include <string_view>

#include "core/http/reload.h"

using namespace skylark::http;

static bool parse(std::string_view q, ReloadQuery* r) { return ParseReloadQuery(q, r); }

TEST(reload_query_forms_taken) {
  ReloadQuery r;
  CHECK(parse("sid=AbC-_9&_HLS_msn=12&_HLS_part=3", &r));
  CHECK(r.sid == "AbC-_9");
  CHECK_EQ(r.msn, 12u);
  CHECK_EQ(r.part, 3u);
  CHECK(!r.skip);
  CHECK(parse("_HLS_msn=007&_HLS_part=0&_HLS_skip=YES&sid=x", &r));
  CHECK_EQ(r.msn, 7u);
  CHECK(r.skip);
  CHECK(parse("_HLS_part=4&_HLS_msn=999999999999999", &r));
  CHECK(r.sid.empty());
  CHECK_EQ(r.msn, 999999999999999u);
}

TEST(reload_query_forms_left_to_the_routes) {
  ReloadQuery r;
  for (const char* q : {
           "", "sid=a", "_HLS_msn=1", "_HLS_part=1", "sid=a&_HLS_part=1",                 // part needs msn; msn alone is not taken
           "_HLS_msn=1&_HLS_part=1&", "&_HLS_msn=1&_HLS_part=1", "_HLS_msn=1&&_HLS_part=1",  // empty pieces
           "_hls_msn=1&_HLS_part=1", "_HLS_msn=1&_HLS_Part=1", "_HLS_msn=1&_HLS_part=1&_HLS_SKIP=YES",  // spelling
           "_HLS_msn=1&_HLS_msn=1&_HLS_part=1", "sid=a&sid=a&_HLS_msn=1&_HLS_part=1",       // repeats
           "_HLS_msn=1&_HLS_part=1&_HLS_skip=v2", "_HLS_msn=1&_HLS_part=1&_HLS_skip=yes",   // skip values
           "_HLS_msn=&_HLS_part=1", "_HLS_msn=-1&_HLS_part=1", "_HLS_msn=1e3&_HLS_part=1", "_HLS_msn=1&_HLS_part=1234567890123456",
           "_HLS_msn=1&_HLS_part=1&token=t", "_HLS_msn=1&_HLS_part=1&x", "_HLS_msn=1&_HLS_part=1&sid=", "_HLS_msn=1&_HLS_part=1&sid=a%20b",
           "_HLS_msn=1&_HLS_part=1&sid=a.b", "_HLS_msn=1&_HLS_part=1#f"}) {
    if (parse(q, &r)) {
      std::printf("taken: %s\n", q);
      CHECK(false);
    }
  }
  const std::string long_sid = "_HLS_msn=1&_HLS_part=1&sid=" + std::string(65, 'a');
  CHECK(!parse(long_sid, &r));
  const std::string max_sid = long_sid.substr(0, long_sid.size() - 1);
  CHECK(parse(max_sid, &r));
}

TEST(reload_reached_as_the_layer_reads_it) {
  const LayerPosition at{10, 2, 4};  // segment 10 in progress with parts 0-1; segment 9 had 4 parts
  CHECK(Reached(at, 10, 0));
  CHECK(Reached(at, 10, 1));
  CHECK(!Reached(at, 10, 2));
  CHECK(!Reached(at, 11, 0));
  CHECK(Reached(at, 9, 3));
  CHECK(Reached(at, 9, 4));   // past the last part of a finished segment: part 0 of the next, listed
  CHECK(Reached(at, 8, 99));  // the segment after it is finished
  const LayerPosition fresh{10, 0, 4};  // segment 10 has no part yet
  CHECK(Reached(fresh, 9, 3));
  CHECK(!Reached(fresh, 9, 4));  // part 0 of segment 10 is not listed yet
  CHECK(!Reached(fresh, 10, 0));
  const LayerPosition first{0, 1, 0};
  CHECK(Reached(first, 0, 0));
  CHECK(!Reached(first, 0, 1));
}

TEST(reload_user_agent) {
  std::string_view ua;
  CHECK(UserAgentOf("GET /a HTTP/1.1\r\nHost: a\r\nuser-AGENT: \t hls.js 1 \r\n\r\n", 512, &ua));
  CHECK(ua == "hls.js 1");
  CHECK(UserAgentOf("GET /a HTTP/1.1\r\nHost: a\r\n\r\n", 512, &ua));
  CHECK(ua.empty());
  CHECK(UserAgentOf("GET /a HTTP/1.1\r\nUser-Agent:\r\n\r\n", 512, &ua));
  CHECK(ua.empty());
  CHECK(!UserAgentOf("GET /a HTTP/1.1\r\nUser-Agent: " + std::string(513, 'x') + "\r\n\r\n", 512, &ua));
  const std::string body_like = "GET /a?User-Agent: x HTTP/1.1\r\nHost: a\r\n\r\n";
  CHECK(UserAgentOf(body_like, 512, &ua));
  CHECK(ua.empty());
}

int main() { return skylark_test::run_all(); }
