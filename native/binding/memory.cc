// The process's C allocator (docs/decisions.md "Giving freed memory back"):
//   trimMalloc(): boolean   // glibc malloc_trim(0): free pages inside the heaps go back to the kernel
//   limitMallocArenas(n: number): boolean   // glibc mallopt(M_ARENA_MAX, n), 1 <= n <= 64
// No other state. On a C library without malloc_trim it does nothing and returns false.
#include <napi.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace skylark::binding {
namespace {

// malloc_trim(0) madvises every whole free page of every arena (not only the top of the heap) back
// to the kernel; true when some memory was released. Takes the arenas' locks in turn: another
// thread's malloc waits for the walk of its arena (0.2–0.3 ms for a fragmented heap of ~200 MB).
Napi::Value TrimMalloc(const Napi::CallbackInfo& info) {
#if defined(__GLIBC__)
  return Napi::Boolean::New(info.Env(), malloc_trim(0) != 0);
#else
  return Napi::Boolean::New(info.Env(), false);
#endif
}

// mallopt(M_ARENA_MAX, n): threads that have no arena yet share the existing ones once n exist,
// instead of each getting its own heap (glibc's default allows 8 per core). Threads keep the arena
// they already have. true when glibc took the setting; false off glibc or for n outside 1..64.
Napi::Value LimitMallocArenas(const Napi::CallbackInfo& info) {
  const double n = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : 0;
  bool ok = false;
#if defined(__GLIBC__)
  if (n >= 1 && n <= 64 && n == static_cast<double>(static_cast<int>(n))) ok = mallopt(M_ARENA_MAX, static_cast<int>(n)) == 1;
#endif
  return Napi::Boolean::New(info.Env(), ok);
}

}  // namespace

void InitMemory(Napi::Env env, Napi::Object exports) {
  exports.Set("trimMalloc", Napi::Function::New(env, TrimMalloc, "trimMalloc"));
  exports.Set("limitMallocArenas", Napi::Function::New(env, LimitMallocArenas, "limitMallocArenas"));
}

}  // namespace skylark::binding
