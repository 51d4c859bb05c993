// RTP receive: demultiplexing, the SRTP packet's RTP header, the rollover counter, receiver
// statistics and the Opus jitter buffer (core/rtp/receive.h).
#include "core/rtp/receive.h"

#include <cmath>
#include <limits>

#include "core/codec/opus.h"

namespace skylark::rtp {

namespace {
constexpr int64_t kSeqSpan = 0x10000;
// A sequence number this far from the expected one starts a new run (a sender restart), not a wait.
constexpr int64_t kSeqJump = 3000;
constexpr int64_t kTsSpan = int64_t{1} << 32;

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t be32(const uint8_t* p) { return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3]; }
}  // namespace

bool is_rtp(const uint8_t* data, size_t size) {
  if (size < 12 || (data[0] & 0xc0) != 0x80) return false;
  const uint8_t pt = data[1] & 0x7f;
  return pt < 64 || pt > 95;
}

RtpStatus parse_srtp_header(const uint8_t* data, size_t size, size_t tag_size, RtpHeader* out) {
  if (!is_rtp(data, size)) return RtpStatus::kNotRtp;
  const uint8_t b0 = data[0];
  size_t hl = 12 + 4 * size_t{static_cast<uint8_t>(b0 & 0x0f)};
  if (b0 & 0x10) {
    if (hl + 4 > size) return RtpStatus::kTruncated;
    hl += 4 + 4 * size_t{be16(data + hl + 2)};
  }
  if (hl + tag_size > size) return RtpStatus::kTruncated;
  out->seq = be16(data + 2);
  out->timestamp = be32(data + 4);
  out->ssrc = be32(data + 8);
  out->payload_type = data[1] & 0x7f;
  out->padding = (b0 & 0x20) != 0;
  out->header_size = hl;
  return RtpStatus::kOk;
}

size_t strip_padding(const uint8_t* data, size_t header_size, size_t end) {
  if (end <= header_size) return 0;
  const size_t pad = data[end - 1];
  if (pad == 0 || pad > end - header_size) return 0;
  return end - pad;
}

// ── SRTCP framing (RFC 3711 §3.4, RFC 7714 §9.2), RTCP (RFC 3550 §6.1, §6.4) ─────────────────────

bool is_rtcp(const uint8_t* data, size_t size) {
  if (size < 8 || (data[0] & 0xc0) != 0x80) return false;
  return data[1] >= 192 && data[1] <= 223;
}

bool parse_srtcp_trailer(const uint8_t* data, size_t size, size_t tag_size, bool aead, SrtcpTrailer* out) {
  if (!is_rtcp(data, size) || size < 8 + 4 + tag_size) return false;
  const size_t index_at = aead ? size - 4 : size - tag_size - 4;
  const uint32_t e_index = be32(data + index_at);
  out->encrypted = (e_index >> 31) != 0;
  out->index = e_index & 0x7fffffff;
  out->index_at = index_at;
  out->tag_at = aead ? size - 4 - tag_size : size - tag_size;
  out->rtcp_end = size - 4 - tag_size;
  return true;
}

RtcpSummary read_sender_reports(const uint8_t* data, size_t size, uint32_t ssrc) {
  RtcpSummary s;
  const RtcpSummary invalid{false, false, false, 0};  // nothing of a malformed packet is used
  size_t at = 0;
  bool first = true;
  while (at < size) {
    if (size - at < 4 || (data[at] & 0xc0) != 0x80) return invalid;
    const uint8_t pt = data[at + 1];
    const size_t len = (size_t{be16(data + at + 2)} + 1) * 4;
    if (len > size - at) return invalid;
    // RFC 3550 §6.1: the first packet of a compound one is an SR or an RR (RFC 5506 allows others;
    // those go to werift, as does everything but reports and SDES).
    if (first && pt != 200 && pt != 201) s.reports_only = false;
    if (pt != 200 && pt != 201 && pt != 202) s.reports_only = false;
    if (pt == 200 && len >= 28 && be32(data + at + 4) == ssrc) {
      s.has_sr = true;
      s.lsr = be32(data + at + 10);  // NTP seconds' low 16 bits ‖ fraction's high 16 bits
    }
    first = false;
    at += len;
  }
  if (size == 0) return invalid;
  s.valid = true;
  return s;
}

void write_receiver_report(uint8_t* o, uint32_t reporter, uint32_t source, const ReportBlock& b, uint32_t lsr, uint32_t dlsr) {
  auto put32 = [&](size_t at, uint32_t v) {
    o[at] = static_cast<uint8_t>(v >> 24);
    o[at + 1] = static_cast<uint8_t>(v >> 16);
    o[at + 2] = static_cast<uint8_t>(v >> 8);
    o[at + 3] = static_cast<uint8_t>(v);
  };
  o[0] = 0x81;  // V=2, P=0, RC=1
  o[1] = 201;
  o[2] = 0;
  o[3] = kReceiverReportSize / 4 - 1;
  put32(4, reporter);
  put32(8, source);
  put32(12, (b.fraction_lost & 0xff) << 24 | (b.packets_lost & 0xffffff));
  put32(16, b.highest_sequence);
  put32(20, b.jitter);
  put32(24, lsr);
  put32(28, dlsr);
}

// ── RFC 3711 §3.3.1 ───────────────────────────────────────────────────────────────────────────

int64_t RolloverCounter::estimate(uint16_t seq) const {
  const int64_t roc = roc_;
  if (sl_ < 0x8000) return seq - sl_ > 0x8000 ? roc - 1 : roc;
  return sl_ - 0x8000 > seq ? roc + 1 : roc;
}

void RolloverCounter::advance(uint16_t seq, uint32_t roc) {
  if (roc > roc_) {
    roc_ = roc;
    sl_ = seq;
  } else if (roc == roc_ && seq > sl_) {
    sl_ = seq;
  }
}

void RolloverCounter::reset(uint16_t seq) {
  roc_ = 0;
  sl_ = seq;
}

// ── RFC 3550 §A.3, §A.8 ───────────────────────────────────────────────────────────────────────

void ReceptionStats::add(uint16_t seq, uint32_t timestamp, double arrival) {
  ++received_;
  if (highest_ < 0) {
    base_ = highest_ = seq;
  } else {
    int64_t d = (int64_t{seq} - (highest_ & 0xffff) + kSeqSpan) & 0xffff;
    if (d >= 0x8000) d -= kSeqSpan;
    if (d > 0) highest_ += d;
  }
  const int32_t transit = static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(std::floor(arrival))) - timestamp);
  if (have_transit_) {
    const int64_t diff = std::llabs(int64_t{transit} - last_transit_);
    jitter_ += (static_cast<double>(static_cast<uint32_t>(diff)) - jitter_) / 16;
  }
  have_transit_ = true;
  last_transit_ = transit;
}

ReportBlock ReceptionStats::report() {
  const int64_t expected = highest_ < 0 ? 0 : highest_ - base_ + 1;
  const int64_t expected_interval = expected - expected_prior_;
  const int64_t received_interval = static_cast<int64_t>(received_) - received_prior_;
  expected_prior_ = expected;
  received_prior_ = static_cast<int64_t>(received_);
  const int64_t lost_interval = expected_interval - received_interval;
  ReportBlock r;
  r.fraction_lost = expected_interval <= 0 || lost_interval <= 0 ? 0 : static_cast<uint32_t>((lost_interval * 256) / expected_interval);
  if (r.fraction_lost > 255) r.fraction_lost = 255;
  const int64_t lost = expected - static_cast<int64_t>(received_);
  r.packets_lost = lost <= 0 ? 0 : static_cast<uint32_t>(lost > 0x7fffff ? 0x7fffff : lost);
  r.highest_sequence = static_cast<uint32_t>(highest_ < 0 ? 0 : highest_);
  r.jitter = static_cast<uint32_t>(jitter_);
  return r;
}

// ── The jitter buffer ─────────────────────────────────────────────────────────────────────────

int64_t OpusJitterBuffer::extend_seq(uint16_t seq) const {
  const int64_t ref = highest_seq_;
  int64_t d = ((int64_t{seq} - (ref % kSeqSpan)) % kSeqSpan + kSeqSpan) % kSeqSpan;
  if (d >= kSeqSpan / 2) d -= kSeqSpan;
  return ref + d;
}

int64_t OpusJitterBuffer::extend_ts(uint32_t timestamp) const {
  const int64_t ref = next_ts_;
  int64_t d = ((int64_t{timestamp} - ((ref % kTsSpan) + kTsSpan) % kTsSpan) % kTsSpan + kTsSpan) % kTsSpan;
  if (d >= kTsSpan / 2) d -= kTsSpan;
  return ref + d;
}

void OpusJitterBuffer::push(uint16_t seq, uint32_t timestamp, const uint8_t* payload, size_t size, double now_ms) {
  ++stats_.received;
  if (size == 0) return;
  if (!started_) {
    started_ = true;
    next_seq_ = highest_seq_ = seq;
    next_ts_ = timestamp;
  }
  const int64_t ext = extend_seq(seq);
  if (ext < next_seq_ || held_.count(ext)) {
    ++stats_.late;
    return;
  }
  if (ext - next_seq_ > kSeqJump) {
    // A new run of sequence numbers: what is held goes out, then the run starts here.
    flush(std::numeric_limits<double>::infinity());
    next_seq_ = ext;
  }
  if (ext < highest_seq_) {
    ++stats_.reordered;
  } else {
    highest_seq_ = ext;
  }
  const int64_t ts = extend_ts(timestamp);
  if (ext == next_seq_ && held_.empty()) {
    // In order with nothing waiting (the usual case): out at once, no copy.
    ++next_seq_;
    emit(ts, payload, size);
    return;
  }
  held_.emplace(ext, Held{ts, now_ms, std::vector<uint8_t>(payload, payload + size)});
  if (held_.size() > o_.max_packets) flush(std::numeric_limits<double>::infinity(), held_.size() - o_.max_packets);
  flush(now_ms);
}

void OpusJitterBuffer::flush(double now_ms, uint64_t force) {
  while (started_ && !held_.empty()) {
    auto first = held_.begin();
    if (first->first == next_seq_) {
      Held h = std::move(first->second);
      held_.erase(first);
      ++next_seq_;
      emit(h.ts, h.payload.data(), h.payload.size());
      continue;
    }
    if (first->first < next_seq_) {  // cannot happen (push refuses them); kept safe
      held_.erase(first);
      continue;
    }
    double oldest = std::numeric_limits<double>::infinity();
    for (const auto& [s, x] : held_) oldest = x.at < oldest ? x.at : oldest;
    if (force == 0 && now_ms - oldest < o_.delay_ms) return;
    if (force > 0) --force;
    stats_.lost += static_cast<uint64_t>(first->first - next_seq_);
    next_seq_ = first->first;
  }
}

void OpusJitterBuffer::restart() {
  flush(std::numeric_limits<double>::infinity(), std::numeric_limits<uint64_t>::max());
  started_ = false;
}

double OpusJitterBuffer::deadline() const {
  if (held_.empty()) return -1;
  double oldest = std::numeric_limits<double>::infinity();
  for (const auto& [s, x] : held_) oldest = x.at < oldest ? x.at : oldest;
  return oldest + o_.delay_ms;
}

void OpusJitterBuffer::emit(int64_t ts, const uint8_t* data, size_t size) {
  const uint32_t samples = codec::opus_packet_samples(data, size);
  if (samples == 0) {
    ++stats_.late;  // malformed: dropped like a packet that never came
    return;
  }
  const int64_t gap = ts - next_ts_;
  if (last_toc_ >= 0 && gap > 0) {
    const uint8_t plc = static_cast<uint8_t>(last_toc_ & 0xfc);
    const uint32_t frame = codec::opus_packet_samples(&plc, 1);
    if (frame > 0 && gap <= int64_t{o_.max_fill_ms} * 48) {
      for (int64_t n = (gap + frame / 2) / frame; n > 0; --n) {
        out_(position_, &plc, 1, true);
        ++stats_.filled;
        position_ += frame;
      }
    }
  }
  last_toc_ = data[0];
  out_(position_, data, size, false);
  position_ += samples;
  next_ts_ = ts + samples;
}

}  // namespace skylark::rtp
