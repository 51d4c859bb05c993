// class RtmpSession for JS: a thin wrapper over skylark::rtmp::Session (native/core/rtmp), the
// sans-I/O RTMP server session of one TCP connection. Shapes: docs/native-api.md.
//
// Protocol problems never throw: they come back as {type:'error', code, message} events (sticky).
// Wrong JS arguments throw a TypeError.
//
// Hot path (audio): push() creates no JS object per message. It returns a number (events << 3 |
// flags) and writes the batch into two per-session ArrayBuffers that JS maps once (buffers()):
//   meta  (Float64Array): [0] = audio bytes of the batch; then per event i, in order,
//         [1+2i] = timestamp in ms (audio) or -1 (any other event), [2+2i] = end offset of the
//         audio body in `arena` (bodies are back to back from offset 0);
//   arena (Uint8Array): the audio bodies of the batch, copied out of the reassembly buffers.
// The other events (connect, publish, ...: a handful per connection) are built as objects and
// fetched with takeEvents(). The typed wrapper in src/native/index.ts turns this into the public
// API; the raw class is not used elsewhere.
#include "binding/addon_state.h"
#include "binding/rtmp_batch.h"
#include "core/rtmp/session.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace skylark::binding {
namespace {

using rtmp::Event;

// One-line argument guards (throw a TypeError and return), better-sqlite3 style.
#define SK_THROW_TYPE(env, msg) \
  do { Napi::TypeError::New(env, msg).ThrowAsJavaScriptException(); return env.Undefined(); } while (0)
#define SK_REQUIRE(env, cond, msg) do { if (!(cond)) SK_THROW_TYPE(env, msg); } while (0)

/** RtmpSession(options?: {maxMessageBytes?: number})
 *  One RTMP server connection (RTMP spec 1.0 §5.2 handshake, §5.3 chunking, §7 commands; AMF0).
 *  `maxMessageBytes`: cap in bytes for any one message, an integer in 1024..16777215 (default
 *  1 MiB); a larger declared message is a `message_too_large` error event. */
class RtmpSession : public Napi::ObjectWrap<RtmpSession> {
 public:
  explicit RtmpSession(const Napi::CallbackInfo& info) : Napi::ObjectWrap<RtmpSession>(info) {
    Napi::Env env = info.Env();
    rtmp::SessionOptions opts;
    if (!ParseSessionOptions(env, info.Length() > 0 ? info[0] : env.Undefined(), "RtmpSession", &opts)) return;
    session_ = std::make_unique<rtmp::Session>(opts);
  }

  /** push(data: Uint8Array): number — feeds socket bytes (any split, even one byte at a time).
   *  Returns (events << 3) | flags: kOutputPending (takeOutput() has bytes), kBuffersChanged
   *  (call buffers() again before reading meta/arena), kControlEvents (takeEvents() has the
   *  non-audio events of the batch). The batch (see the top of this file) is valid until the
   *  next push(). After an error event, returns 0 events. */
  Napi::Value Push(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    napi_typedarray_type type;
    size_t length = 0;
    void* data = nullptr;
    SK_REQUIRE(env, info.Length() >= 1 && info[0].IsTypedArray() &&
                        napi_get_typedarray_info(env, info[0], &type, &length, &data, nullptr, nullptr) == napi_ok &&
                        type == napi_uint8_array,
               "RtmpSession.push: data must be a Uint8Array");
    SK_REQUIRE(env, !busy_, "RtmpSession.push: re-entrant call");
    Busy b(busy_);
    session_->push(static_cast<const uint8_t*>(data), length);
    return Napi::Number::New(env, DrainBatch(env));
  }

  /** buffers(): [meta: ArrayBuffer, arena: ArrayBuffer] — the batch buffers (replaced when push()
   *  reports kBuffersChanged). */
  Napi::Value Buffers(const Napi::CallbackInfo& info) { return batch_.Pair(info.Env()); }

  /** takeEvents(): RtmpEvent[] — the non-audio events of the last push(), in order (then []). */
  Napi::Value TakeEvents(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Array arr = Napi::Array::New(env, control_.size());
    if (control_.empty()) return arr;
    Keys keys(env);
    for (uint32_t i = 0; i < control_.size(); ++i) arr.Set(i, ToJs(env, keys, control_[i]));
    control_.clear();
    return arr;
  }

  /** end(): RtmpEvent[] — the peer closed the socket. Returns [error protocol_violation] when it
   *  stopped mid-handshake or mid-message (a publisher that vanished), else []. (Not yet in
   *  docs/native-api.md; optional for callers.) */
  Napi::Value End(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    SK_REQUIRE(env, !busy_, "RtmpSession.end: re-entrant call");
    Busy b(busy_);
    session_->end();
    return DrainEvents(env);
  }

  /** takeOutput(): Buffer | null — bytes to write to the socket (handshake, control messages,
   *  command replies), or null when there are none. */
  Napi::Value TakeOutput(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto& out = session_->output();
    if (out.empty()) return env.Null();
    Napi::Buffer<uint8_t> buf = Napi::Buffer<uint8_t>::Copy(env, out.data(), out.size());
    out.clear();
    if (out.capacity() > 64 * 1024) out.shrink_to_fit();
    return buf;
  }

  /** acceptPublish(): void — answers the pending publish with StreamBegin and onStatus
   *  NetStream.Publish.Start (level status). A no-op when no publish is pending. */
  Napi::Value AcceptPublish(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    SK_REQUIRE(env, !busy_, "RtmpSession.acceptPublish: re-entrant call");
    session_->accept_publish();
    return env.Undefined();
  }

  /** rejectPublish(code: string, description: string): void — answers the pending publish with
   *  onStatus level 'error' and `code` (e.g. 'NetStream.Publish.BadName'). A no-op when no publish
   *  is pending. */
  Napi::Value RejectPublish(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    SK_REQUIRE(env, info.Length() >= 2 && info[0].IsString() && info[1].IsString(),
               "RtmpSession.rejectPublish: code and description must be strings");
    SK_REQUIRE(env, !busy_, "RtmpSession.rejectPublish: re-entrant call");
    std::string code = info[0].As<Napi::String>().Utf8Value();
    std::string desc = info[1].As<Napi::String>().Utf8Value();
    session_->reject_publish(code, desc);
    return env.Undefined();
  }

  /** bytesIn: number — bytes pushed so far. */
  Napi::Value BytesIn(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(session_->bytes_in()));
  }

 private:
  struct Busy {
    explicit Busy(bool& f) : f_(f) { f_ = true; }
    ~Busy() { f_ = false; }
    bool& f_;
  };

  // Property names of the audio event, created once per drain instead of once per event
  // (NAPI_VERSION 8 cannot hold references to strings across calls).
  struct Keys {
    explicit Keys(Napi::Env env)
        : type(Napi::String::New(env, "type")), timestamp(Napi::String::New(env, "timestamp")),
          data(Napi::String::New(env, "data")), audio(Napi::String::New(env, "audio")) {}
    Napi::String type, timestamp, data, audio;
  };

  static Napi::Value ToJs(Napi::Env env, const Keys& k, Event& e) {
    if (e.type != Event::Type::kAudio) return ControlEventToJs(env, e);
    Napi::Object o = Napi::Object::New(env);
    o.Set(k.type, k.audio);
    o.Set(k.timestamp, Napi::Number::New(env, e.timestamp));
    // Not on the hot path (push() batches audio; end() never completes a message).
    o.Set(k.data, Napi::Buffer<uint8_t>::Copy(env, e.data.data.get(), e.data.size));
    return o;
  }

  // Flags in the low bits of push()'s result (mirrored in src/native/index.ts).
  static constexpr uint32_t kOutputPending = 1, kBuffersChanged = 2, kControlEvents = 4;

  // Moves the session's events into meta/arena (audio) and control_ (the rest); returns push()'s
  // result. Audio message storage is freed here (copied into the arena first).
  double DrainBatch(Napi::Env env) {
    control_.clear();
    auto& events = session_->events();
    uint32_t flags = session_->output().empty() ? 0 : kOutputPending;
    size_t audio_bytes = 0;
    for (const Event& e : events) {
      if (e.type == Event::Type::kAudio) audio_bytes += e.data.size;
      else flags |= kControlEvents;
    }
    if (batch_.Ensure(env, events.size(), audio_bytes)) flags |= kBuffersChanged;
    batch_.Begin(audio_bytes);
    for (Event& e : events) {
      if (e.type == Event::Type::kAudio) {
        batch_.Audio(e.timestamp, e.data.data.get(), e.data.size);
      } else {
        batch_.Control();
        control_.push_back(std::move(e));
      }
    }
    const double n = static_cast<double>(events.size());
    events.clear();
    return n * 8 + flags;
  }

  Napi::Value DrainEvents(Napi::Env env) {
    auto& events = session_->events();
    Napi::Array arr = Napi::Array::New(env, events.size());
    if (events.empty()) return arr;
    Keys keys(env);
    for (uint32_t i = 0; i < events.size(); ++i) arr.Set(i, ToJs(env, keys, events[i]));
    events.clear();
    return arr;
  }

  std::unique_ptr<rtmp::Session> session_;
  bool busy_ = false;
  std::vector<Event> control_;  // non-audio events of the last batch, for takeEvents()
  BatchBuffers batch_;  // the batch's audio bodies for JS (binding/rtmp_batch.h)
};

}  // namespace

void InitRtmpSession(Napi::Env env, Napi::Object exports, AddonState& state) {
  Napi::Function ctor = RtmpSession::DefineClass(
      env, "RtmpSession",
      {RtmpSession::InstanceMethod<&RtmpSession::Push>("push"),
       RtmpSession::InstanceMethod<&RtmpSession::Buffers>("buffers"),
       RtmpSession::InstanceMethod<&RtmpSession::TakeEvents>("takeEvents"),
       RtmpSession::InstanceMethod<&RtmpSession::End>("end"),
       RtmpSession::InstanceMethod<&RtmpSession::TakeOutput>("takeOutput"),
       RtmpSession::InstanceMethod<&RtmpSession::AcceptPublish>("acceptPublish"),
       RtmpSession::InstanceMethod<&RtmpSession::RejectPublish>("rejectPublish"),
       RtmpSession::InstanceAccessor<&RtmpSession::BytesIn>("bytesIn")});
  state.rtmpSession = Napi::Persistent(ctor);
  exports.Set("RtmpSession", ctor);
}

}  // namespace skylark::binding
