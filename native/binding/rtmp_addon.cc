// class RtmpAddon — the JS face of the RTMP ingest listener. The sockets, the caps and the read
// scheduler are io::RtmpServer (native/io, plain C++ on Node's own libuv loop, no thread); this
// class turns JS calls into calls on it, and its events into one `dispatch` call each. A routed
// connection's audio goes from the read buffer through the RTMP session into its Segmenter in C++
// (no JS per message), and JS hears only of parts and segments (docs/native-api.md "RtmpServer";
// docs/decisions.md "Ingest I/O").
//
//   new RtmpAddon({ maxMessageBytes?, maxAudioMessageBytes?, prePublishBytes?, maxConnections?,
//                    maxConnectionsPerIp?, publishTimeoutMs?, mergeReadsMs? }, dispatch)
//       Limits (each hit is reported as LIMIT with its cause):
//       maxConnections (default 1000) / maxConnectionsPerIp (default 10): integers 1..1000000;
//           connections open at once (accept to socket close), in total / per peer IP. One over a
//           cap is closed at accept, before any session exists (rtmp_connections,
//           rtmp_connections_per_ip).
//       publishTimeoutMs: integer 100..3600000 (default 15000). A connection whose publish was not
//           accepted (acceptPublish) this long after accept is closed (rtmp_publish_timeout);
//           bytes do not reset it. Checked by the 1 s sweep. Afterwards only setTimeout applies.
//       prePublishBytes: integer 4096..2^30 (default 65536). Until its publish is accepted, the
//           bytes held for a connection (partial messages, refused before allocation; replies
//           not written yet) stay within it, else it is closed (rtmp_prepublish_bytes).
//       maxMessageBytes: integer 1024..16777215 (default 1 MiB): any one message.
//       maxAudioMessageBytes: integer 16..16777215 (default: maxMessageBytes). A longer audio
//           message is a session error message_too_large (delivered in the READ batch like any
//           protocol error; JS closes) and reported once as audio_frame_bytes.
//       mergeReadsMs: integer 0..1000 (default 0). With it, a routed connection (route(..., merge
//       true)) is not read as its bytes arrive but every mergeReadsMs by one timer for all of them
//       (merged reads, as SRS's `mr`): one wakeup carries several messages of every routed
//       publisher. Near its segmenter's next part/segment cut it is read as bytes arrive again,
//       so the frame that closes a part is never held back.
//   dispatch(kind, id, a, b, c) — every callback into JS, with kind:
//     0 CONNECTION  (id, remote: string)
//     1 READ        (id, count: number, control: RtmpControlEvent[] | undefined,
//                   segmenterEvents: SegmenterEvent[] | undefined, flags: number)
//                   count audio/control slots in the batch buffers (buffers(): meta, arena —
//                   binding/rtmp_batch.h); flags: 1 = buffers replaced, 2 = the batch's audio was
//                   already pushed to the routed segmenter
//     2 CLOSED      (id, reason: string, error: {code, message} | null) — the peer closed or the
//                   socket failed (not sent for close() from JS)
//     3 TIMEOUT     (id) — no bytes for setTimeout(id, ms); sent once per silent period
//     4 LIMIT       (id, cause: string, remote: string) — a cap was hit: cause rtmp_connections |
//                   rtmp_connections_per_ip (id 0: refused at accept, never announced) |
//                   rtmp_publish_timeout | rtmp_prepublish_bytes (the server closed it: CLOSED
//                   (id, "limit: <cause>", null) follows at once) | audio_frame_bytes (the READ
//                   batch with the session's message_too_large error follows)
//   READ audio slots carry each message's kind: meta[1+2i] = timestamp + kind * 2^32 with kind
//     0 sequence header (AAC AudioSpecificConfig / E-RTMP SequenceStart), 1 coded frame, 2 anything
//     else (E-RTMP SequenceEnd, MultichannelConfig, unparsable or multitrack headers).
//   listen(host: string /* an IP literal */, port: number, backlog: number): number  — bound port;
//       throws Error "listen <host>:<port>: EADDRINUSE ..." (with `code`) on failure
//   close(): void                         — stops listening and closes every connection
//   buffers(): [meta: ArrayBuffer, arena: ArrayBuffer]
//   acceptPublish(id) / rejectPublish(id, code, description) — the reply is written at once
//   setTimeout(id, ms)                    — 0 = none
//   route(id, segmenter | null, frames: boolean, merge: boolean) — from the next read, audio goes
//       to `segmenter` in C++; READ batches then carry only sequence headers, or every frame when
//       `frames`; `merge`: merged reads allowed (while the segmenter's next cut is far)
//   audioBytes(id): number               — FLV audio body bytes received (bitrate watch)
//   closeConnection(id)                   — writes pending replies, then FIN; forced after 2 s
//
// Unknown ids are ignored (the connection is gone). Wrong argument types throw TypeError.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "binding/addon_state.h"
#include "binding/guards.h"
#include "binding/rtmp_batch.h"
#include "binding/segmenter.h"
#include "core/codec/flv_audio.h"
#include "io/rtmp_server.h"

namespace skylark::binding {
namespace {

using rtmp::Event;

constexpr int kConnection = 0, kRead = 1, kClosed = 2, kTimeout = 3, kLimit = 4;
constexpr uint32_t kKindSequenceHeader = 0, kKindFrame = 1, kKindOther = 2;
constexpr uint32_t kBuffersChanged = 1, kSegmented = 2;

// What an audio message is, as the segmenter's own tag parser reads it: a sequence header (AAC
// AudioSpecificConfig, E-RTMP SequenceStart), a coded frame, or anything else.
uint32_t AudioKind(const uint8_t* d, size_t n) {
  codec::FlvAudioHeader h;
  if (codec::parse_flv_audio_header(d, n, &h) != codec::FlvAudioStatus::kOk) return kKindOther;
  switch (h.packet) {
    case codec::FlvAudioPacket::kSequenceHeader: return kKindSequenceHeader;
    case codec::FlvAudioPacket::kCodedFrame: return kKindFrame;
    default: return kKindOther;
  }
}

// A route: the JS Segmenter a connection's audio goes to (held by a strong reference while the
// I/O layer owns the route), and whether JS still wants every frame.
class SegmenterRoute final : public io::AudioSink {
 public:
  SegmenterRoute(NativeSegmenterInput* segmenter, Napi::Object object, bool frames)
      : segmenter_(segmenter), ref_(Napi::Persistent(object)), frames_(frames) {}

  void push_audio(uint32_t timestamp_ms, const uint8_t* data, size_t size) override {
    segmenter_->PushNative(timestamp_ms, data, size);  // false (busy: a JS call on it runs): dropped
  }
  uint32_t ms_to_next_cut() const override { return segmenter_->MsToNextCut(); }

  NativeSegmenterInput* segmenter() const { return segmenter_; }
  bool frames() const { return frames_; }

 private:
  NativeSegmenterInput* segmenter_;
  Napi::ObjectReference ref_;
  bool frames_;
};

// Reads the options object into `out`; false with a pending TypeError when it is wrong.
bool ParseOptions(Napi::Env env, Napi::Object o, io::RtmpServerOptions* out) {
  constexpr const char* kWho = "RtmpAddon";
  rtmp::SessionOptions& s = out->session;
  return OptionalIntegerFor(kWho, env, o, "maxMessageBytes", 1024, 0xFFFFFF, &s.max_message_bytes) &&
         OptionalIntegerFor(kWho, env, o, "maxAudioMessageBytes", 16, 0xFFFFFF, &s.max_audio_message_bytes) &&
         OptionalIntegerFor(kWho, env, o, "prePublishBytes", 4096, 1 << 30, &s.pre_publish_bytes) &&
         OptionalIntegerFor(kWho, env, o, "maxConnections", 1, 1000000, &out->max_connections) &&
         OptionalIntegerFor(kWho, env, o, "maxConnectionsPerIp", 1, 1000000, &out->max_connections_per_ip) &&
         OptionalIntegerFor(kWho, env, o, "publishTimeoutMs", 100, 3600000, &out->publish_timeout_ms) &&
         OptionalIntegerFor(kWho, env, o, "mergeReadsMs", 0, 1000, &out->merge_reads_ms);
}

class RtmpAddon : public Napi::ObjectWrap<RtmpAddon>, private io::RtmpServerEvents {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "RtmpAddon",
                       {InstanceMethod<&RtmpAddon::Listen>("listen"),
                        InstanceMethod<&RtmpAddon::Close>("close"),
                        InstanceMethod<&RtmpAddon::Buffers>("buffers"),
                        InstanceMethod<&RtmpAddon::AcceptPublish>("acceptPublish"),
                        InstanceMethod<&RtmpAddon::RejectPublish>("rejectPublish"),
                        InstanceMethod<&RtmpAddon::SetTimeout>("setTimeout"),
                        InstanceMethod<&RtmpAddon::Route>("route"),
                        InstanceMethod<&RtmpAddon::AudioBytes>("audioBytes"),
                        InstanceMethod<&RtmpAddon::CloseConnection>("closeConnection")});
  }

  explicit RtmpAddon(const Napi::CallbackInfo& info) : Napi::ObjectWrap<RtmpAddon>(info) {
    Napi::Env env = info.Env();
    constexpr const char* kUsage = "RtmpAddon(options, dispatch): options must be an object and dispatch a function";
    if (!ArgObject(info, 0, kUsage) || !ArgFunction(info, 1, kUsage)) return;
    io::RtmpServerOptions options;
    if (!ParseOptions(env, info[0].As<Napi::Object>(), &options)) return;
    uv_loop_t* loop = nullptr;
    if (napi_get_uv_event_loop(env, &loop) != napi_ok || !loop) {
      Napi::Error::New(env, "RtmpAddon: no libuv loop").ThrowAsJavaScriptException();
      return;
    }
    dispatch_ = Napi::Persistent(info[1].As<Napi::Function>());
    async_ = std::make_unique<Napi::AsyncContext>(env, "SkylarkRtmpAddon");
    server_.reset(new io::RtmpServer(loop, options, static_cast<io::RtmpServerEvents&>(*this)));
    napi_add_async_cleanup_hook(env, &RtmpAddon::OnEnvCleanup, this, &cleanup_);
  }

  ~RtmpAddon() override {
    if (cleanup_) napi_remove_async_cleanup_hook(cleanup_);
  }

 private:
  // ── JS methods ──────────────────────────────────────────────────────────────────────────────

  Napi::Value Listen(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    constexpr const char* kUsage = "RtmpAddon.listen(host, port, backlog): host must be a string, port and backlog numbers";
    std::string host;
    double port = 0, backlog = 0;
    SK_GUARD(ArgString(info, 0, kUsage, &host) && ArgNumber(info, 1, kUsage, &port) && ArgNumber(info, 2, kUsage, &backlog));
    SK_GUARD(Require(env, server_->can_listen(), "RtmpAddon.listen: already listening or closed"));
    SK_GUARD(Require(env, port >= 0 && port <= 65535 && std::floor(port) == port,
                     "RtmpAddon.listen: port must be an integer in 0..65535"));
    backlog = !(backlog >= 1) ? 1 : backlog > 65535 ? 65535 : backlog;
    int bound = 0;
    const int err = server_->listen(host, static_cast<int>(port), static_cast<int>(backlog), &bound);
    if (err != 0) {
      Napi::Error e = Napi::Error::New(env, "listen " + host + ":" + std::to_string(static_cast<int>(port)) + ": " +
                                                uv_err_name(err) + " " + uv_strerror(err));
      e.Set("code", Napi::String::New(env, uv_err_name(err)));
      e.ThrowAsJavaScriptException();
      return env.Undefined();
    }
    return Napi::Number::New(env, bound);
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    server_->close();
    return info.Env().Undefined();
  }

  Napi::Value Buffers(const Napi::CallbackInfo& info) { return batch_.Pair(info.Env()); }

  Napi::Value AcceptPublish(const Napi::CallbackInfo& info) {
    uint32_t id = 0;
    SK_GUARD(ConnectionId(info, &id));
    server_->accept_publish(id);
    return info.Env().Undefined();
  }

  Napi::Value RejectPublish(const Napi::CallbackInfo& info) {
    constexpr const char* kUsage = "RtmpAddon.rejectPublish(id, code, description): code and description must be strings";
    std::string code, description;
    uint32_t id = 0;
    SK_GUARD(ArgString(info, 1, kUsage, &code) && ArgString(info, 2, kUsage, &description));
    SK_GUARD(ConnectionId(info, &id));
    server_->reject_publish(id, code, description);
    return info.Env().Undefined();
  }

  Napi::Value SetTimeout(const Napi::CallbackInfo& info) {
    double ms = 0;
    uint32_t id = 0;
    SK_GUARD(ArgNumber(info, 1, "RtmpAddon.setTimeout(id, ms): ms must be a number", &ms));
    SK_GUARD(ConnectionId(info, &id));
    server_->set_timeout(id, ms > 0 && std::isfinite(ms) ? static_cast<uint64_t>(ms) : 0);
    return info.Env().Undefined();
  }

  Napi::Value Route(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    constexpr const char* kUsage = "RtmpAddon.route(id, segmenter, frames, merge): frames and merge must be booleans";
    bool frames = false, merge = false;
    SK_GUARD(RequireArgs(info, 4, kUsage) && ArgBool(info, 2, kUsage, &frames) && ArgBool(info, 3, kUsage, &merge));
    NativeSegmenterInput* segmenter = nullptr;
    if (!info[1].IsNull() && !info[1].IsUndefined()) {
      segmenter = UnwrapSegmenter(env, info[1]);
      SK_GUARD(Require(env, segmenter != nullptr, "RtmpAddon.route: segmenter must be a Segmenter or null"));
    }
    uint32_t id = 0;
    SK_GUARD(ConnectionId(info, &id));
    std::unique_ptr<io::AudioSink> route;
    if (segmenter) route = std::make_unique<SegmenterRoute>(segmenter, info[1].As<Napi::Object>(), frames);
    server_->route(id, std::move(route), merge);
    return env.Undefined();
  }

  Napi::Value AudioBytes(const Napi::CallbackInfo& info) {
    uint32_t id = 0;
    SK_GUARD(ConnectionId(info, &id));
    return Napi::Number::New(info.Env(), static_cast<double>(server_->audio_bytes(id)));
  }

  Napi::Value CloseConnection(const Napi::CallbackInfo& info) {
    uint32_t id = 0;
    SK_GUARD(ConnectionId(info, &id));
    server_->close_connection(id);
    return info.Env().Undefined();
  }

  // info[0], the connection id.
  static bool ConnectionId(const Napi::CallbackInfo& info, uint32_t* id) {
    double d = 0;
    if (!ArgNumber(info, 0, "RtmpAddon: connection id must be a number", &d)) return false;
    *id = info[0].As<Napi::Number>().Uint32Value();
    return true;
  }

  // ── io::RtmpServerEvents: every call into JS ─────────────────────────────────────────────────

  void on_connection(uint32_t id, const std::string& remote) override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    Dispatch({Napi::Number::New(env, kConnection), Napi::Number::New(env, id), Napi::String::New(env, remote)});
  }

  // One READ dispatch: the control events, and the audio JS wants (all of it unless routed
  // without frames: then sequence headers only), in message order, plus what the routed
  // segmenter made of the read's audio.
  void on_read(uint32_t id, std::vector<Event>& events, io::AudioSink* sink) override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    // Only this binding routes connections: every sink is a SegmenterRoute.
    const auto* route = static_cast<const SegmenterRoute*>(sink);
    NativeSegmenterInput* segmenter = route ? route->segmenter() : nullptr;
    const bool frames = route == nullptr || route->frames();
    size_t count = 0, audio_bytes = 0;
    bool control = false;
    to_js_.assign(events.size(), 1);
    kinds_.resize(events.size());
    for (size_t i = 0; i < events.size(); ++i) {
      const Event& e = events[i];
      if (e.type != Event::Type::kAudio) {
        ++count;
        control = true;
        continue;
      }
      kinds_[i] = static_cast<uint8_t>(AudioKind(e.data.data.get(), e.data.size));
      if (frames || kinds_[i] == kKindSequenceHeader) {
        ++count;
        audio_bytes += e.data.size;
      } else {
        to_js_[i] = 0;
      }
    }
    const bool has_segmenter_events = segmenter && segmenter->HasNativeEvents();
    if (count == 0 && !has_segmenter_events) return;
    // The route may go away during the dispatch (route() or close from JS): not used after it.
    napi_value segmenter_events =
        has_segmenter_events ? segmenter->TakeNativeEvents(env) : static_cast<napi_value>(env.Undefined());
    uint32_t flags = segmenter ? kSegmented : 0;
    if (batch_.Ensure(env, count, audio_bytes)) flags |= kBuffersChanged;
    Napi::Array ctl = control ? Napi::Array::New(env) : Napi::Array();
    uint32_t k = 0;
    batch_.Begin(audio_bytes);
    for (size_t i = 0; i < events.size(); ++i) {
      if (!to_js_[i]) continue;
      const Event& e = events[i];
      if (e.type == Event::Type::kAudio) {
        batch_.Audio(e.timestamp, e.data.data.get(), e.data.size, kinds_[i]);
      } else {
        batch_.Control();
        ctl.Set(k++, ControlEventToJs(env, e));
      }
    }
    Dispatch({Napi::Number::New(env, kRead), Napi::Number::New(env, id), Napi::Number::New(env, static_cast<double>(count)),
              control ? static_cast<napi_value>(ctl) : static_cast<napi_value>(env.Undefined()), segmenter_events,
              Napi::Number::New(env, flags)});
  }

  void on_closed(uint32_t id, const std::string& reason, std::string_view code, const std::string& message) override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    napi_value error = env.Null();
    if (!code.empty()) {
      Napi::Object o = Napi::Object::New(env);
      o.Set("code", Napi::String::New(env, code.data(), code.size()));
      o.Set("message", message);
      error = o;
    }
    Dispatch({Napi::Number::New(env, kClosed), Napi::Number::New(env, id), Napi::String::New(env, reason), error});
  }

  void on_timeout(uint32_t id) override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    Dispatch({Napi::Number::New(env, kTimeout), Napi::Number::New(env, id)});
  }

  void on_limit(uint32_t id, const char* cause, const std::string& remote) override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    Dispatch({Napi::Number::New(env, kLimit), Napi::Number::New(env, id), Napi::String::New(env, cause),
              Napi::String::New(env, remote)});
  }

  // Each open libuv handle refers to this object until its close callback. When the environment
  // is tearing down, the last close ends the cleanup hook (then this object may be deleted).
  void on_handle_opened() override { Ref(); }
  void on_handle_closed(bool none_open) override {
    Unref();
    if (tearing_down_ && none_open) FinishCleanup();
  }

  // Calls dispatch(kind, id, ...args) as a top-level callback (microtasks and nextTicks run after
  // it). A throw becomes an uncaught exception, as in any other I/O callback. When JS cannot run
  // any more (the environment is stopping, e.g. its worker is ending) the call is dropped.
  void Dispatch(std::initializer_list<napi_value> args) {
    napi_env env = Env();
    napi_value result = nullptr;
    if (napi_make_callback(env, *async_, Value(), dispatch_.Value(), args.size(), args.begin(), &result) == napi_ok)
      return;
    bool pending = false;
    if (napi_is_exception_pending(env, &pending) != napi_ok || !pending) return;
    napi_value error = nullptr;
    napi_get_and_clear_last_exception(env, &error);
    napi_fatal_exception(env, error);
  }

  // The environment (main thread or worker) is tearing down: close every socket and timer, and
  // keep it (and so this code) until libuv has run their close callbacks (an async cleanup hook:
  // Node runs the loop until FinishCleanup).
  static void OnEnvCleanup(napi_async_cleanup_hook_handle, void* arg) {
    auto* self = static_cast<RtmpAddon*>(arg);
    self->tearing_down_ = true;
    self->server_->close();
    if (self->server_->open_handles() == 0) self->FinishCleanup();
  }

  // Ends the cleanup hook; may delete this object (nothing may follow it).
  void FinishCleanup() {
    napi_async_cleanup_hook_handle hook = cleanup_;
    cleanup_ = nullptr;
    if (hook) napi_remove_async_cleanup_hook(hook);
  }

  Napi::FunctionReference dispatch_;
  std::unique_ptr<Napi::AsyncContext> async_;
  // Released (not deleted) with this object: it lives on until libuv has closed its handles.
  std::unique_ptr<io::RtmpServer, io::RtmpServer::Releaser> server_;  // null only when the constructor threw
  napi_async_cleanup_hook_handle cleanup_ = nullptr;  // registered until the environment's teardown ends
  bool tearing_down_ = false;
  std::vector<uint8_t> to_js_;  // per event of a read: 1 = goes to JS
  std::vector<uint8_t> kinds_;  // per audio event of a read: its kind (kKind*)
  BatchBuffers batch_;          // the read's audio bodies for JS (binding/rtmp_batch.h)
};

}  // namespace

void InitRtmpAddon(Napi::Env env, Napi::Object exports, AddonState& state) {
  Napi::Function ctor = RtmpAddon::Define(env);
  state.rtmpAddon = Napi::Persistent(ctor);
  exports.Set("RtmpAddon", ctor);
}

}  // namespace skylark::binding
