// See flv_audio.h.
#include "core/codec/flv_audio.h"

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
