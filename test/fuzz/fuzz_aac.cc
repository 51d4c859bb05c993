// libFuzzer target: AudioSpecificConfig parsing, then (when ADTS-compatible) the ADTS header written
// for a payload size taken from the input, read back field by field (ISO/IEC 14496-3 §1.A.2.2), and
// the RFC 6381 codecs string. Invariants: fields round-trip, codecs string is "mp4a.40.<n>".
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/codec/aac.h"

using namespace skylark::codec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  AudioSpecificConfig asc;
  if (parse_audio_specific_config(data, size, &asc) != AscStatus::kOk) return 0;
  if (asc.sample_rate == 0 || asc.channel_configuration > 7) std::abort();
  if (asc.samples_per_frame() != 1024 && asc.samples_per_frame() != 960) std::abort();
  char codecs[16];
  const size_t n = rfc6381_codecs(asc, codecs, sizeof codecs);
  if (n >= sizeof codecs || std::strncmp(codecs, "mp4a.40.", 8) != 0) std::abort();
  if (adts_incompatibility(asc) != nullptr) return 0;
  const size_t payload = size > 2 ? ((size_t{data[size - 2]} << 8 | data[size - 1]) % (kAdtsMaxPayload + 1)) : 0;
  uint8_t h[kAdtsHeaderSize];
  write_adts_header(h, asc, payload);
  if (h[0] != 0xFF || (h[1] & 0xF6) != 0xF0) std::abort();                 // syncword, MPEG-4, layer 0
  if (((h[2] >> 6) + 1u) != asc.audio_object_type) std::abort();           // profile
  if (static_cast<int>((h[2] >> 2) & 0xF) != adts_frequency_index(asc)) std::abort();
  if ((((h[2] & 1u) << 2) | (h[3] >> 6)) != asc.channel_configuration) std::abort();
  const size_t len = (size_t{h[3]} & 3) << 11 | size_t{h[4]} << 3 | h[5] >> 5;
  if (len != payload + kAdtsHeaderSize) std::abort();
  return 0;
}
