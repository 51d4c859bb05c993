// See text.h.
#include "core/mux/id3/text.h"

#include <cstdint>

namespace skylark::mux::id3 {
namespace {

constexpr uint32_t kReplacement = 0xFFFD;

/** Decodes one code point at `s[i]` (RFC 3629 §4 well-formed sequences only); advances `i` by its
 *  length, or by one byte and returns U+FFFD when the sequence is ill-formed. */
uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) {
    ++i;
    return c;
  }
  size_t n = 0;
  uint32_t cp = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // range of the second byte
  if (c >= 0xC2 && c <= 0xDF) { n = 1; cp = c & 0x1F; }
  else if (c == 0xE0) { n = 2; cp = c & 0x0F; lo = 0xA0; }
  else if (c >= 0xE1 && c <= 0xEC) { n = 2; cp = c & 0x0F; }
  else if (c == 0xED) { n = 2; cp = c & 0x0F; hi = 0x9F; }  // no UTF-16 surrogates
  else if (c >= 0xEE && c <= 0xEF) { n = 2; cp = c & 0x0F; }
  else if (c == 0xF0) { n = 3; cp = c & 0x07; lo = 0x90; }
  else if (c >= 0xF1 && c <= 0xF3) { n = 3; cp = c & 0x07; }
  else if (c == 0xF4) { n = 3; cp = c & 0x07; hi = 0x8F; }  // up to U+10FFFF
  else {
    ++i;
    return kReplacement;
  }
  if (s.size() - i <= n) {  // truncated sequence
    ++i;
    return kReplacement;
  }
  for (size_t k = 1; k <= n; ++k) {
    const uint8_t t = b(i + k);
    if (t < (k == 1 ? lo : 0x80) || t > (k == 1 ? hi : 0xBF)) {
      ++i;
      return kReplacement;
    }
    cp = (cp << 6) | (t & 0x3F);
  }
  i += n + 1;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

std::string clean_text(std::string_view utf8, size_t max_chars) {
  std::string out;
  out.reserve(utf8.size() < max_text_bytes(max_chars) ? utf8.size() : max_text_bytes(max_chars));
  size_t i = 0;
  for (size_t chars = 0; i < utf8.size() && chars < max_chars; ++chars) {
    uint32_t cp = next_code_point(utf8, i);
    if (cp < 0x20 || cp == 0x7F) cp = ' ';
    append_utf8(out, cp);
  }
  return out;
}

std::string clean_url(std::string_view utf8, size_t max_chars) {
  static const char kHex[] = "0123456789ABCDEF";
  const std::string text = clean_text(utf8, max_chars);
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<uint8_t>(ch);
    if (c >= 0x21 && c <= 0x7E) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0x0F]);
    }
  }
  return out;
}

}  // namespace skylark::mux::id3
