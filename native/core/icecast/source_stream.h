// The sans-I/O parser of one Icecast source connection's request body: a raw MP3, ADTS (AAC) or
// Ogg Opus byte stream in, in any split; out, the audio messages an RTMP publisher of the same
// audio would have sent — FLV AUDIODATA bodies with a timestamp in ms — ready for the Segmenter
// (core/segment/segmenter.h), plus the OpusTags comments and a sticky error.
//
//   SourceStream s({.codec = SourceCodec::kMp3});
//   s.push(data, n);                            // then read s.batch() (valid until the next push)
//   for (const SourceItem& it : s.batch().items) ...
//
// Messages (docs/native-api.md "IcecastSource"):
//   MP3   one per MPEG audio Layer III frame: 0x2? (SoundFormat 2, rate/size/type bits as FFmpeg's
//         FLV muxer sets them) + the whole frame. An ID3v2 tag (at the start or between frames) is
//         skipped by its size, the LAME/Xing/VBRI info frame is dropped, and any other bytes
//         between frames are skipped by resyncing on two consecutive valid frame headers of one
//         stream. 1152 samples per MPEG-1 frame, 576 per MPEG-2/2.5 frame.
//   AAC   a sequence header 0xAF 0x00 + the 2-byte AudioSpecificConfig of the first ADTS header
//         (and again whenever object type, sampling frequency or channels change), then one
//         0xAF 0x01 + raw_data_block per ADTS frame (header and CRC removed). 1024 samples per
//         frame at the ADTS sampling frequency (the core rate). ID3v2 and junk as for MP3.
//   Opus  an Enhanced RTMP SequenceStart (0x90, FourCC 'Opus', OpusHead) for the first OpusHead,
//         then CodedFrames (0x91, 'Opus', packet) per audio packet, timed by its TOC at 48 kHz
//         (pre-skip not applied). Ogg pages with a bad CRC are skipped (counted), packets are
//         reassembled across pages, OpusTags become a kTags item. A new chained logical stream
//         (BOS) continues the timeline; its OpusHead is sent again only when the channel layout
//         changes. Another Ogg codec is codec_mismatch.
// Timestamps: the running sample count of the stream, ms = round(samples * 1000 / rate) from 0, so
// they never drift (a change of rate re-bases the count at the time reached). 32-bit, wrapping
// like RTMP's clock.
//
// Errors are sticky (one kError item; every later push is counted and ignored): codec_mismatch,
// no_sync, frame_too_large, bad_header, tag_too_large (see the k* codes below).
//
// Memory: between pushes the stream keeps at most retained_bytes() <= max_retained_bytes()
// (= the largest unit it may wait for — an Ogg page of ≤ 65307 bytes, else a frame plus the next
// header — plus one packet for Opus reassembly). The batch arena is reused from push to push.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/codec/mp3.h"
#include "core/codec/opus.h"
#include "core/icecast/adts.h"
#include "core/icecast/ogg.h"

namespace skylark::icecast {

enum class SourceCodec : uint8_t { kMp3, kAac, kOpus };
/** "mp3" / "aac" / "opus". */
const char* source_codec_name(SourceCodec c);

/** Default / smallest / largest max_frame_bytes: the largest MP3 frame, ADTS raw_data_block or
 *  Opus packet accepted (bytes of codec payload, FLV header not counted). */
inline constexpr uint32_t kDefaultMaxFrameBytes = 8192;
inline constexpr uint32_t kMinMaxFrameBytes = 1024;
inline constexpr uint32_t kMaxMaxFrameBytes = 1024 * 1024;
/** Bytes skipped without finding a frame (MP3/ADTS) or a page with a good CRC (Ogg) before the
 *  stream is given up as no_sync; counted from the start and again after each loss of sync. */
inline constexpr size_t kMaxResyncBytes = 64 * 1024;
/** Ogg only: bytes of candidate pages whose CRC failed within one resync (bounds the CRC work a
 *  stream of fake page headers can cause) before no_sync. */
inline constexpr size_t kMaxResyncCrcBytes = 4 * 64 * 1024;
/** Largest ID3v2 tag skipped (a larger one is tag_too_large). */
inline constexpr size_t kMaxId3TagBytes = 1024 * 1024;
/** OpusTags bytes kept; a longer packet is read up to here (comments cut there are dropped and
 *  the kTags item is flagged truncated). */
inline constexpr size_t kMaxOpusTagsBytes = 16 * 1024;
/** Comments kept per OpusTags. */
inline constexpr size_t kMaxOpusComments = 256;

/** Stable error codes (the `code` JS sees). */
inline constexpr const char* kErrCodecMismatch = "codec_mismatch";   // the bytes are another codec
inline constexpr const char* kErrNoSync = "no_sync";                 // kMaxResyncBytes without a frame/page
inline constexpr const char* kErrFrameTooLarge = "frame_too_large";  // frame/packet > max_frame_bytes
inline constexpr const char* kErrBadHeader = "bad_header";           // unusable OpusHead/OpusTags/page/ADTS setup
inline constexpr const char* kErrTagTooLarge = "tag_too_large";      // ID3v2 tag > kMaxId3TagBytes

struct SourceStreamOptions {
  SourceCodec codec = SourceCodec::kMp3;
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;  // clamped to kMinMaxFrameBytes..kMaxMaxFrameBytes
};

/** One output of a push, in stream order. */
struct SourceItem {
  enum class Type : uint8_t { kAudio, kTags, kError };
  Type type = Type::kAudio;
  uint32_t timestamp_ms = 0;  // kAudio: the message's timestamp; kTags: the time of the next audio
  size_t offset = 0;          // kAudio: the body is batch.arena[offset, offset + size)
  size_t size = 0;
  uint32_t notice = 0;        // kTags / kError: index into batch.notices
};

/** OpusTags (RFC 7845 §5.2) or an error. */
struct SourceNotice {
  // kTags
  std::string vendor;                 // vendor string (UTF-8 as sent)
  std::vector<std::string> comments;  // "KEY=value" user comments in order (UTF-8 as sent)
  bool truncated = false;             // comments were dropped (kMaxOpusTagsBytes, kMaxOpusComments)
  // kError
  const char* code = "";
  std::string message;
  const char* expected = "";          // codec_mismatch: "mp3" / "aac" / "opus"
  const char* received = "";          // codec_mismatch: "mp3", "aac", "mp2", "opus", "vorbis", "flac", "ogg", ...
};

/** What one push produced; valid until the next push (its storage is reused). */
struct SourceBatch {
  std::vector<SourceItem> items;
  std::vector<uint8_t> arena;         // the audio bodies, back to back
  std::vector<SourceNotice> notices;
  size_t audio_count = 0;
};

/** Counters since the start (for logs and tests). Bytes unless named otherwise. */
struct SourceStats {
  uint64_t bytes_in = 0;
  uint64_t messages = 0;              // audio messages (sequence headers included)
  uint64_t junk_bytes = 0;            // skipped while resyncing
  uint64_t tag_bytes = 0;             // ID3v2 tags skipped
  uint64_t info_frames = 0;           // MP3 Xing/Info/VBRI frames dropped
  uint64_t sync_losses = 0;           // times a frame/page boundary held no valid unit
  uint64_t bad_crc_pages = 0;         // Ogg pages dropped for their CRC
  uint64_t ignored_pages = 0;         // Ogg pages of other logical streams (or after EOS)
  uint64_t page_gaps = 0;             // breaks in the audio stream's page sequence numbers
  uint64_t dropped_packets = 0;       // Opus packets lost to missing pages or malformed (TOC)
  uint64_t chained_streams = 0;       // Ogg logical streams after the first
};

class SourceStream {
 public:
  /** kSearching: looking for the first / next unit (two confirmed frame headers; an Ogg page with
   *  a good CRC); kSynced: at a unit boundary; kSkippingTag: inside an ID3v2 tag; kFailed: after
   *  the sticky error. */
  enum class State : uint8_t { kSearching, kSynced, kSkippingTag, kFailed };
  /** Ogg only: where the selected logical stream is. */
  enum class OggState : uint8_t { kAwaitHead, kAwaitTags, kAudio, kEnded };

  explicit SourceStream(const SourceStreamOptions& options = {});

  /** Feeds request body bytes (any split, even one byte at a time: the items are the same).
   *  Rebuilds batch(). */
  void push(const uint8_t* data, size_t size);

  const SourceBatch& batch() const { return batch_; }
  State state() const { return state_; }
  bool failed() const { return state_ == State::kFailed; }
  const SourceStats& stats() const { return stats_; }
  const SourceStreamOptions& options() const { return opt_; }
  /** The newest OpusTags (vendor and comments), or nullptr before any. */
  const SourceNotice* tags() const { return have_tags_ ? &tags_ : nullptr; }
  /** Bytes held between pushes (a partial unit, a partial Opus packet). */
  size_t retained_bytes() const { return pending_.size() + packet_.size(); }
  /** Upper bound of retained_bytes() and of those buffers' capacity. */
  size_t max_retained_bytes() const { return pending_cap_ + packet_cap_; }
  size_t retained_capacity() const { return pending_.capacity() + packet_.capacity(); }

 private:
  // Processes units in [p, p+n) from its start; returns the bytes consumed and sets need_ (bytes
  // from the stopping point that the next decision needs) when it stops early.
  size_t process(const uint8_t* p, size_t n);
  size_t process_mpeg(const uint8_t* p, size_t n);
  size_t process_ogg(const uint8_t* p, size_t n);
  // Shared steps. try_id3: an ID3v2 tag starts at p (kDone: now kSkippingTag, or failed
  // tag_too_large). try_other_codec: another codec's units start at p (kDone: failed
  // codec_mismatch). kNeedMore: need_ says how many bytes from p decide it. skip_tag: skips what
  // [pos, n) holds of the tag, returns the new pos. skip_junk: `count` bytes at *pos are junk.
  enum class Step : uint8_t { kNo, kDone, kNeedMore };
  Step try_id3(const uint8_t* p, size_t avail);
  Step try_other_codec(const uint8_t* p, size_t avail);
  size_t skip_tag(size_t pos, size_t n);
  void skip_junk(size_t* pos, size_t count);

  // MP3 / ADTS: one frame header at p.
  struct MpegUnit {
    uint32_t size = 0;          // whole frame
    uint32_t rate = 0;          // Hz
    codec::Mp3Header mp3;
    AdtsHeader adts;
  };
  // True with `u` for a valid header; false with *need > 0 when more bytes are needed to tell,
  // false with *need == 0 when no frame of ours starts at p.
  bool parse_unit(const uint8_t* p, size_t avail, MpegUnit* u, size_t* need) const;
  bool same_stream(const MpegUnit& a, const MpegUnit& b) const;
  void emit_mpeg(const uint8_t* p, const MpegUnit& u);

  // Ogg Opus. on_page: false for a page that does not count as progress (no logical stream
  // selected and no BOS: bytes of a stream whose start was never seen).
  bool on_page(const uint8_t* p, const OggPage& page);
  void on_bos(const uint8_t* body, const OggPage& page);
  void on_packet(const uint8_t* p, size_t size);
  void on_opus_head(const codec::OpusHead& head, const uint8_t* p, size_t size);
  void on_opus_tags(const uint8_t* p, size_t size, bool truncated);
  bool append_partial(const uint8_t* p, size_t size);

  // Output.
  uint32_t now_ms() const;
  void set_rate(uint32_t rate);
  uint8_t* begin_audio(size_t size);  // appends an audio item of `size` body bytes at now_ms()
  void keep(const uint8_t* p, size_t n);  // appends to pending_ (≤ pending_cap_)
  void drop_partial();
  void fail(const char* code, std::string message, const char* received = "");

  SourceStreamOptions opt_;
  State state_ = State::kSearching;
  State after_tag_ = State::kSearching;  // the state an ID3v2 tag interrupted
  size_t tag_left_ = 0;                  // bytes of the tag still to skip
  size_t need_ = 0;                      // see process()
  size_t junk_ = 0;                      // bytes skipped in this resync
  size_t crc_junk_ = 0;                  // Ogg: bytes of CRC-failed pages in this resync

  std::vector<uint8_t> pending_;  // a partial unit carried to the next push (≤ pending_cap_)
  size_t pending_cap_ = 0;

  // Sample clock: timestamp = base_ms_ + round(samples_ * 1000 / rate_).
  uint64_t base_ms_ = 0;
  uint64_t samples_ = 0;
  uint32_t rate_ = 0;

  // MP3 / ADTS: the last frame accepted (sent or dropped as an info frame) and, for AAC, the
  // configuration of the last sequence header sent.
  bool have_last_ = false;
  MpegUnit last_;
  bool have_config_ = false;
  AdtsHeader config_;

  // Ogg Opus.
  OggState ogg_ = OggState::kAwaitHead;
  bool have_stream_ = false;    // a logical stream is selected
  uint32_t serial_ = 0;         // ... its serial number
  uint32_t next_sequence_ = 0;  // its next page_sequence_number
  bool bos_group_ = false;      // the last page was a BOS page: a BOS now joins the same link
  const char* other_codec_ = "";  // the first non-Opus codec of this link's BOS pages
  bool have_head_ = false;
  codec::OpusHead head_;
  std::vector<uint8_t> packet_;  // a packet continued across pages (≤ packet_cap_)
  size_t packet_cap_ = 0;
  bool partial_ = false;         // packet_ holds the start of a packet continued on the next page
  bool partial_truncated_ = false;  // OpusTags: bytes beyond kMaxOpusTagsBytes were dropped
  uint64_t pages_ = 0;           // valid pages seen
  bool ever_selected_ = false;   // a logical stream was selected once (a later BOS is a chain link)

  bool have_tags_ = false;
  SourceNotice tags_;

  SourceBatch batch_;
  SourceStats stats_;
};

}  // namespace skylark::icecast
