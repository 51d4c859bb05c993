// See flv_audio.h.
#include "core/codec/flv_audio.h"

#include <cstdio>

namespace skylark::codec {

FlvAudioStatus parse_flv_audio_header(const uint8_t* data, size_t size, FlvAudioHeader* out) {
  if (size < 1) return FlvAudioStatus::kTruncated;
  FlvAudioHeader h;
  h.sound_format = data[0] >> 4;
  h.sound_rate = (data[0] >> 2) & 3;
  h.sound_size = (data[0] >> 1) & 1;
  h.sound_type = data[0] & 1;
  if (h.sound_format == kFlvSoundAac) {
    if (size < 2) return FlvAudioStatus::kTruncated;
    h.packet = data[1] == 0 ? FlvAudioPacket::kSequenceHeader
             : data[1] == 1 ? FlvAudioPacket::kCodedFrame
                            : FlvAudioPacket::kOther;
    h.header_size = 2;
  } else if (h.sound_format == kFlvSoundExHeader) {
    // Enhanced RTMP: the low nibble is AudioPacketType, then the codec FourCC.
    const uint8_t packet_type = data[0] & 0x0F;
    if (packet_type == 5 || packet_type == 7) return FlvAudioStatus::kUnsupported;  // Multitrack, ModEx
    if (size < 5) return FlvAudioStatus::kTruncated;
    h.sound_rate = h.sound_size = h.sound_type = 0;
    h.fourcc = (uint32_t{data[1]} << 24) | (uint32_t{data[2]} << 16) | (uint32_t{data[3]} << 8) | data[4];
    h.packet = packet_type == 0 ? FlvAudioPacket::kSequenceHeader
             : packet_type == 1 ? FlvAudioPacket::kCodedFrame
             : packet_type == 2 ? FlvAudioPacket::kSequenceEnd
                                : FlvAudioPacket::kOther;
    h.header_size = 5;
  } else {
    h.header_size = 1;
  }
  *out = h;
  return FlvAudioStatus::kOk;
}

}  // namespace skylark::codec

namespace skylark::codec {
namespace {

void fourcc_text(uint32_t fourcc, char* out) {
  for (int i = 0; i < 4; ++i) {
    const char c = static_cast<char>(fourcc >> (24 - 8 * i));
    out[i] = c >= 0x20 && c < 0x7F ? c : '?';
  }
  out[4] = 0;
}

}  // namespace

const char* audio_codec_name(AudioCodec c) {
  switch (c) {
    case AudioCodec::kAac: return "aac";
    case AudioCodec::kMp3: return "mp3";
    case AudioCodec::kOpus: return "opus";
    case AudioCodec::kNone: break;
  }
  return "";
}

AudioTagProbe probe_audio_tag(const uint8_t* data, size_t size) {
  AudioTagProbe p;
  auto set = [&p](AudioCodec c) {
    p.codec = c;
    std::snprintf(p.codec_name, sizeof p.codec_name, "%s", audio_codec_name(c));
  };
  auto set_fourcc = [&](uint32_t fourcc) {
    if (fourcc == kFourCcMp4a) set(AudioCodec::kAac);
    else if (fourcc == kFourCcMp3) set(AudioCodec::kMp3);
    else if (fourcc == kFourCcOpus) set(AudioCodec::kOpus);
    else fourcc_text(fourcc, p.codec_name);
  };
  if (size < 1) return p;
  FlvAudioHeader h;
  const FlvAudioStatus st = parse_flv_audio_header(data, size, &h);
  if (st == FlvAudioStatus::kUnsupported) {
    // Multitrack (5): byte 1 = AvMultitrackType << 4 | AudioPacketType, then the FourCC.
    p.multitrack = (data[0] & 0x0F) == 5;
    if (p.multitrack && size >= 6)
      set_fourcc(uint32_t{data[2]} << 24 | uint32_t{data[3]} << 16 | uint32_t{data[4]} << 8 | data[5]);
    return p;
  }
  if (st != FlvAudioStatus::kOk) return p;
  p.packet = h.packet;
  if (h.enhanced()) {
    set_fourcc(h.fourcc);
    return p;
  }
  if (h.is_aac()) set(AudioCodec::kAac);
  else if (h.is_mp3()) set(AudioCodec::kMp3);
  else {
    static const char* const kNames[16] = {"pcm", "adpcm", "mp3", "pcm_le", "nellymoser", "nellymoser",
                                           "nellymoser", "g711a", "g711u", "", "aac", "speex",
                                           "flv:12", "flv:13", "mp3", "device"};
    std::snprintf(p.codec_name, sizeof p.codec_name, "%s", kNames[h.sound_format]);
  }
  // Classic non-AAC tags carry codec data right after the 1-byte header: a frame.
  if (!h.is_aac()) p.packet = FlvAudioPacket::kCodedFrame;
  return p;
}

}  // namespace skylark::codec
