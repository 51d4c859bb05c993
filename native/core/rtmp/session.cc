// RTMP server session; see session.h.
#include "core/rtmp/session.h"

#include <algorithm>
#include <cstring>

#include "core/util/bytes.h"

namespace skylark::rtmp {

using util::Status;

namespace {
// User Control event types (RTMP spec 1.0 §6.2, §7.1.7).
constexpr uint16_t kUcStreamBegin = 0;
constexpr uint16_t kUcPingRequest = 6;
constexpr uint16_t kUcPingResponse = 7;

constexpr uint8_t kCsidControl = 2;   // protocol control and user control messages
constexpr uint8_t kCsidCommand = 3;   // NetConnection replies
constexpr uint8_t kCsidStatus = 5;    // NetStream onStatus
constexpr size_t kKeepAmfNodes = 256;  // decoded-node capacity kept between commands

uint32_t be32(std::span<const uint8_t> b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

// An optional string argument: absent/null/undefined → `fallback`; another type → false.
bool opt_string(const Amf0View& v, std::string_view fallback, std::string_view& out) {
  if (!v.valid() || v.is_null_or_undefined()) { out = fallback; return true; }
  if (!v.is_string()) return false;
  out = v.str();
  return true;
}
}  // namespace

Session::Session(SessionOptions options)
    : options_(options), reader_(options.max_message_bytes, options.max_audio_message_bytes) {
  if (options_.pre_publish_bytes > 0)
    reader_.set_inflight_budget(std::min<uint64_t>(options_.pre_publish_bytes, reader_.default_inflight_budget()));
}

void Session::fail(Status code, std::string_view message) {
  if (state_ == State::kError) return;
  state_ = State::kError;
  Event e;
  e.type = Event::Type::kError;
  e.code = code;
  e.message.assign(message);
  events_.push_back(std::move(e));
}

// A chunk reader error: the cap it hit decides the code (and limit()).
void Session::fail_reader() {
  const ChunkReader::Cap cap = reader_.cap_hit();
  if (cap == ChunkReader::Cap::kAudioLength) {
    limit_ = Limit::kAudioMessageBytes;
    return fail(reader_.status(), "audio message longer than the audio message cap");
  }
  if (cap == ChunkReader::Cap::kInflight && !accepted_ && options_.pre_publish_bytes > 0 &&
      reader_.inflight_budget() < reader_.default_inflight_budget()) {
    limit_ = Limit::kPrePublishBytes;
    return fail(Status::kPrePublishLimit, "partial messages before the publish was accepted exceed the pre-publish cap");
  }
  fail(reader_.status(), reader_.error_message());
}

// Before a publish is accepted: partial messages and untaken replies within pre_publish_bytes.
void Session::check_pre_publish() {
  if (accepted_ || options_.pre_publish_bytes == 0 || state_ == State::kError) return;
  if (held_bytes() > options_.pre_publish_bytes) {
    limit_ = Limit::kPrePublishBytes;
    fail(Status::kPrePublishLimit, "bytes held before the publish was accepted exceed the pre-publish cap");
  }
}

void Session::push(const uint8_t* data, size_t size) {
  bytes_in_ += size;
  if (state_ == State::kError || size == 0) return;
  size_t pos = 0;
  if (state_ == State::kHandshake) {
    pos = handshake_.feed(data, size, out_);
    if (handshake_.state() == ServerHandshake::State::kError) {
      fail(Status::kHandshakeInvalid, "RTMP handshake: C0 is not version 3");
      return;
    }
    if (!handshake_.done()) return check_pre_publish();
    state_ = State::kAwaitConnect;
  }
  while (state_ != State::kError) {
    size_t used = 0;
    ChunkReader::Result r = reader_.next(data + pos, size - pos, used, msg_);
    pos += used;
    cursor_ = bytes_in_ - size + pos;
    if (r == ChunkReader::Result::kError) return fail_reader();
    if (r == ChunkReader::Result::kNeedMore) break;
    on_message(msg_);
    msg_.body.data.reset();
    msg_.body.size = 0;
    if (nodes_.capacity() > kKeepAmfNodes) {  // do not keep a bomb-sized node list per connection
      nodes_.clear();
      nodes_.shrink_to_fit();
    }
  }
  if (state_ == State::kError) return;
  // Acknowledgement (§5.4.3) each time the peer's window of received bytes is crossed.
  if (peer_window_ > 0 && bytes_in_ - last_ack_ >= peer_window_) {
    last_ack_ = bytes_in_;
    uint8_t b[4];
    util::ByteWriter w(b, sizeof b);
    w.be32(static_cast<uint32_t>(bytes_in_));
    send_control(kMsgAck, b);
  }
  if (out_.size() > kMaxOutputBytes) return fail(Status::kOutputOverflow, "replies are not being taken");
  check_pre_publish();
}

void Session::end() {
  if (state_ == State::kError) return;
  if (state_ == State::kHandshake) {
    if (bytes_in_ > 0) fail(Status::kHandshakeInvalid, "connection closed during the handshake");
    return;
  }
  if (reader_.mid_message()) fail(Status::kProtocolViolation, "connection closed mid-message");
}

void Session::on_message(Message& m) {
  std::span<const uint8_t> body = m.body.span();
  switch (m.type) {
    case kMsgSetChunkSize:
    case kMsgAbort:
    case kMsgAck:
    case kMsgUserControl:
    case kMsgWindowAckSize:
    case kMsgSetPeerBandwidth:
      on_control(m);
      return;
    case kMsgAudio:
      // Emitted once a publish arrived, also while JS has not answered it yet (a replayed or
      // impatient client): JS gates on its own accept. Dropped before publish and after
      // reject/unpublish.
      if ((publish_ != PublishState::kPublishing && publish_ != PublishState::kPending) || body.empty())
        return;
      {
        Event e;
        e.type = Event::Type::kAudio;
        e.timestamp = m.timestamp;
        e.data = std::move(m.body);
        events_.push_back(std::move(e));
      }
      return;
    case kMsgCommandAmf0:
      on_command(m, body);
      return;
    case kMsgCommandAmf3:  // AMF3 command: a format byte (0), then AMF0 values
      if (!body.empty()) on_command(m, body.subspan(1));
      return;
    case kMsgDataAmf0:
      on_data(m, body);
      return;
    case kMsgDataAmf3:
      if (!body.empty()) on_data(m, body.subspan(1));
      return;
    default:
      return;  // the chunk reader drops video/aggregate/shared objects before they get here
  }
}

void Session::on_control(const Message& m) {
  std::span<const uint8_t> b = m.body.span();
  switch (m.type) {
    case kMsgSetChunkSize: {
      if (b.size() < 4) return fail(Status::kChunkSizeInvalid, "Set Chunk Size shorter than 4 bytes");
      uint32_t v = be32(b);
      if (v == 0 || v > kMaxChunkSize) return fail(Status::kChunkSizeInvalid, "Set Chunk Size out of 1..2^31-1");
      reader_.set_chunk_size(v);  // the message is complete: applies from the next chunk on
      return;
    }
    case kMsgAbort:
      if (b.size() < 4) return fail(Status::kProtocolViolation, "Abort Message shorter than 4 bytes");
      reader_.abort(be32(b));
      return;
    case kMsgWindowAckSize:
      if (b.size() < 4) return fail(Status::kProtocolViolation, "Window Ack Size shorter than 4 bytes");
      peer_window_ = be32(b);
      last_ack_ = cursor_;
      return;
    case kMsgUserControl:
      if (b.size() >= 6 && ((uint16_t{b[0]} << 8) | b[1]) == kUcPingRequest)
        send_user_control(kUcPingResponse, be32(b.subspan(2)));
      return;
    default:  // Acknowledgement, Set Peer Bandwidth: nothing to do for a receiving server
      return;
  }
}

void Session::send_control(uint8_t type, std::span<const uint8_t> body) {
  write_message(out_, out_chunk_size_, kCsidControl, type, 0, 0, body);
}

void Session::send_user_control(uint16_t event, uint32_t value) {
  uint8_t b[6];
  util::ByteWriter w(b, sizeof b);
  w.be16(event);
  w.be32(value);
  send_control(kMsgUserControl, b);
}

void Session::send_command(uint8_t csid, uint32_t stream_id) {
  write_message(out_, out_chunk_size_, csid, kMsgCommandAmf0, stream_id, 0, scratch_);
}

void Session::send_simple_result(double txid) {
  scratch_.clear();
  util::VecWriter w(scratch_);
  amf0_put_string(w, "_result");
  amf0_put_number(w, txid);
  amf0_put_null(w);
  amf0_put_undefined(w);
  send_command(kCsidCommand, 0);
}

void Session::send_info(std::string_view command, uint8_t csid, uint32_t stream_id, std::string_view level,
                        std::string_view code, std::string_view description) {
  scratch_.clear();
  util::VecWriter w(scratch_);
  amf0_put_string(w, command);
  amf0_put_number(w, 0);
  amf0_put_null(w);
  amf0_begin_object(w);
  if (!level.empty()) {
    amf0_put_key(w, "level"); amf0_put_string(w, level);
  }
  amf0_put_key(w, "code"); amf0_put_string(w, code);
  amf0_put_key(w, "description"); amf0_put_string(w, description);
  amf0_end_object(w);
  send_command(csid, stream_id);
}

void Session::send_status(std::string_view level, std::string_view code, std::string_view description) {
  send_info("onStatus", kCsidStatus, publish_stream_id_, level, code, description);
}

void Session::on_command(const Message& m, std::span<const uint8_t> amf) {
  Status st = amf0_decode_all(amf, nodes_);
  if (st != Status::kOk) return fail(st, "command message is not valid AMF0");
  Amf0View name = amf0_root(nodes_, 0);
  Amf0View txv = amf0_root(nodes_, 1);
  if (!name.is_string()) return fail(Status::kCommandInvalid, "command name is not a string");
  const std::string_view cmd = name.str();
  const bool known = cmd == "connect" || cmd == "releaseStream" || cmd == "FCPublish" ||
                     cmd == "createStream" || cmd == "publish" || cmd == "FCUnpublish" ||
                     cmd == "deleteStream" || cmd == "closeStream";
  if (!known) return;  // getStreamLength, _checkbw, play, ...: ignored
  if (!txv.is_number()) return fail(Status::kCommandInvalid, "transaction id is not a number");
  const double txid = txv.number();

  if (cmd == "connect") {
    if (state_ != State::kAwaitConnect) return fail(Status::kProtocolViolation, "connect sent twice");
    Amf0View obj = amf0_root(nodes_, 2);
    if (!obj.is_object()) return fail(Status::kCommandInvalid, "connect: command object missing");
    return cmd_connect(txid, obj);
  }
  if (state_ != State::kConnected) return fail(Status::kProtocolViolation, "command before connect");

  if (cmd == "releaseStream" || cmd == "FCPublish") {
    std::string_view stream;
    if (!opt_string(amf0_root(nodes_, 3), "", stream))
      return fail(Status::kCommandInvalid, "stream name is not a string");
    if (stream.size() > kMaxStreamNameBytes)
      return fail(Status::kStreamNameTooLong, "stream name longer than 1024 bytes");
    send_simple_result(txid);
    if (cmd == "FCPublish") send_info("onFCPublish", kCsidCommand, 0, {}, "NetStream.Publish.Start", "FCPublish");
    return;
  }
  if (cmd == "createStream") {
    if (next_stream_id_ > kMaxMessageStreams) return fail(Status::kProtocolViolation, "too many createStream calls");
    scratch_.clear();
    util::VecWriter w(scratch_);
    amf0_put_string(w, "_result");
    amf0_put_number(w, txid);
    amf0_put_null(w);
    amf0_put_number(w, next_stream_id_++);
    send_command(kCsidCommand, 0);
    return;
  }
  if (cmd == "publish") return cmd_publish(m.stream_id);
  if (cmd == "FCUnpublish") {
    // No reply: FFmpeg closes right after FCUnpublish + deleteStream without reading, and unread
    // bytes in its socket turn its close into a RST that discards its last writes at our end.
    end_publish(publish_stream_id_);
    return;
  }
  if (cmd == "deleteStream") {
    Amf0View id = amf0_root(nodes_, 3);
    if (!id.is_number()) return fail(Status::kCommandInvalid, "deleteStream: stream id is not a number");
    if (id.number() == static_cast<double>(publish_stream_id_)) end_publish(publish_stream_id_);
    return;
  }
  if (cmd == "closeStream") end_publish(m.stream_id);
}

void Session::cmd_publish(uint32_t stream_id) {
  Amf0View namev = amf0_root(nodes_, 3);
  if (!namev.is_string()) return fail(Status::kCommandInvalid, "publish: stream name is not a string");
  if (namev.str().size() > kMaxStreamNameBytes)
    return fail(Status::kStreamNameTooLong, "stream name longer than 1024 bytes");
  std::string_view type;
  if (!opt_string(amf0_root(nodes_, 4), "live", type))
    return fail(Status::kCommandInvalid, "publish: publishing type is not a string");
  if (publish_ == PublishState::kPending || publish_ == PublishState::kPublishing)
    return fail(Status::kProtocolViolation, "publish while already publishing");
  publish_ = PublishState::kPending;
  publish_stream_id_ = stream_id;
  publish_name_.assign(namev.str());
  Event e;
  e.type = Event::Type::kPublish;
  e.stream_name = publish_name_;
  e.publish_type.assign(type);
  e.stream_id = stream_id;
  events_.push_back(std::move(e));
}

void Session::cmd_connect(double txid, const Amf0View& obj) {
  std::string_view app, tc_url, flash_ver;
  if (!opt_string(obj.get("app"), "", app) || !opt_string(obj.get("tcUrl"), "", tc_url) ||
      !opt_string(obj.get("flashVer"), "", flash_ver))
    return fail(Status::kCommandInvalid, "connect: app/tcUrl/flashVer is not a string");
  Amf0View enc = obj.get("objectEncoding");
  const double object_encoding = enc.is_number() ? enc.number() : 0;

  Event e;
  e.type = Event::Type::kConnect;
  e.app.assign(app);
  e.tc_url.assign(tc_url);
  e.flash_ver.assign(flash_ver);
  Amf0View list = obj.get("fourCcList");  // Enhanced RTMP: codecs the client can send
  if (list.is_strict_array()) {
    Amf0View c = list.first_child();
    for (uint32_t i = 0; i < list.child_count() && i < 64; ++i, c = c.next())
      if (c.is_string()) e.four_cc_list.emplace_back(c.str());
  } else if (list.valid() && !list.is_null_or_undefined()) {
    return fail(Status::kCommandInvalid, "connect: fourCcList is not an array");
  }

  uint8_t b[5];
  util::ByteWriter w(b, sizeof b);
  w.be32(kServerWindowAckSize);
  send_control(kMsgWindowAckSize, {b, 4});
  w = util::ByteWriter(b, sizeof b);
  w.be32(kServerPeerBandwidth);
  w.u8(2);  // limit type: dynamic
  send_control(kMsgSetPeerBandwidth, {b, 5});
  w = util::ByteWriter(b, sizeof b);
  w.be32(kServerChunkSize);
  send_control(kMsgSetChunkSize, {b, 4});
  out_chunk_size_ = kServerChunkSize;

  scratch_.clear();
  util::VecWriter v(scratch_);
  amf0_put_string(v, "_result");
  amf0_put_number(v, txid);
  amf0_begin_object(v);
  amf0_put_key(v, "fmsVer"); amf0_put_string(v, "FMS/3,0,1,123");
  amf0_put_key(v, "capabilities"); amf0_put_number(v, 31);
  amf0_end_object(v);
  amf0_begin_object(v);
  amf0_put_key(v, "level"); amf0_put_string(v, "status");
  amf0_put_key(v, "code"); amf0_put_string(v, "NetConnection.Connect.Success");
  amf0_put_key(v, "description"); amf0_put_string(v, "Connection succeeded.");
  amf0_put_key(v, "objectEncoding"); amf0_put_number(v, object_encoding);
  amf0_end_object(v);
  send_command(kCsidCommand, 0);

  state_ = State::kConnected;
  events_.push_back(std::move(e));
}

void Session::on_data(const Message& /*m*/, std::span<const uint8_t> amf) {
  Status st = amf0_decode_all(amf, nodes_);
  if (st != Status::kOk) return fail(st, "data message is not valid AMF0");
  size_t i = 0;
  Amf0View first = amf0_root(nodes_, 0);
  if (first.is_string() && first.str() == "@setDataFrame") i = 1;
  Amf0View name = amf0_root(nodes_, i);
  if (!name.is_string() || name.str() != "onMetaData") return;
  Amf0View obj = amf0_root(nodes_, i + 1);
  if (!obj.is_object()) return;
  Event e;
  e.type = Event::Type::kMetadata;
  Amf0View c = obj.first_child();
  for (uint32_t k = 0; k < obj.child_count() && e.metadata.size() < kMaxMetadataValues; ++k, c = c.next()) {
    MetaValue mv;
    if (c.is_number()) { mv.kind = MetaValue::Kind::kNumber; mv.number = c.number(); }
    else if (c.is_boolean()) { mv.kind = MetaValue::Kind::kBoolean; mv.boolean = c.boolean(); }
    else if (c.is_string()) { mv.kind = MetaValue::Kind::kString; mv.str.assign(c.str()); }
    else continue;  // nested values, null, dates: skipped
    mv.key.assign(c.key());
    e.metadata.push_back(std::move(mv));
  }
  events_.push_back(std::move(e));
}

void Session::end_publish(uint32_t stream_id) {
  if ((publish_ != PublishState::kPending && publish_ != PublishState::kPublishing) ||
      stream_id != publish_stream_id_)
    return;
  publish_ = PublishState::kEnded;
  Event e;
  e.type = Event::Type::kUnpublish;
  e.stream_id = stream_id;
  events_.push_back(std::move(e));
}

bool Session::accept_publish() {
  if (state_ == State::kError || publish_ != PublishState::kPending) return false;
  send_user_control(kUcStreamBegin, publish_stream_id_);
  send_status("status", "NetStream.Publish.Start", "Start publishing");
  publish_ = PublishState::kPublishing;
  accepted_ = true;
  reader_.set_inflight_budget(reader_.default_inflight_budget());
  return true;
}

bool Session::reject_publish(std::string_view code, std::string_view description) {
  // Pending: the publish is refused (bad key). Publishing: the media is refused after the fact
  // (codec mismatch, docs/behaviour.md §9 "Ingest": onStatus NetStream.Publish.Rejected, then close).
  if (state_ == State::kError || (publish_ != PublishState::kPending && publish_ != PublishState::kPublishing)) return false;
  send_status("error", code.substr(0, 256), description.substr(0, 1024));
  publish_ = PublishState::kRejected;
  return true;
}

}  // namespace skylark::rtmp
