// libFuzzer target: arbitrary FLV audio tag bodies into a segmenter with container MPEG-TS (and so
// the FLV header, AudioSpecificConfig, MP3 framing and ADTS/TS writers). The input is split into
// tags: [1 byte length class][2 bytes timestamp delta][body]...; a valid AAC sequence header is fed
// first half of the time; half of the inputs take AAC only (expectCodec, as ingest), the rest any
// codec TS carries.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/codec/aac.h"
#include "core/segment/segmenter.h"

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
    const size_t len = data[pos] * 4u;
    ts += (uint32_t{data[pos + 1]} << 8 | data[pos + 2]) * 3u;
    pos += 3;
    const size_t n = len < size - pos ? len : size - pos;
    if (data[pos - 1] == 0xFF) seg.discontinuity();
    seg.push_audio(ts, data + pos, n, ev);
    pos += n;
    if (ev.size() > 64) ev.clear();
  }
  seg.flush(ev);
  return 0;
}
