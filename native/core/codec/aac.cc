// See aac.h. Field names follow ISO/IEC 14496-3 (§1.6.2.1 AudioSpecificConfig, §4.4.1
// GASpecificConfig, §1.6.6.1 backward-compatible SBR/PS signalling, §1.A.2.2 adts_fixed_header).
#include "core/codec/aac.h"

#include <cstdio>

#include "core/codec/bit_reader.h"

namespace skylark::codec {
namespace {

uint32_t read_object_type(BitReader& br) {
  uint32_t aot = br.bits(5);
  if (aot == 31) aot = 32 + br.bits(6);  // audioObjectTypeExt
  return aot;
}

// samplingFrequencyIndex (+ 24-bit samplingFrequency when 0xF). False for reserved/zero rates.
bool read_frequency(BitReader& br, uint8_t* index, uint32_t* hz) {
  *index = static_cast<uint8_t>(br.bits(4));
  if (*index == 0xF) {
    *hz = br.bits(24);
    return *hz != 0;
  }
  if (*index >= 13) return false;
  *hz = kAacSampleRates[*index];
  return true;
}

bool has_ga_specific_config(uint32_t aot) {
  switch (aot) {
    case 1: case 2: case 3: case 4: case 6: case 7: case 17: case 19: case 20: case 21: case 22: case 23:
      return true;
    default:
      return false;
  }
}

// GASpecificConfig and what may follow it, read leniently: a short or odd tail never fails the
// parse, it only leaves the defaults (1024-sample frames, no implicit-signalled SBR/PS).
void read_tail(BitReader& br, AudioSpecificConfig* c) {
  const uint32_t aot = c->audio_object_type;
  if (!has_ga_specific_config(aot)) return;
  bool frame_length = br.bits(1) != 0;             // frameLengthFlag
  if (br.bits(1)) br.bits(14);                     // dependsOnCoreCoder → coreCoderDelay
  bool extension_flag = br.bits(1) != 0;
  if (!br.ok()) return;
  c->frame_length_960 = frame_length;
  if (c->channel_configuration == 0) return;       // program_config_element: not parsed
  if (aot == 6 || aot == 20) br.bits(3);           // layerNr
  if (extension_flag) {
    if (aot == 22) br.bits(16);                    // numOfSubFrame, layer_length
    if (aot == 17 || aot == 19 || aot == 20 || aot == 23) br.bits(3);  // resilience flags
    br.bits(1);                                    // extensionFlag3
  }
  if (aot == 17 || (aot >= 19 && aot <= 27)) {
    if (br.bits(2) >= 2) return;                   // epConfig 2/3: ErrorProtectionSpecificConfig, stop
  }
  // Backward-compatible explicit signalling: syncExtensionType 0x2B7 (SBR), then 0x548 (PS).
  if (c->sbr || br.remaining() < 16) return;
  if (br.bits(11) != 0x2B7) return;
  if (read_object_type(br) != kAotSbr) return;
  if (!br.bits(1)) return;                         // sbrPresentFlag
  uint8_t ext_index;
  uint32_t ext_hz;
  if (!read_frequency(br, &ext_index, &ext_hz) || !br.ok()) return;
  c->sbr = true;
  c->output_sample_rate = ext_hz;
  if (br.remaining() >= 12 && br.bits(11) == 0x548 && br.bits(1) && br.ok()) c->ps = true;
}

}  // namespace

uint32_t AudioSpecificConfig::output_channels() const {
  if (ps) return 2;
  return channel_configuration == 7 ? 8 : channel_configuration;
}

const char* asc_status_message(AscStatus s) {
  switch (s) {
    case AscStatus::kOk: return "ok";
    case AscStatus::kTruncated: return "AudioSpecificConfig is truncated";
    case AscStatus::kBadObjectType: return "AudioSpecificConfig has an invalid audio object type";
    case AscStatus::kBadFrequency: return "AudioSpecificConfig has a reserved or zero sampling frequency";
    case AscStatus::kBadChannelConfig: return "AudioSpecificConfig has a reserved channel configuration";
  }
  return "unknown";
}

AscStatus parse_audio_specific_config(const uint8_t* data, size_t size, AudioSpecificConfig* out) {
  BitReader br(data, size);
  AudioSpecificConfig c;
  uint32_t aot = read_object_type(br);
  bool freq_ok = read_frequency(br, &c.frequency_index, &c.sample_rate);
  c.channel_configuration = static_cast<uint8_t>(br.bits(4));
  if (!br.ok()) return AscStatus::kTruncated;
  if (aot == 0) return AscStatus::kBadObjectType;
  if (!freq_ok) return AscStatus::kBadFrequency;
  if (c.channel_configuration > 7) return AscStatus::kBadChannelConfig;
  c.signalled_object_type = static_cast<uint8_t>(aot);
  c.output_sample_rate = c.sample_rate;
  if (aot == kAotSbr || aot == kAotPs) {
    // Explicit hierarchical signalling: the first rate is the core (AAC) rate, then the SBR rate.
    c.sbr = true;
    c.ps = aot == kAotPs;
    uint8_t ext_index;
    bool ext_ok = read_frequency(br, &ext_index, &c.output_sample_rate);
    aot = read_object_type(br);
    if (aot == 22) br.bits(4);  // extensionChannelConfiguration (ER BSAC)
    if (!br.ok()) return AscStatus::kTruncated;
    if (!ext_ok) return AscStatus::kBadFrequency;
    if (aot == 0 || aot == kAotSbr || aot == kAotPs) return AscStatus::kBadObjectType;
  }
  c.audio_object_type = static_cast<uint8_t>(aot);
  read_tail(br, &c);
  *out = c;
  return AscStatus::kOk;
}

int adts_frequency_index(const AudioSpecificConfig& asc) {
  if (asc.frequency_index < 13) return asc.frequency_index;
  for (int i = 0; i < 13; ++i)
    if (kAacSampleRates[i] == asc.sample_rate) return i;
  return -1;
}

const char* adts_incompatibility(const AudioSpecificConfig& asc) {
  if (asc.audio_object_type < kAotAacMain || asc.audio_object_type > kAotAacLtp)
    return "only AAC Main/LC/SSR/LTP (and SBR/PS over them) can be carried in ADTS";
  if (asc.channel_configuration == 0) return "channel configuration 0 (program_config_element) is not supported";
  if (asc.frame_length_960) return "960-sample frames are not supported";
  if (adts_frequency_index(asc) < 0) return "the sampling frequency has no ADTS frequency index";
  return nullptr;
}

void write_adts_header(uint8_t* out, const AudioSpecificConfig& asc, size_t payload_size) {
  const uint32_t len = static_cast<uint32_t>(payload_size + kAdtsHeaderSize);  // 13 bits
  const uint32_t profile = asc.audio_object_type - 1u;                         // 2 bits
  const uint32_t sfi = static_cast<uint32_t>(adts_frequency_index(asc)) & 0xF;
  const uint32_t ch = asc.channel_configuration & 7u;
  out[0] = 0xFF;                                                   // syncword 0xFFF
  out[1] = 0xF1;                                                   // ID 0 (MPEG-4), layer 00, protection_absent 1
  out[2] = static_cast<uint8_t>((profile << 6) | (sfi << 2) | (ch >> 2));  // private_bit 0
  out[3] = static_cast<uint8_t>(((ch & 3) << 6) | (len >> 11));     // original/home/copyright bits 0
  out[4] = static_cast<uint8_t>(len >> 3);
  out[5] = static_cast<uint8_t>(((len & 7) << 5) | 0x1F);           // adts_buffer_fullness 0x7FF (VBR)
  out[6] = 0xFC;                                                   // ... number_of_raw_data_blocks 0
}

size_t rfc6381_codecs(const AudioSpecificConfig& asc, char* buf, size_t cap) {
  int n = std::snprintf(buf, cap, "mp4a.40.%u", static_cast<unsigned>(asc.codecs_object_type()));
  return n < 0 ? 0 : static_cast<size_t>(n) < cap ? static_cast<size_t>(n) : cap - 1;
}

}  // namespace skylark::codec
