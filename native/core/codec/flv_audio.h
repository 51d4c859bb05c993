// FLV AUDIODATA header (FLV spec v10.1 §E.4.2.1 AUDIODATA + AACAUDIODATA; Enhanced RTMP v2
// ExAudioTagHeader, SoundFormat 9). A pure function over (data, size).
#pragma once
#include <cstddef>
#include <cstdint>

namespace skylark::codec {

/** FLV SoundFormat values we name. */
inline constexpr uint8_t kFlvSoundMp3 = 2, kFlvSoundExHeader = 9, kFlvSoundAac = 10, kFlvSoundMp3_8k = 14;
/** Enhanced RTMP audio FourCCs (big-endian). */
inline constexpr uint32_t kFourCcMp4a = 0x6D703461;  // 'mp4a'
inline constexpr uint32_t kFourCcOpus = 0x4F707573;  // 'Opus'
inline constexpr uint32_t kFourCcMp3 = 0x2E6D7033;   // '.mp3'

enum class FlvAudioPacket : uint8_t {
  kSequenceHeader,  // AAC: AudioSpecificConfig (AACPacketType 0 / ExHeader SequenceStart)
  kCodedFrame,      // AAC: one raw_data_block (AACPacketType 1 / ExHeader CodedFrames); other codecs: data
  kSequenceEnd,     // ExHeader SequenceEnd
  kOther,           // anything else that is well-formed but carries no audio (e.g. MultichannelConfig)
};

struct FlvAudioHeader {
  uint8_t sound_format = 0;  // 4 bits: 2 MP3, 9 ExHeader, 10 AAC, ...
  uint8_t sound_rate = 0;    // 2 bits (legacy; meaningless for AAC)
  uint8_t sound_size = 0;    // 1 bit: 0 = 8-bit, 1 = 16-bit
  uint8_t sound_type = 0;    // 1 bit: 0 = mono, 1 = stereo
  uint32_t fourcc = 0;       // ExHeader only, else 0
  FlvAudioPacket packet = FlvAudioPacket::kCodedFrame;
  size_t header_size = 0;    // the codec payload starts at data + header_size

  bool enhanced() const { return sound_format == kFlvSoundExHeader; }
  bool is_aac() const { return enhanced() ? fourcc == kFourCcMp4a : sound_format == kFlvSoundAac; }
  bool is_mp3() const {
    return enhanced() ? fourcc == kFourCcMp3 : sound_format == kFlvSoundMp3 || sound_format == kFlvSoundMp3_8k;
  }
  bool is_opus() const { return enhanced() && fourcc == kFourCcOpus; }
};

enum class FlvAudioStatus : uint8_t {
  kOk = 0,
  kTruncated,    // empty body, or the header runs past the end
  kUnsupported,  // ExHeader multitrack / ModEx packets
};

/** Parses the AUDIODATA header at the start of an FLV audio tag body / RTMP audio message. */
FlvAudioStatus parse_flv_audio_header(const uint8_t* data, size_t size, FlvAudioHeader* out);

/** The codecs the segmenter takes. */
enum class AudioCodec : uint8_t { kNone = 0, kAac, kMp3, kOpus };
/** "aac" / "mp3" / "opus" ("" for kNone). */
const char* audio_codec_name(AudioCodec c);

/** What a tag is, named for the segmenter's codec_mismatch event (`received`). `codec_name` is
 *  "aac", "mp3", "opus" for the codecs we take; otherwise a stable name of what was sent: the FLV SoundFormat name
 *  ("pcm", "adpcm", "pcm_le", "nellymoser", "g711a", "g711u", "speex", "device", "flv:<n>") or the
 *  enhanced RTMP FourCC as text ("fLaC", "ac-3", ...; non-printable bytes as '?'), "unknown" for an
 *  empty or truncated tag. Multitrack tags report the first track's FourCC and packet kOther. */
struct AudioTagProbe {
  AudioCodec codec = AudioCodec::kNone;
  char codec_name[16] = "unknown";
  FlvAudioPacket packet = FlvAudioPacket::kOther;
  bool multitrack = false;
};
AudioTagProbe probe_audio_tag(const uint8_t* data, size_t size);

}  // namespace skylark::codec
