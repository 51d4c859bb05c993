// Per-instance addon state (one per Node environment / worker thread), owned by addon.cc: Node
// deletes it when the environment tears down. Only addon.cc and binding/ include napi.h.
#pragma once
#include <napi.h>

namespace skylark::binding {

struct AddonState {
  Napi::FunctionReference segmenter;     // class Segmenter (binding/segmenter.cc)
  Napi::FunctionReference rtmpAddon;     // class RtmpAddon (binding/rtmp_addon.cc)
};

// Registers class Segmenter on `exports` and stores its constructor in `state` (RtmpAddon.route
// recognises a Segmenter by it).
void InitSegmenter(Napi::Env env, Napi::Object exports, AddonState& state);

// Registers class RtmpAddon (the ingest listener over native/io, on Node's libuv loop) on `exports`.
void InitRtmpAddon(Napi::Env env, Napi::Object exports, AddonState& state);

}  // namespace skylark::binding
