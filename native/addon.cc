// Module init only: per-instance addon state (so the addon loads in worker threads), exports.
#include "binding/addon_state.h"

namespace skylark::binding {
// Registers class IcecastSource (binding/icecast_source.cc) on `exports`.
void InitIcecastSource(Napi::Env env, Napi::Object exports, AddonState& state);
// Registers installHttpFront and httpFrontCounts (binding/http_front.cc) on `exports`.
void InitHttpFront(Napi::Env env, Napi::Object exports);
// Registers class RtpFanout (binding/rtp_fanout.cc, the WebRTC fan-out) on `exports`.
void InitRtpFanout(Napi::Env env, Napi::Object exports);
// Registers trimMalloc (binding/memory.cc) on `exports`.
void InitMemory(Napi::Env env, Napi::Object exports);
// Registers class WhipReceive (binding/whip_receive.cc, a WHIP publisher's native receive) on `exports`.
void InitWhipReceive(Napi::Env env, Napi::Object exports);
// Registers coalesceLoop and loopCoalesceCounts (binding/loop_coalesce.cc) on `exports`.
void InitLoopCoalesce(Napi::Env env, Napi::Object exports);
// Registers appendSegment (binding/file_append.cc, the catch-up archive's appends) on `exports`.
void InitFileAppend(Napi::Env env, Napi::Object exports);
}  // namespace skylark::binding

namespace {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto* state = new skylark::binding::AddonState();
  // Instance data is deleted by Node when the environment tears down (cleanup hook).
  env.SetInstanceData<skylark::binding::AddonState>(state);
  skylark::binding::InitSegmenter(env, exports, *state);
  skylark::binding::InitRtmpAddon(env, exports, *state);
  skylark::binding::InitIcecastSource(env, exports, *state);
  skylark::binding::InitHttpFront(env, exports);
  skylark::binding::InitRtpFanout(env, exports);
  skylark::binding::InitMemory(env, exports);
  skylark::binding::InitWhipReceive(env, exports);
  skylark::binding::InitLoopCoalesce(env, exports);
  skylark::binding::InitFileAppend(env, exports);
  exports.Set("abiVersion", Napi::Number::New(env, 1));
  return exports;
}

}  // namespace

NODE_API_MODULE(skylark, Init)
