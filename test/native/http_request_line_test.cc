// The request-line reader the HTTP/1.0 front classifies connections with (core/http/request_line.h).
#include "check.h"

#include <string>

#include "core/http/request_line.h"

using namespace skylark::http;

// The parsed target points into the input: keep each input alive for the whole test.
static RequestLine parse(const char* s) {
  return ParseRequestLine(reinterpret_cast<const uint8_t*>(s), std::char_traits<char>::length(s));
}

TEST(http10_request_line) {
  auto l = parse("GET /listen/stm_1.mp3 HTTP/1.0\r\nHost: a\r\n\r\n");
  CHECK(l.version == RequestVersion::kHttp10);
  CHECK(l.target == "/listen/stm_1.mp3");
  CHECK(TargetStartsWith(l, "/listen/"));
  CHECK(!TargetStartsWith(l, "/hls/"));
}

TEST(http11_request_line) {
  auto l = parse("GET /hls/x/index.m3u8?_HLS_msn=3 HTTP/1.1\r\n");
  CHECK(l.version == RequestVersion::kHttp11);
  CHECK(l.target == "/hls/x/index.m3u8?_HLS_msn=3");
}

TEST(bare_lf_and_leading_empty_line) {
  CHECK(parse("GET / HTTP/1.0\n").version == RequestVersion::kHttp10);
  CHECK(parse("\r\nGET / HTTP/1.0\r\n").version == RequestVersion::kHttp10);
  CHECK(parse("\nGET / HTTP/1.1\r\n").version == RequestVersion::kHttp11);
}

TEST(incomplete_line) {
  CHECK(parse("").version == RequestVersion::kIncomplete);
  CHECK(parse("GET / HTTP/1.0").version == RequestVersion::kIncomplete);
  CHECK(parse("GET / HTTP/1.0\r").version == RequestVersion::kIncomplete);
  CHECK(!TargetStartsWith(parse("GET /listen/ HTT"), "/listen/"));
}

TEST(other_versions_and_garbage) {
  CHECK(parse("GET / HTTP/0.9\r\n").version == RequestVersion::kOther);
  CHECK(parse("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").version == RequestVersion::kOther);
  CHECK(parse("GET /\r\n").version == RequestVersion::kOther);
  CHECK(parse(" / HTTP/1.0\r\n").version == RequestVersion::kOther);
  CHECK(parse("GET  HTTP/1.0\r\n").version == RequestVersion::kOther);
  CHECK(parse("GET / HTTP/1.0 \r\n").version == RequestVersion::kOther);
  CHECK(parse("GET / http/1.0\r\n").version == RequestVersion::kOther);
  CHECK(!TargetStartsWith(parse("GET / HTTP/0.9\r\n"), "/"));
}

TEST_MAIN
