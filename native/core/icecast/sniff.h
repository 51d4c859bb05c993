// What a byte stream starts with, for an Icecast source: ID3v2 tags (ID3v2.4.0 §3.1 header, §3.4
// footer), the LAME/Xing/VBRI info frame an MP3 file begins with, and "which codec is this"
// (MPEG audio Layer I/II/III, ADTS, Ogg) so a stream sent as the wrong codec gets a
// codec_mismatch naming what it carries. Pure functions over (data, size).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/codec/mp3.h"

namespace skylark::icecast {

/** ID3v2 header (and footer) size. */
inline constexpr size_t kId3HeaderBytes = 10;

enum class Id3Status : uint8_t { kOk = 0, kNeedMore, kNotId3 };

/** An ID3v2 tag at `data`: "ID3", major version 2..4, revision < 0xFF, a 28-bit syncsafe size.
 *  `*total` = the whole tag (header + size + the footer when flagged). kNeedMore when fewer than
 *  10 bytes are there but they could still start a tag. */
Id3Status parse_id3v2_header(const uint8_t* data, size_t size, size_t* total);

/** Whether the Layer III frame at `frame` (`h` its parsed header, `h.frame_size` bytes there) is
 *  an info frame — "Xing"/"Info" after the side information, or "VBRI" at byte 36 — that carries
 *  no audio (LAME, FFmpeg and most encoders write one first in a file). */
bool is_mp3_info_frame(const uint8_t* frame, const codec::Mp3Header& h);

/** MPEG audio frame header of any layer (ISO/IEC 11172-3 §2.4.2.3, 13818-3): for recognizing
 *  MPEG-1/2 Layer I/II streams. Layer III is codec::parse_mp3_header's. */
struct MpegAudioFrame {
  uint8_t layer = 0;          // 1, 2 or 3
  uint8_t version_bits = 0;   // the 2-bit ID field (3 = MPEG-1, 2 = MPEG-2, 0 = MPEG-2.5)
  uint32_t sample_rate = 0;   // Hz
  uint32_t frame_size = 0;    // bytes, header included
};
bool parse_mpeg_audio_frame(const uint8_t* data, size_t size, MpegAudioFrame* out);

/** What sniff_codec() decided. */
enum class Sniff : uint8_t {
  kNeedMore,  // the bytes at `data` could start a unit of some codec: `*need` bytes decide it
  kNone,      // nothing recognizable starts here
  kFound,     // `*name` names the codec
};

/** Which codec starts at `data`, when sure: two consecutive MPEG audio frames of the same stream
 *  ("mp1", "mp2", "mp3"), two consecutive ADTS frames ("aac"), or an Ogg page whose first packet
 *  names its codec (ogg_identify_codec: "opus", "vorbis", "flac", ...). Never more than
 *  kSniffMaxBytes are asked for. The answer depends only on the first `*need` bytes, so feeding
 *  a stream in any split gives the same answers. */
inline constexpr size_t kSniffMaxBytes = 8192 + 9;
Sniff sniff_codec(const uint8_t* data, size_t size, const char** name, size_t* need);

}  // namespace skylark::icecast
