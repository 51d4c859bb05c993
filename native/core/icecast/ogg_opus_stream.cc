// SourceStream, Ogg Opus (see source_stream.h): RFC 3533 pages (whole pages, CRC checked, in
// order per logical stream), RFC 7845 Opus mapping (OpusHead alone on the BOS page, OpusTags
// next, then audio packets; chained streams, §3 "grouping and chaining").
//
// Logical streams: the BOS pages at the start of a link (one group of BOS pages before any other
// page) name their codecs; the first Opus stream is taken and the others' pages are ignored. A
// BOS page after other pages starts the next link (chaining): its Opus stream is taken in turn.
// A link without an Opus stream is codec_mismatch (received: the first codec named, skeleton
// streams aside).
#include <algorithm>
#include <cstring>
#include <string>

#include "core/icecast/sniff.h"
#include "core/icecast/source_stream.h"
#include "core/util/bytes.h"

namespace skylark::icecast {
namespace {

// Decoding layout of an OpusHead: what a decoder set up for `a` needs to decode `b` (pre-skip,
// output gain and the informational input rate do not matter for the packets that follow).
bool same_layout(const codec::OpusHead& a, const codec::OpusHead& b) {
  if (a.channels != b.channels || a.mapping_family != b.mapping_family || a.stream_count != b.stream_count ||
      a.coupled_count != b.coupled_count)
    return false;
  return a.mapping_family == 0 || std::memcmp(a.mapping, b.mapping, a.channels) == 0;
}

}  // namespace

size_t SourceStream::process_ogg(const uint8_t* p, size_t n) {
  size_t pos = 0;
  while (state_ != State::kFailed && pos < n) {
    if (state_ == State::kSkippingTag) {
      pos = skip_tag(pos, n);
      continue;
    }
    const uint8_t* q = p + pos;
    const size_t avail = n - pos;
    if (pages_ == 0) {  // before any page: a leading ID3v2 tag is skipped (and the bytes sniffed below)
      const Step step = try_id3(q, avail);
      if (step == Step::kNeedMore) return pos;
      if (step == Step::kDone) continue;
    }
    OggPage page;
    const OggPageStatus st = parse_ogg_page_header(q, avail, &page);
    if (st == OggPageStatus::kNeedMore) {
      need_ = avail < kOggHeaderBytes ? kOggHeaderBytes : kOggHeaderBytes + q[26];
      return pos;
    }
    if (st == OggPageStatus::kOk) {
      if (avail < page.size()) {
        need_ = page.size();
        return pos;
      }
      if (ogg_page_crc_ok(q, page)) {
        if (page.version != 0) {
          fail(kErrBadHeader, "Ogg page stream_structure_version " + std::to_string(page.version) + " is not 0");
          return pos;
        }
        state_ = State::kSynced;
        crc_junk_ = 0;
        ++pages_;
        pos += page.size();
        if (on_page(q, page)) {
          junk_ = 0;
        } else {  // a page of a stream whose start we never saw: no progress either
          ++stats_.ignored_pages;
          junk_ += page.size();
          if (junk_ > kMaxResyncBytes)
            fail(kErrNoSync, "no Ogg page of a logical stream with a BOS page in " + std::to_string(kMaxResyncBytes) + " bytes");
        }
        continue;
      }
      ++stats_.bad_crc_pages;
      crc_junk_ += page.size();
      if (crc_junk_ > kMaxResyncCrcBytes) {
        fail(kErrNoSync, "no Ogg page with a good CRC in " + std::to_string(kMaxResyncCrcBytes) + " bytes of candidates");
        return pos;
      }
    } else if (pages_ == 0) {  // not Ogg (yet): another codec?
      const Step step = try_other_codec(q, avail);
      if (step != Step::kNo) return pos;
    }
    skip_junk(&pos, 1);
  }
  return pos;
}

bool SourceStream::on_page(const uint8_t* p, const OggPage& page) {
  const uint8_t* body = p + page.header_size;
  if (page.flags & kOggBos) {
    on_bos(body, page);
    return true;
  }
  bos_group_ = false;
  if (!have_stream_) {
    if (*other_codec_) {
      fail(kErrCodecMismatch, std::string("the source sends Ogg ") + other_codec_ + ", the stream takes opus", other_codec_);
      return true;
    }
    return false;  // a page of a logical stream whose BOS page was never seen
  }
  if (page.serial != serial_ || ogg_ == OggState::kEnded) {
    ++stats_.ignored_pages;
    return true;
  }
  if (page.sequence != next_sequence_) {  // pages are missing (bad CRC, or never sent)
    ++stats_.page_gaps;
    if (partial_) drop_partial();
  }
  next_sequence_ = page.sequence + 1;

  // The first packet on the page continues one from the previous page, which we may not have.
  bool skipping = false;
  if (page.flags & kOggContinued) skipping = !partial_;
  else if (partial_) drop_partial();
  size_t start = 0, off = 0;
  for (size_t i = 0; i < page.segments && state_ != State::kFailed; ++i) {
    off += page.lacing[i];
    if (page.lacing[i] == 255) continue;
    if (skipping) {  // the tail of a packet whose start was lost
      skipping = false;
      ++stats_.dropped_packets;
    } else if (partial_) {
      if (append_partial(body + start, off - start)) {
        on_packet(packet_.data(), packet_.size());
        packet_.clear();
        partial_ = false;
        partial_truncated_ = false;
      }
    } else {
      on_packet(body + start, off - start);
    }
    start = off;
  }
  if (state_ != State::kFailed && page.segments > 0 && page.lacing[page.segments - 1] == 255 && !skipping) {
    if (append_partial(body + start, off - start)) partial_ = true;  // continues on the next page
  }
  if (page.flags & kOggEos) {
    if (partial_) drop_partial();
    ogg_ = OggState::kEnded;
  }
  return true;
}

void SourceStream::on_bos(const uint8_t* body, const OggPage& page) {
  if (!bos_group_) {  // the first BOS page of a link (the stream's start, or a chained stream)
    if (ever_selected_) ++stats_.chained_streams;
    have_stream_ = false;
    other_codec_ = "";
    ogg_ = OggState::kAwaitHead;
    if (partial_) drop_partial();
  }
  bos_group_ = true;
  // The first packet: it must end on this page (the identification header stands alone).
  size_t len = 0;
  bool complete = false;
  for (size_t i = 0; i < page.segments; ++i) {
    len += page.lacing[i];
    if (page.lacing[i] < 255) {
      complete = true;
      break;
    }
  }
  const char* codec = ogg_identify_codec(body, std::min(len, kOggIdentifyBytes));
  if (std::strcmp(codec, "opus") != 0) {
    if (!*other_codec_ && std::strcmp(codec, "skeleton") != 0) other_codec_ = codec;
    return;
  }
  if (have_stream_) {  // a second Opus stream in the group: ignored
    ++stats_.ignored_pages;
    return;
  }
  codec::OpusHead head;
  const codec::OpusHeadStatus st = complete ? codec::parse_opus_head(body, len, &head) : codec::OpusHeadStatus::kTruncated;
  if (st != codec::OpusHeadStatus::kOk) {
    fail(kErrBadHeader, complete ? codec::opus_head_status_message(st) : "OpusHead does not end on its BOS page");
    return;
  }
  have_stream_ = true;
  ever_selected_ = true;
  serial_ = page.serial;
  next_sequence_ = page.sequence + 1;
  ogg_ = (page.flags & kOggEos) ? OggState::kEnded : OggState::kAwaitTags;
  on_opus_head(head, body, len);
}

void SourceStream::on_opus_head(const codec::OpusHead& head, const uint8_t* p, size_t size) {
  set_rate(codec::kOpusClockRate);
  if (have_head_ && same_layout(head_, head)) return;  // a chained stream that decodes alike
  head_ = head;
  have_head_ = true;
  uint8_t* body = begin_audio(5 + size);
  body[0] = 0x90;  // SoundFormat 9 (ExHeader) | AudioPacketType 0 (SequenceStart)
  std::memcpy(body + 1, "Opus", 4);
  std::memcpy(body + 5, p, size);
}

void SourceStream::on_packet(const uint8_t* p, size_t size) {
  if (ogg_ == OggState::kAwaitTags) {
    if (size < 8 || std::memcmp(p, "OpusTags", 8) != 0) {
      fail(kErrBadHeader, "the packet after OpusHead is not OpusTags");
      return;
    }
    const bool cut = partial_truncated_ || size > kMaxOpusTagsBytes;
    on_opus_tags(p, std::min(size, kMaxOpusTagsBytes), cut);
    ogg_ = OggState::kAudio;
    return;
  }
  if (ogg_ != OggState::kAudio) return;
  if (size > opt_.max_frame_bytes) {
    fail(kErrFrameTooLarge, "Opus packet of " + std::to_string(size) + " bytes is larger than the " +
                                std::to_string(opt_.max_frame_bytes) + "-byte limit");
    return;
  }
  const uint32_t samples = codec::opus_packet_samples(p, size);
  if (samples == 0) {  // empty or malformed (RFC 6716 §3.4): not audio a muxer can time
    ++stats_.dropped_packets;
    return;
  }
  uint8_t* body = begin_audio(5 + size);
  body[0] = 0x91;  // SoundFormat 9 (ExHeader) | AudioPacketType 1 (CodedFrames)
  std::memcpy(body + 1, "Opus", 4);
  std::memcpy(body + 5, p, size);
  samples_ += samples;
}

void SourceStream::on_opus_tags(const uint8_t* p, size_t size, bool truncated) {
  // RFC 7845 §5.2: "OpusTags", vendor string length (LE32) + vendor, comment count (LE32), then
  // per comment its length (LE32) + "KEY=value". What does not fit in `size` is dropped (flagged).
  SourceNotice n;
  util::ByteReader r(p + 8, size - 8);
  const uint32_t vendor_len = r.le32();
  if (r.ok() && r.has(vendor_len)) {
    const std::string_view v = r.str(vendor_len);
    n.vendor.assign(v.data(), v.size());
    uint32_t count = r.le32();
    while (r.ok() && count > 0) {
      const uint32_t len = r.le32();
      if (!r.ok() || !r.has(len)) break;
      const std::string_view c = r.str(len);
      if (n.comments.size() == kMaxOpusComments) break;
      n.comments.emplace_back(c.data(), c.size());
      --count;
    }
    if (count > 0) truncated = true;
  } else {
    truncated = true;
  }
  n.truncated = truncated;
  tags_ = n;
  have_tags_ = true;
  SourceItem it;
  it.type = SourceItem::Type::kTags;
  it.timestamp_ms = now_ms();
  it.notice = static_cast<uint32_t>(batch_.notices.size());
  batch_.notices.push_back(std::move(n));
  batch_.items.push_back(it);
}

bool SourceStream::append_partial(const uint8_t* p, size_t size) {
  const bool tags = ogg_ == OggState::kAwaitTags;
  const size_t cap = tags ? kMaxOpusTagsBytes : opt_.max_frame_bytes;
  if (packet_.size() + size > cap) {
    if (!tags) {
      fail(kErrFrameTooLarge, "Opus packet of more than " + std::to_string(cap) + " bytes (the limit)");
      return false;
    }
    size = cap - packet_.size();  // OpusTags: keep the start, drop the rest
    partial_truncated_ = true;
  }
  if (packet_.size() + size > packet_.capacity())
    packet_.reserve(std::min(packet_cap_, std::max(packet_.capacity() * 2, packet_.size() + size)));
  packet_.insert(packet_.end(), p, p + size);
  return true;
}

void SourceStream::drop_partial() {
  packet_.clear();
  partial_ = false;
  partial_truncated_ = false;
  ++stats_.dropped_packets;
}

}  // namespace skylark::icecast
