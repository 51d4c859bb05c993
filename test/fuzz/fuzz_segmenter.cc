// libFuzzer target: arbitrary FLV audio tag bodies into the TS segmenter (and so the FLV header,
// AudioSpecificConfig and ADTS/TS writers). The input is split into tags: [1 byte length class]
// [2 bytes timestamp delta][body]...; a valid sequence header is fed first half of the time.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/codec/aac.h"
#include "core/segment/ts_segmenter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The ASC parser alone, on the whole input.
  skylark::codec::AudioSpecificConfig asc;
  skylark::codec::parse_audio_specific_config(data, size, &asc);

  skylark::segment::TsSegmenter seg(size > 0 && (data[0] & 1) ? 100 : 2000);
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
