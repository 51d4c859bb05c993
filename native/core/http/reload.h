// LL-HLS blocking playlist reloads (rfc8216bis §6.2.5.2) as the native HTTP front reads them
// (docs/http.md "Blocking reloads held in native code"): the one query form it answers, whether a
// layer lists what a reload asks for, and a head's User-Agent. Pure functions; no allocation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace skylark::http {

// A blocking reload's query. `sid` points into the parsed query ('' when absent).
struct ReloadQuery {
  std::string_view sid;
  uint64_t msn = 0;   // _HLS_msn
  uint64_t part = 0;  // _HLS_part
  bool skip = false;  // _HLS_skip=YES
};

// Parses the query (no '?') of a reload the front may answer: pieces `sid=<[0-9A-Za-z_-]{1,64}>`,
// `_HLS_msn=<1–15 digits>`, `_HLS_part=<1–15 digits>` and `_HLS_skip=YES`, each at most once, in
// any order, joined by '&'; `_HLS_msn` and `_HLS_part` present. Anything else (another parameter,
// another spelling, a repeat, an empty piece, a value out of form) is false: the HLS routes
// answer it (docs/ll-hls.md "Delivery directives").
bool ParseReloadQuery(std::string_view query, ReloadQuery* out);

// Where a layer is: the media sequence number of the segment in progress, its parts, and the parts
// of the segment before it (0 when none).
struct LayerPosition {
  uint64_t next_sequence = 0;
  uint32_t open_parts = 0;
  uint32_t previous_parts = 0;
};

// Whether the layer lists part `part` of segment `msn` (Layer.reached of the server): a part index
// past the last part of a finished segment is part 0 of the next one.
bool Reached(const LayerPosition& at, uint64_t msn, uint64_t part);

// The User-Agent value of a request head (CRLF lines; the field name in any case; surrounding
// blanks trimmed), '' when absent. False when it is longer than `max` bytes.
bool UserAgentOf(std::string_view head, size_t max, std::string_view* out);

}  // namespace skylark::http
