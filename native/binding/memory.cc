// The process's C allocator (docs/decisions.md "Giving freed memory back"):
//   trimMalloc(): boolean   // glibc malloc_trim(0): free pages inside the heaps go back to the kernel
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

}  // namespace

void InitMemory(Napi::Env env, Napi::Object exports) {
  exports.Set("trimMalloc", Napi::Function::New(env, TrimMalloc, "trimMalloc"));
}

}  // namespace skylark::binding
