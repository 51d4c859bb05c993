// See ts_segmenter.h.
#include "core/segment/ts_segmenter.h"

#include <cstdio>

#include "core/codec/flv_audio.h"

namespace skylark::segment {
namespace {

bool same_config(const codec::AudioSpecificConfig& a, const codec::AudioSpecificConfig& b) {
  return a.audio_object_type == b.audio_object_type && a.signalled_object_type == b.signalled_object_type &&
         a.sample_rate == b.sample_rate && a.channel_configuration == b.channel_configuration &&
         a.frame_length_960 == b.frame_length_960 && a.sbr == b.sbr && a.ps == b.ps &&
         a.output_sample_rate == b.output_sample_rate;
}

std::string format(const char* fmt, unsigned a, unsigned b = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, a, b);
  return buf;
}

}  // namespace

TsSegmenter::TsSegmenter(uint32_t target_duration_ms)
    : target_ms_(target_duration_ms == 0 ? kDefaultTargetDurationMs : target_duration_ms) {}

void TsSegmenter::error(std::vector<SegmenterEvent>& out, const char* code, std::string message) {
  SegmenterEvent& e = out.emplace_back();
  e.type = SegmenterEvent::Type::kError;
  e.code = code;
  e.message = std::move(message);
}

void TsSegmenter::push_audio(uint32_t timestamp_ms, const uint8_t* data, size_t size,
                             std::vector<SegmenterEvent>& out) {
  codec::FlvAudioHeader h;
  switch (codec::parse_flv_audio_header(data, size, &h)) {
    case codec::FlvAudioStatus::kOk: break;
    case codec::FlvAudioStatus::kTruncated:
      return error(out, kErrInvalidAudioTag, "audio tag is empty or its header is truncated");
    case codec::FlvAudioStatus::kUnsupported:
      return error(out, kErrUnsupportedCodec, "enhanced RTMP multitrack audio is not supported");
  }
  if (!h.is_aac()) {
    if (h.enhanced())
      return error(out, kErrUnsupportedCodec, "audio codec is not AAC (enhanced RTMP FourCC is not 'mp4a')");
    return error(out, kErrUnsupportedCodec, format("audio codec is not AAC (FLV SoundFormat %u)", h.sound_format));
  }
  const uint8_t* payload = data + h.header_size;
  const size_t payload_size = size - h.header_size;
  switch (h.packet) {
    case codec::FlvAudioPacket::kSequenceHeader: return on_sequence_header(payload, payload_size, out);
    case codec::FlvAudioPacket::kCodedFrame: return on_frame(timestamp_ms, payload, payload_size, out);
    case codec::FlvAudioPacket::kSequenceEnd: return;
    case codec::FlvAudioPacket::kOther:
      if (!h.enhanced()) return error(out, kErrInvalidAudioTag, format("unknown AACPacketType %u", data[1]));
      return;  // e.g. MultichannelConfig: nothing we need
  }
}

void TsSegmenter::on_sequence_header(const uint8_t* data, size_t size, std::vector<SegmenterEvent>& out) {
  codec::AudioSpecificConfig asc;
  codec::AscStatus st = codec::parse_audio_specific_config(data, size, &asc);
  if (st != codec::AscStatus::kOk) return error(out, kErrBadAudioSpecificConfig, codec::asc_status_message(st));
  if (const char* why = codec::adts_incompatibility(asc))
    return error(out, kErrUnsupportedCodec,
                 format("AAC object type %u at %u Hz: ", asc.audio_object_type, asc.sample_rate) + why);
  if (configured_ && same_config(asc, asc_)) return;  // repeated sequence header
  if (configured_) {
    // Config change mid-stream: end the open segment, continue the timeline at the new rate.
    close_segment(out);
    if (clock_started_) {  // before any audio there is nothing to be discontinuous with
      origin_pts_ = next_pts();
      samples_ = 0;
      next_discontinuity_ = true;
    }
  }
  asc_ = asc;
  configured_ = true;
  SegmenterEvent& e = out.emplace_back();
  e.type = SegmenterEvent::Type::kConfig;
  codec::rfc6381_codecs(asc, e.codecs, sizeof e.codecs);
  e.sample_rate = asc.output_sample_rate;
  e.channels = asc.output_channels();
  e.audio_object_type = asc.codecs_object_type();
}

void TsSegmenter::on_frame(uint32_t ts, const uint8_t* frame, size_t size, std::vector<SegmenterEvent>& out) {
  if (!configured_)
    return error(out, kErrAudioBeforeSequenceHeader, "AAC audio before its sequence header (AudioSpecificConfig)");
  if (size == 0) return error(out, kErrInvalidAudioTag, "empty AAC frame");
  if (size > codec::kAdtsMaxPayload)
    return error(out, kErrInvalidAudioTag, format("AAC frame of %u bytes exceeds the ADTS maximum %u",
                                                  static_cast<unsigned>(size), static_cast<unsigned>(codec::kAdtsMaxPayload)));
  if (!clock_started_) {
    clock_started_ = true;
    origin_pts_ = uint64_t{ts} * 90 + mux::ts::kPcrLead90k;
    samples_ = 0;
    last_rtmp_ = ts;
    rtmp_ms_ = anchor_ms_ = ts;
    anchor_pts_ = origin_pts_;
    pending_discontinuity_ = false;  // nothing came before: nothing to be discontinuous with
  } else if (pending_discontinuity_) {
    // Publisher reconnected: new RTMP clock; the timeline carries on where it stopped.
    pending_discontinuity_ = false;
    close_segment(out);
    next_discontinuity_ = true;
    last_rtmp_ = ts;
    rtmp_ms_ = anchor_ms_ = ts;
    anchor_pts_ = next_pts();
  } else {
    rtmp_ms_ += static_cast<int32_t>(ts - last_rtmp_);  // modulo 2^32: survives the 49.7-day wrap
    last_rtmp_ = ts;
    const uint64_t pts = next_pts();
    const int64_t expected_ms = anchor_ms_ + static_cast<int64_t>((pts - anchor_pts_) / 90);
    const int64_t drift = rtmp_ms_ - expected_ms;
    if (drift > kResyncThresholdMs) {
      close_segment(out);
      next_discontinuity_ = true;
      origin_pts_ = pts + static_cast<uint64_t>(drift) * 90;
      samples_ = 0;
      anchor_ms_ = rtmp_ms_;
      anchor_pts_ = origin_pts_;
    } else if (drift < -kResyncThresholdMs) {
      anchor_ms_ = rtmp_ms_;
      anchor_pts_ = pts;
    }
  }

  if (sizes_.empty()) {
    seg_origin_pts_ = origin_pts_;
    seg_first_sample_ = samples_;
    seg_discontinuity_ = next_discontinuity_;
    next_discontinuity_ = false;
  }
  raw_.insert(raw_.end(), frame, frame + size);
  sizes_.push_back(static_cast<uint32_t>(size));
  samples_ += asc_.samples_per_frame();
  if ((samples_ - seg_first_sample_) * 1000 >= uint64_t{target_ms_} * asc_.sample_rate) close_segment(out);
}

void TsSegmenter::flush(std::vector<SegmenterEvent>& out) { close_segment(out); }

void TsSegmenter::close_segment(std::vector<SegmenterEvent>& out) {
  if (sizes_.empty()) return;
  mux::ts::FrameClock clock;
  clock.origin_pts90k = seg_origin_pts_;
  clock.first_sample = seg_first_sample_;
  clock.samples_per_frame = asc_.samples_per_frame();
  clock.sample_rate = asc_.sample_rate;
  mux::ts::AacFrames frames{raw_.data(), sizes_.data(), sizes_.size()};
  SegmenterEvent& e = out.emplace_back();
  e.type = SegmenterEvent::Type::kSegment;
  e.data = writer_.write(asc_, frames, clock);
  e.sequence = sequence_++;
  e.frames = static_cast<uint32_t>(sizes_.size());
  e.duration_ms = static_cast<double>(uint64_t{e.frames} * clock.samples_per_frame) * 1000.0 / clock.sample_rate;
  e.pts90k = clock.pts_of(0);
  e.discontinuity = seg_discontinuity_;
  raw_.clear();
  sizes_.clear();
}

}  // namespace skylark::segment
