// class RtmpServer — the RTMP ingest listener with its socket I/O in C++, on Node's own libuv loop
// (the same loop Node and uWebSockets.js run on; no thread). Each accepted TCP connection gets a
// sans-I/O skylark::rtmp::Session (native/core/rtmp); its replies are written from here. Why: a
// publisher sends one message per ~21 ms, and reading it through a node:net Socket costs a
// stream-machinery round in JS per message. Here a socket read costs no JS at all once the
// connection is *routed* to its stream's Segmenter: audio goes from the read buffer through the
// RTMP session into the segmenter in C++, and JS hears only of parts and segments (docs/native-api.md
// "RtmpServer"; docs/decisions.md "Ingest I/O").
//
//   new RtmpServer({ maxMessageBytes?, maxAudioMessageBytes?, prePublishBytes?, maxConnections?,
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
//           not yet written) stay within it, else it is closed (rtmp_prepublish_bytes).
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
//                    segmenterEvents: SegmenterEvent[] | undefined, flags: number)
//                   count audio/control slots in the batch buffers (buffers(): meta, arena — the
//                   RtmpSession batch layout); flags: 1 = buffers replaced, 2 = the batch's audio
//                   was already pushed to the routed segmenter
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
//       throws Error "listen <host>:<port>: EADDRINUSE ..." on failure
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
#include <uv.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "binding/addon_state.h"
#include "binding/rtmp_batch.h"
#include "binding/segmenter.h"
#include "core/codec/flv_audio.h"
#include "core/rtmp/session.h"
#include "core/util/ids.h"

namespace skylark::binding {
namespace {

using rtmp::Event;

constexpr int kConnection = 0, kRead = 1, kClosed = 2, kTimeout = 3, kLimit = 4;
constexpr uint32_t kKindSequenceHeader = 0, kKindFrame = 1, kKindOther = 2;
constexpr uint32_t kDefaultMaxConnections = 1000, kDefaultMaxConnectionsPerIp = 10;
constexpr uint32_t kDefaultPublishTimeoutMs = 15000, kDefaultPrePublishBytes = 64 * 1024;
constexpr uint32_t kBuffersChanged = 1, kSegmented = 2;
constexpr size_t kReadBufferBytes = 64 * 1024;
constexpr size_t kMaxQueuedWriteBytes = 1024 * 1024;  // a peer that does not read our replies
constexpr uint64_t kCloseGraceMs = 2000;
constexpr uint64_t kSweepMs = 1000;
constexpr uint64_t kMergeSlackMs = 50;  // publisher send jitter + one frame, before a cut
constexpr uint64_t kCutEarlyMs = 25;    // the timed read comes this much before the closing frame
                                        // is due (the newest frame read may be a frame old)

class RtmpServer;

struct Conn {
  uv_tcp_t tcp;  // tcp.data = this
  RtmpServer* server = nullptr;
  uint32_t id = 0;
  std::string remote;        // "ip:port"
  std::string ip;            // the per-IP count's key
  bool counted = false;      // in the connection counts (until the handle's close callback)
  uint64_t accepted_at = 0;  // uv_now, ms: the publish deadline counts from here
  bool audio_limit_sent = false;
  std::unique_ptr<rtmp::Session> session;
  bool closing = false;      // no more reads, writes or callbacks
  bool handle_open = true;   // uv_close not called yet
  uint64_t closing_since = 0;
  uint64_t last_read = 0;    // uv_now, ms
  uint64_t timeout_ms = 0;
  bool timeout_sent = false;
  uint64_t audio_bytes = 0;
  // Routing: audio pushed to this segmenter in C++ (strong reference to the JS object).
  NativeSegmenterInput* segmenter = nullptr;
  Napi::ObjectReference segmenter_ref;
  bool deliver_frames = true;
  bool merge_allowed = false;  // route(..., merge): lazy reads wanted (no JS consumer in a hurry)
  bool merged = false;         // read by the merge timer now, not by libuv as bytes arrive
  uint64_t merge_tick = 0;     // the last merge tick that read it (an id queued twice reads once)
  uint64_t due = 0;            // loop time of its timed read near a cut (0 = regular merged reads)
  bool cut_armed = false;      // the timed read for the coming cut is set (or done)
};

struct PendingClose {
  uint32_t id;
  std::string reason, code, message;
};

struct WriteReq {
  uv_write_t req;
  std::vector<uint8_t> bytes;
};

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

#define SK_THROW_TYPE(env, msg) \
  do { Napi::TypeError::New(env, msg).ThrowAsJavaScriptException(); return env.Undefined(); } while (0)
#define SK_REQUIRE(env, cond, msg) do { if (!(cond)) SK_THROW_TYPE(env, msg); } while (0)

class RtmpServer : public Napi::ObjectWrap<RtmpServer> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "RtmpServer",
                       {InstanceMethod<&RtmpServer::Listen>("listen"),
                        InstanceMethod<&RtmpServer::Close>("close"),
                        InstanceMethod<&RtmpServer::Buffers>("buffers"),
                        InstanceMethod<&RtmpServer::AcceptPublish>("acceptPublish"),
                        InstanceMethod<&RtmpServer::RejectPublish>("rejectPublish"),
                        InstanceMethod<&RtmpServer::SetTimeout>("setTimeout"),
                        InstanceMethod<&RtmpServer::Route>("route"),
                        InstanceMethod<&RtmpServer::AudioBytes>("audioBytes"),
                        InstanceMethod<&RtmpServer::CloseConnection>("closeConnection")});
  }

  explicit RtmpServer(const Napi::CallbackInfo& info) : Napi::ObjectWrap<RtmpServer>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 2 || !info[0].IsObject() || !info[1].IsFunction()) {
      Napi::TypeError::New(env, "RtmpServer(options, dispatch): options must be an object and dispatch a function")
          .ThrowAsJavaScriptException();
      return;
    }
    session_options_.pre_publish_bytes = kDefaultPrePublishBytes;
    if (!ParseSessionOptions(env, info[0], "RtmpServer", &session_options_)) return;
    Napi::Object opts = info[0].As<Napi::Object>();
    if (!UintOption(env, opts, "RtmpServer", "maxConnections", 1, 1000000, &max_connections_) ||
        !UintOption(env, opts, "RtmpServer", "maxConnectionsPerIp", 1, 1000000, &max_connections_per_ip_) ||
        !UintOption(env, opts, "RtmpServer", "publishTimeoutMs", 100, 3600000, &publish_timeout_ms_))
      return;
    Napi::Value merge = opts.Get("mergeReadsMs");
    if (!merge.IsUndefined()) {
      const double d = merge.IsNumber() ? merge.As<Napi::Number>().DoubleValue() : NAN;
      if (!(d >= 0 && d <= 1000) || std::floor(d) != d) {
        Napi::TypeError::New(env, "RtmpServer: mergeReadsMs must be an integer in 0..1000").ThrowAsJavaScriptException();
        return;
      }
      merge_ms_ = static_cast<uint64_t>(d);
    }
    dispatch_ = Napi::Persistent(info[1].As<Napi::Function>());
    async_ = std::make_unique<Napi::AsyncContext>(env, "SkylarkRtmpServer");
    if (napi_get_uv_event_loop(env, &loop_) != napi_ok || !loop_) {
      Napi::Error::New(env, "RtmpServer: no libuv loop").ThrowAsJavaScriptException();
      return;
    }
    read_buffer_.reset(new char[kReadBufferBytes]);
    napi_add_env_cleanup_hook(env, &RtmpServer::OnEnvCleanup, this);
    cleanup_hook_ = true;
  }

  ~RtmpServer() override {
    if (cleanup_hook_) napi_remove_env_cleanup_hook(Env(), &RtmpServer::OnEnvCleanup, this);
  }

 private:
  // ── JS methods ──────────────────────────────────────────────────────────────────────────────

  Napi::Value Listen(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    SK_REQUIRE(env, info.Length() >= 3 && info[0].IsString() && info[1].IsNumber() && info[2].IsNumber(),
               "RtmpServer.listen(host, port, backlog): host must be a string, port and backlog numbers");
    SK_REQUIRE(env, !listening_ && !closed_, "RtmpServer.listen: already listening or closed");
    const std::string host = info[0].As<Napi::String>().Utf8Value();
    const double port = info[1].As<Napi::Number>().DoubleValue();
    const int backlog = std::clamp(static_cast<int>(info[2].As<Napi::Number>().DoubleValue()), 1, 65535);
    SK_REQUIRE(env, port >= 0 && port <= 65535 && std::floor(port) == port, "RtmpServer.listen: port must be an integer in 0..65535");
    sockaddr_storage addr{};
    int err = host.find(':') != std::string::npos
                  ? uv_ip6_addr(host.c_str(), static_cast<int>(port), reinterpret_cast<sockaddr_in6*>(&addr))
                  : uv_ip4_addr(host.c_str(), static_cast<int>(port), reinterpret_cast<sockaddr_in*>(&addr));
    if (err == 0) err = uv_tcp_init(loop_, &listener_);
    if (err != 0) {
      closed_ = true;
      return ThrowUv(env, host, port, err);
    }
    listener_.data = this;
    listener_open_ = true;
    Ref();  // the listener handle refers to this object until its close callback
    err = uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&addr), 0);
    if (err == 0) err = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), backlog, &RtmpServer::OnConnection);
    if (err != 0) {
      closed_ = true;  // a failed server is not reused: make a new one
      CloseListener();
      return ThrowUv(env, host, port, err);
    }
    listening_ = true;
    sockaddr_storage bound{};
    int len = sizeof(bound);
    uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&bound), &len);
    const int bound_port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    return Napi::Number::New(env, bound_port);
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    CloseAll();
    return info.Env().Undefined();
  }

  Napi::Value Buffers(const Napi::CallbackInfo& info) { return batch_.Pair(info.Env()); }

  Napi::Value AcceptPublish(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Conn* c = ConnArg(info);
    if (!c) return env.Undefined();
    c->session->accept_publish();
    Flush(c, true);
    return env.Undefined();
  }

  Napi::Value RejectPublish(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    SK_REQUIRE(env, info.Length() >= 3 && info[1].IsString() && info[2].IsString(),
               "RtmpServer.rejectPublish(id, code, description): code and description must be strings");
    Conn* c = ConnArg(info);
    if (!c) return env.Undefined();
    c->session->reject_publish(info[1].As<Napi::String>().Utf8Value(), info[2].As<Napi::String>().Utf8Value());
    Flush(c, true);
    return env.Undefined();
  }

  Napi::Value SetTimeout(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    SK_REQUIRE(env, info.Length() >= 2 && info[1].IsNumber(), "RtmpServer.setTimeout(id, ms): ms must be a number");
    Conn* c = ConnArg(info);
    if (!c) return env.Undefined();
    const double ms = info[1].As<Napi::Number>().DoubleValue();
    c->timeout_ms = ms > 0 && std::isfinite(ms) ? static_cast<uint64_t>(ms) : 0;
    c->last_read = uv_now(loop_);
    c->timeout_sent = false;
    return env.Undefined();
  }

  Napi::Value Route(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    SK_REQUIRE(env, info.Length() >= 4 && info[2].IsBoolean() && info[3].IsBoolean(),
               "RtmpServer.route(id, segmenter, frames, merge): frames and merge must be booleans");
    NativeSegmenterInput* seg = nullptr;
    if (!info[1].IsNull() && !info[1].IsUndefined()) {
      seg = UnwrapSegmenter(env, info[1]);
      SK_REQUIRE(env, seg != nullptr, "RtmpServer.route: segmenter must be a Segmenter or null");
    }
    Conn* c = ConnArg(info);
    if (!c) return env.Undefined();
    c->segmenter = seg;
    if (seg) c->segmenter_ref = Napi::Persistent(info[1].As<Napi::Object>());
    else c->segmenter_ref.Reset();
    c->deliver_frames = info[2].As<Napi::Boolean>().Value();
    c->merge_allowed = info[3].As<Napi::Boolean>().Value();
    UpdateMerged(c);
    return env.Undefined();
  }

  Napi::Value AudioBytes(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Conn* c = ConnArg(info);
    return Napi::Number::New(env, c ? static_cast<double>(c->audio_bytes) : 0);
  }

  Napi::Value CloseConnection(const Napi::CallbackInfo& info) {
    Conn* c = ConnArg(info);
    if (c) BeginClose(c, /*graceful=*/true);
    return info.Env().Undefined();
  }

  // ── helpers ─────────────────────────────────────────────────────────────────────────────────

  Napi::Value ThrowUv(Napi::Env env, const std::string& host, double port, int err) {
    Napi::Error e = Napi::Error::New(env, "listen " + host + ":" + std::to_string(static_cast<int>(port)) + ": " +
                                              uv_err_name(err) + " " + uv_strerror(err));
    e.Set("code", Napi::String::New(env, uv_err_name(err)));
    e.ThrowAsJavaScriptException();
    return env.Undefined();
  }

  // The live connection of info[0], or nullptr (unknown id, closing).
  Conn* ConnArg(const Napi::CallbackInfo& info) {
    if (info.Length() < 1 || !info[0].IsNumber()) {
      Napi::TypeError::New(info.Env(), "RtmpServer: connection id must be a number").ThrowAsJavaScriptException();
      return nullptr;
    }
    auto it = conns_.find(static_cast<uint32_t>(info[0].As<Napi::Number>().Uint32Value()));
    if (it == conns_.end() || it->second->closing) return nullptr;
    return it->second;
  }

  // Calls dispatch(kind, id, ...args) as a top-level callback (microtasks and nextTicks run after
  // it). A throw becomes an uncaught exception, as in any other I/O callback.
  void Dispatch(std::initializer_list<napi_value> args) {
    Napi::Env env = Env();
    dispatch_.MakeCallback(Value(), args, *async_);
    if (env.IsExceptionPending()) {
      Napi::Error e = env.GetAndClearPendingException();
      napi_fatal_exception(env, e.Value());
    }
  }

  // Writes the session's pending replies: directly when nothing is queued, else queued. A failed
  // write closes the connection; JS hears CLOSED at once, or on the next loop turn when `from_js`
  // (a JS method is on the stack: no callback into JS from inside it).
  void Flush(Conn* c, bool from_js) {
    auto& out = c->session->output();
    if (out.empty() || c->closing) {
      if (c->closing) out.clear();
      return;
    }
    auto* stream = reinterpret_cast<uv_stream_t*>(&c->tcp);
    size_t done = 0;
    if (c->tcp.write_queue_size == 0) {
      uv_buf_t b = uv_buf_init(reinterpret_cast<char*>(out.data()), static_cast<unsigned>(out.size()));
      int n = uv_try_write(stream, &b, 1);
      if (n > 0) done = static_cast<size_t>(n);
      else if (n != UV_EAGAIN && n != UV_ENOSYS) {
        out.clear();
        PeerGone(c, std::string("socket error: ") + uv_strerror(n), from_js);
        return;
      }
    }
    if (done < out.size()) {
      auto* w = new WriteReq();
      w->bytes.assign(out.begin() + static_cast<std::ptrdiff_t>(done), out.end());
      w->req.data = c;
      uv_buf_t b = uv_buf_init(reinterpret_cast<char*>(w->bytes.data()), static_cast<unsigned>(w->bytes.size()));
      int err = uv_write(&w->req, stream, &b, 1, &RtmpServer::OnWrite);
      if (err != 0) {
        delete w;
        out.clear();
        PeerGone(c, std::string("socket error: ") + uv_strerror(err), from_js);
        return;
      }
    }
    out.clear();
    if (out.capacity() > 64 * 1024) out.shrink_to_fit();
    if (c->tcp.write_queue_size > kMaxQueuedWriteBytes) PeerGone(c, "peer does not read", from_js);
  }

  // Merged reads while the routed segmenter's next cut (part or segment end) is further away than
  // one merge period plus slack. Nearer, one read is timed a little before the frame that closes
  // the part is due (`left` ms of media from the newest frame, which arrived at most a frame
  // ago); if that read comes before the frame, the socket is read as bytes arrive until the cut.
  // So the frame that closes a part or segment is never held back (no LL-HLS latency).
  void UpdateMerged(Conn* c) {
    if (merge_ms_ == 0 || !c->merge_allowed || c->segmenter == nullptr) {
      c->due = 0;
      c->cut_armed = false;
      SetMerged(c, false);
      return;
    }
    const uint64_t left = c->segmenter->MsToNextCut();
    if (left > merge_ms_ + kMergeSlackMs) {
      c->due = 0;
      c->cut_armed = false;
      SetMerged(c, true);
      return;
    }
    if (!c->cut_armed && left > kCutEarlyMs) {
      c->cut_armed = true;
      c->due = uv_now(loop_) + left - kCutEarlyMs;
      SetMerged(c, true);
      if (c->due < timer_at_) ArmMergeTimer(c->due);
      return;
    }
    c->due = 0;
    SetMerged(c, false);
  }

  // (Re)arms the one-shot merge timer for loop time `at`.
  void ArmMergeTimer(uint64_t at) {
    const uint64_t now = uv_now(loop_);
    timer_at_ = at;
    uv_timer_start(&merge_timer_, &RtmpServer::OnMergeTick, at > now ? at - now : 0, 0);
    merge_running_ = true;
  }

  // Moves a connection between libuv reads (as bytes arrive) and the merge timer's reads.
  void SetMerged(Conn* c, bool on) {
    if (on == c->merged || c->closing) return;
    auto* stream = reinterpret_cast<uv_stream_t*>(&c->tcp);
    c->merged = on;
    if (on) {
      uv_read_stop(stream);
      merged_.push_back(c->id);
      InitTimer(&merge_timer_, &merge_init_);
      if (!merge_running_) {
        next_regular_ = uv_now(loop_) + merge_ms_;
        ArmMergeTimer(next_regular_);
      }
    } else {
      uv_read_start(stream, &RtmpServer::OnAlloc, &RtmpServer::OnRead);
    }
  }

  // Every merge_ms_: reads what each merged connection has (a short read means it is drained).
  static void OnMergeTick(uv_timer_t* t) {
    auto* self = static_cast<RtmpServer*>(t->data);
    self->merge_running_ = false;
    self->timer_at_ = UINT64_MAX;
    std::vector<uint32_t> ids;
    ids.swap(self->merged_);
    const uint64_t tick = ++self->merge_ticks_;
    const uint64_t now = uv_now(self->loop_);
    const bool regular = now >= self->next_regular_;
    if (regular) self->next_regular_ = now + self->merge_ms_;
    for (uint32_t id : ids) {
      auto it = self->conns_.find(id);
      if (it == self->conns_.end()) continue;
      Conn* c = it->second;
      if (c->closing || !c->merged || c->merge_tick == tick) continue;
      c->merge_tick = tick;
      // A connection with a timed read (near a cut) is read only then.
      if (c->due != 0 ? c->due <= now : regular) {
        c->due = 0;
        self->ReadMerged(c);
      }
      if (!c->closing && c->merged) self->merged_.push_back(id);
    }
    if (self->merged_.empty()) return;
    uint64_t at = self->next_regular_;
    for (uint32_t id : self->merged_) {
      auto it = self->conns_.find(id);
      if (it != self->conns_.end() && it->second->due != 0) at = std::min(at, it->second->due);
    }
    if (at < self->timer_at_) self->ArmMergeTimer(at);
  }

  void ReadMerged(Conn* c) {
    uv_os_fd_t fd;
    if (uv_fileno(reinterpret_cast<uv_handle_t*>(&c->tcp), &fd) != 0) return;
    for (int i = 0; i < 16 && !c->closing && c->merged; ++i) {
      const ssize_t n = ::read(fd, read_buffer_.get(), kReadBufferBytes);
      if (n > 0) {
        OnData(c, reinterpret_cast<const uint8_t*>(read_buffer_.get()), static_cast<size_t>(n));
        if (static_cast<size_t>(n) < kReadBufferBytes) return;
      } else if (n == 0) {
        OnEof(c);
        return;
      } else if (errno == EINTR) {
        continue;
      } else {
        if (errno != EAGAIN && errno != EWOULDBLOCK) PeerGone(c, std::string("socket error: ") + uv_strerror(uv_translate_sys_error(errno)), false);
        return;
      }
    }
  }

  // The peer closed its side: the session says whether it vanished mid-message.
  void OnEof(Conn* c) {
    c->session->end();
    std::string code, message;
    for (const Event& e : c->session->events()) {
      if (e.type != Event::Type::kError) continue;
      code = std::string(util::status_code(e.code));
      message = e.message;
    }
    c->session->events().clear();
    PeerGone(c, "peer closed", false, std::move(code), std::move(message));
  }

  // The peer is gone (EOF, socket error): JS hears CLOSED once (`code`/`message`: the session's
  // error when the peer vanished mid-message), then the handle closes.
  void PeerGone(Conn* c, const std::string& reason, bool defer, std::string code = {}, std::string message = {}) {
    if (c->closing) return;
    BeginClose(c, /*graceful=*/false);
    PendingClose p{c->id, reason, std::move(code), std::move(message)};
    if (defer) {
      deferred_.push_back(std::move(p));
      StartSweep(/*now=*/true);
      return;
    }
    NotifyClosed(p);
  }

  void NotifyClosed(const PendingClose& p) {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    napi_value err = env.Null();
    if (!p.code.empty()) {
      Napi::Object o = Napi::Object::New(env);
      o.Set("code", p.code);
      o.Set("message", p.message);
      err = o;
    }
    Dispatch({Napi::Number::New(env, kClosed), Napi::Number::New(env, p.id), Napi::String::New(env, p.reason), err});
  }

  // Tells JS a cap was hit (LIMIT). Only from libuv callbacks (never inside a JS call).
  void DispatchLimit(uint32_t id, const char* cause, const std::string& remote) {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    Dispatch({Napi::Number::New(env, kLimit), Napi::Number::New(env, id), Napi::String::New(env, cause),
              Napi::String::New(env, remote)});
  }

  // Closes a connection for a cap at once (no more reads, no grace): LIMIT, then CLOSED.
  void LimitClose(Conn* c, const char* cause) {
    if (c->closing) return;
    BeginClose(c, /*graceful=*/false);
    DispatchLimit(c->id, cause, c->remote);
    NotifyClosed(PendingClose{c->id, std::string("limit: ") + cause, {}, {}});
  }

  // Stops reading and closes the handle: after the queued writes and a FIN when graceful (forced
  // after kCloseGraceMs by the sweep), else at once.
  void BeginClose(Conn* c, bool graceful) {
    if (c->closing) return;
    c->closing = true;
    c->closing_since = uv_now(loop_);
    c->segmenter = nullptr;
    c->segmenter_ref.Reset();
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&c->tcp));
    if (graceful) {
      auto* req = new uv_shutdown_t();
      req->data = c;
      if (uv_shutdown(req, reinterpret_cast<uv_stream_t*>(&c->tcp), &RtmpServer::OnShutdown) == 0) return;
      delete req;
    }
    CloseHandle(c);
  }

  void CloseHandle(Conn* c) {
    if (!c->handle_open) return;
    c->handle_open = false;
    uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), &RtmpServer::OnConnClosed);
  }

  void CloseListener() {
    if (!listener_open_) return;
    listener_open_ = false;
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), &RtmpServer::OnListenerClosed);
  }

  void CloseAll() {
    closed_ = true;
    listening_ = false;
    CloseListener();
    for (auto& [id, c] : conns_) {
      c->closing = true;
      c->segmenter = nullptr;
      c->segmenter_ref.Reset();
      CloseHandle(c);
    }
    StopSweep();
    if (merge_init_ && !merge_closing_) {
      merge_closing_ = true;
      uv_timer_stop(&merge_timer_);
      merge_running_ = false;
      uv_close(reinterpret_cast<uv_handle_t*>(&merge_timer_), [](uv_handle_t* h) { static_cast<RtmpServer*>(h->data)->Unref(); });
    }
  }

  // Initializes one of the server's timers once: unref'd (connections and the listener keep the
  // loop alive, not timers), holding a reference to this object until its close callback.
  void InitTimer(uv_timer_t* t, bool* init) {
    if (*init) return;
    uv_timer_init(loop_, t);
    t->data = this;
    *init = true;
    Ref();
    uv_unref(reinterpret_cast<uv_handle_t*>(t));
  }

  // The sweep timer: every kSweepMs while connections exist; `now` = also on the next loop turn
  // (deferred CLOSED notifications).
  void StartSweep(bool now = false) {
    if (closed_ || (sweep_running_ && !now)) return;
    InitTimer(&sweep_, &sweep_init_);
    uv_timer_start(&sweep_, &RtmpServer::OnSweep, now ? 0 : kSweepMs, kSweepMs);
    sweep_running_ = true;
  }

  void StopSweep() {
    if (sweep_init_ && sweep_running_) uv_timer_stop(&sweep_);
    sweep_running_ = false;
    if (closed_ && sweep_init_ && !sweep_closing_) {
      sweep_closing_ = true;
      uv_close(reinterpret_cast<uv_handle_t*>(&sweep_), [](uv_handle_t* h) { static_cast<RtmpServer*>(h->data)->Unref(); });
    }
  }

  // One read: the session's events go to the routed segmenter (audio) and to JS (the rest, and
  // audio that is not routed or is wanted as frames) in one dispatch.
  void OnData(Conn* c, const uint8_t* data, size_t n) {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    c->last_read = uv_now(loop_);
    c->timeout_sent = false;
    c->session->push(data, n);
    auto& events = c->session->events();
    Flush(c, false);
    if (c->closing) {
      events.clear();
      return;
    }
    const rtmp::Session& session = *c->session;
    if (session.limit() == rtmp::Limit::kPrePublishBytes ||
        (!session.publish_accepted() && session_options_.pre_publish_bytes > 0 &&
         session.held_bytes() + c->tcp.write_queue_size > session_options_.pre_publish_bytes)) {
      events.clear();
      LimitClose(c, "rtmp_prepublish_bytes");
      return;
    }
    if (session.limit() == rtmp::Limit::kAudioMessageBytes && !c->audio_limit_sent) {
      c->audio_limit_sent = true;
      DispatchLimit(c->id, "audio_frame_bytes", c->remote);
      if (c->closing) {
        events.clear();
        return;
      }
    }
    if (events.empty()) return;
    NativeSegmenterInput* seg = c->segmenter;
    const bool frames = seg == nullptr || c->deliver_frames;
    // Which events go to JS, and the arena bytes they need.
    size_t count = 0, audio_bytes = 0;
    bool control = false;
    to_js_.assign(events.size(), 1);
    kinds_.resize(events.size());
    for (size_t i = 0; i < events.size(); ++i) {
      Event& e = events[i];
      if (e.type == Event::Type::kAudio) {
        c->audio_bytes += e.data.size;
        if (seg) seg->PushNative(e.timestamp, e.data.data.get(), e.data.size);
        kinds_[i] = static_cast<uint8_t>(AudioKind(e.data.data.get(), e.data.size));
        if (frames || kinds_[i] == kKindSequenceHeader) {
          ++count;
          audio_bytes += e.data.size;
        } else {
          to_js_[i] = 0;
        }
      } else {
        ++count;
        control = true;
      }
    }
    if (seg) UpdateMerged(c);
    const bool has_seg_events = seg && seg->HasNativeEvents();
    if (count == 0 && !has_seg_events) {
      events.clear();
      return;
    }
    napi_value seg_events = has_seg_events ? seg->TakeNativeEvents(env) : static_cast<napi_value>(env.Undefined());
    uint32_t flags = seg ? kSegmented : 0;
    if (batch_.Ensure(env, count, audio_bytes)) flags |= kBuffersChanged;
    Napi::Array ctl = control ? Napi::Array::New(env) : Napi::Array();
    uint32_t k = 0;
    batch_.Begin(audio_bytes);
    for (size_t i = 0; i < events.size(); ++i) {
      Event& e = events[i];
      if (!to_js_[i]) continue;
      if (e.type == Event::Type::kAudio) {
        batch_.Audio(e.timestamp, e.data.data.get(), e.data.size, kinds_[i]);
      } else {
        batch_.Control();
        ctl.Set(k++, ControlEventToJs(env, e));
      }
    }
    events.clear();
    Dispatch({Napi::Number::New(env, kRead), Napi::Number::New(env, c->id), Napi::Number::New(env, static_cast<double>(count)),
              control ? static_cast<napi_value>(ctl) : static_cast<napi_value>(env.Undefined()), seg_events,
              Napi::Number::New(env, flags)});
  }

  // ── libuv callbacks ─────────────────────────────────────────────────────────────────────────

  static void OnConnection(uv_stream_t* listener, int status) {
    auto* self = static_cast<RtmpServer*>(listener->data);
    if (status != 0 || self->closed_) return;
    auto* c = new Conn();
    c->server = self;
    if (uv_tcp_init(self->loop_, &c->tcp) != 0) {
      delete c;
      return;
    }
    c->tcp.data = c;
    self->Ref();  // each connection handle refers to the server until its close callback
    if (uv_accept(listener, reinterpret_cast<uv_stream_t*>(&c->tcp)) != 0) {
      c->closing = true;
      self->CloseHandle(c);  // not in conns_: freed by the close callback
      return;
    }
    PeerName(&c->tcp, &c->ip, &c->remote);
    // The caps, before anything is allocated for the connection.
    const auto from_ip = self->per_ip_.find(c->ip);
    const char* refused = nullptr;
    if (self->open_ >= self->max_connections_) refused = "rtmp_connections";
    else if (from_ip != self->per_ip_.end() && from_ip->second >= self->max_connections_per_ip_) refused = "rtmp_connections_per_ip";
    const uint32_t id = refused ? 0 : self->ids_.next([self](uint32_t i) { return self->IdTaken(i); });
    if (id == 0) {
      c->closing = true;
      self->CloseHandle(c);  // not in conns_: freed by the close callback
      Napi::Env env = self->Env();
      Napi::HandleScope scope(env);
      self->DispatchLimit(0, refused ? refused : "rtmp_connections", c->remote);
      return;
    }
    c->counted = true;
    ++self->open_;
    ++self->per_ip_[c->ip];
    uv_tcp_nodelay(&c->tcp, 1);
    c->id = id;
    c->session = std::make_unique<rtmp::Session>(self->session_options_);
    c->last_read = c->accepted_at = uv_now(self->loop_);
    self->conns_[c->id] = c;
    self->StartSweep();
    uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp), &RtmpServer::OnAlloc, &RtmpServer::OnRead);
    Napi::Env env = self->Env();
    Napi::HandleScope scope(env);
    self->Dispatch({Napi::Number::New(env, kConnection), Napi::Number::New(env, c->id), Napi::String::New(env, c->remote)});
  }

  // An id is in use while its connection exists or JS has yet to hear of its close.
  bool IdTaken(uint32_t id) const {
    if (conns_.count(id) != 0) return true;
    for (const PendingClose& p : deferred_)
      if (p.id == id) return true;
    return false;
  }

  // The peer's IP and "ip:port" ("?" when unknown).
  static void PeerName(uv_tcp_t* tcp, std::string* ip_out, std::string* remote_out) {
    sockaddr_storage addr{};
    int len = sizeof(addr);
    if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      *ip_out = *remote_out = "?";
      return;
    }
    char ip[64] = {0};
    int port = 0;
    if (addr.ss_family == AF_INET6) {
      auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
      uv_ip6_name(a6, ip, sizeof(ip));
      port = ntohs(a6->sin6_port);
    } else {
      auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
      uv_ip4_name(a4, ip, sizeof(ip));
      port = ntohs(a4->sin_port);
    }
    *ip_out = ip;
    *remote_out = std::string(ip) + ":" + std::to_string(port);
  }

  static void OnAlloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
    auto* c = static_cast<Conn*>(h->data);
    // One buffer for every connection: a read is consumed (copied by the session) before the next.
    buf->base = c->server->read_buffer_.get();
    buf->len = kReadBufferBytes;
  }

  static void OnRead(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
    auto* c = static_cast<Conn*>(s->data);
    RtmpServer* self = c->server;
    if (c->closing) return;
    if (nread > 0) {
      self->OnData(c, reinterpret_cast<const uint8_t*>(buf->base), static_cast<size_t>(nread));
      return;
    }
    if (nread == 0) return;  // EAGAIN
    if (nread == UV_EOF) {
      self->OnEof(c);
      return;
    }
    self->PeerGone(c, std::string("socket error: ") + uv_strerror(static_cast<int>(nread)), false);
  }

  static void OnWrite(uv_write_t* req, int status) {
    auto* w = reinterpret_cast<WriteReq*>(req);
    auto* c = static_cast<Conn*>(req->data);
    delete w;
    if (status != 0 && status != UV_ECANCELED && !c->closing) c->server->PeerGone(c, std::string("socket error: ") + uv_strerror(status), false);
  }

  static void OnShutdown(uv_shutdown_t* req, int) {
    auto* c = static_cast<Conn*>(req->data);
    delete req;
    c->server->CloseHandle(c);
  }

  static void OnConnClosed(uv_handle_t* h) {
    auto* c = static_cast<Conn*>(h->data);
    RtmpServer* self = c->server;
    auto it = self->conns_.find(c->id);
    if (it != self->conns_.end() && it->second == c) self->conns_.erase(it);
    if (c->counted) {
      --self->open_;
      auto ip = self->per_ip_.find(c->ip);
      if (ip != self->per_ip_.end() && --ip->second == 0) self->per_ip_.erase(ip);
    }
    delete c;
    if (self->conns_.empty() && self->deferred_.empty() && !self->closed_) self->StopSweep();
    self->Unref();
  }

  static void OnListenerClosed(uv_handle_t* h) {
    static_cast<RtmpServer*>(h->data)->Unref();
  }

  // Once a second while connections exist: force-closes graceful closes that hang, and tells JS
  // of connections silent past their timeout.
  static void OnSweep(uv_timer_t* t) {
    auto* self = static_cast<RtmpServer*>(t->data);
    if (!self->deferred_.empty()) {
      std::vector<PendingClose> pending;
      pending.swap(self->deferred_);
      for (const PendingClose& p : pending) self->NotifyClosed(p);
    }
    const uint64_t now = uv_now(self->loop_);
    std::vector<uint32_t> timed_out, late;
    for (auto& [id, c] : self->conns_) {
      if (c->closing) {
        if (now - c->closing_since >= kCloseGraceMs) self->CloseHandle(c);
      } else if (!c->session->publish_accepted() && now - c->accepted_at >= self->publish_timeout_ms_) {
        late.push_back(id);
      } else if (c->timeout_ms > 0 && !c->timeout_sent && now - c->last_read >= c->timeout_ms) {
        c->timeout_sent = true;
        timed_out.push_back(id);
      }
    }
    if (timed_out.empty() && late.empty()) return;
    Napi::Env env = self->Env();
    Napi::HandleScope scope(env);
    for (uint32_t id : late) {
      auto it = self->conns_.find(id);
      if (it != self->conns_.end()) self->LimitClose(it->second, "rtmp_publish_timeout");
    }
    for (uint32_t id : timed_out) {
      auto it = self->conns_.find(id);
      if (it == self->conns_.end() || it->second->closing) continue;
      self->Dispatch({Napi::Number::New(env, kTimeout), Napi::Number::New(env, id)});
    }
  }

  static void OnEnvCleanup(void* arg) {
    auto* self = static_cast<RtmpServer*>(arg);
    self->cleanup_hook_ = false;
    self->CloseAll();
  }

  rtmp::SessionOptions session_options_;
  Napi::FunctionReference dispatch_;
  std::unique_ptr<Napi::AsyncContext> async_;
  uv_loop_t* loop_ = nullptr;
  uv_tcp_t listener_{};
  bool listener_open_ = false;
  bool listening_ = false;
  bool closed_ = false;
  bool cleanup_hook_ = false;
  uv_timer_t sweep_{};
  bool sweep_init_ = false, sweep_running_ = false, sweep_closing_ = false;
  std::unique_ptr<char[]> read_buffer_;
  std::unordered_map<uint32_t, Conn*> conns_;
  std::vector<PendingClose> deferred_;  // CLOSED notifications for the next sweep
  std::vector<uint8_t> to_js_;          // per event of a read: 1 = goes to JS
  std::vector<uint8_t> kinds_;          // per audio event of a read: its kind (kKind*)
  uint32_t max_connections_ = kDefaultMaxConnections;
  uint32_t max_connections_per_ip_ = kDefaultMaxConnectionsPerIp;
  uint32_t publish_timeout_ms_ = kDefaultPublishTimeoutMs;
  uint32_t open_ = 0;                   // counted connections (accept to handle close)
  std::unordered_map<std::string, uint32_t> per_ip_;
  util::IdCounter ids_;                 // connection ids, never one in use
  uint64_t merge_ms_ = 0;               // merged reads of routed connections (0 = off)
  uv_timer_t merge_timer_{};
  bool merge_init_ = false, merge_running_ = false, merge_closing_ = false;
  std::vector<uint32_t> merged_;        // ids of the merged connections
  uint64_t merge_ticks_ = 0;
  uint64_t next_regular_ = 0;            // loop time of the next regular merged read
  uint64_t timer_at_ = UINT64_MAX;       // loop time the merge timer is armed for
  BatchBuffers batch_;  // the read's audio bodies for JS (binding/rtmp_batch.h)
};

}  // namespace

void InitRtmpServer(Napi::Env env, Napi::Object exports, AddonState& state) {
  Napi::Function ctor = RtmpServer::Define(env);
  state.rtmpServer = Napi::Persistent(ctor);
  exports.Set("RtmpServer", ctor);
}

}  // namespace skylark::binding
