// Fewer wake-ups of a busy HTTP thread, the JS face (io/loop_coalesce.h, docs/http.md "Fewer
// wake-ups under load"):
//
//   coalesceLoop(intervalUs: number, minConnections: number): void
//       starts (or reconfigures) the coalescing of the calling thread's event loop; intervalUs 0
//       stops sleeping. minConnections counts the HTTP front's open connections (io::OpenHttpConnections).
//   loopCoalesceCounts(): { waits: number, sleeps: number, sleptUs: number } | null   // this thread's
//
// One coalescer per thread (each HTTP thread has its own loop); it is closed with the thread's
// environment (an async cleanup hook: libuv must run the handle's close before the code goes).
// Wrong JS arguments throw a TypeError.
#include <napi.h>

#include <cstdint>

#include "io/http_front.h"
#include "io/loop_coalesce.h"

namespace skylark::binding {
namespace {

struct ThreadCoalescer {
  io::LoopCoalescer* coalescer = nullptr;
  napi_async_cleanup_hook_handle hook = nullptr;
};
thread_local ThreadCoalescer t_state;

void OnEnvCleanup(napi_async_cleanup_hook_handle, void*) {
  io::LoopCoalescer* c = t_state.coalescer;
  t_state.coalescer = nullptr;
  if (c == nullptr) {
    if (t_state.hook) napi_remove_async_cleanup_hook(t_state.hook);
    t_state.hook = nullptr;
    return;
  }
  c->Close([](io::LoopCoalescer* self) {
    delete self;
    napi_async_cleanup_hook_handle hook = t_state.hook;
    t_state.hook = nullptr;
    if (hook) napi_remove_async_cleanup_hook(hook);
  });
}

Napi::Value CoalesceLoop(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber()) {
    Napi::TypeError::New(env, "coalesceLoop(intervalUs: number, minConnections: number)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const double interval = info[0].As<Napi::Number>().DoubleValue();
  const double min_connections = info[1].As<Napi::Number>().DoubleValue();
  if (!(interval >= 0 && interval <= 100000) || !(min_connections >= 0 && min_connections <= 1e9)) {
    Napi::TypeError::New(env, "coalesceLoop: intervalUs must be 0-100000 and minConnections 0-1e9").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  io::LoopCoalesceOptions o;
  o.interval_us = static_cast<uint32_t>(interval);
  o.min_connections = static_cast<uint64_t>(min_connections);
  o.open_connections = &io::OpenHttpConnections;
  if (t_state.coalescer) {
    t_state.coalescer->Configure(o);
    return env.Undefined();
  }
  uv_loop_t* loop = nullptr;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok || loop == nullptr) {
    Napi::Error::New(env, "coalesceLoop: no event loop").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  t_state.coalescer = new io::LoopCoalescer(loop, o);
  napi_add_async_cleanup_hook(env, &OnEnvCleanup, nullptr, &t_state.hook);
  return env.Undefined();
}

Napi::Value Counts(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!t_state.coalescer) return env.Null();
  const io::LoopCoalesceCounts& c = t_state.coalescer->counts();
  auto out = Napi::Object::New(env);
  out.Set("waits", Napi::Number::New(env, static_cast<double>(c.waits)));
  out.Set("sleeps", Napi::Number::New(env, static_cast<double>(c.sleeps)));
  out.Set("sleptUs", Napi::Number::New(env, static_cast<double>(c.slept_us)));
  return out;
}

}  // namespace

void InitLoopCoalesce(Napi::Env env, Napi::Object exports) {
  exports.Set("coalesceLoop", Napi::Function::New(env, CoalesceLoop, "coalesceLoop"));
  exports.Set("loopCoalesceCounts", Napi::Function::New(env, Counts, "loopCoalesceCounts"));
}

}  // namespace skylark::binding
