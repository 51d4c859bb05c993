#include "core/http/request_line.h"

namespace skylark::http {

RequestLine ParseRequestLine(const uint8_t* data, size_t size) {
  RequestLine out;
  size_t start = 0;
  // RFC 9112 §2.2: ignore one empty line before the request line.
  if (size >= 2 && data[0] == '\r' && data[1] == '\n') start = 2;
  else if (size >= 1 && data[0] == '\n') start = 1;
  // The line ends at the first LF (RFC 9112 §2.2 lets a recipient accept a bare LF).
  size_t end = start;
  while (end < size && data[end] != '\n') ++end;
  if (end == size) return out;  // kIncomplete
  size_t line_end = end;
  if (line_end > start && data[line_end - 1] == '\r') --line_end;
  const std::string_view line(reinterpret_cast<const char*>(data + start), line_end - start);
  out.version = RequestVersion::kOther;
  // method SP request-target SP HTTP-version
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return out;
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return out;
  const std::string_view version = line.substr(sp2 + 1);
  if (version == "HTTP/1.1") out.version = RequestVersion::kHttp11;
  else if (version == "HTTP/1.0") out.version = RequestVersion::kHttp10;
  else return out;
  out.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  return out;
}

bool TargetStartsWith(const RequestLine& line, std::string_view prefix) {
  if (line.version != RequestVersion::kHttp10 && line.version != RequestVersion::kHttp11) return false;
  return line.target.substr(0, prefix.size()) == prefix;
}

}  // namespace skylark::http
