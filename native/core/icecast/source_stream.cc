// See source_stream.h. This file: the push loop (partial units carried between pushes), the steps
// every codec shares (ID3v2 tags, junk, another codec's bytes), the sample clock and the output.
// The codec parts: mpeg_stream.cc (MP3, ADTS) and ogg_opus_stream.cc (Ogg Opus).
#include "core/icecast/source_stream.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/icecast/sniff.h"

namespace skylark::icecast {
namespace {
/** A batch arena grown past this goes back to nothing at the next push (a huge push is rare). */
constexpr size_t kArenaShrinkAbove = 1024 * 1024;
}  // namespace

const char* source_codec_name(SourceCodec c) {
  switch (c) {
    case SourceCodec::kMp3: return "mp3";
    case SourceCodec::kAac: return "aac";
    case SourceCodec::kOpus: return "opus";
  }
  return "";
}

SourceStream::SourceStream(const SourceStreamOptions& options) : opt_(options) {
  opt_.max_frame_bytes = std::clamp(opt_.max_frame_bytes, kMinMaxFrameBytes, kMaxMaxFrameBytes);
  if (opt_.codec == SourceCodec::kOpus) {
    pending_cap_ = kOggMaxPageBytes;  // a whole page waits for its CRC check (sniffing needs less)
    packet_cap_ = std::max<size_t>(opt_.max_frame_bytes, kMaxOpusTagsBytes);
  } else {
    pending_cap_ = kSniffMaxBytes;    // ≥ an ADTS frame (8191) + the next header (9), an MP3 frame + 4
    packet_cap_ = 0;
  }
}

void SourceStream::push(const uint8_t* data, size_t size) {
  batch_.items.clear();
  batch_.notices.clear();
  batch_.audio_count = 0;
  if (batch_.arena.capacity() > kArenaShrinkAbove) batch_.arena = std::vector<uint8_t>();
  else batch_.arena.clear();
  stats_.bytes_in += size;
  while (size > 0 && state_ != State::kFailed) {
    if (pending_.empty()) {
      // Units in the caller's bytes are parsed in place; only a trailing partial unit is kept.
      const size_t used = process(data, size);
      data += used;
      size -= used;
      if (size > 0 && state_ != State::kFailed) keep(data, size);
      break;
    }
    // Complete the kept unit with just the bytes it needs, then parse it.
    const size_t want = need_ > pending_.size() ? need_ - pending_.size() : 1;
    const size_t take = std::min(want, size);
    keep(data, take);
    data += take;
    size -= take;
    if (state_ == State::kFailed || pending_.size() < need_) continue;
    const size_t used = process(pending_.data(), pending_.size());
    if (state_ != State::kFailed) pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(used));
  }
  if (state_ == State::kFailed && (pending_.capacity() || packet_.capacity())) {
    // Nothing more will be parsed: let the buffers go (not earlier: the parse may point into them).
    pending_ = std::vector<uint8_t>();
    packet_ = std::vector<uint8_t>();
    partial_ = false;
  }
}

void SourceStream::keep(const uint8_t* p, size_t n) {
  if (pending_.size() + n > pending_cap_) {  // cannot happen: every need_ is ≤ pending_cap_
    fail(kErrBadHeader, "a unit is larger than the source parser's buffer");
    return;
  }
  if (pending_.size() + n > pending_.capacity())
    pending_.reserve(std::min(pending_cap_, std::max(pending_.capacity() * 2, pending_.size() + n)));
  pending_.insert(pending_.end(), p, p + n);
}

size_t SourceStream::process(const uint8_t* p, size_t n) {
  need_ = 0;
  return opt_.codec == SourceCodec::kOpus ? process_ogg(p, n) : process_mpeg(p, n);
}

SourceStream::Step SourceStream::try_id3(const uint8_t* p, size_t avail) {
  size_t total = 0;
  switch (parse_id3v2_header(p, avail, &total)) {
    case Id3Status::kNotId3: return Step::kNo;
    case Id3Status::kNeedMore: need_ = kId3HeaderBytes; return Step::kNeedMore;
    case Id3Status::kOk: break;
  }
  if (total > kMaxId3TagBytes) {
    fail(kErrTagTooLarge, "ID3v2 tag of " + std::to_string(total) + " bytes is larger than the " +
                              std::to_string(kMaxId3TagBytes) + "-byte limit");
    return Step::kDone;
  }
  after_tag_ = state_;
  state_ = State::kSkippingTag;
  tag_left_ = total;
  return Step::kDone;
}

size_t SourceStream::skip_tag(size_t pos, size_t n) {
  const size_t k = std::min(tag_left_, n - pos);
  tag_left_ -= k;
  stats_.tag_bytes += k;
  if (tag_left_ == 0) state_ = after_tag_;
  return pos + k;
}

SourceStream::Step SourceStream::try_other_codec(const uint8_t* p, size_t avail) {
  const char* name = "";
  size_t need = 0;
  switch (sniff_codec(p, avail, &name, &need)) {
    case Sniff::kNeedMore: need_ = need; return Step::kNeedMore;
    case Sniff::kNone: return Step::kNo;
    case Sniff::kFound: break;
  }
  const char* own = source_codec_name(opt_.codec);
  if (std::strcmp(name, own) == 0) return Step::kNo;  // ours, just not a frame we take here
  fail(kErrCodecMismatch, std::string("the source sends ") + name + ", the stream takes " + own, name);
  return Step::kDone;
}

void SourceStream::skip_junk(size_t* pos, size_t count) {
  if (state_ == State::kSynced) {
    state_ = State::kSearching;
    ++stats_.sync_losses;
  }
  *pos += count;
  junk_ += count;
  stats_.junk_bytes += count;
  if (junk_ > kMaxResyncBytes)
    fail(kErrNoSync, std::string("no ") + (opt_.codec == SourceCodec::kOpus ? "Ogg page" : "frame") + " of " +
                         source_codec_name(opt_.codec) + " found in " + std::to_string(kMaxResyncBytes) + " bytes");
}

uint32_t SourceStream::now_ms() const {
  const uint64_t ms = base_ms_ + (rate_ ? (samples_ * 1000 + rate_ / 2) / rate_ : 0);
  return static_cast<uint32_t>(ms);  // wraps like RTMP's 32-bit clock
}

void SourceStream::set_rate(uint32_t rate) {
  if (rate == rate_) return;
  if (rate_) base_ms_ += (samples_ * 1000 + rate_ / 2) / rate_;
  samples_ = 0;
  rate_ = rate;
}

uint8_t* SourceStream::begin_audio(size_t size) {
  SourceItem it;
  it.type = SourceItem::Type::kAudio;
  it.timestamp_ms = now_ms();
  it.offset = batch_.arena.size();
  it.size = size;
  batch_.items.push_back(it);
  batch_.arena.resize(batch_.arena.size() + size);
  ++batch_.audio_count;
  ++stats_.messages;
  return batch_.arena.data() + it.offset;
}

void SourceStream::fail(const char* code, std::string message, const char* received) {
  if (state_ == State::kFailed) return;
  state_ = State::kFailed;
  SourceNotice n;
  n.code = code;
  n.message = std::move(message);
  if (std::strcmp(code, kErrCodecMismatch) == 0) {
    n.expected = source_codec_name(opt_.codec);
    n.received = received;
  }
  SourceItem it;
  it.type = SourceItem::Type::kError;
  it.timestamp_ms = now_ms();
  it.notice = static_cast<uint32_t>(batch_.notices.size());
  batch_.notices.push_back(std::move(n));
  batch_.items.push_back(it);
}

}  // namespace skylark::icecast
