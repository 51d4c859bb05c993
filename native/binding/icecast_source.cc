// class IcecastSource for JS: a thin wrapper over skylark::icecast::SourceStream
// (native/core/icecast), the sans-I/O parser of one Icecast source connection's request body (MP3,
// ADTS or Ogg Opus bytes in; FLV audio messages, OpusTags and a sticky error out). Shapes:
// docs/native-api.md "IcecastSource".
//
//   new IcecastSource(codec: 'mp3'|'aac'|'opus', options?: { maxFrameBytes?: integer 1024..1048576 })
//   push(data: Uint8Array): number   // (items << 3) | flags; the batch is in buffers()
//   buffers(): [meta: ArrayBuffer, arena: ArrayBuffer]
//   takeEvents(): IcecastSourceEvent[]   // the non-audio items of the last push, in order
//   stats, tags, retainedBytes, failed   // accessors
//
// Hot path: push() creates no JS object per message. The batch layout is RtmpSession's
// (binding/rtmp_batch.h): meta (Float64) [0] = audio bytes; per item i, [1+2i] = timestamp in ms
// (audio) or -1 (an event), [2+2i] = end offset of the audio body in arena. Media problems never
// throw (an error event, sticky); wrong JS arguments throw a TypeError.
#include "binding/addon_state.h"
#include "binding/rtmp_batch.h"
#include "binding/guards.h"
#include "core/icecast/source_stream.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <string>

namespace skylark::binding {
namespace {

using icecast::SourceItem;
using icecast::SourceNotice;

// Reads the constructor arguments into `out`; false with a pending TypeError when they are wrong.
bool ParseArgs(const Napi::CallbackInfo& info, icecast::SourceStreamOptions* out) {
  Napi::Env env = info.Env();
  const std::string codec = info.Length() > 0 && info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "";
  if (codec == "mp3") out->codec = icecast::SourceCodec::kMp3;
  else if (codec == "aac") out->codec = icecast::SourceCodec::kAac;
  else if (codec == "opus") out->codec = icecast::SourceCodec::kOpus;
  else return ThrowTypeError(env, "IcecastSource: codec must be 'mp3', 'aac' or 'opus'");
  if (info.Length() < 2 || info[1].IsUndefined() || info[1].IsNull()) return true;
  if (!ArgObject(info, 1, "IcecastSource: options must be an object")) return false;
  return OptionalIntegerFor("IcecastSource", env, info[1].As<Napi::Object>(), "maxFrameBytes", icecast::kMinMaxFrameBytes,
                            icecast::kMaxMaxFrameBytes, &out->max_frame_bytes);
}

/** IcecastSource(codec, options?) — one Icecast source connection (PUT / SOURCE request body). */
class IcecastSource : public Napi::ObjectWrap<IcecastSource> {
 public:
  explicit IcecastSource(const Napi::CallbackInfo& info) : Napi::ObjectWrap<IcecastSource>(info) {
    icecast::SourceStreamOptions opts;
    if (!ParseArgs(info, &opts)) return;
    stream_ = std::make_unique<icecast::SourceStream>(opts);
  }

  /** push(data: Uint8Array): number — feeds request body bytes (any split). Returns
   *  (items << 3) | flags: kBuffersChanged (call buffers() again), kEvents (takeEvents() has the
   *  tags/error items of the batch). The batch is valid until the next push(). */
  Napi::Value Push(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const uint8_t* data = nullptr;
    size_t length = 0;
    SK_GUARD(ArgBytes(info, 0, "IcecastSource.push: data must be a Uint8Array", &data, &length));
    SK_GUARD(Require(env, !busy_, "IcecastSource.push: re-entrant call"));
    busy_ = true;
    stream_->push(data, length);
    busy_ = false;
    events_taken_ = false;
    const icecast::SourceBatch& b = stream_->batch();
    uint32_t flags = 0;
    if (b.items.size() != b.audio_count) flags |= kEvents;
    if (batch_.Ensure(env, b.items.size(), b.arena.size())) flags |= kBuffersChanged;
    batch_.Begin(b.arena.size());
    for (const SourceItem& it : b.items) {
      if (it.type == SourceItem::Type::kAudio) batch_.Audio(it.timestamp_ms, b.arena.data() + it.offset, it.size);
      else batch_.Control();
    }
    return Napi::Number::New(env, static_cast<double>(b.items.size()) * 8 + flags);
  }

  /** buffers(): [meta: ArrayBuffer, arena: ArrayBuffer] (replaced when push() says kBuffersChanged). */
  Napi::Value Buffers(const Napi::CallbackInfo& info) { return batch_.Pair(info.Env()); }

  /** takeEvents(): the tags/error items of the last push(), in order, as objects (then []). */
  Napi::Value TakeEvents(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const icecast::SourceBatch& b = stream_->batch();
    Napi::Array arr = Napi::Array::New(env);
    if (events_taken_) return arr;
    uint32_t k = 0;
    for (const SourceItem& it : b.items) {
      if (it.type == SourceItem::Type::kTags) arr.Set(k++, TagsToJs(env, b.notices[it.notice], it.timestamp_ms));
      else if (it.type == SourceItem::Type::kError) arr.Set(k++, ErrorToJs(env, b.notices[it.notice]));
    }
    events_taken_ = true;
    return arr;
  }

  /** stats: the parser's counters (bytes and counts since the start). */
  Napi::Value Stats(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const icecast::SourceStats& s = stream_->stats();
    Napi::Object o = Napi::Object::New(env);
    auto n = [&env](uint64_t v) { return Napi::Number::New(env, static_cast<double>(v)); };
    o.Set("bytesIn", n(s.bytes_in));
    o.Set("messages", n(s.messages));
    o.Set("junkBytes", n(s.junk_bytes));
    o.Set("tagBytes", n(s.tag_bytes));
    o.Set("infoFrames", n(s.info_frames));
    o.Set("syncLosses", n(s.sync_losses));
    o.Set("badCrcPages", n(s.bad_crc_pages));
    o.Set("ignoredPages", n(s.ignored_pages));
    o.Set("pageGaps", n(s.page_gaps));
    o.Set("droppedPackets", n(s.dropped_packets));
    o.Set("chainedStreams", n(s.chained_streams));
    return o;
  }

  /** tags: the newest OpusTags as {vendor, comments, truncated}, or null. */
  Napi::Value Tags(const Napi::CallbackInfo& info) {
    const SourceNotice* t = stream_->tags();
    return t ? TagsToJs(info.Env(), *t, -1) : info.Env().Null();
  }

  /** retainedBytes: bytes held between pushes (a partial frame, page or packet). */
  Napi::Value RetainedBytes(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(stream_->retained_bytes()));
  }

  /** failed: the sticky error happened. */
  Napi::Value Failed(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), stream_->failed()); }

 private:
  static constexpr uint32_t kBuffersChanged = 2, kEvents = 4;  // mirrored in src/native/icecast-source.ts

  static Napi::Object TagsToJs(Napi::Env env, const SourceNotice& n, double timestamp_ms) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("type", "tags");
    if (timestamp_ms >= 0) o.Set("timestampMs", Napi::Number::New(env, timestamp_ms));
    o.Set("vendor", Napi::String::New(env, n.vendor));
    Napi::Array c = Napi::Array::New(env, n.comments.size());
    for (uint32_t i = 0; i < n.comments.size(); ++i) c.Set(i, Napi::String::New(env, n.comments[i]));
    o.Set("comments", c);
    o.Set("truncated", Napi::Boolean::New(env, n.truncated));
    return o;
  }

  static Napi::Object ErrorToJs(Napi::Env env, const SourceNotice& n) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("type", "error");
    o.Set("code", n.code);
    o.Set("message", n.message);
    if (*n.expected) o.Set("expected", n.expected);
    if (*n.received) o.Set("received", n.received);
    return o;
  }

  std::unique_ptr<icecast::SourceStream> stream_;
  bool busy_ = false;
  bool events_taken_ = false;  // takeEvents() ran since the last push()
  BatchBuffers batch_;
};

}  // namespace

void InitIcecastSource(Napi::Env env, Napi::Object exports, AddonState& state) {
  Napi::Function ctor = IcecastSource::DefineClass(
      env, "IcecastSource",
      {IcecastSource::InstanceMethod<&IcecastSource::Push>("push"),
       IcecastSource::InstanceMethod<&IcecastSource::Buffers>("buffers"),
       IcecastSource::InstanceMethod<&IcecastSource::TakeEvents>("takeEvents"),
       IcecastSource::InstanceAccessor<&IcecastSource::Stats>("stats"),
       IcecastSource::InstanceAccessor<&IcecastSource::Tags>("tags"),
       IcecastSource::InstanceAccessor<&IcecastSource::RetainedBytes>("retainedBytes"),
       IcecastSource::InstanceAccessor<&IcecastSource::Failed>("failed")});
  exports.Set("IcecastSource", ctor);
}

}  // namespace skylark::binding
