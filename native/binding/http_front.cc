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
//   (httpFrontCounts also gives objectHits, objectCut, objects, refused, idleClosed and objectsAnswered)
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
  return out;
}

// Bytes of a Buffer or any TypedArray (a view into its ArrayBuffer).
bool BytesOf(const Napi::Value& v, const uint8_t** data, size_t* size) {
  if (!v.IsTypedArray()) return false;
  auto ta = v.As<Napi::TypedArray>();
  auto ab = ta.ArrayBuffer();
  *data = static_cast<const uint8_t*>(ab.Data()) + ta.ByteOffset();
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

}  // namespace

void InitHttpFront(Napi::Env env, Napi::Object exports) {
  exports.Set("installHttpFront", Napi::Function::New(env, Install, "installHttpFront"));
  exports.Set("httpFrontCounts", Napi::Function::New(env, Counts, "httpFrontCounts"));
  exports.Set("setSendBuffer", Napi::Function::New(env, SetSendBuffer, "setSendBuffer"));
  exports.Set("putHttpObject", Napi::Function::New(env, PutObject, "putHttpObject"));
  exports.Set("deleteHttpObject", Napi::Function::New(env, DeleteObject, "deleteHttpObject"));
  exports.Set("setHttpObjectsAnswering", Napi::Function::New(env, SetAnswering, "setHttpObjectsAnswering"));
}

}  // namespace skylark::binding
