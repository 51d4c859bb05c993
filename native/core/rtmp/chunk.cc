// Chunk stream demuxer and writer; see chunk.h.
#include "core/rtmp/chunk.h"

#include <algorithm>
#include <cstring>

namespace skylark::rtmp {

using util::Status;

namespace {
constexpr size_t kMessageHeaderSize[4] = {11, 7, 3, 0};

uint32_t rd24(const uint8_t* p) { return (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2]; }
uint32_t rd32(const uint8_t* p) { return (uint32_t{p[0]} << 24) | rd24(p + 1); }
uint32_t rdle32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
size_t basic_len(uint8_t b0) {
  uint8_t low = b0 & 0x3F;
  return low == 0 ? 2 : low == 1 ? 3 : 1;
}
}  // namespace

ChunkReader::ChunkReader(uint32_t max_message_bytes, uint32_t max_audio_message_bytes)
    : max_message_bytes_(max_message_bytes),
      max_audio_bytes_(max_audio_message_bytes == 0 ? max_message_bytes
                                                    : std::min(max_audio_message_bytes, max_message_bytes)),
      audio_capped_(max_audio_message_bytes != 0),
      budget_(default_inflight_budget()) {}

uint64_t ChunkReader::default_inflight_budget() const {
  const uint32_t largest = std::max({max_audio_bytes_, std::min(kMaxCommandMessageBytes, max_message_bytes_),
                                     std::min(kMaxControlMessageBytes, max_message_bytes_)});
  return uint64_t{largest} + kInflightSlackBytes;
}

ChunkReader::Result ChunkReader::fail(Status s, const char* msg) {
  phase_ = Phase::kError;
  status_ = s;
  error_ = msg;
  return Result::kError;
}

ChunkReader::Stream* ChunkReader::find(uint32_t csid) {
  if (current_ < streams_.size() && streams_[current_].csid == csid) return &streams_[current_];
  for (auto& s : streams_)
    if (s.csid == csid) return &s;
  return nullptr;
}

uint32_t ChunkReader::cap_for(uint8_t type) const {
  switch (type) {
    case kMsgSetChunkSize:
    case kMsgAbort:
    case kMsgAck:
    case kMsgUserControl:
    case kMsgWindowAckSize:
    case kMsgSetPeerBandwidth:
      return kMaxControlMessageBytes;
    case kMsgAudio:
      return max_audio_bytes_;
    case kMsgDataAmf0:
    case kMsgDataAmf3:
    case kMsgCommandAmf0:
    case kMsgCommandAmf3:
      return std::min(kMaxCommandMessageBytes, max_message_bytes_);
    default:
      return 0;  // read through and dropped (video, aggregate, shared objects, unknown)
  }
}

void ChunkReader::abort(uint32_t csid) {
  Stream* s = find(csid);
  if (s == nullptr || !s->in_progress) return;
  // The aborted stream is never the one whose chunk is being read (Abort is a whole message).
  if (s->buf) inflight_ -= s->length;
  s->buf.reset();
  s->in_progress = false;
  s->received = 0;
}

bool ChunkReader::mid_message() const {
  if (phase_ == Phase::kError) return false;
  if (phase_ == Phase::kPayload || hdr_len_ > 0 || replay_pos_ < replay_len_) return true;
  for (const auto& s : streams_)
    if (s.in_progress) return true;
  return false;
}

// Header bytes needed given what hdr_ holds so far (grows as the header reveals itself).
size_t ChunkReader::header_need() {
  if (hdr_len_ == 0) return 1;
  size_t bl = basic_len(hdr_[0]);
  if (hdr_len_ < bl) return bl;
  unsigned fmt = hdr_[0] >> 6;
  size_t base = bl + kMessageHeaderSize[fmt];
  if (hdr_len_ < base) return base;
  if (fmt < 3) return rd24(hdr_ + bl) == 0xFFFFFF ? base + 4 : base;
  uint32_t csid = bl == 1 ? (hdr_[0] & 0x3F) : bl == 2 ? 64u + hdr_[1] : 64u + hdr_[1] + 256u * hdr_[2];
  const Stream* s = find(csid);
  return s != nullptr && s->extended ? base + 4 : base;  // type 3: peek a possible extended field
}

bool ChunkReader::begin_message(Stream& s) {
  uint32_t cap = cap_for(s.type);
  s.in_progress = true;
  s.received = 0;
  s.msg_timestamp = s.timestamp;
  s.discard = cap == 0;
  if (s.discard) return true;
  if (s.length > cap) {
    if (s.type == kMsgAudio && audio_capped_) {
      cap_hit_ = Cap::kAudioLength;
      fail(Status::kMessageTooLarge, "audio message length above the audio message cap");
    } else {
      cap_hit_ = Cap::kMessageLength;
      fail(Status::kMessageTooLarge, "message length above the cap for its type");
    }
    return false;
  }
  if (inflight_ + s.length > budget_) {
    cap_hit_ = Cap::kInflight;
    fail(Status::kMessageTooLarge, "too many bytes in partially received messages");
    return false;
  }
  if (s.length > 0) {
    s.buf.reset(new uint8_t[s.length]);
    inflight_ += s.length;
  }
  return true;
}

bool ChunkReader::finish_header() {
  const uint8_t* h = hdr_;
  size_t bl = basic_len(h[0]);
  unsigned fmt = h[0] >> 6;
  uint32_t csid = bl == 1 ? (h[0] & 0x3F) : bl == 2 ? 64u + h[1] : 64u + h[1] + 256u * h[2];
  const uint8_t* mh = h + bl;

  Stream* s = find(csid);
  if (s == nullptr) {
    if (fmt != 0) {
      fail(Status::kProtocolViolation, "first chunk on a chunk stream is not type 0");
      return false;
    }
    if (streams_.size() >= kMaxChunkStreams) {
      fail(Status::kChunkStreamLimit, "too many chunk streams");
      return false;
    }
    if (streams_.capacity() == 0) streams_.reserve(8);
    streams_.emplace_back();
    s = &streams_.back();
    s->csid = csid;
  }
  current_ = static_cast<size_t>(s - streams_.data());

  if (fmt == 3) {
    if (s->extended) {
      // Peeked 4 bytes: the extended timestamp repeated (FFmpeg), or already payload.
      if (rd32(mh) != s->ts_field) {
        if (replay_pos_ < replay_len_) {  // cannot happen (see next()); never lose bytes
          fail(Status::kProtocolViolation, "internal: overlapping replay");
          return false;
        }
        std::memcpy(replay_, mh, 4);
        replay_len_ = 4;
        replay_pos_ = 0;
      }
    }
    if (!s->in_progress) {
      s->timestamp += s->ts_field;  // a new message with the previous delta
      if (!begin_message(*s)) return false;
    }
  } else {
    uint32_t ts = rd24(mh);
    bool ext = ts == 0xFFFFFF;
    if (ext) ts = rd32(mh + kMessageHeaderSize[fmt]);
    uint32_t length = s->length;
    uint8_t type = s->type;
    if (fmt <= 1) {
      length = rd24(mh + 3);
      type = mh[6];
    }
    if (s->in_progress) {
      // A full header inside a message: allowed only if it repeats the message's length and type.
      if (length != s->length || type != s->type) {
        fail(Status::kProtocolViolation, "message length or type changed mid-message");
        return false;
      }
      s->ts_field = ts;
      s->extended = ext;
    } else {
      s->ts_field = ts;
      s->extended = ext;
      s->length = length;
      s->type = type;
      if (fmt == 0) {
        s->timestamp = ts;
        s->stream_id = rdle32(mh + 7);
      } else {
        s->timestamp += ts;
      }
      if (!begin_message(*s)) return false;
    }
  }
  chunk_left_ = std::min(chunk_size_, s->length - s->received);
  return true;
}

ChunkReader::Result ChunkReader::next(const uint8_t* data, size_t size, size_t& used, Message& out) {
  used = 0;
  if (phase_ == Phase::kError) return Result::kError;
  for (;;) {
    // Replayed bytes (a peek that was payload) come before the rest of the input.
    const bool from_replay = replay_pos_ < replay_len_;
    const uint8_t* src = from_replay ? replay_ + replay_pos_ : data + used;
    const size_t avail = from_replay ? replay_len_ - replay_pos_ : size - used;
    size_t take = 0;

    if (phase_ == Phase::kHeader) {
      size_t need = header_need();
      if (hdr_len_ < need) {
        if (avail == 0) return Result::kNeedMore;
        take = std::min(avail, need - hdr_len_);
        std::memcpy(hdr_ + hdr_len_, src, take);
        hdr_len_ += take;
        if (from_replay) replay_pos_ += take; else used += take;
        continue;
      }
      // Header complete. A type-3 peek (4 bytes after the basic header) always consumes whatever
      // replay was left, so finish_header() may start a new replay safely.
      if (!finish_header()) return Result::kError;
      hdr_len_ = 0;
      phase_ = Phase::kPayload;
      // fall through to payload handling (chunk_left_ may be 0 for an empty message)
    }

    Stream& s = streams_[current_];
    if (chunk_left_ > 0) {
      const bool again = replay_pos_ < replay_len_;
      const uint8_t* p = again ? replay_ + replay_pos_ : data + used;
      const size_t n0 = again ? replay_len_ - replay_pos_ : size - used;
      if (n0 == 0) return Result::kNeedMore;
      size_t n = std::min<size_t>(n0, chunk_left_);
      if (!s.discard) std::memcpy(s.buf.get() + s.received, p, n);
      s.received += static_cast<uint32_t>(n);
      chunk_left_ -= static_cast<uint32_t>(n);
      if (again) replay_pos_ += n; else used += n;
      if (chunk_left_ > 0) continue;
    }
    phase_ = Phase::kHeader;
    if (s.received == s.length) {
      s.in_progress = false;
      if (s.discard) continue;
      out.csid = s.csid;
      out.timestamp = s.msg_timestamp;
      out.stream_id = s.stream_id;
      out.type = s.type;
      out.body.data = std::move(s.buf);
      out.body.size = s.length;
      if (out.body.data) inflight_ -= s.length;
      return Result::kMessage;
    }
  }
}

void write_message(std::vector<uint8_t>& out, uint32_t chunk_size, uint8_t csid, uint8_t type,
                   uint32_t stream_id, uint32_t timestamp, std::span<const uint8_t> payload) {
  const size_t len = payload.size();
  const bool ext = timestamp >= 0xFFFFFF;
  const size_t chunks = len == 0 ? 1 : (len + chunk_size - 1) / chunk_size;
  size_t at = out.size();
  out.resize(at + 12 + (ext ? 4 : 0) + len + (chunks - 1) * (1 + (ext ? 4 : 0)));
  uint8_t* p = out.data() + at;
  auto put24 = [&](uint32_t v) { *p++ = uint8_t(v >> 16); *p++ = uint8_t(v >> 8); *p++ = uint8_t(v); };
  auto put32 = [&](uint32_t v) { *p++ = uint8_t(v >> 24); put24(v); };
  *p++ = static_cast<uint8_t>(csid & 0x3F);
  put24(ext ? 0xFFFFFF : timestamp);
  put24(static_cast<uint32_t>(len));
  *p++ = type;
  *p++ = uint8_t(stream_id); *p++ = uint8_t(stream_id >> 8);
  *p++ = uint8_t(stream_id >> 16); *p++ = uint8_t(stream_id >> 24);
  if (ext) put32(timestamp);
  size_t off = 0;
  for (size_t c = 0; c < chunks; ++c) {
    if (c > 0) {
      *p++ = static_cast<uint8_t>(0xC0 | (csid & 0x3F));
      if (ext) put32(timestamp);
    }
    size_t n = std::min<size_t>(chunk_size, len - off);
    if (n > 0) std::memcpy(p, payload.data() + off, n);
    p += n;
    off += n;
  }
}

}  // namespace skylark::rtmp
