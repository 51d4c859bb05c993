// Fewer wake-ups of a busy HTTP thread (docs/http.md "Fewer wake-ups under load").
//
// A thread serving many keep-alive connections whose requests arrive one by one (LL-HLS players
// all asking for the part that just landed) goes back to its wait after each one, so the kernel
// puts it to sleep and wakes it once per request: the switches cost more than the requests. This
// handle runs before each wait of the thread's libuv loop: when the loop last went to wait less
// than `interval_us` ago and at least `min_connections` connections are open (the HTTP front's
// count), the thread sleeps out the rest of the interval first, so that the wait returns at once
// with everything that became ready meanwhile. A loop with work pending (`uv_backend_timeout` 0)
// never sleeps, a timer due sooner shortens the sleep, and a quiet loop (its last wait longer ago
// than the interval) waits as before: at most one sleep per interval, only under load.
// No N-API here.
#pragma once
#include <uv.h>

#include <cstdint>

namespace skylark::io {

struct LoopCoalesceOptions {
  uint32_t interval_us = 1000;       // at most one wait per this many µs while busy
  uint64_t min_connections = 256;    // coalesce only with at least this many connections open
  uint64_t (*open_connections)() = nullptr;  // the open connections now (null: always coalesce)
};

struct LoopCoalesceCounts {
  uint64_t waits = 0;     // the loop's waits seen (prepare phases)
  uint64_t sleeps = 0;    // of which preceded by a sleep
  uint64_t slept_us = 0;  // time slept in all (µs)
};

class LoopCoalescer {
 public:
  // Starts on `loop` (unreferenced: it never keeps the loop alive). Call on the loop's thread.
  LoopCoalescer(uv_loop_t* loop, const LoopCoalesceOptions& options);
  LoopCoalescer(const LoopCoalescer&) = delete;
  LoopCoalescer& operator=(const LoopCoalescer&) = delete;

  // Changes the interval and threshold (an interval of 0 stops sleeping). Call on the loop's thread.
  void Configure(const LoopCoalesceOptions& options) { options_ = options; }
  const LoopCoalesceCounts& counts() const { return counts_; }

  // Stops and closes the handle; `done(self)` runs once the loop let it go (then delete it).
  void Close(void (*done)(LoopCoalescer*));

 private:
  static void OnPrepare(uv_prepare_t* handle);

  uv_prepare_t prepare_;
  LoopCoalesceOptions options_;
  LoopCoalesceCounts counts_;
  uint64_t last_wait_ns_ = 0;  // uv_hrtime() when the loop last went to wait
  void (*done_)(LoopCoalescer*) = nullptr;
};

}  // namespace skylark::io
