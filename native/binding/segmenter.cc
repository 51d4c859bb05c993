// class Segmenter — one per live stream layer: FLV audio (AAC, MP3, Opus; classic and Enhanced
// RTMP) in; MPEG-TS or fMP4/CMAF segments and LL-HLS parts out. See docs/native-api.md
// "Segmenter" and native/core/segment/segmenter.h (timing and cutting policy).
//
//   new Segmenter({ container: 'ts'|'fmp4', targetDurationMs?, partTargetMs?, expectCodec?,
//                   maxFrameBytes?, maxSegmentBytes?, segmentBytes? })
//       targetDurationMs: integer 100..60000 (default 2000); partTargetMs: 0 (default, no parts) or
//       an integer 50..targetDurationMs, fmp4 only; expectCodec: 'aac'|'mp3'|'opus' (opus needs fmp4);
//       maxFrameBytes: integer 0..16777215, maxSegmentBytes: integer 0..4294967295 (0 or unset = no
//       cap; error events frame_too_large / segment_too_large, the frame dropped); segmentBytes:
//       boolean (default true), with parts only: false = segment events carry empty `data` (the
//       caller joins the parts)
//   pushAudio(timestampMs: number, data: Uint8Array): SegmenterEvent[]
//   pushMetadata(timestampMs: number, fields: { title: string, artist?, album?, url?: string | null }): void
//                                    // a now-playing change: timed ID3 in the part / segment of the
//                                    // first pending frame at or after timestampMs
//   flush(): SegmenterEvent[]        // ends the open segment
//   discontinuity(): void            // the next audio starts a segment flagged discontinuity
//
// Finished bytes (segments, parts, init segments) are external Buffers that own their memory (no
// copy). Wrong argument types throw TypeError; media problems never throw (error events).
#include "binding/segmenter.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "binding/guards.h"
#include "core/mux/id3/tag.h"
#include "core/segment/segmenter.h"

namespace skylark::binding {
namespace {

using segment::SegmenterEvent;

// Hands bytes to JS without a copy: the Buffer's finalizer owns the vector.
Napi::Buffer<uint8_t> ExternalBuffer(Napi::Env env, std::vector<uint8_t>&& bytes) {
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

// Parses the Segmenter options; false with a pending TypeError when they are wrong.
bool ParseOptions(const Napi::CallbackInfo& info, segment::SegmenterOptions* opt) {
  Napi::Env env = info.Env();
  if (info.Length() == 0 || info[0].IsUndefined())
    return ThrowTypeError(env, "options must be an object with container 'ts' or 'fmp4'");
  if (!ArgObject(info, 0, "options must be an object")) return false;
  Napi::Object o = info[0].As<Napi::Object>();
  if (!OptionalInteger(env, o, "targetDurationMs", 100, 60000, &opt->target_duration_ms,
                       "targetDurationMs must be an integer from 100 to 60000"))
    return false;
  Napi::Value c = o.Get("container");
  const std::string container = c.IsString() ? c.As<Napi::String>().Utf8Value() : "";
  if (container == "ts") opt->container = segment::Container::kTs;
  else if (container == "fmp4") opt->container = segment::Container::kFmp4;
  else return ThrowTypeError(env, "container must be 'ts' or 'fmp4'");
  constexpr const char* kParts = "partTargetMs must be 0 or an integer from 50 to targetDurationMs";
  if (!OptionalInteger(env, o, "partTargetMs", 0, 60000, &opt->part_target_ms, kParts)) return false;
  if (opt->part_target_ms != 0) {
    if (opt->part_target_ms < 50 || opt->part_target_ms > opt->target_duration_ms) return ThrowTypeError(env, kParts);
    if (opt->container != segment::Container::kFmp4)
      return ThrowTypeError(env, "partTargetMs (LL-HLS parts) needs container 'fmp4'");
  }
  if (!OptionalInteger(env, o, "maxFrameBytes", 0, 16777215, &opt->max_frame_bytes,
                       "maxFrameBytes must be an integer from 0 (no cap) to 16777215") ||
      !OptionalInteger(env, o, "maxSegmentBytes", 0, 4294967295.0, &opt->max_segment_bytes,
                       "maxSegmentBytes must be an integer from 0 (no cap) to 4294967295"))
    return false;
  Napi::Value sb = o.Get("segmentBytes");
  if (!sb.IsUndefined()) {
    if (!sb.IsBoolean()) return ThrowTypeError(env, "segmentBytes must be a boolean");
    opt->segment_bytes = sb.As<Napi::Boolean>().Value();
  }
  Napi::Value e = o.Get("expectCodec");
  if (!e.IsUndefined()) {
    const std::string codec = e.IsString() ? e.As<Napi::String>().Utf8Value() : "";
    if (codec == "aac") opt->expect = codec::AudioCodec::kAac;
    else if (codec == "mp3") opt->expect = codec::AudioCodec::kMp3;
    else if (codec == "opus") opt->expect = codec::AudioCodec::kOpus;
    else return ThrowTypeError(env, "expectCodec must be 'aac', 'mp3' or 'opus'");
    if (opt->expect == codec::AudioCodec::kOpus && opt->container != segment::Container::kFmp4)
      return ThrowTypeError(env, "Opus is carried only in container 'fmp4'");
  }
  return true;
}

// Re-entrancy guard: a call from JS and a push from the RTMP server (PushNative) never nest.
struct Busy {
  explicit Busy(bool& f) : flag(f), entered(!f) { flag = true; }
  ~Busy() { if (entered) flag = false; }
  bool& flag;
  bool entered;
};

class SegmenterWrap : public Napi::ObjectWrap<SegmenterWrap>, public NativeSegmenterInput {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Segmenter",
                       {InstanceMethod<&SegmenterWrap::PushAudio>("pushAudio"),
                        InstanceMethod<&SegmenterWrap::PushMetadata>("pushMetadata"),
                        InstanceMethod<&SegmenterWrap::Flush>("flush"),
                        InstanceMethod<&SegmenterWrap::Discontinuity>("discontinuity")});
  }

  explicit SegmenterWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<SegmenterWrap>(info) {
    segment::SegmenterOptions opt;
    if (!ParseOptions(info, &opt)) return;
    core_ = std::make_unique<segment::Segmenter>(opt);
  }

 private:
  // The core exists (the constructor did not throw) and no call on it is running.
  static bool Usable(Napi::Env env, const std::unique_ptr<segment::Segmenter>& core, const Busy& busy) {
    if (!core) {
      Napi::Error::New(env, "Segmenter was not constructed").ThrowAsJavaScriptException();
      return false;
    }
    if (!busy.entered) {
      Napi::Error::New(env, "Segmenter is busy (re-entrant call)").ThrowAsJavaScriptException();
      return false;
    }
    return true;
  }

  Napi::Value PushAudio(const Napi::CallbackInfo& info) {
    double ts = 0;
    const uint8_t* data = nullptr;
    size_t size = 0;
    SK_GUARD(ArgNumber(info, 0, "timestampMs must be a number", &ts));
    SK_GUARD(ArgBytes(info, 1, "data must be a Uint8Array", &data, &size));
    SK_GUARD(Require(info.Env(), std::isfinite(ts), "timestampMs must be finite"));
    Busy busy(busy_);
    SK_GUARD(Usable(info.Env(), core_, busy));
    // RTMP timestamps are a 32-bit ms clock: reduce modulo 2^32 (negative values wrap too).
    const uint32_t ts32 = static_cast<uint32_t>(static_cast<int64_t>(std::fmod(std::floor(ts), 4294967296.0)));
    events_.clear();
    core_->push_audio(ts32, data, size, events_);
    return ToArray(info.Env());
  }

  // fields.<name>: a string (required) or, when `optional`, also null/undefined (= absent). Reads at
  // most what kMaxChars characters take in UTF-8 (the core cuts at kMaxChars characters; V8 writes
  // only whole characters, and lone surrogates as U+FFFD). False with a pending TypeError.
  static bool MetadataField(Napi::Env env, Napi::Object fields, const char* name, bool optional, std::string* out) {
    Napi::Value v = fields.Get(name);
    if (env.IsExceptionPending()) return false;  // a throwing getter
    if (optional && (v.IsUndefined() || v.IsNull())) return true;
    if (!v.IsString())
      return ThrowTypeError(env, optional ? "fields.artist, fields.album and fields.url must be strings, null or undefined"
                                          : "fields.title must be a string");
    char buf[mux::id3::max_text_bytes(mux::id3::kMaxChars) + 1];
    size_t len = 0;
    if (napi_get_value_string_utf8(env, v, buf, sizeof buf, &len) != napi_ok) return ThrowTypeError(env, "unreadable string");
    out->assign(buf, len);
    return true;
  }

  Napi::Value PushMetadata(const Napi::CallbackInfo& info) {
    double ts = 0;
    SK_GUARD(ArgNumber(info, 0, "timestampMs must be a number", &ts));
    SK_GUARD(Require(info.Env(), std::isfinite(ts), "timestampMs must be finite"));
    SK_GUARD(ArgObject(info, 1, "fields must be an object { title, artist?, album?, url? }"));
    Napi::Object fields = info[1].As<Napi::Object>();
    std::string title, artist, album, url;
    SK_GUARD(MetadataField(info.Env(), fields, "title", false, &title) && MetadataField(info.Env(), fields, "artist", true, &artist) &&
             MetadataField(info.Env(), fields, "album", true, &album) && MetadataField(info.Env(), fields, "url", true, &url));
    Busy busy(busy_);
    SK_GUARD(Usable(info.Env(), core_, busy));
    const uint32_t ts32 = static_cast<uint32_t>(static_cast<int64_t>(std::fmod(std::floor(ts), 4294967296.0)));
    core_->push_metadata(ts32, mux::id3::NowPlaying{title, artist, album, url});
    return info.Env().Undefined();
  }

  Napi::Value Flush(const Napi::CallbackInfo& info) {
    Busy busy(busy_);
    SK_GUARD(Usable(info.Env(), core_, busy));
    events_.clear();
    core_->flush(events_);
    return ToArray(info.Env());
  }

  Napi::Value Discontinuity(const Napi::CallbackInfo& info) {
    if (core_) core_->discontinuity();
    return info.Env().Undefined();
  }

  // NativeSegmenterInput: events accumulate in native_events_ (never mixed with a JS call's).
  bool PushNative(uint32_t timestamp_ms, const uint8_t* data, size_t size) override {
    if (!core_ || busy_) return false;
    Busy busy(busy_);
    core_->push_audio(timestamp_ms, data, size, native_events_);
    return true;
  }
  bool HasNativeEvents() const override { return !native_events_.empty(); }
  uint32_t MsToNextCut() const override { return core_ ? core_->ms_to_next_cut() : 0; }
  Napi::Value TakeNativeEvents(Napi::Env env) override {
    if (!core_) return Napi::Array::New(env, 0);
    events_.swap(native_events_);
    Napi::Array arr = ToArray(env);  // clears events_
    native_events_.clear();
    return arr;
  }

  Napi::Array ToArray(Napi::Env env) {
    Napi::Array arr = Napi::Array::New(env, events_.size());
    const bool fmp4 = core_->options().container == segment::Container::kFmp4;
    const bool parts = fmp4 && core_->options().part_target_ms > 0;
    for (size_t i = 0; i < events_.size(); ++i)
      arr.Set(static_cast<uint32_t>(i), ToObject(env, events_[i], fmp4, parts));
    events_.clear();
    return arr;
  }

  static Napi::Object ToObject(Napi::Env env, SegmenterEvent& e, bool fmp4, bool parts) {
    Napi::Object o = Napi::Object::New(env);
    switch (e.type) {
      case SegmenterEvent::Type::kConfig:
        o.Set("type", "config");
        o.Set("codec", codec::audio_codec_name(e.codec));
        o.Set("codecs", Napi::String::New(env, e.codecs));
        o.Set("sampleRate", Napi::Number::New(env, e.sample_rate));
        o.Set("channels", Napi::Number::New(env, e.channels));
        if (e.codec == codec::AudioCodec::kAac) o.Set("audioObjectType", Napi::Number::New(env, e.audio_object_type));
        if (fmp4) {
          o.Set("timescale", Napi::Number::New(env, e.timescale));
          o.Set("init", ExternalBuffer(env, std::move(e.init)));
        }
        break;
      case SegmenterEvent::Type::kSegment:
      case SegmenterEvent::Type::kPart: {
        const bool part = e.type == SegmenterEvent::Type::kPart;
        o.Set("type", part ? "part" : "segment");
        o.Set("sequence", Napi::Number::New(env, static_cast<double>(e.sequence)));
        if (part) o.Set("partIndex", Napi::Number::New(env, e.part_index));
        o.Set("data", ExternalBuffer(env, std::move(e.data)));
        o.Set("durationMs", Napi::Number::New(env, e.duration_ms));
        o.Set("pts90k", Napi::Number::New(env, static_cast<double>(e.pts90k)));
        if (!part) o.Set("discontinuity", Napi::Boolean::New(env, e.discontinuity));
        o.Set("frames", Napi::Number::New(env, e.frames));
        if (!e.metadata.empty()) {
          Napi::Array marks = Napi::Array::New(env, e.metadata.size());
          for (size_t k = 0; k < e.metadata.size(); ++k) {
            const segment::MetadataMark& m = e.metadata[k];
            Napi::Object mo = Napi::Object::New(env);
            mo.Set("id", Napi::Number::New(env, m.id));
            mo.Set("timestampMs", Napi::Number::New(env, m.timestamp_ms));
            mo.Set("pts90k", Napi::Number::New(env, static_cast<double>(m.pts90k)));
            if (fmp4) mo.Set("presentationTime", Napi::Number::New(env, static_cast<double>(m.presentation_time)));
            marks.Set(static_cast<uint32_t>(k), mo);
          }
          o.Set("metadata", marks);
        }
        o.Set("independent", Napi::Boolean::New(env, e.independent));
        if (!part && parts) o.Set("parts", Napi::Number::New(env, e.part_index));
        if (fmp4) {
          o.Set("baseMediaDecodeTime", Napi::Number::New(env, static_cast<double>(e.base_media_decode_time)));
          o.Set("timescale", Napi::Number::New(env, e.timescale));
        }
        break;
      }
      case SegmenterEvent::Type::kError:
        o.Set("type", "error");
        o.Set("code", e.code);
        o.Set("message", e.message);
        if (!e.expected.empty()) {
          o.Set("expected", e.expected);
          o.Set("received", e.received);
        }
        break;
    }
    return o;
  }

  std::unique_ptr<segment::Segmenter> core_;
  std::vector<SegmenterEvent> events_;
  std::vector<SegmenterEvent> native_events_;  // from PushNative, until TakeNativeEvents
  bool busy_ = false;
};

}  // namespace

NativeSegmenterInput* UnwrapSegmenter(Napi::Env env, Napi::Value value) {
  AddonState* state = env.GetInstanceData<AddonState>();
  if (!state || state->segmenter.IsEmpty() || !value.IsObject()) return nullptr;
  Napi::Object o = value.As<Napi::Object>();
  bool is = false;
  if (napi_instanceof(env, o, state->segmenter.Value(), &is) != napi_ok || !is) return nullptr;
  return SegmenterWrap::Unwrap(o);
}

void InitSegmenter(Napi::Env env, Napi::Object exports, AddonState& state) {
  Napi::Function ctor = SegmenterWrap::Define(env);
  state.segmenter = Napi::Persistent(ctor);
  exports.Set("Segmenter", ctor);
}

}  // namespace skylark::binding
