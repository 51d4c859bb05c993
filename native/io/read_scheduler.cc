// The read scheduler of io::RtmpServer: merged reads of routed connections (as SRS's `mr`). With
// merge_reads_ms and a route that allows it, a connection is not read as its bytes arrive but by
// one timer for all of them every merge_reads_ms, while its sink's next cut (LL-HLS part or
// segment end) is further away than one merge period plus slack. Nearer, one read is timed a
// little before the frame that closes the part is due; if that read comes before the frame, the
// socket is read as bytes arrive until the cut. So the frame that closes a part or segment is
// never held back (no LL-HLS latency). docs/decisions.md "Ingest I/O".
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "io/connection.h"
#include "io/rtmp_server.h"

namespace skylark::io {

// Decides how a routed connection is read from now on: merged (regular ticks), merged with one
// timed read before the coming cut (`left` ms of media from the newest frame, which arrived at
// most a frame ago), or as bytes arrive.
void RtmpServer::UpdateMerged(Connection* c) {
  const uint64_t merge_ms = options_.merge_reads_ms;
  if (merge_ms == 0 || !c->merge_allowed || c->sink == nullptr) {
    c->due = 0;
    c->cut_armed = false;
    SetMerged(c, false);
    return;
  }
  const uint64_t left = c->sink->ms_to_next_cut();
  if (left > merge_ms + kMergeSlackMs) {
    c->due = 0;
    c->cut_armed = false;
    SetMerged(c, true);
    return;
  }
  if (!c->cut_armed && left > kCutEarlyMs) {
    c->cut_armed = true;
    c->due = uv_now(loop_) + left - kCutEarlyMs;
    SetMerged(c, true);
    if (c->due < timer_at_) ArmMergeTimer(c->due);
    return;
  }
  c->due = 0;
  SetMerged(c, false);
}

// (Re)arms the one-shot merge timer for loop time `at`.
void RtmpServer::ArmMergeTimer(uint64_t at) {
  const uint64_t now = uv_now(loop_);
  timer_at_ = at;
  uv_timer_start(&merge_timer_, &RtmpServer::OnMergeTick, at > now ? at - now : 0, 0);
  merge_running_ = true;
}

// Moves a connection between libuv reads (as bytes arrive) and the merge timer's reads.
void RtmpServer::SetMerged(Connection* c, bool on) {
  if (on == c->merged || c->closing) return;
  c->merged = on;
  if (!on) {
    StartReading(c);
    return;
  }
  uv_read_stop(reinterpret_cast<uv_stream_t*>(&c->tcp));
  merged_.push_back(c->id);
  InitTimer(&merge_timer_, &merge_init_);
  if (!merge_running_) {
    next_regular_ = uv_now(loop_) + options_.merge_reads_ms;
    ArmMergeTimer(next_regular_);
  }
}

void RtmpServer::StopMergeTimer() {
  if (!merge_init_ || merge_closing_) return;
  merge_closing_ = true;
  uv_timer_stop(&merge_timer_);
  merge_running_ = false;
  CloseTimer(&merge_timer_);
}

// Every merge_reads_ms (and at a timed read): reads what each merged connection due now has.
void RtmpServer::OnMergeTick(uv_timer_t* t) {
  auto* self = static_cast<RtmpServer*>(t->data);
  self->merge_running_ = false;
  self->timer_at_ = UINT64_MAX;
  std::vector<uint32_t> ids;
  ids.swap(self->merged_);
  const uint64_t tick = ++self->merge_ticks_;
  const uint64_t now = uv_now(self->loop_);
  const bool regular = now >= self->next_regular_;
  if (regular) self->next_regular_ = now + self->options_.merge_reads_ms;
  for (uint32_t id : ids) {
    auto it = self->conns_.find(id);
    if (it == self->conns_.end()) continue;
    Connection* c = it->second;
    if (c->closing || !c->merged || c->merge_tick == tick) continue;
    c->merge_tick = tick;
    // A connection with a timed read (near a cut) is read only then.
    if (c->due != 0 ? c->due <= now : regular) {
      c->due = 0;
      self->ReadMerged(c);
    }
    if (!c->closing && c->merged) self->merged_.push_back(id);
  }
  if (self->merged_.empty()) return;
  uint64_t at = self->next_regular_;
  for (uint32_t id : self->merged_) {
    auto it = self->conns_.find(id);
    if (it != self->conns_.end() && it->second->due != 0) at = std::min(at, it->second->due);
  }
  if (at < self->timer_at_) self->ArmMergeTimer(at);
}

// Reads a merged connection until a short read (drained), at most 16 buffers.
void RtmpServer::ReadMerged(Connection* c) {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(&c->tcp), &fd) != 0) return;
  for (int i = 0; i < 16 && !c->closing && c->merged; ++i) {
    const ssize_t n = ::read(fd, read_buffer_.get(), kReadBufferBytes);
    if (n > 0) {
      OnData(c, reinterpret_cast<const uint8_t*>(read_buffer_.get()), static_cast<size_t>(n));
      if (static_cast<size_t>(n) < kReadBufferBytes) return;
    } else if (n == 0) {
      OnEof(c);
      return;
    } else if (errno == EINTR) {
      continue;
    } else {
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        PeerGone(c, std::string("socket error: ") + uv_strerror(uv_translate_sys_error(errno)), false);
      return;
    }
  }
}

}  // namespace skylark::io
