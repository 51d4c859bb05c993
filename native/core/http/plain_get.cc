#include "core/http/plain_get.h"

namespace skylark::http {
namespace {

constexpr size_t kMaxHead = 8192;  // a longer head is left to the HTTP server

inline char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

bool EqualsLower(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (Lower(s[i]) != lower[i]) return false;
  return true;
}

// Path characters of an origin-form target that need no decoding (RFC 3986 §3.3 pchar without
// pct-encoded, and '/').
inline bool PathChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' || c == '-' || c == '.' || c == '_' || c == '~';
}

// A header this path leaves to the HTTP server (it changes what the answer must be).
bool Refused(std::string_view name, std::string_view value) {
  switch (name.size()) {
    case 5: return EqualsLower(name, "range");
    case 6: return EqualsLower(name, "expect");
    case 7: return EqualsLower(name, "upgrade");
    case 8: return EqualsLower(name, "if-range");
    case 10: return EqualsLower(name, "connection") && !EqualsLower(value, "keep-alive");
    case 14: return EqualsLower(name, "content-length");
    case 17: return EqualsLower(name, "transfer-encoding");
    default: return false;
  }
}

}  // namespace

std::string_view PlainGetTarget(const uint8_t* bytes, size_t size, std::string_view prefix) {
  const std::string_view data(reinterpret_cast<const char*>(bytes), size);
  if (size > kMaxHead || size < 4 || data.substr(0, 4) != "GET " || data.substr(size - 4) != "\r\n\r\n") return {};
  // The request line: GET SP target SP HTTP/1.1 CRLF.
  const size_t line_end = data.find("\r\n");
  const std::string_view line = data.substr(0, line_end);
  constexpr std::string_view kVersion = " HTTP/1.1";
  if (line.size() < 4 + kVersion.size() || line.substr(line.size() - kVersion.size()) != kVersion) return {};
  const std::string_view target = line.substr(4, line.size() - 4 - kVersion.size());
  if (target.size() <= prefix.size() || target.substr(0, prefix.size()) != prefix) return {};
  for (size_t i = 0; i < target.size(); ++i) {
    const char c = target[i];
    if (!PathChar(c)) return {};
    // No dot segment ("/." at a segment start): what the HTTP server would route is left to it.
    if (c == '.' && i > 0 && target[i - 1] == '/') return {};
  }
  // Header fields up to the empty line; the head ends exactly at `size` (checked above), so the
  // first empty line must be there too.
  size_t at = line_end + 2;
  while (at < size - 2) {
    const size_t end = data.find("\r\n", at);
    if (end == std::string_view::npos || end == at) return {};  // an empty line before the end: pipelined
    const std::string_view field = data.substr(at, end - at);
    for (char c : field)
      if (c == '\n' || c == '\r' || c == '\0') return {};  // bare LF/CR (RFC 9112 §2.2 lets servers refuse): the server's call
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos || colon == 0) return {};
    std::string_view value = field.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (Refused(field.substr(0, colon), value)) return {};
    at = end + 2;
  }
  return at == size - 2 ? target : std::string_view{};
}

}  // namespace skylark::http
