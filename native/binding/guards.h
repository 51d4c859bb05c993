// Argument guards for every binding class (better-sqlite3 style): each check throws a TypeError
// with the caller's message and returns false, so a guard is one line that throws and returns:
//
//   SK_GUARD(RequireArgs(info, 2, "Segmenter.pushAudio(timestampMs, data): two arguments"));
//   double ms;
//   SK_GUARD(ArgNumber(info, 1, "RtmpAddon.setTimeout(id, ms): ms must be a number", &ms));
//
// In a constructor (no return value): `if (!ArgObject(info, 0, "...")) return;`.
#pragma once
#include <napi.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace skylark::binding {

/** Throws TypeError(message) into JS; returns false. */
inline bool ThrowTypeError(Napi::Env env, const std::string& message) {
  Napi::TypeError::New(env, message).ThrowAsJavaScriptException();
  return false;
}

/** `ok`, else TypeError(message). */
inline bool Require(Napi::Env env, bool ok, const char* message) { return ok || ThrowTypeError(env, message); }

/** At least `n` arguments, else TypeError(message). */
inline bool RequireArgs(const Napi::CallbackInfo& info, size_t n, const char* message) {
  return Require(info.Env(), info.Length() >= n, message);
}

/** Argument `i` is a number (NaN and ±Infinity included: check the range yourself); into `out`. */
inline bool ArgNumber(const Napi::CallbackInfo& info, size_t i, const char* message, double* out) {
  if (info.Length() <= i || !info[i].IsNumber()) return ThrowTypeError(info.Env(), message);
  *out = info[i].As<Napi::Number>().DoubleValue();
  return true;
}

/** Argument `i` is a boolean; into `out`. */
inline bool ArgBool(const Napi::CallbackInfo& info, size_t i, const char* message, bool* out) {
  if (info.Length() <= i || !info[i].IsBoolean()) return ThrowTypeError(info.Env(), message);
  *out = info[i].As<Napi::Boolean>().Value();
  return true;
}

/** Argument `i` is a string; its UTF-8 bytes into `out`. */
inline bool ArgString(const Napi::CallbackInfo& info, size_t i, const char* message, std::string* out) {
  if (info.Length() <= i || !info[i].IsString()) return ThrowTypeError(info.Env(), message);
  *out = info[i].As<Napi::String>().Utf8Value();
  return true;
}

/** Argument `i` is an object (not null; functions and arrays are objects). */
inline bool ArgObject(const Napi::CallbackInfo& info, size_t i, const char* message) {
  return Require(info.Env(), info.Length() > i && info[i].IsObject(), message);
}

/** Argument `i` is a function. */
inline bool ArgFunction(const Napi::CallbackInfo& info, size_t i, const char* message) {
  return Require(info.Env(), info.Length() > i && info[i].IsFunction(), message);
}

/** Argument `i` is a Uint8Array (a Buffer is one); its bytes into `data` / `size` (valid until
 *  the call returns). */
inline bool ArgBytes(const Napi::CallbackInfo& info, size_t i, const char* message, const uint8_t** data, size_t* size) {
  if (info.Length() <= i || !info[i].IsTypedArray()) return ThrowTypeError(info.Env(), message);
  Napi::TypedArray t = info[i].As<Napi::TypedArray>();
  if (t.TypedArrayType() != napi_uint8_array) return ThrowTypeError(info.Env(), message);
  Napi::Uint8Array bytes = t.As<Napi::Uint8Array>();
  *data = bytes.Data();
  *size = bytes.ByteLength();
  return true;
}

/** Argument `i` is a Uint8Array copied into `out` (a key); null or undefined, when `optional`, leaves
 *  `out` empty. */
inline bool ArgKey(const Napi::CallbackInfo& info, size_t i, const char* message, std::vector<uint8_t>* out, bool optional) {
  if (optional && (info.Length() <= i || info[i].IsNull() || info[i].IsUndefined())) return true;
  const uint8_t* data = nullptr;
  size_t size = 0;
  if (!ArgBytes(info, i, message, &data, &size)) return false;
  out->assign(data, data + size);
  return true;
}

/** `v` is an integer in lo..hi; into `out`. */
inline bool IsIntegerIn(Napi::Value v, double lo, double hi, uint32_t* out) {
  const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
  if (!(d >= lo && d <= hi) || std::floor(d) != d) return false;
  *out = static_cast<uint32_t>(d);
  return true;
}

/** Property `name` of `options`, when present, is an integer in lo..hi; into `out` (absent:
 *  `out` unchanged). Else TypeError(message). */
inline bool OptionalInteger(Napi::Env env, Napi::Object options, const char* name, double lo, double hi, uint32_t* out,
                            const char* message) {
  Napi::Value v = options.Get(name);
  return v.IsUndefined() || IsIntegerIn(v, lo, hi, out) || ThrowTypeError(env, message);
}

/** As OptionalInteger, with the message "<who>: <name> must be an integer in <lo>..<hi>". */
inline bool OptionalIntegerFor(const char* who, Napi::Env env, Napi::Object options, const char* name, uint32_t lo,
                            uint32_t hi, uint32_t* out) {
  Napi::Value v = options.Get(name);
  if (v.IsUndefined() || IsIntegerIn(v, lo, hi, out)) return true;
  return ThrowTypeError(env, std::string(who) + ": " + name + " must be an integer in " + std::to_string(lo) + ".." +
                                 std::to_string(hi));
}

}  // namespace skylark::binding

/** In a method that returns Napi::Value with `info` in scope: when `guard` is false (it threw a
 *  TypeError), return undefined at once. */
#define SK_GUARD(guard)                                  \
  do {                                                   \
    if (!(guard)) return info.Env().Undefined();         \
  } while (0)
