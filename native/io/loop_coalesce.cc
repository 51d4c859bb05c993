// docs/http.md "Fewer wake-ups under load"; see io/loop_coalesce.h.
#include "io/loop_coalesce.h"

#include <time.h>

#include <algorithm>
#include <cerrno>

namespace skylark::io {

LoopCoalescer::LoopCoalescer(uv_loop_t* loop, const LoopCoalesceOptions& options) : options_(options) {
  uv_prepare_init(loop, &prepare_);
  prepare_.data = this;
  uv_prepare_start(&prepare_, &LoopCoalescer::OnPrepare);
  uv_unref(reinterpret_cast<uv_handle_t*>(&prepare_));
}

void LoopCoalescer::Close(void (*done)(LoopCoalescer*)) {
  done_ = done;
  uv_prepare_stop(&prepare_);
  uv_close(reinterpret_cast<uv_handle_t*>(&prepare_), [](uv_handle_t* h) {
    auto* self = static_cast<LoopCoalescer*>(h->data);
    if (self->done_) self->done_(self);
  });
}

void LoopCoalescer::OnPrepare(uv_prepare_t* handle) {
  auto* self = static_cast<LoopCoalescer*>(handle->data);
  LoopCoalesceOptions& o = self->options_;
  self->counts_.waits++;
  uint64_t now = uv_hrtime();
  const uint64_t interval_ns = static_cast<uint64_t>(o.interval_us) * 1000;
  const uint64_t since = now - self->last_wait_ns_;
  if (interval_ns > 0 && self->last_wait_ns_ != 0 && since < interval_ns && (o.open_connections == nullptr || o.open_connections() >= o.min_connections)) {
    const int timeout_ms = uv_backend_timeout(handle->loop);  // -1: no timer; 0: work pending, do not wait
    if (timeout_ms != 0) {
      uint64_t sleep_ns = interval_ns - since;
      if (timeout_ms > 0) sleep_ns = std::min<uint64_t>(sleep_ns, static_cast<uint64_t>(timeout_ms) * 1000000);
      timespec ts{static_cast<time_t>(sleep_ns / 1000000000), static_cast<long>(sleep_ns % 1000000000)};
      while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
      }
      const uint64_t after = uv_hrtime();
      self->counts_.sleeps++;
      self->counts_.slept_us += (after - now) / 1000;
      now = after;
    }
  }
  self->last_wait_ns_ = now;
}

}  // namespace skylark::io
