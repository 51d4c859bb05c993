// BatchBuffers and ControlEventToJs: see binding/rtmp_batch.h.
#include "binding/rtmp_batch.h"

#include <algorithm>
#include <string_view>

namespace skylark::binding {
namespace {
constexpr size_t kMetaSlots = 128;            // initial events per batch
constexpr size_t kArenaBytes = 16 * 1024;     // initial audio bytes per batch
constexpr size_t kShrinkAbove = 1024 * 1024;  // a grown arena goes back to the default size
                                              // after a batch that fits in it
}  // namespace

bool BatchBuffers::Ensure(Napi::Env env, size_t events, size_t audio_bytes) {
  bool changed = false;
  const size_t slots = 1 + 2 * events;
  if (meta_ref_.IsEmpty() || slots > meta_slots_) {
    size_t n = std::max(slots, meta_ref_.IsEmpty() ? 1 + 2 * kMetaSlots : 2 * meta_slots_);
    Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, n * sizeof(double));
    meta_ = static_cast<double*>(ab.Data());
    meta_slots_ = n;
    meta_ref_ = Napi::Persistent(ab);
    changed = true;
  }
  const bool shrink = arena_size_ > kShrinkAbove && audio_bytes <= kArenaBytes;
  if (arena_ref_.IsEmpty() || audio_bytes > arena_size_ || shrink) {
    size_t n = shrink || arena_ref_.IsEmpty() ? kArenaBytes : std::max(audio_bytes, 2 * arena_size_);
    n = std::max(n, audio_bytes);
    Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, n);
    arena_ = static_cast<uint8_t*>(ab.Data());
    arena_size_ = n;
    arena_ref_ = Napi::Persistent(ab);
    changed = true;
  }
  return changed;
}

Napi::Value BatchBuffers::Pair(Napi::Env env) {
  if (meta_ref_.IsEmpty() || arena_ref_.IsEmpty()) Ensure(env, 0, 0);
  Napi::Array a = Napi::Array::New(env, 2);
  a.Set(0u, meta_ref_.Value());
  a.Set(1u, arena_ref_.Value());
  return a;
}

Napi::Object ControlEventToJs(Napi::Env env, const rtmp::Event& e) {
  using rtmp::Event;
  Napi::Object o = Napi::Object::New(env);
  switch (e.type) {
    case Event::Type::kConnect: {
      o.Set("type", "connect");
      o.Set("app", e.app);
      o.Set("tcUrl", e.tc_url);
      o.Set("flashVer", e.flash_ver);
      Napi::Array list = Napi::Array::New(env, e.four_cc_list.size());
      for (uint32_t i = 0; i < e.four_cc_list.size(); ++i) list.Set(i, e.four_cc_list[i]);
      o.Set("fourCcList", list);
      break;
    }
    case Event::Type::kPublish:
      o.Set("type", "publish");
      o.Set("streamName", e.stream_name);
      o.Set("publishType", e.publish_type);
      o.Set("streamId", Napi::Number::New(env, e.stream_id));
      break;
    case Event::Type::kUnpublish:
      o.Set("type", "unpublish");
      o.Set("streamId", Napi::Number::New(env, e.stream_id));
      break;
    case Event::Type::kMetadata: {
      o.Set("type", "metadata");
      Napi::Object values = Napi::Object::New(env);
      for (const auto& mv : e.metadata) {
        switch (mv.kind) {
          case rtmp::MetaValue::Kind::kNumber: values.Set(mv.key, Napi::Number::New(env, mv.number)); break;
          case rtmp::MetaValue::Kind::kBoolean: values.Set(mv.key, Napi::Boolean::New(env, mv.boolean)); break;
          case rtmp::MetaValue::Kind::kString: values.Set(mv.key, mv.str); break;
        }
      }
      o.Set("values", values);
      break;
    }
    case Event::Type::kError: {
      o.Set("type", "error");
      std::string_view code = util::status_code(e.code);
      o.Set("code", Napi::String::New(env, code.data(), code.size()));
      o.Set("message", e.message);
      break;
    }
    case Event::Type::kAudio:
      o.Set("type", "audio");  // callers build audio events themselves (bodies go through the arena)
      break;
  }
  return o;
}

}  // namespace skylark::binding
