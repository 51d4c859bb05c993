// The batch buffers that carry a read's audio bodies to JS without an object per message (RtmpAddon,
// binding/rtmp_addon.cc, and any binding that hands JS a batch of audio messages), and RTMP
// control events (connect, publish, ...) as JS objects. Layout: docs/native-api.md "RtmpServer".
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "binding/addon_state.h"
#include "core/rtmp/session.h"

namespace skylark::binding {

// Two plain ArrayBuffers held by strong references, reused from batch to batch:
//   meta  (Float64): [0] = audio bytes of the batch; per event i, [1+2i] = timestamp in ms (audio;
//         plus kind * 2^32 when the caller gives one: RtmpAddon's 0 sequence header / 1 coded
//         frame / 2 other) or -1 (another event), [2+2i] = end offset of the audio body in `arena`;
//   arena (bytes):   the audio bodies back to back from 0.
// They start at 128 events / 16 KiB, grow to fit a batch and shrink back after one over 1 MiB.
class BatchBuffers {
 public:
  // Makes room for `events` events and `audio_bytes` bytes; true when a buffer was replaced (JS
  // must fetch Pair() again). Never replaces a buffer when both already fit.
  bool Ensure(Napi::Env env, size_t events, size_t audio_bytes);
  // [meta, arena] for JS (created on first use).
  Napi::Value Pair(Napi::Env env);
  // Fills the batch (after Ensure() made room): Begin, then per event in order Audio or Control.
  void Begin(size_t audio_bytes) {
    meta_[0] = static_cast<double>(audio_bytes);
    at_ = 0;
    slot_ = 0;
  }
  // `kind` (0 when the caller has none): the timestamp slot holds timestamp + kind * 2^32.
  void Audio(uint32_t timestamp_ms, const uint8_t* body, size_t size, uint32_t kind = 0) {
    if (size > 0) std::memcpy(arena_ + at_, body, size);
    at_ += size;
    meta_[1 + 2 * slot_] = static_cast<double>(timestamp_ms) + static_cast<double>(kind) * 4294967296.0;
    meta_[2 + 2 * slot_] = static_cast<double>(at_);
    ++slot_;
  }
  void Control() {
    meta_[1 + 2 * slot_] = -1;
    meta_[2 + 2 * slot_] = static_cast<double>(at_);
    ++slot_;
  }

 private:
  size_t at_ = 0, slot_ = 0;
  Napi::Reference<Napi::ArrayBuffer> meta_ref_, arena_ref_;
  double* meta_ = nullptr;
  size_t meta_slots_ = 0;
  uint8_t* arena_ = nullptr;
  size_t arena_size_ = 0;
};

// A control event (not audio) as the JS RtmpControlEvent object: {type: 'connect', app, tcUrl,
// flashVer, fourCcList} | {type: 'publish', streamName, publishType, streamId} | {type:
// 'unpublish', streamId} | {type: 'metadata', values} | {type: 'error', code, message}.
Napi::Object ControlEventToJs(Napi::Env env, const rtmp::Event& e);

}  // namespace skylark::binding
