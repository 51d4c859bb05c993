// See segmenter.h.
#include "core/segment/segmenter.h"

#include <algorithm>

#include <cstdio>

namespace skylark::segment {
namespace {

bool same_asc(const codec::AudioSpecificConfig& a, const codec::AudioSpecificConfig& b) {
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

/** Buffer capacity kept from one segment to the next (a 320 kbps 6 s segment is 240 KB). */
constexpr size_t kKeepBufferBytes = 1024 * 1024;

/** MP3 in HLS CODECS: the value Apple's HLS authoring spec and hls.js use for MPEG-1/2 Layer III. */
constexpr const char* kMp3Codecs = "mp4a.40.34";

}  // namespace

Segmenter::Segmenter(const SegmenterOptions& options) : opt_(options) {
  if (opt_.target_duration_ms == 0) opt_.target_duration_ms = kDefaultTargetDurationMs;
  if (opt_.container != Container::kFmp4) opt_.part_target_ms = 0;
}

bool Segmenter::same_config(const TrackConfig& a, const TrackConfig& b) {
  if (a.codec != b.codec) return false;
  switch (a.codec) {
    case AudioCodec::kAac: return same_asc(a.asc, b.asc) && a.asc_bytes == b.asc_bytes;
    case AudioCodec::kMp3: return codec::mp3_same_stream(a.mp3, b.mp3);
    case AudioCodec::kOpus: return a.opus == b.opus;
    case AudioCodec::kNone: return true;
  }
  return false;
}

void Segmenter::error(std::vector<SegmenterEvent>& out, const char* code, std::string message) {
  SegmenterEvent& e = out.emplace_back();
  e.type = SegmenterEvent::Type::kError;
  e.code = code;
  e.message = std::move(message);
}

void Segmenter::push_metadata(uint32_t timestamp_ms, const mux::id3::NowPlaying& fields) {
  PendingMetadata m;
  if (++metadata_id_ == 0) metadata_id_ = 1;  // ids count from 1 (and wrap after 2^32 - 1 changes)
  m.id = metadata_id_;
  m.timestamp_ms = timestamp_ms;
  m.tag = mux::id3::now_playing_tag(fields);
  // The first frame not yet written whose RTMP timestamp is at or after the change (modulo 2^32).
  for (size_t i = 0; i < frame_ts_.size(); ++i)
    if (static_cast<int32_t>(frame_ts_[i] - timestamp_ms) >= 0) return attach_metadata(std::move(m), i);
  // None: the next frame pushed. A change already waiting for it is superseded.
  if (has_meta_next_) meta_bytes_ -= meta_next_.tag.size();
  meta_bytes_ += m.tag.size();
  meta_next_ = std::move(m);
  has_meta_next_ = true;
}

void Segmenter::attach_metadata(PendingMetadata&& m, size_t frame) {
  m.frame = frame;
  meta_bytes_ += m.tag.size();
  auto it = std::lower_bound(meta_.begin(), meta_.end(), frame,
                             [](const PendingMetadata& x, size_t f) { return x.frame < f; });
  if (it != meta_.end() && it->frame == frame) {  // one change per frame: the later call wins
    meta_bytes_ -= it->tag.size();
    *it = std::move(m);
    return;
  }
  meta_.insert(it, std::move(m));
  if (meta_.size() > kMaxMetadataPerFragment) {  // the earliest is superseded within the fragment
    meta_bytes_ -= meta_.front().tag.size();
    meta_.erase(meta_.begin());
  }
}

void Segmenter::clear_unwritten() {
  raw_.clear();
  sizes_.clear();
  durations_.clear();
  frame_ts_.clear();
  for (const auto& m : meta_) meta_bytes_ -= m.tag.size();
  meta_.clear();
}

void Segmenter::discontinuity() {
  pending_discontinuity_ = true;
  mp3_.reset();
}

void Segmenter::push_audio(uint32_t ts, const uint8_t* data, size_t size, std::vector<SegmenterEvent>& out) {
  codec::FlvAudioHeader h;
  switch (codec::parse_flv_audio_header(data, size, &h)) {
    case codec::FlvAudioStatus::kOk: break;
    case codec::FlvAudioStatus::kTruncated:
      return error(out, kErrInvalidAudioTag, "audio tag is empty or its header is truncated");
    case codec::FlvAudioStatus::kUnsupported:
      if (opt_.expect != AudioCodec::kNone) {
        const codec::AudioTagProbe p = codec::probe_audio_tag(data, size);
        if (p.codec != opt_.expect) {
          SegmenterEvent& e = out.emplace_back();
          e.type = SegmenterEvent::Type::kError;
          e.code = kErrCodecMismatch;
          e.expected = codec::audio_codec_name(opt_.expect);
          e.received = p.codec_name;
          e.message = "expected " + e.expected + " audio, received " + e.received;
          return;
        }
      }
      return error(out, kErrUnsupportedCodec, "enhanced RTMP multitrack audio is not supported");
  }
  const AudioCodec c = h.is_aac() ? AudioCodec::kAac : h.is_mp3() ? AudioCodec::kMp3
                     : h.is_opus() ? AudioCodec::kOpus : AudioCodec::kNone;
  if (opt_.expect != AudioCodec::kNone && c != opt_.expect) {
    SegmenterEvent& e = out.emplace_back();
    e.type = SegmenterEvent::Type::kError;
    e.code = kErrCodecMismatch;
    e.expected = codec::audio_codec_name(opt_.expect);
    e.received = codec::probe_audio_tag(data, size).codec_name;
    e.message = "expected " + e.expected + " audio, received " + e.received;
    return;
  }
  const uint8_t* payload = data + h.header_size;
  const size_t payload_size = size - h.header_size;
  switch (c) {
    case AudioCodec::kAac: return on_aac(h, ts, payload, payload_size, out);
    case AudioCodec::kMp3:
      if (h.packet == codec::FlvAudioPacket::kCodedFrame) on_mp3(ts, payload, payload_size, out);
      return;  // E-RTMP SequenceStart/End, MultichannelConfig: nothing MP3 needs
    case AudioCodec::kOpus:
      if (opt_.container != Container::kFmp4)
        return error(out, kErrUnsupportedCodec, "Opus is carried only in fMP4 (container 'fmp4'), not MPEG-TS");
      return on_opus(h, ts, payload, payload_size, out);
    case AudioCodec::kNone: break;
  }
  if (h.enhanced()) {
    const codec::AudioTagProbe p = codec::probe_audio_tag(data, size);
    return error(out, kErrUnsupportedCodec, std::string("audio codec '") + p.codec_name +
                                                "' is not supported (AAC, MP3 and Opus are)");
  }
  return error(out, kErrUnsupportedCodec,
               format("audio codec is not supported (FLV SoundFormat %u; AAC, MP3 and Opus are)", h.sound_format));
}

void Segmenter::on_aac(const codec::FlvAudioHeader& h, uint32_t ts, const uint8_t* p, size_t n,
                       std::vector<SegmenterEvent>& out) {
  switch (h.packet) {
    case codec::FlvAudioPacket::kSequenceHeader: {
      TrackConfig c;
      c.codec = AudioCodec::kAac;
      codec::AscStatus st = codec::parse_audio_specific_config(p, n, &c.asc);
      if (st != codec::AscStatus::kOk) return error(out, kErrBadAudioSpecificConfig, codec::asc_status_message(st));
      if (const char* why = codec::adts_incompatibility(c.asc))
        return error(out, kErrUnsupportedCodec,
                     format("AAC object type %u at %u Hz: ", c.asc.audio_object_type, c.asc.sample_rate) + why);
      c.asc_bytes.assign(p, p + (n < 64 ? n : 64));  // the esds DecoderSpecificInfo (trailing junk capped)
      c.clock_rate = c.asc.sample_rate;
      c.samples_per_frame = c.asc.samples_per_frame();
      return on_config(std::move(c), out);
    }
    case codec::FlvAudioPacket::kCodedFrame:
      if (!configured_ || cfg_.codec != AudioCodec::kAac)
        return error(out, kErrAudioBeforeSequenceHeader, "AAC audio before its sequence header (AudioSpecificConfig)");
      if (n == 0) return error(out, kErrInvalidAudioTag, "empty AAC frame");
      if (n > codec::kAdtsMaxPayload)
        return error(out, kErrFrameTooLarge, format("AAC frame of %u bytes exceeds the ADTS maximum %u",
                                                    static_cast<unsigned>(n), static_cast<unsigned>(codec::kAdtsMaxPayload)));
      return on_frame(ts, p, n, cfg_.samples_per_frame, out);
    case codec::FlvAudioPacket::kSequenceEnd: return;
    case codec::FlvAudioPacket::kOther:
      if (!h.enhanced()) return error(out, kErrInvalidAudioTag, format("unknown AACPacketType %u", p[-1]));
      return;  // e.g. MultichannelConfig: nothing we need
  }
}

void Segmenter::on_opus(const codec::FlvAudioHeader& h, uint32_t ts, const uint8_t* p, size_t n,
                        std::vector<SegmenterEvent>& out) {
  switch (h.packet) {
    case codec::FlvAudioPacket::kSequenceHeader: {
      TrackConfig c;
      c.codec = AudioCodec::kOpus;
      codec::OpusHeadStatus st = codec::parse_opus_head(p, n, &c.opus);
      if (st != codec::OpusHeadStatus::kOk) return error(out, kErrBadOpusHead, codec::opus_head_status_message(st));
      c.clock_rate = codec::kOpusClockRate;
      return on_config(std::move(c), out);
    }
    case codec::FlvAudioPacket::kCodedFrame: {
      if (!configured_ || cfg_.codec != AudioCodec::kOpus)
        return error(out, kErrAudioBeforeSequenceHeader, "Opus audio before its sequence header (OpusHead)");
      const uint32_t samples = codec::opus_packet_samples(p, n);
      if (samples == 0) return error(out, kErrBadOpusPacket, "malformed Opus packet (TOC, frame count or length)");
      return on_frame(ts, p, n, samples, out);
    }
    case codec::FlvAudioPacket::kSequenceEnd:
    case codec::FlvAudioPacket::kOther: return;
  }
}

void Segmenter::on_mp3(uint32_t ts, const uint8_t* p, size_t n, std::vector<SegmenterEvent>& out) {
  mp3_frames_.clear();
  const size_t skipped = mp3_.push(p, n, mp3_frames_);
  if (skipped > 0)
    error(out, kErrBadMp3Header, format("skipped %u bytes that are not MPEG-1/2/2.5 Layer III frames",
                                        static_cast<unsigned>(skipped)));
  for (const auto& f : mp3_frames_) {
    if (!configured_ || cfg_.codec != AudioCodec::kMp3 || !codec::mp3_same_stream(cfg_.mp3, f.header)) {
      TrackConfig c;
      c.codec = AudioCodec::kMp3;
      c.mp3 = f.header;
      c.clock_rate = f.header.sample_rate;
      c.samples_per_frame = f.header.samples_per_frame;
      on_config(std::move(c), out);
    }
    on_frame(ts, f.data, f.size, f.header.samples_per_frame, out);
  }
}

void Segmenter::on_config(TrackConfig&& c, std::vector<SegmenterEvent>& out) {
  if (configured_ && same_config(c, cfg_)) return;  // repeated sequence header
  bool reorigin = false;
  uint64_t pts = 0;
  if (configured_) {
    // Config change mid-stream: end the open segment, continue the timeline at the new rate.
    close_segment(out);
    if (clock_started_) {  // before any audio there is nothing to be discontinuous with
      pts = next_pts();
      reorigin = true;
      next_discontinuity_ = true;
    }
  }
  cfg_ = std::move(c);
  configured_ = true;
  if (reorigin) {
    origin_pts_ = pts;
    origin_dts_ = pts * cfg_.clock_rate / 90000;
    samples_ = 0;
  }
  SegmenterEvent& e = out.emplace_back();
  e.type = SegmenterEvent::Type::kConfig;
  e.codec = cfg_.codec;
  e.timescale = cfg_.clock_rate;
  mux::fmp4::AudioTrack track;
  track.timescale = cfg_.clock_rate;
  switch (cfg_.codec) {
    case AudioCodec::kAac:
      codec::rfc6381_codecs(cfg_.asc, e.codecs, sizeof e.codecs);
      e.sample_rate = cfg_.asc.output_sample_rate;
      e.channels = cfg_.asc.output_channels();
      e.audio_object_type = cfg_.asc.codecs_object_type();
      track.kind = mux::fmp4::AudioTrack::Kind::kAac;
      track.object_type_indication = 0x40;  // ISO/IEC 14496-3 audio
      track.decoder_specific = cfg_.asc_bytes.data();
      track.decoder_specific_size = cfg_.asc_bytes.size();
      track.sample_rate = cfg_.asc.sample_rate;
      track.channels = static_cast<uint16_t>(e.channels);
      break;
    case AudioCodec::kMp3:
      std::snprintf(e.codecs, sizeof e.codecs, "%s", kMp3Codecs);
      e.sample_rate = cfg_.mp3.sample_rate;
      e.channels = cfg_.mp3.channels();
      track.kind = mux::fmp4::AudioTrack::Kind::kMp3;
      track.object_type_indication = cfg_.mp3.object_type_indication();
      track.sample_rate = cfg_.mp3.sample_rate;
      track.channels = static_cast<uint16_t>(e.channels);
      track.avg_bitrate = track.max_bitrate = cfg_.mp3.bitrate_kbps * 1000;
      break;
    case AudioCodec::kOpus:
      std::snprintf(e.codecs, sizeof e.codecs, "opus");
      e.sample_rate = codec::kOpusClockRate;
      e.channels = cfg_.opus.channels;
      track.kind = mux::fmp4::AudioTrack::Kind::kOpus;
      track.opus = cfg_.opus;
      track.sample_rate = codec::kOpusClockRate;
      track.channels = cfg_.opus.channels;
      // The pre-skip: dOps PreSkip, and an edit list that starts the presentation after it (what
      // FFmpeg's mov muxer writes for Opus: elst media_time = pre-skip).
      track.edit_media_time = cfg_.opus.pre_skip;
      break;
    case AudioCodec::kNone: break;
  }
  if (opt_.container == Container::kFmp4) e.init = mux::fmp4::write_init_segment(track);
}

void Segmenter::on_frame(uint32_t ts, const uint8_t* frame, size_t size, uint32_t samples,
                         std::vector<SegmenterEvent>& out) {
  if (opt_.max_frame_bytes != 0 && size > opt_.max_frame_bytes)
    return error(out, kErrFrameTooLarge, format("audio frame of %u bytes exceeds the cap of %u bytes",
                                                static_cast<unsigned>(size), opt_.max_frame_bytes));
  if (!clock_started_) {
    clock_started_ = true;
    origin_pts_ = uint64_t{ts} * 90 + mux::ts::kPcrLead90k;
    origin_dts_ = origin_pts_ * cfg_.clock_rate / 90000;
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
      origin_dts_ = origin_pts_ * cfg_.clock_rate / 90000;
      samples_ = 0;
      anchor_ms_ = rtmp_ms_;
      anchor_pts_ = origin_pts_;
    } else if (drift < -kResyncThresholdMs) {
      anchor_ms_ = rtmp_ms_;
      anchor_pts_ = pts;
    }
  }

  // After the clock: a jump may just have closed the open segment.
  if (opt_.max_segment_bytes != 0 && seg_frame_bytes_ + size > opt_.max_segment_bytes)
    return error(out, kErrSegmentTooLarge,
                 format("audio frame of %u bytes would take the segment over its cap of %u bytes",
                        static_cast<unsigned>(size), opt_.max_segment_bytes));
  if (seg_frames_ == 0) {
    seg_first_sample_ = part_first_sample_ = samples_;
    seg_discontinuity_ = next_discontinuity_;
    next_discontinuity_ = false;
    part_index_ = 0;
  }
  raw_.insert(raw_.end(), frame, frame + size);
  sizes_.push_back(static_cast<uint32_t>(size));
  durations_.push_back(samples);
  frame_ts_.push_back(ts);
  if (has_meta_next_) {
    has_meta_next_ = false;
    meta_bytes_ -= meta_next_.tag.size();
    attach_metadata(std::move(meta_next_), sizes_.size() - 1);
    meta_next_ = {};
  }
  ++seg_frames_;
  seg_frame_bytes_ += size;
  samples_ += samples;
  const uint64_t rate = cfg_.clock_rate;
  if ((samples_ - seg_first_sample_) * 1000 >= uint64_t{opt_.target_duration_ms} * rate) close_segment(out);
  else if (parts() && (samples_ - part_first_sample_) * 1000 >= uint64_t{opt_.part_target_ms} * rate) close_part(out);
}

void Segmenter::write_fragment(std::vector<uint8_t>& dst, uint64_t first_sample, std::vector<MetadataMark>& marks) {
  mux::fmp4::Fragment f;
  f.sequence_number = ++fragment_sequence_;
  f.base_media_decode_time = origin_dts_ + first_sample;
  f.data = raw_.data();
  f.sizes = sizes_.data();
  f.durations = durations_.data();
  f.count = sizes_.size();
  // The changes of these frames: an emsg each before the moof, at its frame's decode time.
  events_scratch_.clear();
  uint64_t sample = first_sample;
  size_t next = 0;
  for (const auto& m : meta_) {
    if (m.frame >= f.count) break;  // cannot happen: changes are attached to frames of raw_
    for (; next < m.frame; ++next) sample += durations_[next];
    mux::fmp4::EventMessage& em = events_scratch_.emplace_back();
    em.timescale = cfg_.clock_rate;
    em.presentation_time = origin_dts_ + sample;
    em.id = m.id;
    em.scheme_id_uri = mux::fmp4::kId3EventScheme;
    em.message_data = m.tag.data();
    em.message_size = m.tag.size();
    marks.push_back({m.id, m.timestamp_ms, pts_at(sample), em.presentation_time});
  }
  f.events = events_scratch_.data();
  f.event_count = events_scratch_.size();
  const size_t at = dst.size();
  dst.resize(at + mux::fmp4::fragment_size(f));
  util::ByteWriter w(dst.data() + at, dst.size() - at);
  mux::fmp4::write_fragment(w, f);
  if (!w.ok() || w.size() != dst.size() - at) dst.resize(at);  // cannot happen: sizes computed above
  events_scratch_.clear();
  clear_unwritten();
}

uint32_t Segmenter::ms_to_next_cut() const {
  if (!configured_ || cfg_.clock_rate == 0 || seg_frames_ == 0) return 0;
  const uint64_t rate = cfg_.clock_rate;
  const auto left = [&](uint32_t target_ms, uint64_t first_sample) -> uint64_t {
    const uint64_t target = uint64_t{target_ms} * rate / 1000;
    const uint64_t done = samples_ - first_sample;
    return target > done ? target - done : 0;
  };
  uint64_t samples = left(opt_.target_duration_ms, seg_first_sample_);
  if (parts()) samples = std::min(samples, left(opt_.part_target_ms, part_first_sample_));
  return static_cast<uint32_t>(samples * 1000 / rate);
}

void Segmenter::close_part(std::vector<SegmenterEvent>& out) {
  if (sizes_.empty()) return;
  SegmenterEvent& e = out.emplace_back();
  e.type = SegmenterEvent::Type::kPart;
  e.sequence = sequence_;
  e.part_index = part_index_++;
  e.frames = static_cast<uint32_t>(sizes_.size());
  e.duration_ms = static_cast<double>(samples_ - part_first_sample_) * 1000.0 / cfg_.clock_rate;
  e.pts90k = pts_at(part_first_sample_);
  e.base_media_decode_time = origin_dts_ + part_first_sample_;
  e.timescale = cfg_.clock_rate;
  write_fragment(e.data, part_first_sample_, e.metadata);
  if (opt_.segment_bytes) seg_bytes_.insert(seg_bytes_.end(), e.data.begin(), e.data.end());
  seg_marks_.insert(seg_marks_.end(), e.metadata.begin(), e.metadata.end());
  part_first_sample_ = samples_;
}

void Segmenter::flush(std::vector<SegmenterEvent>& out) { close_segment(out); }

void Segmenter::close_segment(std::vector<SegmenterEvent>& out) {
  if (seg_frames_ == 0) return;
  std::vector<uint8_t> data;
  std::vector<MetadataMark> marks;
  if (opt_.container == Container::kTs) {
    mux::ts::FrameClock clock;
    clock.origin_pts90k = origin_pts_;
    clock.first_sample = seg_first_sample_;
    clock.samples_per_frame = cfg_.samples_per_frame;
    clock.sample_rate = cfg_.clock_rate;
    mux::ts::AudioFrames frames{raw_.data(), sizes_.data(), sizes_.size()};
    mux::ts::TsAudioFormat format;
    if (cfg_.codec == AudioCodec::kAac) format = {mux::ts::kStreamTypeAdtsAac, &cfg_.asc};
    else format = {cfg_.mp3.ts_stream_type(), nullptr, /*timed_metadata=*/true};
    ts_meta_scratch_.clear();
    if (format.timed_metadata)
      for (const auto& m : meta_) {
        ts_meta_scratch_.push_back({m.frame, m.tag.data(), m.tag.size()});
        marks.push_back({m.id, m.timestamp_ms, clock.pts_of(m.frame), 0});
      }
    data = ts_.write(format, frames, clock, ts_meta_scratch_.data(), ts_meta_scratch_.size());
    ts_meta_scratch_.clear();
    clear_unwritten();
  } else if (parts()) {
    close_part(out);
    data = std::move(seg_bytes_);
    seg_bytes_ = {};
    marks = std::move(seg_marks_);
    seg_marks_.clear();
  } else {
    write_fragment(data, seg_first_sample_, marks);
  }
  SegmenterEvent& e = out.emplace_back();
  e.type = SegmenterEvent::Type::kSegment;
  e.data = std::move(data);
  e.sequence = sequence_++;
  e.frames = seg_frames_;
  e.part_index = parts() ? part_index_ : 0;
  e.duration_ms = static_cast<double>(samples_ - seg_first_sample_) * 1000.0 / cfg_.clock_rate;
  e.pts90k = pts_at(seg_first_sample_);
  e.base_media_decode_time = origin_dts_ + seg_first_sample_;
  e.timescale = cfg_.clock_rate;
  e.discontinuity = seg_discontinuity_;
  e.metadata = std::move(marks);
  seg_frames_ = 0;
  seg_frame_bytes_ = 0;
  part_index_ = 0;
  // Buffers keep their capacity for the next segment, unless an outsized one grew them.
  if (raw_.capacity() > kKeepBufferBytes) std::vector<uint8_t>().swap(raw_);
}

}  // namespace skylark::segment
