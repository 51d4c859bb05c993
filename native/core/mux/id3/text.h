// The strings an ID3v2.4 now-playing tag carries, made safe to write (id3v2.4.0-structure §4,
// id3v2.4.0-frames §4.2 text information frames, §4.3.2 WXXX): whatever bytes come in, what goes
// out is bounded and well-formed.
//
//   clean_text: well-formed UTF-8 (RFC 3629 §4: a byte that does not start a well-formed sequence
//               becomes U+FFFD, and decoding goes on at the next byte), control characters
//               (U+0000..U+001F, U+007F: newlines, NULs that would end the string early in a reader)
//               become spaces, cut after `max_chars` code points (never inside a character).
//   clean_url:  the same cut, then every byte outside the printable ASCII range 0x21..0x7E
//               percent-encoded (RFC 3986 §2.1; non-ASCII characters as their UTF-8 bytes, as RFC
//               3987 §3.1 maps an IRI to a URI): the WXXX URL field is ISO-8859-1, and a plain-ASCII
//               URL reads the same in ISO-8859-1 and UTF-8 (hls.js decodes it as UTF-8).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace skylark::mux::id3 {

/** Characters (code points) kept of each now-playing string (docs/behaviour.md §11: title ≤ 256). */
inline constexpr size_t kMaxChars = 256;
/** Bytes clean_text returns at most: `max_chars` code points of at most 4 UTF-8 bytes each. */
constexpr size_t max_text_bytes(size_t max_chars) { return 4 * max_chars; }
/** Bytes clean_url returns at most: each byte of the cut string percent-encoded. */
constexpr size_t max_url_bytes(size_t max_chars) { return 3 * 4 * max_chars; }

/** `utf8` (any bytes) as well-formed UTF-8 without control characters, at most `max_chars` code points. */
std::string clean_text(std::string_view utf8, size_t max_chars = kMaxChars);
/** `utf8` (any bytes) cut as clean_text cuts, then percent-encoded to printable ASCII. */
std::string clean_url(std::string_view utf8, size_t max_chars = kMaxChars);

}  // namespace skylark::mux::id3
