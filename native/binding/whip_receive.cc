// class WhipReceive for JS: a WHIP publisher's media receive in native code (io/whip_receive.h,
// docs/behaviour.md "Go live over WHIP", docs/decisions.md "WHIP receive in native code").
//
//   new WhipReceive(fd, profile, key, salt, auth | null, payloadType, clockRate, jitterMs, maxFillMs,
//                   maxPackets, maxFrameBytes, dispatch, mergeMs?,
//                   rtcpRemoteKey?, rtcpRemoteSalt, rtcpRemoteAuth | null, rtcpLocalKey, rtcpLocalSalt,
//                   rtcpLocalAuth | null, reporterSsrc, lastSrtcpIndex, remoteAddress, remotePort)
//       starts watching fd at once; mergeMs: 0..1000 (default 0), merged reads while routed
//       (io/whip_receive.h); with rtcpRemoteKey (not null/undefined): RTCP in native code — the
//       publisher's SRTCP opened with the remote SRTCP session keys, receiver reports from
//       reporterSsrc (SRTCP index lastSrtcpIndex + 1 onwards) sent to remoteAddress:remotePort
//   route(segmenter | null, frames: boolean, merge?: boolean)   // ordered Opus goes into the Segmenter
//       in C++; frames: JS still gets every frame (flagged segmented); merge: merged reads allowed
//   counts(out: Float64Array(18)): void        // [packets, bytes, rejected, other, ssrc (-1: none),
//       msSinceLastRtp (-1: none), received, reordered, lost, late, filled, held, segmented, mergedReads,
//       srtcp, srtcpRejected, reportsSent, lastSrtcpIndex]
//   report(out: Float64Array(5)): boolean      // [ssrc, fractionLost, packetsLost, highestSequence,
//       jitter] (RFC 3550 §6.4.1; starts the next interval); false before the first packet
//   close(): void                              // stops watching fd (idempotent); nothing follows
//
//   dispatch(kind, a, b, c), once per wakeup that has something for JS:
//     0 DATAGRAMS (list: [Buffer, address: string, port: number, family: 'IPv4' | 'IPv6'][]) — not RTP
//     1 FRAMES (positions: number[] (48 kHz samples), payloads: Buffer[], segmented: boolean)
//     2 SEGMENTER (events: SegmenterEvent[]) — what the routed segmenter made of the pushed frames
//     3 ERROR (message: string) — the socket failed; the watch stopped
//
// Wrong JS arguments and invalid keys throw a TypeError.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "binding/addon_state.h"
#include "binding/guards.h"
#include "binding/segmenter.h"
#include "io/whip_receive.h"

namespace skylark::binding {
namespace {

constexpr int kDatagrams = 0, kFrames = 1, kSegmenter = 2, kError = 3;

// The routed Segmenter (held by a strong reference while routed).
class SegmenterSink final : public io::AudioSink {
 public:
  SegmenterSink(NativeSegmenterInput* s, Napi::Object o) : segmenter_(s), ref_(Napi::Persistent(o)) {}
  void push_audio(uint32_t ts, const uint8_t* data, size_t size) override { segmenter_->PushNative(ts, data, size); }
  uint32_t ms_to_next_cut() const override { return segmenter_->MsToNextCut(); }
  NativeSegmenterInput* segmenter() const { return segmenter_; }

 private:
  NativeSegmenterInput* segmenter_;
  Napi::ObjectReference ref_;
};

bool ArgFloat64(const Napi::CallbackInfo& info, size_t i, size_t n, const char* message, Napi::Float64Array* out) {
  if (info.Length() <= i || !info[i].IsTypedArray() || info[i].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array) {
    return ThrowTypeError(info.Env(), message);
  }
  *out = info[i].As<Napi::Float64Array>();
  return Require(info.Env(), out->ElementLength() >= n, message);
}

class WhipReceive : public Napi::ObjectWrap<WhipReceive>, private io::WhipReceiveEvents {
 public:
  explicit WhipReceive(const Napi::CallbackInfo& info) : Napi::ObjectWrap<WhipReceive>(info) {
    Napi::Env env = info.Env();
    static const char* kUsage =
        "WhipReceive(fd, profile, key, salt, auth, payloadType, clockRate, jitterMs, maxFillMs, maxPackets, maxFrameBytes, "
        "dispatch): integers, key/salt/auth Uint8Arrays (auth may be null), dispatch a function";
    io::WhipReceiveConfig c;
    uint32_t fd = 0, profile = 0, pt = 0, clock = 0, jitter = 0, fill = 0, held = 0, frame = 0, merge = 0;
    if (info.Length() < 12 || !IsIntegerIn(info[0], 0, 2147483647.0, &fd) || !IsIntegerIn(info[1], 0, 65535, &profile) ||
        !IsIntegerIn(info[5], 0, 127, &pt) || !IsIntegerIn(info[6], 1, 1000000, &clock) ||
        !IsIntegerIn(info[7], 0, 10000, &jitter) || !IsIntegerIn(info[8], 0, 3600000, &fill) ||
        !IsIntegerIn(info[9], 1, 65536, &held) || !IsIntegerIn(info[10], 1, 16777215, &frame) || !info[11].IsFunction() ||
        (info.Length() > 12 && !info[12].IsUndefined() && !IsIntegerIn(info[12], 0, 1000, &merge))) {
      ThrowTypeError(env, kUsage);
      return;
    }
    if (!ArgKey(info, 2, kUsage, &c.key, false) || !ArgKey(info, 3, kUsage, &c.salt, false) || !ArgKey(info, 4, kUsage, &c.auth, true)) return;
    if (info.Length() > 13 && !info[13].IsNull() && !info[13].IsUndefined() && !ArgRtcp(info, &c.rtcp)) return;
    c.fd = static_cast<int>(fd);
    c.profile = static_cast<int>(profile);
    c.payload_type = static_cast<uint8_t>(pt);
    c.clock_rate = clock;
    c.jitter.delay_ms = jitter;
    c.jitter.max_fill_ms = fill;
    c.jitter.max_packets = held;
    c.max_frame_bytes = frame;
    c.merge_ms = merge;
    uv_loop_t* loop = nullptr;
    if (napi_get_uv_event_loop(env, &loop) != napi_ok || !loop) {
      Napi::Error::New(env, "WhipReceive: no libuv loop").ThrowAsJavaScriptException();
      return;
    }
    std::string error;
    receiver_ = std::make_unique<io::WhipReceiver>(loop, c, static_cast<io::WhipReceiveEvents&>(*this), &error);
    if (!receiver_->ok()) {
      receiver_.reset();
      ThrowTypeError(env, "WhipReceive: " + error);
      return;
    }
    if (int err = receiver_->start()) {
      receiver_.reset();
      ThrowTypeError(env, std::string("WhipReceive: cannot watch the socket: ") + uv_strerror(err));
      return;
    }
    dispatch_ = Napi::Persistent(info[11].As<Napi::Function>());
    async_ = std::make_unique<Napi::AsyncContext>(env, "SkylarkWhipReceive");
    napi_add_env_cleanup_hook(env, &WhipReceive::OnEnvCleanup, this);
    hooked_ = true;
  }

  ~WhipReceive() override {
    if (hooked_) napi_remove_env_cleanup_hook(Env(), &WhipReceive::OnEnvCleanup, this);
  }

  // Arguments 13..22: the native RTCP's keys, reporter SSRC, last SRTCP index and remote address.
  static bool ArgRtcp(const Napi::CallbackInfo& info, io::WhipReceiveConfig::Rtcp* r) {
    static const char* kRtcp =
        "WhipReceive: rtcpRemoteKey, rtcpRemoteSalt, rtcpLocalKey, rtcpLocalSalt Uint8Arrays, the auth keys Uint8Arrays or null, "
        "reporterSsrc and lastSrtcpIndex integers, remoteAddress an IP address, remotePort 1..65535";
    uint32_t ssrc = 0, index = 0, port = 0;
    std::string host;
    if (!ArgKey(info, 13, kRtcp, &r->remote_key, false) || !ArgKey(info, 14, kRtcp, &r->remote_salt, false) ||
        !ArgKey(info, 15, kRtcp, &r->remote_auth, true) || !ArgKey(info, 16, kRtcp, &r->local_key, false) ||
        !ArgKey(info, 17, kRtcp, &r->local_salt, false) || !ArgKey(info, 18, kRtcp, &r->local_auth, true)) {
      return false;
    }
    if (info.Length() < 23 || !IsIntegerIn(info[19], 0, 4294967295.0, &ssrc) || !IsIntegerIn(info[20], 0, 2147483647.0, &index) ||
        !info[21].IsString() || !IsIntegerIn(info[22], 1, 65535, &port)) {
      return ThrowTypeError(info.Env(), kRtcp);
    }
    host = info[21].As<Napi::String>().Utf8Value();
    std::memset(&r->remote, 0, sizeof r->remote);
    auto* v4 = reinterpret_cast<sockaddr_in*>(&r->remote);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&r->remote);
    if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(static_cast<uint16_t>(port));
    } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(static_cast<uint16_t>(port));
    } else {
      return ThrowTypeError(info.Env(), kRtcp);
    }
    r->on = true;
    r->reporter_ssrc = ssrc;
    r->last_index = index;
    return true;
  }

  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "WhipReceive",
                       {InstanceMethod<&WhipReceive::Route>("route"), InstanceMethod<&WhipReceive::Counts>("counts"),
                        InstanceMethod<&WhipReceive::Report>("report"), InstanceMethod<&WhipReceive::Close>("close")});
  }

 private:
  static void OnEnvCleanup(void* arg) {
    auto* self = static_cast<WhipReceive*>(arg);
    self->hooked_ = false;
    if (self->receiver_) self->receiver_->stop();
  }

  Napi::Value Route(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    constexpr const char* kUsage = "WhipReceive.route(segmenter | null, frames: boolean, merge?: boolean)";
    bool frames = false, merge = false;
    SK_GUARD(Require(env, info.Length() >= 2, kUsage) && ArgBool(info, 1, kUsage, &frames));
    if (info.Length() > 2 && !info[2].IsUndefined()) SK_GUARD(ArgBool(info, 2, kUsage, &merge));
    if (!receiver_) return env.Undefined();
    if (info[0].IsNull() || info[0].IsUndefined()) {
      receiver_->route(nullptr, true);
      return env.Undefined();
    }
    NativeSegmenterInput* segmenter = UnwrapSegmenter(env, info[0]);
    SK_GUARD(Require(env, segmenter != nullptr, "WhipReceive.route: segmenter must be a Segmenter or null"));
    receiver_->route(std::make_unique<SegmenterSink>(segmenter, info[0].As<Napi::Object>()), frames, merge);
    return env.Undefined();
  }

  Napi::Value Counts(const Napi::CallbackInfo& info) {
    Napi::Float64Array out;
    SK_GUARD(ArgFloat64(info, 0, 18, "WhipReceive.counts(out): out must be a Float64Array of 18", &out));
    if (!receiver_) return info.Env().Undefined();
    const io::WhipReceiveCounts& c = receiver_->counts();
    const rtp::JitterStats& j = receiver_->jitter_stats();
    const double now = static_cast<double>(uv_hrtime()) / 1e6;
    const double values[18] = {static_cast<double>(c.packets), static_cast<double>(c.bytes), static_cast<double>(c.rejected),
                               static_cast<double>(c.other), static_cast<double>(c.ssrc), c.last_rtp_ms < 0 ? -1 : now - c.last_rtp_ms,
                               static_cast<double>(j.received), static_cast<double>(j.reordered), static_cast<double>(j.lost),
                               static_cast<double>(j.late), static_cast<double>(j.filled), static_cast<double>(receiver_->held()),
                               static_cast<double>(c.segmented), static_cast<double>(c.merged_reads),
                               static_cast<double>(c.srtcp), static_cast<double>(c.srtcp_rejected),
                               static_cast<double>(c.reports_sent), static_cast<double>(c.srtcp_index)};
    for (size_t i = 0; i < 18; ++i) out[i] = values[i];
    return info.Env().Undefined();
  }

  Napi::Value Report(const Napi::CallbackInfo& info) {
    Napi::Float64Array out;
    SK_GUARD(ArgFloat64(info, 0, 5, "WhipReceive.report(out): out must be a Float64Array of 5", &out));
    rtp::ReportBlock r;
    if (!receiver_ || !receiver_->report(&r)) return Napi::Boolean::New(info.Env(), false);
    out[0] = static_cast<double>(receiver_->counts().ssrc);
    out[1] = r.fraction_lost;
    out[2] = r.packets_lost;
    out[3] = r.highest_sequence;
    out[4] = r.jitter;
    return Napi::Boolean::New(info.Env(), true);
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    if (receiver_) receiver_->stop();
    datagrams_.clear();
    positions_.clear();
    payloads_.clear();
    return info.Env().Undefined();
  }

  // ── io::WhipReceiveEvents ────────────────────────────────────────────────────────────────────

  void on_datagram(const uint8_t* data, size_t size, const sockaddr_storage& from) override {
    datagrams_.push_back({std::vector<uint8_t>(data, data + size), from});
  }

  void on_frame(uint64_t samples, const uint8_t* data, size_t size, bool segmented) override {
    positions_.push_back(static_cast<double>(samples));
    payloads_.emplace_back(data, data + size);
    segmented_ = segmented;
  }

  void on_batch_end() override {
    auto* sink = receiver_ ? static_cast<SegmenterSink*>(receiver_->sink()) : nullptr;
    const bool events = sink && sink->segmenter()->HasNativeEvents();
    if (datagrams_.empty() && positions_.empty() && !events) return;
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    if (events) Dispatch({Napi::Number::New(env, kSegmenter), sink->segmenter()->TakeNativeEvents(env)});
    if (!positions_.empty()) {
      Napi::Array pos = Napi::Array::New(env, positions_.size()), pay = Napi::Array::New(env, payloads_.size());
      for (uint32_t i = 0; i < positions_.size(); ++i) {
        pos.Set(i, Napi::Number::New(env, positions_[i]));
        pay.Set(i, Napi::Buffer<uint8_t>::Copy(env, payloads_[i].data(), payloads_[i].size()));
      }
      positions_.clear();
      payloads_.clear();
      Dispatch({Napi::Number::New(env, kFrames), pos, pay, Napi::Boolean::New(env, segmented_)});
    }
    if (!datagrams_.empty()) {
      Napi::Array list = Napi::Array::New(env, datagrams_.size());
      for (uint32_t i = 0; i < datagrams_.size(); ++i) list.Set(i, DatagramToJs(env, datagrams_[i]));
      datagrams_.clear();
      Dispatch({Napi::Number::New(env, kDatagrams), list});
    }
  }

  void on_error(int err) override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    Dispatch({Napi::Number::New(env, kError), Napi::String::New(env, std::string(uv_err_name(err)) + " " + uv_strerror(err))});
  }

  struct Datagram {
    std::vector<uint8_t> data;
    sockaddr_storage from;
  };

  static Napi::Value DatagramToJs(Napi::Env env, const Datagram& d) {
    char host[INET6_ADDRSTRLEN] = "";
    uint16_t port = 0;
    const char* family = "IPv4";
    if (d.from.ss_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(&d.from);
      inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
      port = ntohs(a->sin6_port);
      family = "IPv6";
    } else {
      const auto* a = reinterpret_cast<const sockaddr_in*>(&d.from);
      inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
      port = ntohs(a->sin_port);
    }
    Napi::Array o = Napi::Array::New(env, 4);
    o.Set(0u, Napi::Buffer<uint8_t>::Copy(env, d.data.data(), d.data.size()));
    o.Set(1u, Napi::String::New(env, host));
    o.Set(2u, Napi::Number::New(env, port));
    o.Set(3u, Napi::String::New(env, family));
    return o;
  }

  void Dispatch(std::initializer_list<napi_value> args) {
    napi_env env = Env();
    napi_value result = nullptr;
    if (napi_make_callback(env, *async_, Value(), dispatch_.Value(), args.size(), args.begin(), &result) == napi_ok) return;
    bool pending = false;
    if (napi_is_exception_pending(env, &pending) != napi_ok || !pending) return;
    napi_value error = nullptr;
    napi_get_and_clear_last_exception(env, &error);
    napi_fatal_exception(env, error);
  }

  std::unique_ptr<io::WhipReceiver> receiver_;
  Napi::FunctionReference dispatch_;
  std::unique_ptr<Napi::AsyncContext> async_;
  bool hooked_ = false;
  std::vector<Datagram> datagrams_;
  std::vector<double> positions_;
  std::vector<std::vector<uint8_t>> payloads_;
  bool segmented_ = false;
};

}  // namespace

void InitWhipReceive(Napi::Env env, Napi::Object exports) { exports.Set("WhipReceive", WhipReceive::Define(env)); }

}  // namespace skylark::binding
