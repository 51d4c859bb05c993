// One accepted TCP connection of io::RtmpServer (rtmp_server.cc, read_scheduler.cc): its libuv
// handle, its RTMP session, its timers' bookkeeping and its read mode. Freed by the handle's close
// callback, so a Connection* stays valid until then, through any owner callback.
#pragma once
#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/rtmp/session.h"
#include "io/rtmp_server.h"

namespace skylark::io {

struct Connection {
  uv_tcp_t tcp;  // tcp.data = this
  RtmpServer* server = nullptr;
  uint32_t id = 0;
  std::string remote;        // "ip:port"
  std::string ip;            // the per-IP count's key
  bool counted = false;      // in the connection counts (until the handle's close callback)
  uint64_t accepted_at = 0;  // uv_now, ms: the publish deadline counts from here
  bool audio_limit_sent = false;
  std::unique_ptr<rtmp::Session> session;
  bool closing = false;      // no more reads, writes or events
  bool handle_open = true;   // uv_close not called yet
  uint64_t closing_since = 0;
  uint64_t last_read = 0;    // uv_now, ms
  uint64_t timeout_ms = 0;
  bool timeout_sent = false;
  uint64_t audio_bytes = 0;
  std::unique_ptr<AudioSink> sink;  // routed: audio goes here (route())
  // The read scheduler (read_scheduler.cc).
  bool merge_allowed = false;  // route(..., merge): lazy reads wanted (no consumer in a hurry)
  bool merged = false;         // read by the merge timer now, not by libuv as bytes arrive
  uint64_t merge_tick = 0;     // the last merge tick that read it (an id queued twice reads once)
  uint64_t due = 0;            // loop time of its timed read near a cut (0 = regular merged reads)
  bool cut_armed = false;      // the timed read for the coming cut is set (or done)
};

struct WriteReq {
  uv_write_t req;  // req.data = the Connection
  std::vector<uint8_t> bytes;
};

}  // namespace skylark::io
