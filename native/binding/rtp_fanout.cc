// class RtpFanout for JS: the WebRTC fan-out of one stream (io/rtp_fanout.h, docs/listeners.md
// "WebRTC"). One `send` per stream packet writes that packet, as SRTP, to every enabled peer.
//
//   new RtpFanout()
//   add(fd: number, host: string, port: number, ssrc: number, payloadType: number, profile: number,
//       key: Uint8Array, salt: Uint8Array, auth: Uint8Array | null): number   // the peer's id (≥ 1)
//   remove(id: number): boolean
//   setEnabled(id: number, enabled: boolean): boolean
//   retarget(id: number, fd: number, host: string, port: number): boolean
//   send(seq: number, timestamp: number, payload: Uint8Array, marker: boolean): number   // packets written
//   protect(id: number, seq, timestamp, payload, marker): Buffer | null   // the packet, not written
//   counts(id: number, out: Float64Array(7)): boolean   // [packets, bytes, drops, dropRun, lastErrno, roc, lastSeq]
//   totals(out: Float64Array(3)): void                   // [packets, bytes, drops] of every peer
//   size: number
//
// `fd` is a UDP socket descriptor the process owns (a Node dgram socket's handle fd); the fan-out
// never closes it, and the caller removes or retargets the peer before the socket closes. Wrong JS
// arguments and invalid keys throw a TypeError; sends never throw (a failed write is a drop).
#include "binding/addon_state.h"
#include "binding/guards.h"
#include "io/rtp_fanout.h"

#include <string>
#include <vector>

namespace skylark::binding {
namespace {

bool ArgId(const Napi::CallbackInfo& info, const char* message, uint32_t* id) {
  return Require(info.Env(), info.Length() > 0 && IsIntegerIn(info[0], 1, 4294967295.0, id), message);
}

// seq, timestamp, payload, marker from argument `at` on.
struct PacketArgs {
  uint32_t seq = 0, timestamp = 0;
  const uint8_t* payload = nullptr;
  size_t size = 0;
  bool marker = false;
};
bool ArgPacket(const Napi::CallbackInfo& info, size_t at, const char* message, PacketArgs* p) {
  Napi::Env env = info.Env();
  if (info.Length() < at + 4 || !IsIntegerIn(info[at], 0, 65535, &p->seq) || !IsIntegerIn(info[at + 1], 0, 4294967295.0, &p->timestamp)) {
    return ThrowTypeError(env, message);
  }
  if (!ArgBytes(info, at + 2, message, &p->payload, &p->size) || !ArgBool(info, at + 3, message, &p->marker)) return false;
  return Require(env, p->size <= io::kRtpFanoutMaxPayload, "RtpFanout: payload larger than one UDP datagram");
}

class RtpFanout : public Napi::ObjectWrap<RtpFanout> {
 public:
  explicit RtpFanout(const Napi::CallbackInfo& info) : Napi::ObjectWrap<RtpFanout>(info) {}

  Napi::Value Add(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    static const char* kUsage =
        "RtpFanout.add(fd, host, port, ssrc, payloadType, profile, key, salt, auth): integers, a host string, "
        "key/salt/auth Uint8Arrays (auth may be null)";
    io::RtpPeerConfig c;
    uint32_t fd = 0, port = 0, ssrc = 0, pt = 0, profile = 0;
    if (info.Length() < 9 || !IsIntegerIn(info[0], 0, 2147483647.0, &fd) || !info[1].IsString() ||
        !IsIntegerIn(info[2], 1, 65535, &port) || !IsIntegerIn(info[3], 0, 4294967295.0, &ssrc) ||
        !IsIntegerIn(info[4], 0, 127, &pt) || !IsIntegerIn(info[5], 0, 65535, &profile)) {
      ThrowTypeError(env, kUsage);
      return env.Undefined();
    }
    if (!ArgKey(info, 6, kUsage, &c.key, false) || !ArgKey(info, 7, kUsage, &c.salt, false) || !ArgKey(info, 8, kUsage, &c.auth, true)) {
      return env.Undefined();
    }
    c.fd = static_cast<int>(fd);
    c.host = info[1].As<Napi::String>().Utf8Value();
    c.port = static_cast<uint16_t>(port);
    c.ssrc = ssrc;
    c.payload_type = static_cast<uint8_t>(pt);
    c.profile = static_cast<int>(profile);
    std::string error;
    const uint32_t id = fanout_.Add(c, &error);
    if (id == 0) {
      ThrowTypeError(env, "RtpFanout.add: " + error);
      return env.Undefined();
    }
    return Napi::Number::New(env, id);
  }

  Napi::Value Remove(const Napi::CallbackInfo& info) {
    uint32_t id;
    if (!ArgId(info, "RtpFanout.remove(id): id must be a peer id", &id)) return info.Env().Undefined();
    return Napi::Boolean::New(info.Env(), fanout_.Remove(id));
  }

  Napi::Value SetEnabled(const Napi::CallbackInfo& info) {
    uint32_t id;
    bool on = false;
    if (!ArgId(info, "RtpFanout.setEnabled(id, enabled): id must be a peer id", &id) ||
        !ArgBool(info, 1, "RtpFanout.setEnabled(id, enabled): enabled must be a boolean", &on)) {
      return info.Env().Undefined();
    }
    return Napi::Boolean::New(info.Env(), fanout_.SetEnabled(id, on));
  }

  Napi::Value Retarget(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    uint32_t id, fd = 0, port = 0;
    if (!ArgId(info, "RtpFanout.retarget(id, fd, host, port): id must be a peer id", &id)) return env.Undefined();
    if (info.Length() < 4 || !IsIntegerIn(info[1], 0, 2147483647.0, &fd) || !info[2].IsString() || !IsIntegerIn(info[3], 1, 65535, &port)) {
      ThrowTypeError(env, "RtpFanout.retarget(id, fd, host, port): fd, port integers, host a string");
      return env.Undefined();
    }
    return Napi::Boolean::New(env, fanout_.Retarget(id, static_cast<int>(fd), info[2].As<Napi::String>().Utf8Value(), static_cast<uint16_t>(port)));
  }

  Napi::Value Send(const Napi::CallbackInfo& info) {
    PacketArgs p;
    if (!ArgPacket(info, 0, "RtpFanout.send(seq: 0..65535, timestamp: uint32, payload: Uint8Array, marker: boolean)", &p)) {
      return info.Env().Undefined();
    }
    const size_t sent = fanout_.Send(static_cast<uint16_t>(p.seq), p.timestamp, p.payload, p.size, p.marker);
    return Napi::Number::New(info.Env(), static_cast<double>(sent));
  }

  Napi::Value Protect(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    uint32_t id;
    PacketArgs p;
    if (!ArgId(info, "RtpFanout.protect(id, seq, timestamp, payload, marker): id must be a peer id", &id) ||
        !ArgPacket(info, 1, "RtpFanout.protect(id, seq: 0..65535, timestamp: uint32, payload: Uint8Array, marker: boolean)", &p)) {
      return env.Undefined();
    }
    std::vector<uint8_t> out;
    if (!fanout_.Protect(id, static_cast<uint16_t>(p.seq), p.timestamp, p.payload, p.size, p.marker, &out)) return env.Null();
    return Napi::Buffer<uint8_t>::Copy(env, out.data(), out.size());
  }

  Napi::Value Counts(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    uint32_t id;
    if (!ArgId(info, "RtpFanout.counts(id, out): id must be a peer id", &id)) return env.Undefined();
    Napi::Float64Array out;
    if (!ArgFloat64(info, 1, 7, "RtpFanout.counts(id, out): out must be a Float64Array of 7", &out)) return env.Undefined();
    io::RtpPeerCounts c;
    if (!fanout_.Counts(id, &c)) return Napi::Boolean::New(env, false);
    out[0] = static_cast<double>(c.packets);
    out[1] = static_cast<double>(c.bytes);
    out[2] = static_cast<double>(c.drops);
    out[3] = static_cast<double>(c.drop_run);
    out[4] = static_cast<double>(c.last_errno);
    out[5] = static_cast<double>(c.roc);
    out[6] = static_cast<double>(c.last_seq);
    return Napi::Boolean::New(env, true);
  }

  Napi::Value Totals(const Napi::CallbackInfo& info) {
    Napi::Float64Array out;
    if (!ArgFloat64(info, 0, 3, "RtpFanout.totals(out): out must be a Float64Array of 3", &out)) return info.Env().Undefined();
    const io::RtpPeerCounts c = fanout_.Totals();
    out[0] = static_cast<double>(c.packets);
    out[1] = static_cast<double>(c.bytes);
    out[2] = static_cast<double>(c.drops);
    return info.Env().Undefined();
  }

  Napi::Value Size(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(fanout_.size())); }

 private:
  static bool ArgFloat64(const Napi::CallbackInfo& info, size_t i, size_t n, const char* message, Napi::Float64Array* out) {
    if (info.Length() <= i || !info[i].IsTypedArray() || info[i].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array) {
      return ThrowTypeError(info.Env(), message);
    }
    *out = info[i].As<Napi::Float64Array>();
    return Require(info.Env(), out->ElementLength() >= n, message);
  }

  io::RtpFanout fanout_;
};

}  // namespace

void InitRtpFanout(Napi::Env env, Napi::Object exports) {
  Napi::Function ctor = RtpFanout::DefineClass(
      env, "RtpFanout",
      {RtpFanout::InstanceMethod<&RtpFanout::Add>("add"),
       RtpFanout::InstanceMethod<&RtpFanout::Remove>("remove"),
       RtpFanout::InstanceMethod<&RtpFanout::SetEnabled>("setEnabled"),
       RtpFanout::InstanceMethod<&RtpFanout::Retarget>("retarget"),
       RtpFanout::InstanceMethod<&RtpFanout::Send>("send"),
       RtpFanout::InstanceMethod<&RtpFanout::Protect>("protect"),
       RtpFanout::InstanceMethod<&RtpFanout::Counts>("counts"),
       RtpFanout::InstanceMethod<&RtpFanout::Totals>("totals"),
       RtpFanout::InstanceAccessor<&RtpFanout::Size>("size")});
  exports.Set("RtpFanout", ctor);
}

}  // namespace skylark::binding
