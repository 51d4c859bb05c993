// libFuzzer target: the blocking reload query and head reading of the native HTTP front
// (core/http/reload.h, docs/http.md "Blocking reloads held in native code"). Invariants: a parsed
// query's sid points into the input and is of the allowed form; parsing is deterministic; a query
// taken is taken again with its pieces in reverse order (order never matters) and is not taken
// with any piece repeated; a User-Agent points into the head and is no longer than asked.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/http/reload.h"

using namespace skylark::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  ReloadQuery q;
  if (ParseReloadQuery(in, &q)) {
    if (!q.sid.empty() && (q.sid.data() < in.data() || q.sid.data() + q.sid.size() > in.data() + in.size() || q.sid.size() > 64)) std::abort();
    ReloadQuery again;
    if (!ParseReloadQuery(in, &again) || again.msn != q.msn || again.part != q.part || again.skip != q.skip || again.sid != q.sid) std::abort();
    std::vector<std::string_view> pieces;
    for (size_t at = 0;;) {
      const size_t amp = in.find('&', at);
      pieces.push_back(in.substr(at, amp == std::string_view::npos ? std::string_view::npos : amp - at));
      if (amp == std::string_view::npos) break;
      at = amp + 1;
    }
    std::string reversed;
    for (size_t i = pieces.size(); i-- > 0;) reversed.append(pieces[i]).append(i ? "&" : "");
    ReloadQuery r;
    if (!ParseReloadQuery(reversed, &r) || r.msn != q.msn || r.part != q.part || r.skip != q.skip || r.sid != q.sid) std::abort();
    const std::string doubled = std::string(in) + "&" + std::string(pieces[0]);
    if (ParseReloadQuery(doubled, &r)) std::abort();
  }
  const size_t max = size % 600;
  std::string_view ua;
  if (UserAgentOf(in, max, &ua) && !ua.empty()) {
    if (ua.data() < in.data() || ua.data() + ua.size() > in.data() + in.size() || ua.size() > max) std::abort();
  }
  return 0;
}
