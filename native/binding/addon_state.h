// Per-instance addon state (one per Node environment / worker thread), owned by addon.cc.
// The ONLY place besides binding/*.cc that includes napi.h is addon.cc.
#pragma once
#include <napi.h>

namespace skylark::binding {

struct AddonState {
  Napi::FunctionReference rtmpSession;   // class RtmpSession (binding/rtmp_session.cc)
  Napi::FunctionReference tsSegmenter;   // class TsSegmenter (binding/segmenter.cc)
  Napi::FunctionReference segmenter;     // class Segmenter (binding/segmenter.cc)
  Napi::FunctionReference rtmpServer;    // class RtmpServer (binding/rtmp_server.cc)
};

// Registers class RtmpSession on `exports` and stores its constructor in `state`.
void InitRtmpSession(Napi::Env env, Napi::Object exports, AddonState& state);
// Registers class TsSegmenter on `exports` and stores its constructor in `state`.
void InitTsSegmenter(Napi::Env env, Napi::Object exports, AddonState& state);
// Registers class Segmenter and function probeAudioTag on `exports`; stores the constructor in `state`.
void InitSegmenter(Napi::Env env, Napi::Object exports, AddonState& state);

// Registers class RtmpServer (the ingest listener, socket I/O on Node's libuv loop) on `exports`.
void InitRtmpServer(Napi::Env env, Napi::Object exports, AddonState& state);

}  // namespace skylark::binding
