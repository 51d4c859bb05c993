// Sans-I/O RTMP server session (one per TCP connection): handshake, chunk streams, protocol control,
// AMF0 commands of a publisher (FFmpeg, OBS). Bytes in (push), events and reply bytes out.
//
//   Session s({.max_message_bytes = 1 << 20});
//   s.push(data, n);                 // then drain s.events() and s.output()
//   s.accept_publish();              // after a kPublish event (or reject_publish(code, desc))
//
// RTMP spec 1.0: §5.2 handshake, §5.3 chunking, §5.4 protocol control, §6.2 user control, §7.2
// commands (connect, createStream, publish, deleteStream, closeStream; releaseStream, FCPublish and
// FCUnpublish as FFmpeg and OBS send them). Errors are sticky: after the first kError event every
// later push() is counted in bytes_in() and otherwise ignored.
//
// Caps (SessionOptions): any one message (max_message_bytes), audio messages
// (max_audio_message_bytes: message_too_large, limit() kAudioMessageBytes), and, until a publish is
// accepted, the bytes the session holds — partial messages (their declared lengths, refused before
// allocation) plus replies not yet taken — (pre_publish_bytes: prepublish_limit, limit()
// kPrePublishBytes). After accept_publish() the in-flight budget is the largest per-type cap + 256 KiB.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/rtmp/amf0.h"
#include "core/rtmp/chunk.h"
#include "core/rtmp/handshake.h"
#include "core/util/status.h"

namespace skylark::rtmp {

inline constexpr size_t kMaxStreamNameBytes = 1024;       // longer → stream_name_too_long
inline constexpr size_t kMaxOutputBytes = 1024 * 1024;    // replies not taken by the caller
inline constexpr uint32_t kServerWindowAckSize = 2500000;
inline constexpr uint32_t kServerPeerBandwidth = 2500000;
inline constexpr uint32_t kServerChunkSize = 4096;
inline constexpr uint32_t kMaxMessageStreams = 16;        // createStream calls per connection
inline constexpr size_t kMaxMetadataValues = 256;

struct SessionOptions {
  uint32_t max_message_bytes = kDefaultMaxMessageBytes;  // cap for any one message (audio)
  uint32_t max_audio_message_bytes = 0;  // cap for an audio message (0 = max_message_bytes)
  uint32_t pre_publish_bytes = 0;        // bytes held before accept_publish() (0 = no cap)
};

/** The cap that failed a session (Session::limit()). */
enum class Limit : uint8_t { kNone, kAudioMessageBytes, kPrePublishBytes };

/** A flat onMetaData value (nested objects/arrays and null are skipped). */
struct MetaValue {
  enum class Kind : uint8_t { kNumber, kString, kBoolean };
  std::string key;
  Kind kind = Kind::kNumber;
  double number = 0;
  bool boolean = false;
  std::string str;
};

struct Event {
  enum class Type : uint8_t { kConnect, kPublish, kUnpublish, kMetadata, kAudio, kError };
  Type type = Type::kError;
  // kConnect
  std::string app, tc_url, flash_ver;
  std::vector<std::string> four_cc_list;
  // kPublish / kUnpublish
  std::string stream_name, publish_type;
  uint32_t stream_id = 0;
  // kMetadata
  std::vector<MetaValue> metadata;
  // kAudio: the whole FLV AUDIODATA body; timestamp in ms (RTMP clock)
  uint32_t timestamp = 0;
  OwnedBytes data;
  // kError
  util::Status code = util::Status::kOk;
  std::string message;
};

class Session {
 public:
  enum class State : uint8_t { kHandshake, kAwaitConnect, kConnected, kError };
  enum class PublishState : uint8_t { kNone, kPending, kPublishing, kRejected, kEnded };

  explicit Session(SessionOptions options = {});

  /** Feeds socket bytes. Completed events are appended to events(), replies to output(). */
  void push(const uint8_t* data, size_t size);
  /** The peer closed the connection: an error event if it stopped inside the handshake, a chunk
   *  header or a message (protocol_violation). */
  void end();
  /** Answers the pending publish with StreamBegin + onStatus NetStream.Publish.Start. Returns
   *  false (and does nothing) when no publish is pending. */
  bool accept_publish();
  /** Answers the pending publish with onStatus level 'error' and `code`. */
  // Also valid while publishing (media refused after accept, e.g. codec mismatch).
  bool reject_publish(std::string_view code, std::string_view description);

  std::vector<Event>& events() { return events_; }
  std::vector<uint8_t>& output() { return out_; }
  uint64_t bytes_in() const { return bytes_in_; }
  State state() const { return state_; }
  PublishState publish_state() const { return publish_; }
  bool failed() const { return state_ == State::kError; }
  /** The cap behind the session's error, if one was (kNone otherwise). */
  Limit limit() const { return limit_; }
  /** Whether accept_publish() has answered a publish on this connection. */
  bool publish_accepted() const { return accepted_; }
  /** Bytes the session holds for the connection beyond its fixed size: partial messages (declared
   *  lengths) and replies not yet taken from output(). */
  uint64_t held_bytes() const { return reader_.inflight() + out_.size(); }

 private:
  void fail(util::Status code, std::string_view message);
  void fail_reader();
  void check_pre_publish();
  void on_message(Message& m);
  void on_control(const Message& m);
  void on_command(const Message& m, std::span<const uint8_t> amf);
  void on_data(const Message& m, std::span<const uint8_t> amf);
  void cmd_connect(double txid, const Amf0View& obj);
  void cmd_publish(uint32_t stream_id);
  void send_control(uint8_t type, std::span<const uint8_t> body);
  void send_user_control(uint16_t event, uint32_t value);
  void send_command(uint8_t csid, uint32_t stream_id);  // sends scratch_ as an AMF0 command
  void send_simple_result(double txid);
  // Sends `command` (transaction 0, null, {level, code, description}) on `csid`: onStatus or
  // onFCPublish (which carries no level: an empty `level` is left out).
  void send_info(std::string_view command, uint8_t csid, uint32_t stream_id, std::string_view level,
                 std::string_view code, std::string_view description);
  // A NetStream onStatus on the publishing stream (level "status" or "error").
  void send_status(std::string_view level, std::string_view code, std::string_view description);
  void end_publish(uint32_t stream_id);

  SessionOptions options_;
  State state_ = State::kHandshake;
  PublishState publish_ = PublishState::kNone;
  Limit limit_ = Limit::kNone;
  bool accepted_ = false;
  ServerHandshake handshake_;
  ChunkReader reader_;
  uint32_t out_chunk_size_ = kDefaultChunkSize;
  uint64_t bytes_in_ = 0;
  uint64_t cursor_ = 0;    // bytes_in_ up to the end of the message being handled
  uint64_t last_ack_ = 0;
  uint32_t peer_window_ = 0;  // Window Acknowledgement Size the peer asked for (0 = none)
  uint32_t next_stream_id_ = 1;
  uint32_t publish_stream_id_ = 0;
  std::string publish_name_;

  std::vector<Event> events_;
  std::vector<uint8_t> out_;
  std::vector<Amf0Node> nodes_;   // reused across commands
  std::vector<uint8_t> scratch_;  // reused to encode replies
  Message msg_;
};

}  // namespace skylark::rtmp
