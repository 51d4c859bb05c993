#include "core/http/reload.h"

#include <strings.h>

namespace skylark::http {
namespace {

// A decimal of 1–15 digits (as the routes read it), else false.
bool Decimal(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 15) return false;
  uint64_t v = 0;
  for (const char ch : s) {
    if (ch < '0' || ch > '9') return false;
    v = v * 10 + static_cast<uint64_t>(ch - '0');
  }
  *out = v;
  return true;
}

bool SidChar(char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '-' || ch == '_'; }

}  // namespace

bool ParseReloadQuery(std::string_view q, ReloadQuery* out) {
  ReloadQuery r;
  bool has_sid = false, has_msn = false, has_part = false, has_skip = false;
  if (q.empty()) return false;
  for (;;) {
    const size_t amp = q.find('&');
    const std::string_view piece = q.substr(0, amp);
    const size_t eq = piece.find('=');
    if (eq == std::string_view::npos) return false;
    const std::string_view name = piece.substr(0, eq), value = piece.substr(eq + 1);
    if (name == "sid" && !has_sid) {
      if (value.empty() || value.size() > 64) return false;
      for (const char ch : value) {
        if (!SidChar(ch)) return false;
      }
      r.sid = value;
      has_sid = true;
    } else if (name == "_HLS_msn" && !has_msn) {
      if (!Decimal(value, &r.msn)) return false;
      has_msn = true;
    } else if (name == "_HLS_part" && !has_part) {
      if (!Decimal(value, &r.part)) return false;
      has_part = true;
    } else if (name == "_HLS_skip" && !has_skip && value == "YES") {
      r.skip = has_skip = true;
    } else {
      return false;
    }
    if (amp == std::string_view::npos) break;
    q = q.substr(amp + 1);
  }
  if (!has_msn || !has_part) return false;
  *out = r;
  return true;
}

bool Reached(const LayerPosition& at, uint64_t msn, uint64_t part) {
  const uint64_t next = at.next_sequence;
  if (msn > next) return false;
  if (msn == next) return part < at.open_parts;
  if (msn + 1 < next) return true;
  if (part < at.previous_parts) return true;
  return at.open_parts > 0;
}

bool UserAgentOf(std::string_view head, size_t max, std::string_view* out) {
  *out = {};
  size_t at = head.find("\r\n");
  while (at != std::string_view::npos && at + 2 < head.size()) {
    const size_t start = at + 2;
    const size_t end = head.find("\r\n", start);
    if (end == std::string_view::npos || end == start) break;
    const std::string_view line = head.substr(start, end - start);
    if (line.size() >= 11 && strncasecmp(line.data(), "user-agent:", 11) == 0) {
      std::string_view v = line.substr(11);
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
      if (v.size() > max) return false;
      *out = v;
      return true;
    }
    at = end;
  }
  return true;
}

}  // namespace skylark::http
