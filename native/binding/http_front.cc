// The HTTP/1.0 front's JS face (io/http_front.h, docs/http.md "HTTP/1.0"):
//
//   installHttpFront(objectSuffix: string, cappedPrefixes: string[], sendBufferBytes: number,
//                    onConnection: (fd: number, head: Buffer) => void): string   // '' = installed
//   httpFrontCounts(): { http10: number, capped: number, incomplete: number, peerHits: number,
//                    coalesced: number }
//   setSendBuffer(fd: number, bytes: number): boolean   // SO_SNDBUF of a socket JS owns
//   putHttpObject(path: string, head: Uint8Array, body: Uint8Array): boolean   // io::PutHttpObject
//   deleteHttpObject(path: string): boolean
//   setHttpObjectsAnswering(on: boolean): void   // io::SetHttpObjectsAnswering
//   putHeldReload, deleteHeldReload, setHeldReloads, putHeldReloadCells, drainHeldReloads,
//   heldReloadCounts: blocking reloads held in native code (io::PutHeldReload and the rest)
//   (httpFrontCounts also gives objectHits, objectCut, objects, refused, idleClosed, objectsAnswered
//   and openConnections)
//
// `onConnection` runs on the thread that installed the front (the main thread), for each
// connection whose first request is HTTP/1.0, with a socket descriptor it owns and the bytes
// already read from it. Connections reach it through a thread-safe function, so any HTTP thread
// may hand off; when its queue is full (1024 waiting) the HTTP server keeps the connection (and
// refuses the HTTP/1.0 request as before). Wrong JS arguments throw a TypeError.
#include "binding/addon_state.h"
#include "binding/guards.h"
#include "io/http_front.h"

#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

namespace skylark::binding {
namespace {

struct Handed {
  int fd;
  std::vector<uint8_t> head;
};

std::mutex g_mu;
Napi::ThreadSafeFunction* g_tsfn = nullptr;  // guarded by g_mu

void CallJs(Napi::Env env, Napi::Function cb, Handed* item) {
  if (env == nullptr || cb.IsEmpty()) {  // the environment is tearing down
    close(item->fd);
    delete item;
    return;
  }
  const int fd = item->fd;
  auto head = Napi::Buffer<uint8_t>::Copy(env, item->head.data(), item->head.size());
  delete item;
  cb.Call({Napi::Number::New(env, fd), head});
}

bool Handoff(int fd, const uint8_t* bytes, size_t size) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_tsfn) return false;
  auto* item = new Handed{fd, std::vector<uint8_t>(bytes, bytes + size)};
  if (g_tsfn->NonBlockingCall(item, CallJs) != napi_ok) {
    delete item;
    return false;
  }
  return true;
}

void Teardown(void*) {
  io::SetHttp10Handoff(nullptr);
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_tsfn) return;
  g_tsfn->Release();
  delete g_tsfn;
  g_tsfn = nullptr;
}

Napi::Value Install(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 4 || !info[0].IsString() || !info[1].IsArray() || !info[2].IsNumber() || !info[3].IsFunction()) {
    ThrowTypeError(env, "installHttpFront(objectSuffix: string, cappedPrefixes: string[], sendBufferBytes: number, onConnection: function)");
    return env.Undefined();
  }
  io::HttpFrontOptions options;
  auto prefixes = info[1].As<Napi::Array>();
  for (uint32_t i = 0; i < prefixes.Length(); ++i) {
    Napi::Value p = prefixes.Get(i);
    if (!p.IsString()) {
      ThrowTypeError(env, "installHttpFront: cappedPrefixes must be strings");
      return env.Undefined();
    }
    options.capped_prefixes.push_back(p.As<Napi::String>().Utf8Value());
  }
  const double sndbuf = info[2].As<Napi::Number>().DoubleValue();
  if (!(sndbuf >= 0 && sndbuf <= 1 << 30)) {
    ThrowTypeError(env, "installHttpFront: sendBufferBytes must be 0..2^30");
    return env.Undefined();
  }
  options.send_buffer_bytes = static_cast<int>(sndbuf);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_tsfn) {
      g_tsfn->Release();
      delete g_tsfn;
    }
    g_tsfn = new Napi::ThreadSafeFunction(
        Napi::ThreadSafeFunction::New(env, info[3].As<Napi::Function>(), "skylark-http10", 1024, 1));
    g_tsfn->Unref(env);  // the front never keeps the process alive by itself
  }
  napi_add_env_cleanup_hook(env, Teardown, nullptr);
  const std::string error = io::InstallHttpFront(info[0].As<Napi::String>().Utf8Value(), options, Handoff);
  if (!error.empty()) Teardown(nullptr);
  return Napi::String::New(env, error);
}

Napi::Value Counts(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const io::HttpFrontCounts c = io::GetHttpFrontCounts();
  auto out = Napi::Object::New(env);
  out.Set("http10", Napi::Number::New(env, static_cast<double>(c.http10)));
  out.Set("capped", Napi::Number::New(env, static_cast<double>(c.capped)));
  out.Set("incomplete", Napi::Number::New(env, static_cast<double>(c.incomplete)));
  out.Set("peerHits", Napi::Number::New(env, static_cast<double>(c.peer_hits)));
  out.Set("coalesced", Napi::Number::New(env, static_cast<double>(c.coalesced)));
  out.Set("objectHits", Napi::Number::New(env, static_cast<double>(c.object_hits)));
  out.Set("objectCut", Napi::Number::New(env, static_cast<double>(c.object_cut)));
  out.Set("objects", Napi::Number::New(env, static_cast<double>(c.objects)));
  out.Set("refused", Napi::Number::New(env, static_cast<double>(c.refused)));
  out.Set("idleClosed", Napi::Number::New(env, static_cast<double>(c.idle_closed)));
  out.Set("objectsAnswered", Napi::Boolean::New(env, io::HttpObjectsAnswered()));
  out.Set("openConnections", Napi::Number::New(env, static_cast<double>(io::OpenHttpConnections())));
  return out;
}

// Bytes of a Buffer or any TypedArray (a view into its ArrayBuffer).
// Also of a SharedArrayBuffer (playlists rendered for every HTTP thread), whose data pointer comes
// from the view itself (Napi::ArrayBuffer refuses shared memory).
bool BytesOf(const Napi::Value& v, const uint8_t** data, size_t* size) {
  if (!v.IsTypedArray()) return false;
  auto ta = v.As<Napi::TypedArray>();
  napi_typedarray_type type;
  size_t length = 0;
  void* bytes = nullptr;
  if (napi_get_typedarray_info(v.Env(), v, &type, &length, &bytes, nullptr, nullptr) != napi_ok) return false;
  *data = static_cast<const uint8_t*>(bytes);
  *size = ta.ByteLength();
  return true;
}

Napi::Value PutObject(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint8_t *head = nullptr, *body = nullptr;
  size_t head_size = 0, body_size = 0;
  if (info.Length() < 3 || !info[0].IsString() || !BytesOf(info[1], &head, &head_size) || !BytesOf(info[2], &body, &body_size)) {
    ThrowTypeError(env, "putHttpObject(path: string, head: Uint8Array, body: Uint8Array)");
    return env.Undefined();
  }
  const std::string path = info[0].As<Napi::String>().Utf8Value();
  return Napi::Boolean::New(env, io::PutHttpObject(path, std::string_view(reinterpret_cast<const char*>(head), head_size), body, body_size));
}

Napi::Value DeleteObject(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) {
    ThrowTypeError(env, "deleteHttpObject(path: string)");
    return env.Undefined();
  }
  return Napi::Boolean::New(env, io::DeleteHttpObject(info[0].As<Napi::String>().Utf8Value()));
}

Napi::Value SetAnswering(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsBoolean()) {
    ThrowTypeError(env, "setHttpObjectsAnswering(on: boolean)");
    return env.Undefined();
  }
  io::SetHttpObjectsAnswering(info[0].As<Napi::Boolean>().Value());
  return env.Undefined();
}

Napi::Value SetSendBuffer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber()) {
    ThrowTypeError(env, "setSendBuffer(fd: number, bytes: number)");
    return env.Undefined();
  }
  const double fd = info[0].As<Napi::Number>().DoubleValue();
  const double bytes = info[1].As<Napi::Number>().DoubleValue();
  if (!(fd >= 0 && fd < 1 << 30) || !(bytes >= 1 && bytes <= 1 << 30)) {
    ThrowTypeError(env, "setSendBuffer: fd must be 0..2^30 and bytes 1..2^30");
    return env.Undefined();
  }
  const int value = static_cast<int>(bytes);
  return Napi::Boolean::New(env, setsockopt(static_cast<int>(fd), SOL_SOCKET, SO_SNDBUF, &value, sizeof value) == 0);
}

// putHeldReload(path, [nextSequence, openParts, previousParts, timeoutMs], heads: Uint8Array[4], bodies: Uint8Array[4]): boolean
Napi::Value PutReload(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* usage = "putHeldReload(path: string, at: number[4], heads: Uint8Array[4], bodies: Uint8Array[4])";
  if (info.Length() < 4 || !info[0].IsString() || !info[1].IsArray() || !info[2].IsArray() || !info[3].IsArray()) {
    ThrowTypeError(env, usage);
    return env.Undefined();
  }
  auto at = info[1].As<Napi::Array>();
  auto heads = info[2].As<Napi::Array>();
  auto bodies = info[3].As<Napi::Array>();
  if (at.Length() != 4 || heads.Length() != 4 || bodies.Length() != 4) {
    ThrowTypeError(env, usage);
    return env.Undefined();
  }
  double v[4];
  for (uint32_t i = 0; i < 4; ++i) {
    Napi::Value x = at.Get(i);
    if (!x.IsNumber()) {
      ThrowTypeError(env, usage);
      return env.Undefined();
    }
    v[i] = x.As<Napi::Number>().DoubleValue();
    if (!(v[i] >= 0 && v[i] <= 9007199254740991.0) || v[i] != static_cast<double>(static_cast<uint64_t>(v[i])) || (i > 0 && v[i] > 4294967295.0)) {
      ThrowTypeError(env, "putHeldReload: at must hold non-negative integers");
      return env.Undefined();
    }
  }
  std::string_view hv[4], bv[4];
  for (uint32_t i = 0; i < 4; ++i) {
    const uint8_t* d = nullptr;
    size_t n = 0;
    if (!BytesOf(heads.Get(i), &d, &n)) {
      ThrowTypeError(env, usage);
      return env.Undefined();
    }
    hv[i] = std::string_view(reinterpret_cast<const char*>(d), n);
    if (!BytesOf(bodies.Get(i), &d, &n)) {
      ThrowTypeError(env, usage);
      return env.Undefined();
    }
    bv[i] = std::string_view(reinterpret_cast<const char*>(d), n);
  }
  io::HeldReloadState state;
  state.next_sequence = static_cast<uint64_t>(v[0]);
  state.open_parts = static_cast<uint32_t>(v[1]);
  state.previous_parts = static_cast<uint32_t>(v[2]);
  state.timeout_ms = static_cast<uint32_t>(v[3]);
  return Napi::Boolean::New(env, io::PutHeldReload(info[0].As<Napi::String>().Utf8Value(), state, hv, bv));
}

// deleteHeldReload(path, finalHead?: Uint8Array, finalBody?: Uint8Array): boolean
Napi::Value DeleteReload(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint8_t *head = nullptr, *body = nullptr;
  size_t head_size = 0, body_size = 0;
  const bool final = info.Length() >= 3 && !info[1].IsUndefined();
  if (info.Length() < 1 || !info[0].IsString() || (final && (!BytesOf(info[1], &head, &head_size) || !BytesOf(info[2], &body, &body_size)))) {
    ThrowTypeError(env, "deleteHeldReload(path: string, finalHead?: Uint8Array, finalBody?: Uint8Array)");
    return env.Undefined();
  }
  return Napi::Boolean::New(env, io::DeleteHeldReload(info[0].As<Napi::String>().Utf8Value(), std::string_view(reinterpret_cast<const char*>(head), head_size),
                                                      std::string_view(reinterpret_cast<const char*>(body), body_size)));
}

Napi::Reference<Napi::Value>* g_caps_ref = nullptr;  // keeps the counter's memory alive

// setHeldReloads(on: boolean, cells?: Int32Array, maxTotal?: number, maxPerAddress?: number): boolean
Napi::Value SetReloads(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsBoolean()) {
    ThrowTypeError(env, "setHeldReloads(on: boolean, cells?: Int32Array, maxTotal?: number, maxPerAddress?: number)");
    return env.Undefined();
  }
  const bool on = info[0].As<Napi::Boolean>().Value();
  if (info.Length() >= 4 && info[1].IsTypedArray() && info[2].IsNumber() && info[3].IsNumber()) {
    auto ta = info[1].As<Napi::TypedArray>();
    if (ta.TypedArrayType() != napi_int32_array) {
      ThrowTypeError(env, "setHeldReloads: cells must be an Int32Array");
      return env.Undefined();
    }
    // The counter's memory is a SharedArrayBuffer: its data pointer comes from the view itself.
    napi_typedarray_type type;
    size_t length = 0;
    void* data = nullptr;
    if (napi_get_typedarray_info(env, info[1], &type, &length, &data, nullptr, nullptr) != napi_ok || data == nullptr) {
      ThrowTypeError(env, "setHeldReloads: cells must be an Int32Array");
      return env.Undefined();
    }
    auto* cells = static_cast<int32_t*>(data);
    const double total = info[2].As<Napi::Number>().DoubleValue(), per = info[3].As<Napi::Number>().DoubleValue();
    if (!(total >= 0 && total <= 2147483647.0) || !(per >= 0 && per <= 2147483647.0)) {
      ThrowTypeError(env, "setHeldReloads: caps must be 0..2^31-1");
      return env.Undefined();
    }
    auto* ref = new Napi::Reference<Napi::Value>(Napi::Persistent(info[1]));
    if (!io::SetHeldReloadCaps(cells, length, static_cast<int32_t>(total), static_cast<int32_t>(per))) {
      delete ref;
      return Napi::Boolean::New(env, false);
    }
    delete g_caps_ref;  // the old memory is no longer read (its cells were forgotten with it)
    g_caps_ref = ref;
  }
  io::SetHeldReloads(on);
  return Napi::Boolean::New(env, true);
}

Napi::Reference<Napi::Value>* g_listeners_ref = nullptr;  // keeps the listener count's memory alive

// setHeldReloadListeners(count: Int32Array, max: number): boolean   (count[0]: the server's listener count)
Napi::Value SetListeners(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  napi_typedarray_type type;
  size_t length = 0;
  void* data = nullptr;
  if (info.Length() < 2 || !info[0].IsTypedArray() || !info[1].IsNumber() || napi_get_typedarray_info(env, info[0], &type, &length, &data, nullptr, nullptr) != napi_ok ||
      type != napi_int32_array || length < 1 || data == nullptr) {
    ThrowTypeError(env, "setHeldReloadListeners(count: Int32Array, max: number)");
    return env.Undefined();
  }
  const double max = info[1].As<Napi::Number>().DoubleValue();
  if (!(max >= 1 && max <= 2147483647.0)) return Napi::Boolean::New(env, false);
  auto* ref = new Napi::Reference<Napi::Value>(Napi::Persistent(info[0]));
  if (!io::SetHeldReloadListeners(static_cast<const int32_t*>(data), static_cast<int32_t>(max))) {
    delete ref;
    return Napi::Boolean::New(env, false);
  }
  delete g_listeners_ref;
  g_listeners_ref = ref;
  return Napi::Boolean::New(env, true);
}

// putHeldReloadCells(address: string, a: number, b: number): boolean
Napi::Value PutCells(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsString() || !info[1].IsNumber() || !info[2].IsNumber()) {
    ThrowTypeError(env, "putHeldReloadCells(address: string, a: number, b: number)");
    return env.Undefined();
  }
  return Napi::Boolean::New(env, io::PutHeldReloadCells(info[0].As<Napi::String>().Utf8Value(), info[1].As<Napi::Number>().Int32Value(), info[2].As<Napi::Number>().Int32Value()));
}

// drainHeldReloads(): { sessions: string[] (path, sid, address, userAgent, … flat), wanted: string[] }
Napi::Value Drain(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<io::HeldReloadSession> sessions;
  std::vector<std::string> wanted;
  io::DrainHeldReloadSessions(&sessions, &wanted);
  auto flat = Napi::Array::New(env, sessions.size() * 4);
  uint32_t i = 0;
  for (const auto& s : sessions) {
    flat.Set(i++, Napi::String::New(env, s.path));
    flat.Set(i++, Napi::String::New(env, s.sid));
    flat.Set(i++, Napi::String::New(env, s.address));
    flat.Set(i++, Napi::String::New(env, s.user_agent));
  }
  auto want = Napi::Array::New(env, wanted.size());
  for (uint32_t j = 0; j < wanted.size(); ++j) want.Set(j, Napi::String::New(env, wanted[j]));
  auto out = Napi::Object::New(env);
  out.Set("sessions", flat);
  out.Set("wanted", want);
  return out;
}

Napi::Value ReloadCounts(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const io::HeldReloadCounts c = io::GetHeldReloadCounts();
  auto out = Napi::Object::New(env);
  out.Set("hits", Napi::Number::New(env, static_cast<double>(c.hits)));
  out.Set("held", Napi::Number::New(env, static_cast<double>(c.held)));
  out.Set("timeouts", Napi::Number::New(env, static_cast<double>(c.timeouts)));
  out.Set("cut", Napi::Number::New(env, static_cast<double>(c.cut)));
  out.Set("broken", Napi::Number::New(env, static_cast<double>(c.broken)));
  out.Set("waiting", Napi::Number::New(env, static_cast<double>(c.waiting)));
  out.Set("layers", Napi::Number::New(env, static_cast<double>(c.layers)));
  return out;
}

}  // namespace

void InitHttpFront(Napi::Env env, Napi::Object exports) {
  exports.Set("installHttpFront", Napi::Function::New(env, Install, "installHttpFront"));
  exports.Set("httpFrontCounts", Napi::Function::New(env, Counts, "httpFrontCounts"));
  exports.Set("setSendBuffer", Napi::Function::New(env, SetSendBuffer, "setSendBuffer"));
  exports.Set("putHttpObject", Napi::Function::New(env, PutObject, "putHttpObject"));
  exports.Set("deleteHttpObject", Napi::Function::New(env, DeleteObject, "deleteHttpObject"));
  exports.Set("setHttpObjectsAnswering", Napi::Function::New(env, SetAnswering, "setHttpObjectsAnswering"));
  exports.Set("putHeldReload", Napi::Function::New(env, PutReload, "putHeldReload"));
  exports.Set("deleteHeldReload", Napi::Function::New(env, DeleteReload, "deleteHeldReload"));
  exports.Set("setHeldReloads", Napi::Function::New(env, SetReloads, "setHeldReloads"));
  exports.Set("setHeldReloadListeners", Napi::Function::New(env, SetListeners, "setHeldReloadListeners"));
  exports.Set("putHeldReloadCells", Napi::Function::New(env, PutCells, "putHeldReloadCells"));
  exports.Set("drainHeldReloads", Napi::Function::New(env, Drain, "drainHeldReloads"));
  exports.Set("heldReloadCounts", Napi::Function::New(env, ReloadCounts, "heldReloadCounts"));
}

}  // namespace skylark::binding
