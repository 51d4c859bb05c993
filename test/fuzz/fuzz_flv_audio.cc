// libFuzzer target: the FLV / Enhanced RTMP AUDIODATA header parser and the tag probe
// (codec::probe_audio_tag) on arbitrary bytes. Invariants: the payload offset never passes the input, the
// probe's codec name is NUL-terminated printable text, a codec we take has its canonical name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/codec/flv_audio.h"

using namespace skylark::codec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FlvAudioHeader h;
  if (parse_flv_audio_header(data, size, &h) == FlvAudioStatus::kOk) {
    if (h.header_size > size) std::abort();
    if (h.is_aac() + h.is_mp3() + h.is_opus() > 1) std::abort();
  }
  const AudioTagProbe p = probe_audio_tag(data, size);
  const size_t n = strnlen(p.codec_name, sizeof p.codec_name);
  if (n == 0 || n == sizeof p.codec_name) std::abort();
  for (size_t i = 0; i < n; ++i)
    if (p.codec_name[i] < 0x20 || p.codec_name[i] > 0x7E) std::abort();
  if (p.codec != AudioCodec::kNone && std::strcmp(p.codec_name, audio_codec_name(p.codec)) != 0) std::abort();
  return 0;
}
