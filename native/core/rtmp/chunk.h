// RTMP chunk stream (RTMP spec 1.0 §5.3): an incremental demuxer that turns chunks from any number
// of input pieces (down to one byte at a time) into whole messages, and a writer that chunks our
// own messages.
//
// Hazards handled (see docs/native-api.md and docs/architecture.md): basic headers of 1/2/3 bytes (csid
// 2..65599); message header types 0/1/2/3; extended timestamps, including on type-3 chunks in both
// conventions (FFmpeg repeats the extended timestamp on every type-3 chunk, some clients do not: the
// 4 bytes are peeked and kept only when they equal the stream's extended timestamp); the first
// chunk on a chunk stream must be type 0; a header that changes length or type mid-message is an
// error; at most kMaxChunkStreams distinct chunk streams; message lengths are checked against a
// per-type cap (audio: its own, lower cap when set) and the bytes of all partially received
// messages against an in-flight budget BEFORE anything is allocated, and buffers are sized from the
// (capped) message length, never from the chunk size; video, aggregate, shared-object and unknown
// messages are read through and dropped chunk by chunk without buffering.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/util/status.h"

namespace skylark::rtmp {

/** RTMP message type ids (RTMP spec 1.0 §5.4, §7.1). */
enum MessageType : uint8_t {
  kMsgSetChunkSize = 1,
  kMsgAbort = 2,
  kMsgAck = 3,
  kMsgUserControl = 4,
  kMsgWindowAckSize = 5,
  kMsgSetPeerBandwidth = 6,
  kMsgAudio = 8,
  kMsgVideo = 9,
  kMsgDataAmf3 = 15,
  kMsgSharedObjectAmf3 = 16,
  kMsgCommandAmf3 = 17,
  kMsgDataAmf0 = 18,
  kMsgSharedObjectAmf0 = 19,
  kMsgCommandAmf0 = 20,
  kMsgAggregate = 22,
};

inline constexpr uint32_t kDefaultChunkSize = 128;          // both directions until Set Chunk Size
inline constexpr uint32_t kMaxChunkSize = 0x7FFFFFFF;       // Set Chunk Size: 1..2^31-1
inline constexpr size_t kMaxChunkStreams = 64;              // distinct csids per connection
inline constexpr uint32_t kMaxControlMessageBytes = 64;     // types 1..6
inline constexpr uint32_t kMaxCommandMessageBytes = 64 * 1024;  // AMF commands and data
inline constexpr uint32_t kDefaultMaxMessageBytes = 1024 * 1024;  // audio (configurable)
inline constexpr uint32_t kInflightSlackBytes = 256 * 1024;  // default budget for messages being
                                                             // assembled = the largest per-type
                                                             // cap + this slack

/** Reassembled message storage, handed on without copying (to JS as an external buffer). */
struct OwnedBytes {
  std::unique_ptr<uint8_t[]> data;
  uint32_t size = 0;
  std::span<const uint8_t> span() const { return {data.get(), size}; }
};

/** One complete message. `timestamp` is the absolute RTMP timestamp in ms (32-bit, wraps). */
struct Message {
  uint32_t csid = 0;
  uint32_t timestamp = 0;
  uint32_t stream_id = 0;
  uint8_t type = 0;
  OwnedBytes body;
};

class ChunkReader {
 public:
  enum class Result : uint8_t { kNeedMore, kMessage, kError };
  /** Which cap a kMessageTooLarge error hit. */
  enum class Cap : uint8_t { kNone, kMessageLength, kAudioLength, kInflight };

  /** `max_message_bytes` caps any one message; `max_audio_message_bytes` (0 = the same) caps audio
   *  messages (type 8) alone. Control messages are capped at kMaxControlMessageBytes, commands and
   *  data at kMaxCommandMessageBytes (both never above `max_message_bytes`). */
  explicit ChunkReader(uint32_t max_message_bytes = kDefaultMaxMessageBytes, uint32_t max_audio_message_bytes = 0);

  /** Consumes bytes from `data` until a message completes (kMessage: `out` holds it and `used`
   *  says how much of `data` was consumed — call again with the rest), the input is exhausted
   *  (kNeedMore, all consumed) or an error (kError; see status()/error_message(), sticky). */
  Result next(const uint8_t* data, size_t size, size_t& used, Message& out);

  /** Incoming chunk size for every later chunk (the caller validated 1..kMaxChunkSize). */
  void set_chunk_size(uint32_t size) { chunk_size_ = size; }
  uint32_t chunk_size() const { return chunk_size_; }
  /** Abort Message (§5.4.2): drops the partial message on `csid`, if any. */
  void abort(uint32_t csid);
  /** True when the input stopped inside a chunk header or a message. */
  bool mid_message() const;
  util::Status status() const { return status_; }
  const std::string& error_message() const { return error_; }
  /** The cap behind a kMessageTooLarge error (kNone otherwise). */
  Cap cap_hit() const { return cap_hit_; }

  /** Bytes allocated for partially received messages (their declared lengths). */
  uint64_t inflight() const { return inflight_; }
  /** Budget for inflight(), checked before each message buffer is allocated (kMessageTooLarge,
   *  Cap::kInflight, when a new message would exceed it). Applies to messages started after the
   *  call. */
  void set_inflight_budget(uint64_t bytes) { budget_ = bytes; }
  /** The budget set at construction: the largest per-type cap + kInflightSlackBytes. */
  uint64_t default_inflight_budget() const;
  uint64_t inflight_budget() const { return budget_; }

 private:
  struct Stream {
    uint32_t csid = 0;
    uint32_t timestamp = 0;   // absolute timestamp of the last message started
    uint32_t ts_field = 0;    // last timestamp/delta value (after the extended field)
    bool extended = false;    // last type 0/1/2 header used the extended timestamp
    uint32_t length = 0;
    uint8_t type = 0;
    uint32_t stream_id = 0;
    // message being assembled
    bool in_progress = false;
    bool discard = false;
    uint32_t received = 0;
    uint32_t msg_timestamp = 0;
    std::unique_ptr<uint8_t[]> buf;
  };
  enum class Phase : uint8_t { kHeader, kPayload, kError };

  size_t header_need();
  bool finish_header();
  bool begin_message(Stream& s);
  Stream* find(uint32_t csid);
  Result fail(util::Status s, const char* msg);
  uint32_t cap_for(uint8_t type) const;

  uint32_t max_message_bytes_;
  uint32_t max_audio_bytes_;  // <= max_message_bytes_
  bool audio_capped_;         // an audio cap was given: audio over it is Cap::kAudioLength
  uint64_t budget_;
  Cap cap_hit_ = Cap::kNone;
  uint32_t chunk_size_ = kDefaultChunkSize;
  uint64_t inflight_ = 0;  // bytes allocated for messages being assembled
  Phase phase_ = Phase::kHeader;
  util::Status status_ = util::Status::kOk;
  std::string error_;

  std::vector<Stream> streams_;
  size_t current_ = 0;       // index into streams_ of the chunk being read
  uint32_t chunk_left_ = 0;  // payload bytes left in the current chunk

  uint8_t hdr_[18] = {};     // basic (≤3) + message header (≤11) + extended timestamp (4)
  size_t hdr_len_ = 0;
  uint8_t replay_[4] = {};   // peeked bytes that were not an extended timestamp (payload)
  size_t replay_len_ = 0;
  size_t replay_pos_ = 0;
};

/** Appends one message as chunks (type 0 then type 3) to `out`. `csid` must be 2..63. */
void write_message(std::vector<uint8_t>& out, uint32_t chunk_size, uint8_t csid, uint8_t type,
                   uint32_t stream_id, uint32_t timestamp, std::span<const uint8_t> payload);

}  // namespace skylark::rtmp
