// SourceStream, MP3 and ADTS (see source_stream.h): frames found by their headers. A frame is
// taken without more ado when it follows a taken frame of the same stream at once; otherwise (at
// the start, after junk or a tag, or when the stream parameters change) only when the header right
// after it also parses and describes the same stream, so a stray sync word in junk is not a frame.
#include <algorithm>
#include <cstring>
#include <string>

#include "core/icecast/sniff.h"
#include "core/icecast/source_stream.h"

namespace skylark::icecast {
namespace {

// FLV AUDIODATA byte 0 for an MP3 frame (FLV spec v10.1 §E.4.2.1): SoundFormat 2, SoundSize 1
// (16-bit), SoundType from the channel mode, SoundRate as FFmpeg's FLV muxer writes it — 3 (44 kHz)
// for 44.1/48 kHz, 2 for 22.05 kHz, 1 for 11.025 kHz; the rates that muxer refuses get the class
// of their MPEG version (32 kHz → 3, 24/16 kHz → 2, 12/8 kHz → 1). Readers take the rate from the
// frame header.
uint8_t flv_mp3_byte(const codec::Mp3Header& h) {
  const uint8_t rate = h.version == codec::MpegVersion::k1 ? 3 : h.version == codec::MpegVersion::k2 ? 2 : 1;
  return static_cast<uint8_t>(0x20 | rate << 2 | 0x02 | (h.channels() > 1 ? 1 : 0));
}

}  // namespace

bool SourceStream::parse_unit(const uint8_t* p, size_t avail, MpegUnit* u, size_t* need) const {
  *need = 0;
  if (opt_.codec == SourceCodec::kMp3) {
    switch (codec::parse_mp3_header(p, avail, &u->mp3)) {
      case codec::Mp3Status::kOk: break;
      case codec::Mp3Status::kTruncated: *need = codec::kMp3HeaderSize; return false;
      default: return false;
    }
    u->size = u->mp3.frame_size;
    u->rate = u->mp3.sample_rate;
    return true;
  }
  switch (parse_adts_header(p, avail, &u->adts)) {
    case AdtsStatus::kOk: break;
    case AdtsStatus::kTruncated:
      *need = avail >= 2 && (p[1] & 1) == 0 ? kAdtsHeaderCrcBytes : kAdtsHeaderBytes;
      return false;
    default: return false;
  }
  u->size = u->adts.frame_length;
  u->rate = u->adts.sample_rate;
  return true;
}

bool SourceStream::same_stream(const MpegUnit& a, const MpegUnit& b) const {
  return opt_.codec == SourceCodec::kMp3 ? codec::mp3_same_stream(a.mp3, b.mp3) : adts_same_config(a.adts, b.adts);
}

size_t SourceStream::process_mpeg(const uint8_t* p, size_t n) {
  // Bytes after a frame that a confirmation reads: the next header (ADTS: with its CRC, at most).
  const size_t confirm = opt_.codec == SourceCodec::kMp3 ? codec::kMp3HeaderSize : kAdtsHeaderCrcBytes;
  size_t pos = 0;
  while (state_ != State::kFailed && pos < n) {
    if (state_ == State::kSkippingTag) {
      pos = skip_tag(pos, n);
      continue;
    }
    const uint8_t* q = p + pos;
    const size_t avail = n - pos;
    Step step = try_id3(q, avail);
    if (step == Step::kNeedMore) return pos;
    if (step == Step::kDone) continue;

    MpegUnit u;
    size_t need = 0;
    if (parse_unit(q, avail, &u, &need)) {
      const bool follows = state_ == State::kSynced && have_last_ && same_stream(last_, u);
      const size_t want = follows ? u.size : u.size + confirm;
      if (avail < want) {
        need_ = want;
        return pos;
      }
      MpegUnit next;
      size_t next_need = 0;
      if (follows || (parse_unit(q + u.size, avail - u.size, &next, &next_need) && same_stream(u, next))) {
        state_ = State::kSynced;
        junk_ = 0;
        emit_mpeg(q, u);
        pos += u.size;
        continue;
      }
    } else if (need > 0) {
      need_ = need;
      return pos;
    }
    step = try_other_codec(q, avail);
    if (step == Step::kNeedMore) return pos;
    if (step == Step::kDone) return pos;
    skip_junk(&pos, 1);
  }
  return pos;
}

void SourceStream::emit_mpeg(const uint8_t* p, const MpegUnit& u) {
  last_ = u;
  have_last_ = true;
  if (opt_.codec == SourceCodec::kMp3) {
    if (u.size > opt_.max_frame_bytes) {
      fail(kErrFrameTooLarge, "MP3 frame of " + std::to_string(u.size) + " bytes is larger than the " +
                                  std::to_string(opt_.max_frame_bytes) + "-byte limit");
      return;
    }
    if (is_mp3_info_frame(p, u.mp3)) {  // a LAME/Xing/VBRI header: no audio
      ++stats_.info_frames;
      return;
    }
    set_rate(u.rate);
    uint8_t* body = begin_audio(1 + u.size);
    body[0] = flv_mp3_byte(u.mp3);
    std::memcpy(body + 1, p, u.size);
    samples_ += u.mp3.samples_per_frame;
    return;
  }
  const AdtsHeader& h = u.adts;
  if (h.channel_configuration == 0) {
    fail(kErrBadHeader, "ADTS channel configuration 0 (a program_config_element) is not supported");
    return;
  }
  if (h.raw_data_blocks != 1) {
    fail(kErrBadHeader, "ADTS frames with " + std::to_string(h.raw_data_blocks) + " raw_data_blocks are not supported");
    return;
  }
  if (h.payload_size() > opt_.max_frame_bytes) {
    fail(kErrFrameTooLarge, "AAC frame of " + std::to_string(h.payload_size()) + " bytes is larger than the " +
                                std::to_string(opt_.max_frame_bytes) + "-byte limit");
    return;
  }
  set_rate(u.rate);
  if (!have_config_ || !adts_same_config(config_, h)) {
    uint8_t* seq = begin_audio(4);
    seq[0] = 0xAF;  // SoundFormat 10 (AAC), 44 kHz, 16-bit, stereo: fixed for AAC (FLV spec)
    seq[1] = 0x00;  // AACPacketType 0: sequence header
    adts_audio_specific_config(h, seq + 2);
    config_ = h;
    have_config_ = true;
  }
  uint8_t* body = begin_audio(2 + h.payload_size());
  body[0] = 0xAF;
  body[1] = 0x01;  // AACPacketType 1: raw
  std::memcpy(body + 2, p + h.header_size, h.payload_size());
  samples_ += 1024;
}

}  // namespace skylark::icecast
