// class Segmenter: the JS face of segment::Segmenter (docs/native-api.md "Segmenter"), and what the
// RTMP server's routes push into it from C++.
#pragma once
#include <cstddef>
#include <cstdint>

#include "binding/addon_state.h"

namespace skylark::binding {

// What the native RTMP server (binding/rtmp_addon.cc) feeds a JS Segmenter object with, without
// a JS call per message: PushNative() keeps the segmenter's events until TakeNativeEvents() turns
// them into the same event objects pushAudio() returns.
class NativeSegmenterInput {
 public:
  virtual ~NativeSegmenterInput() = default;
  // One FLV AUDIODATA body (RTMP timestamp in ms). False when the segmenter is busy (a JS call on
  // it is running: the frame is not pushed).
  virtual bool PushNative(uint32_t timestamp_ms, const uint8_t* data, size_t size) = 0;
  // Whether PushNative() left events for TakeNativeEvents().
  virtual bool HasNativeEvents() const = 0;
  // The kept events as a JS array of SegmenterEvent objects (then none are kept).
  virtual Napi::Value TakeNativeEvents(Napi::Env env) = 0;
  // Media time (ms) before the open part or segment reaches its target (0 = unknown / soon).
  virtual uint32_t MsToNextCut() const = 0;
};

// The native face of a JS `Segmenter` instance, or nullptr when `value` is anything else.
NativeSegmenterInput* UnwrapSegmenter(Napi::Env env, Napi::Value value);

}  // namespace skylark::binding
