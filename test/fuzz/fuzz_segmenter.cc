// libFuzzer target: arbitrary FLV audio tag bodies into a segmenter with container MPEG-TS (and so
// the FLV header, AudioSpecificConfig, MP3 framing and ADTS/TS writers). The input is split into
// tags: [1 byte length class][2 bytes timestamp delta][body]...; a valid AAC sequence header is fed
// first half of the time; half of the inputs take AAC only (expectCodec, as ingest), the rest any
// codec TS carries. A length class of 0xFE makes the body a now-playing change (push_metadata, the
// body split at NULs into title, artist, album, url) instead of audio: a segment carries the ID3
// PID's packets exactly when it reports a change (MP3 layers; AAC in TS drops changes), and what
// waits for a frame stays bounded.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "core/codec/aac.h"
#include "core/mux/id3/tag.h"
#include "core/segment/segmenter.h"

namespace {
void check(std::vector<skylark::segment::SegmenterEvent>& ev) {
  for (const auto& e : ev) {
    if (e.type != skylark::segment::SegmenterEvent::Type::kSegment) continue;
    if (e.data.size() % 188 != 0) std::abort();
    bool id3_packets = false;
    for (size_t i = 0; i + 188 <= e.data.size(); i += 188)
      if (((e.data[i + 1] & 0x1F) << 8 | e.data[i + 2]) == 0x101) id3_packets = true;
    if (id3_packets != !e.metadata.empty()) std::abort();
  }
  ev.clear();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The ASC parser alone, on the whole input.
  skylark::codec::AudioSpecificConfig asc;
  skylark::codec::parse_audio_specific_config(data, size, &asc);

  skylark::segment::SegmenterOptions options;
  options.container = skylark::segment::Container::kTs;
  options.target_duration_ms = size > 0 && (data[0] & 1) ? 100 : 2000;
  if (size > 0 && (data[0] & 4)) options.expect = skylark::codec::AudioCodec::kAac;
  skylark::segment::Segmenter seg(options);
  std::vector<skylark::segment::SegmenterEvent> ev;
  static const uint8_t kSeq[] = {0xAF, 0x00, 0x11, 0x90};
  if (size > 0 && (data[0] & 2)) seg.push_audio(0, kSeq, sizeof kSeq, ev);
  size_t pos = size > 0 ? 1 : 0;
  uint32_t ts = 0;
  while (pos + 3 <= size) {
    const bool change = data[pos] == 0xFE;
    const size_t len = data[pos] * 4u;
    ts += (uint32_t{data[pos + 1]} << 8 | data[pos + 2]) * 3u;
    pos += 3;
    const size_t n = len < size - pos ? len : size - pos;
    if (change) {
      std::string_view f[4];
      size_t at = 0;
      for (int k = 0; k < 4 && at <= n; ++k) {
        size_t end = at;
        while (end < n && data[pos + end] != 0) ++end;
        f[k] = std::string_view(reinterpret_cast<const char*>(data + pos + at), end - at);
        at = end + 1;
      }
      seg.push_metadata(ts, {f[0], f[1], f[2], f[3]});
    } else {
      if (data[pos - 1] == 0xFF) seg.discontinuity();
      seg.push_audio(ts, data + pos, n, ev);
    }
    pos += n;
    if (seg.pending_metadata() > skylark::segment::kMaxMetadataPerFragment + 1 ||
        seg.pending_metadata_bytes() >
            (skylark::segment::kMaxMetadataPerFragment + 1) * skylark::mux::id3::kMaxNowPlayingTagSize)
      std::abort();
    check(ev);
  }
  seg.flush(ev);
  check(ev);
  return 0;
}
