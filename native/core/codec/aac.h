// AAC codec headers: AudioSpecificConfig (ISO/IEC 14496-3 §1.6.2.1), the ADTS header
// (ISO/IEC 14496-3 §1.A.2.2 / ISO/IEC 13818-7 §6.2) and the RFC 6381 `codecs` string.
// Pure functions over (data, size): no allocation, no state.
#pragma once
#include <cstddef>
#include <cstdint>

namespace skylark::codec {

/** Audio object types we name (ISO/IEC 14496-3 Table 1.1). */
inline constexpr uint8_t kAotAacMain = 1, kAotAacLc = 2, kAotAacSsr = 3, kAotAacLtp = 4,
                         kAotSbr = 5, kAotPs = 29;

/** sampling_frequency_index → Hz (indices 13, 14 are reserved, 15 = explicit 24-bit value). */
inline constexpr uint32_t kAacSampleRates[13] = {96000, 88200, 64000, 48000, 44100, 32000, 24000,
                                                 22050, 16000, 12000, 11025, 8000,  7350};

/** A parsed AudioSpecificConfig. Rates in Hz. */
struct AudioSpecificConfig {
  uint8_t audio_object_type = 0;      // core object type (for SBR/PS: the underlying one, e.g. 2)
  uint8_t signalled_object_type = 0;  // as signalled: 5 (SBR) / 29 (PS) for explicit HE-AAC, else = core
  uint8_t frequency_index = 0;        // core sampling_frequency_index; 15 when explicit
  uint32_t sample_rate = 0;           // core sampling rate (the rate AAC frames are timed at)
  uint8_t channel_configuration = 0;  // 0 = PCE in the stream, 1..7
  bool frame_length_960 = false;      // GASpecificConfig frameLengthFlag (960-sample frames)
  bool sbr = false;                   // SBR signalled (explicitly or by the backward-compatible sync extension)
  bool ps = false;                    // parametric stereo signalled
  uint32_t output_sample_rate = 0;    // extension (SBR) rate when sbr, else sample_rate

  /** Samples per raw_data_block at the core rate (1024, or 960 with frameLengthFlag). */
  uint32_t samples_per_frame() const { return frame_length_960 ? 960 : 1024; }
  /** Output channels (channel configuration 7 = 7.1 = 8 channels; PS decodes mono to stereo). */
  uint32_t output_channels() const;
  /** The object type for the `codecs` string: 29 with PS, 5 with SBR, else the core type. */
  uint8_t codecs_object_type() const { return ps ? kAotPs : sbr ? kAotSbr : audio_object_type; }
};

enum class AscStatus : uint8_t {
  kOk = 0,
  kTruncated,         // ended before the mandatory fields
  kBadObjectType,     // object type 0 (null) or an SBR/PS wrapper around a bad core type
  kBadFrequency,      // reserved frequency index 13/14 or explicit frequency 0
  kBadChannelConfig,  // channel configuration 8..15 (reserved)
};

/** Human-readable reason for a status (static string). */
const char* asc_status_message(AscStatus s);

/** Parses an AudioSpecificConfig (ISO/IEC 14496-3 §1.6.2.1): audioObjectType with the escape 31
 *  (32 + 6 bits), samplingFrequencyIndex with 0xF (explicit 24-bit rate), channelConfiguration,
 *  explicit SBR/PS (object type 5/29) and, leniently, the backward-compatible sync extension
 *  (0x2B7) and GASpecificConfig frameLengthFlag. Trailing bytes are ignored. */
AscStatus parse_audio_specific_config(const uint8_t* data, size_t size, AudioSpecificConfig* out);

/** Why `asc` cannot be carried as ADTS (core type not Main/LC/SSR/LTP, channel configuration 0,
 *  explicit rate without an index), or nullptr when it can. */
const char* adts_incompatibility(const AudioSpecificConfig& asc);

/** ADTS header size without CRC (protection_absent = 1). */
inline constexpr size_t kAdtsHeaderSize = 7;
/** Largest raw AAC frame an ADTS header can describe (13-bit frame_length includes the header). */
inline constexpr size_t kAdtsMaxPayload = 8191 - kAdtsHeaderSize;

/** Writes the 7-byte ADTS header for one raw_data_block of `payload_size` bytes (MPEG-4 ID, no CRC,
 *  buffer fullness 0x7FF = VBR). `asc` must be ADTS-compatible and payload_size <= kAdtsMaxPayload. */
void write_adts_header(uint8_t* out, const AudioSpecificConfig& asc, size_t payload_size);

/** The ADTS sampling_frequency_index of the core rate (explicit rates mapped back to the table),
 *  or -1 when the rate has none. */
int adts_frequency_index(const AudioSpecificConfig& asc);

/** RFC 6381 `codecs` value, e.g. "mp4a.40.2" (LC), "mp4a.40.5" (HE), "mp4a.40.29" (HEv2),
 *  into `buf` (NUL-terminated, at most 12 bytes). Returns the length. */
size_t rfc6381_codecs(const AudioSpecificConfig& asc, char* buf, size_t cap);

}  // namespace skylark::codec
