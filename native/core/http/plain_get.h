// Whether the bytes of one read are exactly one plain HTTP/1.1 GET that a stored object may answer
// as it is (docs/http.md "Media objects answered in native code"): RFC 9112 §2–§3 (message format,
// request line), §9.3 (persistence), RFC 9110 §14 (ranges). Pure function; no sockets, no
// allocation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace skylark::http {

// Reads `data` (`size` bytes, any content) as one request head and says whether a stored object
// may answer it: `GET <target> HTTP/1.1` with `target` starting with `prefix` and holding only
// path characters (no query, fragment, percent-encoding, dot segment or control byte), CRLF line
// ends throughout, the head ending exactly at `size` (nothing pipelined after it, nothing cut
// short), and no header that asks for more than the whole object: no Range, If-Range, Expect,
// Upgrade, Content-Length, Transfer-Encoding, and no Connection value other than keep-alive (a
// "close" is the HTTP server's to honour). Header names are matched case-insensitively. Returns
// the target (pointing into `data`), or an empty view when the object path does not apply.
std::string_view PlainGetTarget(const uint8_t* data, size_t size, std::string_view prefix);

}  // namespace skylark::http
