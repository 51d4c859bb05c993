// class RtmpSession for JS: a thin wrapper over skylark::rtmp::Session (native/core/rtmp), the
// sans-I/O RTMP server session of one TCP connection. Shapes: docs/native-api.md.
//
// Protocol problems never throw: they come back as {type:'error', code, message} events (sticky).
// Wrong JS arguments throw a TypeError. Audio bodies go to JS as external Buffers that own the
// reassembled message storage (freed by the Buffer's finalizer): no copy after reassembly.
#include "binding/addon_state.h"
#include "core/rtmp/session.h"

#include <cmath>

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
    if (info.Length() > 0 && !info[0].IsUndefined() && !info[0].IsNull()) {
      if (!info[0].IsObject()) {
        Napi::TypeError::New(env, "RtmpSession: options must be an object").ThrowAsJavaScriptException();
        return;
      }
      Napi::Value v = info[0].As<Napi::Object>().Get("maxMessageBytes");
      if (!v.IsUndefined()) {
        double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
        if (!(d >= 1024 && d <= 0xFFFFFF) || std::floor(d) != d) {
          Napi::TypeError::New(env, "RtmpSession: maxMessageBytes must be an integer in 1024..16777215")
              .ThrowAsJavaScriptException();
          return;
        }
        opts.max_message_bytes = static_cast<uint32_t>(d);
      }
    }
    session_ = std::make_unique<rtmp::Session>(opts);
  }

  /** push(data: Uint8Array): RtmpEvent[] — feeds socket bytes (any split, even one byte at a
   *  time); returns the events they completed, possibly []. After an error event, returns []. */
  Napi::Value Push(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    SK_REQUIRE(env, info.Length() >= 1 && info[0].IsTypedArray() &&
                        info[0].As<Napi::TypedArray>().TypedArrayType() == napi_uint8_array,
               "RtmpSession.push: data must be a Uint8Array");
    SK_REQUIRE(env, !busy_, "RtmpSession.push: re-entrant call");
    Busy b(busy_);
    Napi::Uint8Array a = info[0].As<Napi::Uint8Array>();
    session_->push(a.Data(), a.ElementLength());
    return DrainEvents(env);
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

  // Property names of the hot (audio) event, created once per drain instead of once per event
  // (NAPI_VERSION 8 cannot hold references to strings across calls).
  struct Keys {
    explicit Keys(Napi::Env env)
        : type(Napi::String::New(env, "type")), timestamp(Napi::String::New(env, "timestamp")),
          data(Napi::String::New(env, "data")), audio(Napi::String::New(env, "audio")) {}
    Napi::String type, timestamp, data, audio;
  };

  static void FreeMessage(Napi::Env, uint8_t* d) { delete[] d; }

  static Napi::Value ToJs(Napi::Env env, const Keys& k, Event& e) {
    Napi::Object o = Napi::Object::New(env);
    switch (e.type) {
      case Event::Type::kAudio: {
        o.Set(k.type, k.audio);
        o.Set(k.timestamp, Napi::Number::New(env, e.timestamp));
        uint32_t size = e.data.size;
        uint8_t* p = e.data.data.release();  // ownership moves to the Buffer's finalizer
        o.Set(k.data, Napi::Buffer<uint8_t>::New(env, p, size, FreeMessage));
        break;
      }
      case Event::Type::kConnect: {
        o.Set("type", "connect");
        o.Set("app", e.app);
        o.Set("tcUrl", e.tc_url);
        o.Set("flashVer", e.flash_ver);
        Napi::Array list = Napi::Array::New(env, e.four_cc_list.size());
        for (uint32_t i = 0; i < e.four_cc_list.size(); ++i) list.Set(i, e.four_cc_list[i]);
        o.Set("fourCcList", list);
        break;
      }
      case Event::Type::kPublish:
        o.Set("type", "publish");
        o.Set("streamName", e.stream_name);
        o.Set("publishType", e.publish_type);
        o.Set("streamId", Napi::Number::New(env, e.stream_id));
        break;
      case Event::Type::kUnpublish:
        o.Set("type", "unpublish");
        o.Set("streamId", Napi::Number::New(env, e.stream_id));
        break;
      case Event::Type::kMetadata: {
        o.Set("type", "metadata");
        Napi::Object values = Napi::Object::New(env);
        for (auto& mv : e.metadata) {
          switch (mv.kind) {
            case rtmp::MetaValue::Kind::kNumber: values.Set(mv.key, Napi::Number::New(env, mv.number)); break;
            case rtmp::MetaValue::Kind::kBoolean: values.Set(mv.key, Napi::Boolean::New(env, mv.boolean)); break;
            case rtmp::MetaValue::Kind::kString: values.Set(mv.key, mv.str); break;
          }
        }
        o.Set("values", values);
        break;
      }
      case Event::Type::kError: {
        o.Set("type", "error");
        std::string_view code = util::status_code(e.code);
        o.Set("code", Napi::String::New(env, code.data(), code.size()));
        o.Set("message", e.message);
        break;
      }
    }
    return o;
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
};

}  // namespace

void InitRtmpSession(Napi::Env env, Napi::Object exports, AddonState& state) {
  Napi::Function ctor = RtmpSession::DefineClass(
      env, "RtmpSession",
      {RtmpSession::InstanceMethod<&RtmpSession::Push>("push"),
       RtmpSession::InstanceMethod<&RtmpSession::End>("end"),
       RtmpSession::InstanceMethod<&RtmpSession::TakeOutput>("takeOutput"),
       RtmpSession::InstanceMethod<&RtmpSession::AcceptPublish>("acceptPublish"),
       RtmpSession::InstanceMethod<&RtmpSession::RejectPublish>("rejectPublish"),
       RtmpSession::InstanceAccessor<&RtmpSession::BytesIn>("bytesIn")});
  state.rtmpSession = Napi::Persistent(ctor);
  exports.Set("RtmpSession", ctor);
}

}  // namespace skylark::binding
