// AAC AudioSpecificConfig / ADTS / RFC 6381 and FLV AUDIODATA header parsing (native/core/codec).
#include <cstring>
#include <vector>

#include "check.h"
#include "core/codec/aac.h"
#include "core/codec/flv_audio.h"

using namespace skylark::codec;

namespace {
// MSB-first bit writer for building AudioSpecificConfigs.
struct Bits {
  std::vector<uint8_t> bytes;
  size_t n = 0;
  Bits& put(uint32_t v, unsigned width) {
    for (unsigned i = width; i-- > 0; ++n) {
      if (n % 8 == 0) bytes.push_back(0);
      if ((v >> i) & 1) bytes.back() |= static_cast<uint8_t>(0x80 >> (n % 8));
    }
    return *this;
  }
};
AscStatus parse(const std::vector<uint8_t>& b, AudioSpecificConfig* c) {
  return parse_audio_specific_config(b.data(), b.size(), c);
}
std::string codecs(const AudioSpecificConfig& c) {
  char buf[16];
  rfc6381_codecs(c, buf, sizeof buf);
  return buf;
}
}  // namespace

TEST(asc_lc_48k_stereo) {
  AudioSpecificConfig c;
  CHECK(parse({0x11, 0x90}, &c) == AscStatus::kOk);
  CHECK_EQ(c.audio_object_type, 2);
  CHECK_EQ(c.frequency_index, 3);
  CHECK_EQ(c.sample_rate, 48000u);
  CHECK_EQ(c.output_sample_rate, 48000u);
  CHECK_EQ(c.channel_configuration, 2);
  CHECK_EQ(c.output_channels(), 2u);
  CHECK(!c.sbr && !c.ps && !c.frame_length_960);
  CHECK_EQ(c.samples_per_frame(), 1024u);
  CHECK(codecs(c) == "mp4a.40.2");
  CHECK(adts_incompatibility(c) == nullptr);
}

TEST(asc_lc_44k1_mono) {
  AudioSpecificConfig c;
  CHECK(parse({0x12, 0x08}, &c) == AscStatus::kOk);
  CHECK_EQ(c.sample_rate, 44100u);
  CHECK_EQ(c.channel_configuration, 1);
}

TEST(asc_escape_object_type) {
  // audioObjectType 31 → 32 + 10 = 42 (USAC): parses, but cannot go into ADTS.
  Bits b;
  b.put(31, 5).put(10, 6).put(3, 4).put(2, 4);
  AudioSpecificConfig c;
  CHECK(parse(b.bytes, &c) == AscStatus::kOk);
  CHECK_EQ(c.audio_object_type, 42);
  CHECK_EQ(c.sample_rate, 48000u);
  CHECK(adts_incompatibility(c) != nullptr);
  CHECK(codecs(c) == "mp4a.40.42");
}

TEST(asc_explicit_frequency) {
  Bits b;
  b.put(2, 5).put(15, 4).put(44100, 24).put(2, 4).put(0, 3);
  AudioSpecificConfig c;
  CHECK(parse(b.bytes, &c) == AscStatus::kOk);
  CHECK_EQ(c.frequency_index, 15);
  CHECK_EQ(c.sample_rate, 44100u);
  CHECK_EQ(adts_frequency_index(c), 4);  // mapped back to the table for ADTS
  CHECK(adts_incompatibility(c) == nullptr);
  Bits odd;
  odd.put(2, 5).put(15, 4).put(12345, 24).put(2, 4).put(0, 3);
  CHECK(parse(odd.bytes, &c) == AscStatus::kOk);
  CHECK_EQ(c.sample_rate, 12345u);
  CHECK_EQ(adts_frequency_index(c), -1);
  CHECK(adts_incompatibility(c) != nullptr);
}

TEST(asc_explicit_he_aac_and_ps) {
  // AOT 5 (SBR), core 24 kHz, stereo, extension 48 kHz, core AOT 2.
  Bits b;
  b.put(5, 5).put(6, 4).put(2, 4).put(3, 4).put(2, 5).put(0, 3);
  AudioSpecificConfig c;
  CHECK(parse(b.bytes, &c) == AscStatus::kOk);
  CHECK_EQ(c.audio_object_type, 2);
  CHECK_EQ(c.signalled_object_type, 5);
  CHECK(c.sbr && !c.ps);
  CHECK_EQ(c.sample_rate, 24000u);
  CHECK_EQ(c.output_sample_rate, 48000u);
  CHECK(codecs(c) == "mp4a.40.5");
  CHECK(adts_incompatibility(c) == nullptr);
  CHECK_EQ(adts_frequency_index(c), 6);  // ADTS carries the core rate (implicit SBR)
  Bits p;
  p.put(29, 5).put(6, 4).put(1, 4).put(3, 4).put(2, 5).put(0, 3);
  CHECK(parse(p.bytes, &c) == AscStatus::kOk);
  CHECK(c.sbr && c.ps);
  CHECK_EQ(c.output_channels(), 2u);
  CHECK(codecs(c) == "mp4a.40.29");
}

TEST(asc_backward_compatible_sbr_signalling) {
  // LC 22.05 kHz stereo + GASpecificConfig, then syncExtensionType 0x2B7, AOT 5, sbr 1, 44.1 kHz.
  Bits b;
  b.put(2, 5).put(7, 4).put(2, 4).put(0, 3).put(0x2B7, 11).put(5, 5).put(1, 1).put(4, 4);
  AudioSpecificConfig c;
  CHECK(parse(b.bytes, &c) == AscStatus::kOk);
  CHECK(c.sbr);
  CHECK_EQ(c.sample_rate, 22050u);
  CHECK_EQ(c.output_sample_rate, 44100u);
  CHECK(codecs(c) == "mp4a.40.5");
}

TEST(asc_malformed) {
  AudioSpecificConfig c;
  CHECK(parse({}, &c) == AscStatus::kTruncated);
  CHECK(parse({0x11}, &c) == AscStatus::kTruncated);
  CHECK(parse({0x01, 0x90}, &c) == AscStatus::kBadObjectType);  // AOT 0
  Bits f13;
  f13.put(2, 5).put(13, 4).put(2, 4).put(0, 3);
  CHECK(parse(f13.bytes, &c) == AscStatus::kBadFrequency);
  Bits f0;
  f0.put(2, 5).put(15, 4).put(0, 24).put(2, 4).put(0, 3);
  CHECK(parse(f0.bytes, &c) == AscStatus::kBadFrequency);
  Bits ch8;
  ch8.put(2, 5).put(3, 4).put(8, 4).put(0, 3);
  CHECK(parse(ch8.bytes, &c) == AscStatus::kBadChannelConfig);
  Bits sbr_short;  // AOT 5 without the extension fields
  sbr_short.put(5, 5).put(6, 4).put(2, 4);
  CHECK(parse(sbr_short.bytes, &c) == AscStatus::kTruncated);
  Bits sbr_sbr;  // SBR over SBR
  sbr_sbr.put(5, 5).put(6, 4).put(2, 4).put(3, 4).put(5, 5);
  CHECK(parse(sbr_sbr.bytes, &c) == AscStatus::kBadObjectType);
  Bits esc_short;  // escape without its 6 bits
  esc_short.put(31, 5).put(1, 3);
  CHECK(parse(esc_short.bytes, &c) == AscStatus::kTruncated);
  // Channel configuration 0 (PCE) parses but is not carried.
  Bits pce;
  pce.put(2, 5).put(3, 4).put(0, 4).put(0, 3);
  CHECK(parse(pce.bytes, &c) == AscStatus::kOk);
  CHECK(adts_incompatibility(c) != nullptr);
}

TEST(asc_every_byte_prefix_is_safe) {
  // No input may read out of bounds (ASan) or crash: all 2-byte and 3-byte patterns.
  AudioSpecificConfig c;
  for (uint32_t v = 0; v < 0x10000; ++v) {
    uint8_t b[2] = {static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)};
    parse_audio_specific_config(b, 2, &c);
    parse_audio_specific_config(b, 1, &c);
  }
  CHECK(true);
}

TEST(adts_header_bytes) {
  AudioSpecificConfig c;
  CHECK(parse({0x11, 0x90}, &c) == AscStatus::kOk);
  uint8_t h[7];
  write_adts_header(h, c, 100);  // frame_length 107
  const uint8_t want[7] = {0xFF, 0xF1, 0x4C, 0x80, 0x0D, 0x7F, 0xFC};
  CHECK(std::memcmp(h, want, 7) == 0);
  write_adts_header(h, c, kAdtsMaxPayload);  // frame_length 8191 = all 13 bits
  CHECK_EQ(((h[3] & 3) << 11) | (h[4] << 3) | (h[5] >> 5), 8191);
  CHECK(parse({0x12, 0x08}, &c) == AscStatus::kOk);  // LC 44.1k mono
  write_adts_header(h, c, 0);
  CHECK_EQ(h[2], 0x50);  // profile 1, index 4, channel high bit 0
  CHECK_EQ(h[3] >> 6, 1);
}

TEST(flv_audio_header_legacy) {
  FlvAudioHeader h;
  const uint8_t seq[] = {0xAF, 0x00, 0x11, 0x90};
  CHECK(parse_flv_audio_header(seq, sizeof seq, &h) == FlvAudioStatus::kOk);
  CHECK_EQ(h.sound_format, 10);
  CHECK_EQ(h.sound_rate, 3);
  CHECK_EQ(h.sound_size, 1);
  CHECK_EQ(h.sound_type, 1);
  CHECK(h.is_aac());
  CHECK(h.packet == FlvAudioPacket::kSequenceHeader);
  CHECK_EQ(h.header_size, 2u);
  const uint8_t raw[] = {0xAF, 0x01, 0x21};
  CHECK(parse_flv_audio_header(raw, sizeof raw, &h) == FlvAudioStatus::kOk);
  CHECK(h.packet == FlvAudioPacket::kCodedFrame);
  const uint8_t mp3[] = {0x2F, 0xFF, 0xFB};
  CHECK(parse_flv_audio_header(mp3, sizeof mp3, &h) == FlvAudioStatus::kOk);
  CHECK_EQ(h.sound_format, 2);
  CHECK(!h.is_aac());
  CHECK_EQ(h.header_size, 1u);
  CHECK(parse_flv_audio_header(seq, 0, &h) == FlvAudioStatus::kTruncated);
  CHECK(parse_flv_audio_header(seq, 1, &h) == FlvAudioStatus::kTruncated);
}

TEST(flv_audio_header_enhanced) {
  FlvAudioHeader h;
  const uint8_t start[] = {0x90, 'm', 'p', '4', 'a', 0x11, 0x90};
  CHECK(parse_flv_audio_header(start, sizeof start, &h) == FlvAudioStatus::kOk);
  CHECK(h.enhanced() && h.is_aac());
  CHECK(h.packet == FlvAudioPacket::kSequenceHeader);
  CHECK_EQ(h.header_size, 5u);
  const uint8_t opus[] = {0x91, 'O', 'p', 'u', 's', 0x00};
  CHECK(parse_flv_audio_header(opus, sizeof opus, &h) == FlvAudioStatus::kOk);
  CHECK(!h.is_aac());
  CHECK(h.packet == FlvAudioPacket::kCodedFrame);
  const uint8_t multitrack[] = {0x95, 0x00};
  CHECK(parse_flv_audio_header(multitrack, sizeof multitrack, &h) == FlvAudioStatus::kUnsupported);
  CHECK(parse_flv_audio_header(start, 4, &h) == FlvAudioStatus::kTruncated);
}

TEST_MAIN
