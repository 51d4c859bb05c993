// The plain-GET reader that decides when a stored media object answers a request in native code
// (core/http/plain_get.h, docs/http.md "Media objects answered in native code").
#include "check.h"

#include <string>

#include "core/http/plain_get.h"

using namespace skylark::http;

static std::string_view target(const std::string& s) {
  return PlainGetTarget(reinterpret_cast<const uint8_t*>(s.data()), s.size(), "/hls/");
}

TEST(plain_get_is_read) {
  CHECK(target("GET /hls/stm_1/a128/3.1.m4s HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nUser-Agent: x\r\n\r\n") == "/hls/stm_1/a128/3.1.m4s");
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\n\r\n") == "/hls/s/a/0.0.m4s");
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\nCONNECTION:  Keep-Alive \r\nIf-None-Match: \"x\"\r\n\r\n") == "/hls/s/a/0.0.m4s");
}

TEST(plain_get_leaves_the_rest_to_the_server) {
  // Other methods, versions, prefixes, and targets that need decoding or carry a query.
  CHECK(target("HEAD /hls/s/a/0.0.m4s HTTP/1.1\r\n\r\n").empty());
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.0\r\n\r\n").empty());
  CHECK(target("GET /api/x HTTP/1.1\r\n\r\n").empty());
  CHECK(target("GET /hls/ HTTP/1.1\r\n\r\n").empty());
  CHECK(target("GET /hls/s/a/0.0.m4s?token=x HTTP/1.1\r\n\r\n").empty());
  CHECK(target("GET /hls/s/a/%30.0.m4s HTTP/1.1\r\n\r\n").empty());
  CHECK(target("GET /hls/s/../a/0.0.m4s HTTP/1.1\r\n\r\n").empty());
  CHECK(target("GET /hls/s/a/0.0.m4s#f HTTP/1.1\r\n\r\n").empty());
  CHECK(target("GET  /hls/s/a/0.0.m4s HTTP/1.1\r\n\r\n").empty());
  // Headers that change the answer or the connection.
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\nRange: bytes=0-1\r\n\r\n").empty());
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\nrange:bytes=0-1\r\n\r\n").empty());
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\nConnection: close\r\n\r\n").empty());
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n").empty());
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\nContent-Length: 3\r\n\r\n").empty());
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").empty());
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\nExpect: 100-continue\r\n\r\n").empty());
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\nIf-Range: x\r\n\r\n").empty());
}

TEST(plain_get_needs_exactly_one_whole_head) {
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\nHost: a\r\n").empty());                 // cut short
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\nHost: a\r\n\r\nGET /hls/s/a/0.1.m4s HTTP/1.1\r\n\r\n").empty());  // pipelined
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\n\r\nx\r\n\r\n").empty());                // bytes after the head
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\nHost: a\r\n\r\n").empty());                // bare LF
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\nHost a\r\n\r\n").empty());               // no colon
  CHECK(target("GET /hls/s/a/0.0.m4s HTTP/1.1\r\n: a\r\n\r\n").empty());                  // empty name
  CHECK(target("").empty());
  CHECK(target("GET ").empty());
  CHECK(target("GET \r\n\r\n").empty());
  CHECK(target(std::string("GET /hls/s/a/0.0.m4s HTTP/1.1\r\nX: a") + std::string(9000, 'b') + "\r\n\r\n").empty());
}
TEST_MAIN
