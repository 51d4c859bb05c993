// The HTTP/1.x request line (RFC 9112 §3): which protocol version a request head asks for, and
// whether its request-target starts with a given path. Pure function over the first bytes a
// connection sent; no sockets, no allocation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace skylark::http {

// What the first line of a request head says (RFC 9112 §2.3, §3).
enum class RequestVersion : uint8_t {
  kIncomplete,  // no CRLF (or bare LF) within the bytes given: the line is not all there
  kHttp11,      // "HTTP/1.1" (what the HTTP server parses itself)
  kHttp10,      // "HTTP/1.0": answered by the HTTP/1.0 front (docs/http.md)
  kOther,       // anything else (HTTP/0.9, HTTP/2 preface, garbage): left to the HTTP server to refuse
};

struct RequestLine {
  RequestVersion version = RequestVersion::kIncomplete;
  // The request-target (origin-form path and query) when the line is complete; empty otherwise.
  std::string_view target;
};

// Reads the request line at the start of `data` (`size` bytes, any content). A leading empty line
// (RFC 9112 §2.2: a server SHOULD ignore at least one CRLF before the request line) is skipped.
// The version token must be exactly "HTTP/1.0" or "HTTP/1.1", separated from the target by one SP.
// The returned `target` points into `data`.
RequestLine ParseRequestLine(const uint8_t* data, size_t size);

// True when `line` is complete and its request-target starts with `prefix` (byte-wise).
bool TargetStartsWith(const RequestLine& line, std::string_view prefix);

}  // namespace skylark::http
