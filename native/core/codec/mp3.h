// MPEG audio Layer III frame headers (ISO/IEC 11172-3 §2.4.1.3 (MPEG-1), ISO/IEC 13818-3 §2.4.1.3
// (MPEG-2 LSF) and the MPEG-2.5 extension) and a frame splitter that turns arbitrary byte chunks
// (an FLV tag may hold several frames, or part of one) into whole frames, resyncing on sync words.
// parse_mp3_header is a pure function over (data, size); Mp3FrameSplitter owns a small buffer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace skylark::codec {

/** MPEG audio version as coded in the header's 2-bit ID field. */
enum class MpegVersion : uint8_t { k25 = 0, kReserved = 1, k2 = 2, k1 = 3 };

inline constexpr size_t kMp3HeaderSize = 4;
/** Largest Layer III frame: MPEG-1, 320 kbps at 32 kHz with padding = 1441 bytes; MPEG-2.5 160 kbps
 *  at 8 kHz = 1440 (+1). */
inline constexpr size_t kMp3MaxFrameSize = 1441;

struct Mp3Header {
  MpegVersion version = MpegVersion::k1;
  uint32_t bitrate_kbps = 0;     // 8..320
  uint32_t sample_rate = 0;      // Hz: 44100/48000/32000, 22050/24000/16000, 11025/12000/8000
  uint8_t channel_mode = 0;      // 0 stereo, 1 joint stereo, 2 dual channel, 3 mono
  bool padding = false;
  bool crc = false;              // protection_bit == 0: a 16-bit CRC follows the header
  uint32_t frame_size = 0;       // whole frame, header included
  uint32_t samples_per_frame = 0;  // 1152 (MPEG-1) or 576 (MPEG-2/2.5)

  uint32_t channels() const { return channel_mode == 3 ? 1 : 2; }
  bool mpeg1() const { return version == MpegVersion::k1; }
  /** MPEG-TS stream_type: 0x03 (ISO/IEC 11172-3) for MPEG-1, 0x04 (ISO/IEC 13818-3) for MPEG-2/2.5. */
  uint8_t ts_stream_type() const { return mpeg1() ? 0x03 : 0x04; }
  /** ISO/IEC 14496-1 objectTypeIndication in esds: 0x6B (11172-3) for MPEG-1, 0x69 (13818-3)
   *  otherwise (FFmpeg's mov muxer makes the same choice). */
  uint8_t object_type_indication() const { return mpeg1() ? 0x6B : 0x69; }
};

enum class Mp3Status : uint8_t {
  kOk = 0,
  kTruncated,       // fewer than 4 bytes
  kNoSync,          // the 11-bit frame sync is not there
  kBadVersion,      // version ID 01 (reserved)
  kNotLayer3,       // Layer I/II or reserved layer
  kFreeFormat,      // bitrate index 0: frame size unknowable without scanning, unsupported
  kBadBitrate,      // bitrate index 15
  kBadSampleRate,   // sampling frequency index 3
  kBadEmphasis,     // emphasis 10 (reserved)
};

const char* mp3_status_message(Mp3Status s);

/** Parses the 4-byte frame header at `data`. */
Mp3Status parse_mp3_header(const uint8_t* data, size_t size, Mp3Header* out);

/** Same stream parameters (version, rate, channel count): a frame that may follow `a` without a
 *  configuration change. */
inline bool mp3_same_stream(const Mp3Header& a, const Mp3Header& b) {
  return a.version == b.version && a.sample_rate == b.sample_rate && a.channels() == b.channels();
}

/** Splits a byte stream into whole Layer III frames. Input may cut frames anywhere; garbage between
 *  frames is skipped by scanning for the next sync word whose header parses. A frame found after
 *  skipped bytes (or at the very start) is only trusted once the header right after it also parses
 *  and matches (or the input so far ends exactly with it at flush): a stray 0xFFE in garbage is not
 *  taken for a frame. Pending bytes are bounded (kMaxPending). */
class Mp3FrameSplitter {
 public:
  static constexpr size_t kMaxPending = 4 * kMp3MaxFrameSize;

  struct Frame {
    const uint8_t* data;  // valid until the next push()/reset()
    uint32_t size;
    Mp3Header header;
  };

  /** Appends `data` and appends the frames it completes to `frames`. Returns the number of bytes
   *  skipped as garbage while doing so. */
  size_t push(const uint8_t* data, size_t size, std::vector<Frame>& frames);
  /** Drops pending bytes and the sync state (after a discontinuity). */
  void reset() { buf_.clear(); synced_ = false; }
  size_t pending() const { return buf_.size(); }
  bool synced() const { return synced_; }

 private:
  std::vector<uint8_t> buf_;
  std::vector<uint8_t> out_;  // frames handed out by the last push (stable storage)
  bool synced_ = false;       // the next byte is the start of a frame following a good one
};

}  // namespace skylark::codec
