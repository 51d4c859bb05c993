// class TsSegmenter — one per live stream: FLV AAC audio in, MPEG-TS HLS segments out.
// See docs/native-api.md "TsSegmenter" and native/core/segment/ts_segmenter.h (timing policy).
//
//   new TsSegmenter(options?: { targetDurationMs?: number })   // ms, integer 100..60000, default 2000
//   pushAudio(timestampMs: number, data: Uint8Array): SegmentEvent[]
//       timestampMs: RTMP timestamp (ms; taken modulo 2^32); data: one FLV AUDIODATA body
//   flush(): SegmentEvent[]          // ends the open segment
//   discontinuity(): void            // the next audio starts a segment flagged discontinuity
//
// SegmentEvent:
//   { type: 'config', codec: 'aac', codecs: 'mp4a.40.2', sampleRate: Hz, channels, audioObjectType }
//   { type: 'segment', sequence, data: Buffer (external, owns the bytes), durationMs, pts90k,
//     discontinuity, frames }
//   { type: 'error', code, message }  — audio_before_sequence_header | bad_audio_specific_config |
//     unsupported_codec | invalid_audio_tag; the tag is dropped, the segmenter goes on.
// Output: MPEG-TS per ISO/IEC 13818-1 (PAT, audio-only PMT with stream_type 0x0F, PCR on the audio
// PID) carrying ADTS (ISO/IEC 14496-3 §1.A.2) built from the AudioSpecificConfig (§1.6.2.1); segments
// as RFC 8216 §3.2 and §4.3.3 expect (durations for EXTINF, discontinuity flag, media sequence).
// Wrong argument types throw TypeError; media problems never throw.
#include "binding/segmenter.h"

#include <cmath>
#include <vector>

#include "core/segment/ts_segmenter.h"

namespace skylark::binding {
namespace {

using segment::SegmenterEvent;

class TsSegmenterWrap : public Napi::ObjectWrap<TsSegmenterWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "TsSegmenter",
                       {InstanceMethod<&TsSegmenterWrap::PushAudio>("pushAudio"),
                        InstanceMethod<&TsSegmenterWrap::Flush>("flush"),
                        InstanceMethod<&TsSegmenterWrap::Discontinuity>("discontinuity")});
  }

  explicit TsSegmenterWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<TsSegmenterWrap>(info) {
    Napi::Env env = info.Env();
    uint32_t target = segment::kDefaultTargetDurationMs;
    if (info.Length() > 0 && !info[0].IsUndefined()) {
      if (!info[0].IsObject()) { Napi::TypeError::New(env, "options must be an object").ThrowAsJavaScriptException(); return; }
      Napi::Value v = info[0].As<Napi::Object>().Get("targetDurationMs");
      if (!v.IsUndefined()) {
        double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
        if (!(d >= 100 && d <= 60000) || d != std::floor(d)) { Napi::TypeError::New(env, "targetDurationMs must be an integer from 100 to 60000").ThrowAsJavaScriptException(); return; }
        target = static_cast<uint32_t>(d);
      }
    }
    core_ = std::make_unique<segment::TsSegmenter>(target);
  }

 private:
  // Re-entrancy guard (nothing we call runs JS, but a finalizer or a future callback must not nest).
  struct Busy {
    explicit Busy(bool& f) : flag(f), entered(!f) { flag = true; }
    ~Busy() { if (entered) flag = false; }
    bool& flag;
    bool entered;
  };

  Napi::Value PushAudio(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!core_) { Napi::Error::New(env, "TsSegmenter was not constructed").ThrowAsJavaScriptException(); return env.Undefined(); }
    if (info.Length() < 1 || !info[0].IsNumber()) { Napi::TypeError::New(env, "timestampMs must be a number").ThrowAsJavaScriptException(); return env.Undefined(); }
    if (info.Length() < 2 || !info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) { Napi::TypeError::New(env, "data must be a Uint8Array").ThrowAsJavaScriptException(); return env.Undefined(); }
    double ts = info[0].As<Napi::Number>().DoubleValue();
    if (!std::isfinite(ts)) { Napi::TypeError::New(env, "timestampMs must be finite").ThrowAsJavaScriptException(); return env.Undefined(); }
    Busy busy(busy_);
    if (!busy.entered) { Napi::Error::New(env, "TsSegmenter is busy (re-entrant call)").ThrowAsJavaScriptException(); return env.Undefined(); }
    Napi::Uint8Array data = info[1].As<Napi::Uint8Array>();
    // RTMP timestamps are a 32-bit ms clock: reduce modulo 2^32 (negative values wrap too).
    const uint32_t ts32 = static_cast<uint32_t>(static_cast<int64_t>(std::fmod(std::floor(ts), 4294967296.0)));
    events_.clear();
    core_->push_audio(ts32, data.Data(), data.ByteLength(), events_);
    return ToArray(env);
  }

  Napi::Value Flush(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!core_) { Napi::Error::New(env, "TsSegmenter was not constructed").ThrowAsJavaScriptException(); return env.Undefined(); }
    Busy busy(busy_);
    if (!busy.entered) { Napi::Error::New(env, "TsSegmenter is busy (re-entrant call)").ThrowAsJavaScriptException(); return env.Undefined(); }
    events_.clear();
    core_->flush(events_);
    return ToArray(env);
  }

  Napi::Value Discontinuity(const Napi::CallbackInfo& info) {
    if (core_) core_->discontinuity();
    return info.Env().Undefined();
  }

  Napi::Array ToArray(Napi::Env env) {
    Napi::Array arr = Napi::Array::New(env, events_.size());
    for (size_t i = 0; i < events_.size(); ++i) arr.Set(static_cast<uint32_t>(i), ToObject(env, events_[i]));
    events_.clear();
    return arr;
  }

  static Napi::Object ToObject(Napi::Env env, SegmenterEvent& e) {
    Napi::Object o = Napi::Object::New(env);
    switch (e.type) {
      case SegmenterEvent::Type::kConfig:
        o.Set("type", "config");
        o.Set("codec", "aac");
        o.Set("codecs", Napi::String::New(env, e.codecs));
        o.Set("sampleRate", Napi::Number::New(env, e.sample_rate));
        o.Set("channels", Napi::Number::New(env, e.channels));
        o.Set("audioObjectType", Napi::Number::New(env, e.audio_object_type));
        break;
      case SegmenterEvent::Type::kSegment:
        o.Set("type", "segment");
        o.Set("sequence", Napi::Number::New(env, static_cast<double>(e.sequence)));
        o.Set("data", ExternalBuffer(env, std::move(e.data)));
        o.Set("durationMs", Napi::Number::New(env, e.duration_ms));
        o.Set("pts90k", Napi::Number::New(env, static_cast<double>(e.pts90k)));
        o.Set("discontinuity", Napi::Boolean::New(env, e.discontinuity));
        o.Set("frames", Napi::Number::New(env, e.frames));
        break;
      case SegmenterEvent::Type::kError:
        o.Set("type", "error");
        o.Set("code", e.code);
        o.Set("message", e.message);
        break;
    }
    return o;
  }

  // Hands the segment's bytes to JS without a copy: the Buffer's finalizer owns the vector.
  static Napi::Buffer<uint8_t> ExternalBuffer(Napi::Env env, std::vector<uint8_t>&& bytes) {
    auto* owned = new std::vector<uint8_t>(std::move(bytes));
    const int64_t size = static_cast<int64_t>(owned->size());
    if (owned->empty()) {  // a zero-length external buffer has no data pointer to own
      delete owned;
      return Napi::Buffer<uint8_t>::New(env, 0);
    }
    Napi::MemoryManagement::AdjustExternalMemory(env, size);
    return Napi::Buffer<uint8_t>::New(env, owned->data(), owned->size(),
                                      [size](Napi::Env fenv, uint8_t*, std::vector<uint8_t>* hint) {
                                        Napi::MemoryManagement::AdjustExternalMemory(fenv, -size);
                                        delete hint;
                                      },
                                      owned);
  }

  std::unique_ptr<segment::TsSegmenter> core_;
  std::vector<SegmenterEvent> events_;
  bool busy_ = false;
};

}  // namespace

void InitTsSegmenter(Napi::Env env, Napi::Object exports, AddonState& state) {
  Napi::Function ctor = TsSegmenterWrap::Define(env);
  state.tsSegmenter = Napi::Persistent(ctor);
  exports.Set("TsSegmenter", ctor);
}

}  // namespace skylark::binding
