// A catch-up segment's append in one call (io/file_append.h, docs/decisions.md "Catch-up storage"):
//
//   appendSegment(dataFd: number, data: Uint8Array[], dataAt: number,
//                 recordsFd: number, head: Uint8Array | null, records: Uint8Array,
//                 recordsFrom: number, recordsBytes: number, recordsAt: number): number
//       writes the pieces of `data` one after the other at byte `dataAt` of `dataFd` (pwritev), then
//       `head` (when not null) followed by `records[recordsFrom, recordsFrom + recordsBytes)` at byte
//       `recordsAt` of `recordsFd`, on the calling thread; returns the time the writes took (ms, from
//       CLOCK_MONOTONIC: what the kernel held them back by when the disk is behind). Throws an Error with `code` (`EIO`,
//       `ENOSPC`, …) and `errno` when a write fails (the records are not written after a failed data
//       write), a TypeError on wrong arguments. No state.
#include <napi.h>
#include <time.h>
#include <uv.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io/file_append.h"

namespace skylark::binding {
namespace {

constexpr double kMaxPosition = 9007199254740991.0;  // 2^53 - 1

bool Fd(const Napi::Value& v, int* out) {
  if (!v.IsNumber()) return false;
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0 && d <= 2147483647.0) || d != static_cast<double>(static_cast<int>(d))) return false;
  *out = static_cast<int>(d);
  return true;
}

bool Position(const Napi::Value& v, double* out) {
  if (!v.IsNumber()) return false;
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0 && d <= kMaxPosition) || d != static_cast<double>(static_cast<int64_t>(d))) return false;
  *out = d;
  return true;
}

// A Uint8Array's bytes (napi's data pointer already starts at the view's byte offset).
bool Bytes(napi_env env, napi_value v, iovec* out) {
  bool is = false;
  if (napi_is_typedarray(env, v, &is) != napi_ok || !is) return false;
  napi_typedarray_type type;
  size_t length = 0;
  void* data = nullptr;
  if (napi_get_typedarray_info(env, v, &type, &length, &data, nullptr, nullptr) != napi_ok || type != napi_uint8_array) return false;
  out->iov_base = data;
  out->iov_len = length;
  return true;
}

void ThrowErrno(Napi::Env env, int err) {
  const char* code = uv_err_name(-err);
  Napi::Error e = Napi::Error::New(env, std::string(code) + ": " + std::strerror(err) + ", catch-up append");
  e.Set("code", Napi::String::New(env, code));
  e.Set("errno", Napi::Number::New(env, -err));
  e.ThrowAsJavaScriptException();
}

Napi::Value AppendSegment(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int data_fd = -1, records_fd = -1;
  double data_at = 0, records_at = 0, from = 0, bytes = 0;
  iovec records_all{};
  bool ok = info.Length() >= 9 && Fd(info[0], &data_fd) && info[1].IsArray() && Position(info[2], &data_at) && Fd(info[3], &records_fd) &&
            Bytes(env, info[5], &records_all) && Position(info[6], &from) && Position(info[7], &bytes) && Position(info[8], &records_at) &&
            from + bytes <= static_cast<double>(records_all.iov_len);
  iovec records[2];
  size_t records_n = 0;
  if (ok && !info[4].IsNull()) ok = Bytes(env, info[4], &records[records_n++]);
  iovec stack[16];
  std::vector<iovec> heap;
  iovec* data = stack;
  uint32_t n = 0;
  if (ok) {
    Napi::Array pieces = info[1].As<Napi::Array>();
    n = pieces.Length();
    if (n > 16) {
      heap.resize(n);
      data = heap.data();
    }
    for (uint32_t i = 0; ok && i < n; i++) {
      napi_value piece;
      ok = napi_get_element(env, pieces, i, &piece) == napi_ok && Bytes(env, piece, &data[i]);
    }
  }
  if (!ok) {
    Napi::TypeError::New(env,
                         "appendSegment(dataFd, data: Uint8Array[], dataAt, recordsFd, head: Uint8Array | null, records: Uint8Array, "
                         "recordsFrom, recordsBytes, recordsAt): fds and positions are whole numbers >= 0, the range inside records")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  records[records_n].iov_base = static_cast<uint8_t*>(records_all.iov_base) + static_cast<size_t>(from);
  records[records_n].iov_len = static_cast<size_t>(bytes);
  records_n++;
  timespec t0{}, t1{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const int err = io::AppendRecorded(data_fd, data, n, static_cast<off_t>(data_at), records_fd, records, records_n,
                                     static_cast<off_t>(records_at));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (err != 0) {
    ThrowErrno(env, err);
    return env.Undefined();
  }
  return Napi::Number::New(env, static_cast<double>(t1.tv_sec - t0.tv_sec) * 1e3 + static_cast<double>(t1.tv_nsec - t0.tv_nsec) / 1e6);
}

}  // namespace

void InitFileAppend(Napi::Env env, Napi::Object exports) {
  exports.Set("appendSegment", Napi::Function::New(env, AppendSegment, "appendSegment"));
}

}  // namespace skylark::binding
