// The RTMP ingest server's socket I/O on a libuv loop (Node's own, no thread): TCP accept with the
// connection caps, per-connection reads into a sans-I/O rtmp::Session (native/core/rtmp) and writes
// of its replies, the 1 s sweep (publish deadline, idle timeouts, graceful closes that hang), the
// pre-publish byte cap, and the read scheduler (merged reads of routed connections,
// read_scheduler.cc). Plain C++ on libuv: no N-API and no parsing of its own. It tells its owner
// what happened through RtmpServerEvents, and pushes a routed connection's audio into the
// AudioSink its owner gave it. The N-API class over it is native/binding/rtmp_addon.cc; the JS
// contract is docs/native-api.md "RtmpServer" and the reasons are docs/decisions.md "Ingest I/O".
//
//   io::RtmpServer server(loop, options, events);   // events: an RtmpServerEvents
//   int port = 0;
//   if (int err = server.listen("127.0.0.1", 1935, 511, &port)) ...;   // a libuv error code
//   server.accept_publish(id);   // after events.on_read() delivered the publish event
//   server.close();              // no event follows
//
// Every RtmpServerEvents call comes from a libuv callback, never from inside a call on the server
// (a write that fails inside accept_publish() is reported on the next loop turn).
#pragma once
#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/rtmp/session.h"
#include "core/util/ids.h"

namespace skylark::io {

inline constexpr uint32_t kDefaultMaxConnections = 1000;
inline constexpr uint32_t kDefaultMaxConnectionsPerIp = 10;
inline constexpr uint32_t kDefaultPublishTimeoutMs = 15000;
inline constexpr uint32_t kDefaultPrePublishBytes = 64 * 1024;
inline constexpr size_t kReadBufferBytes = 64 * 1024;       // one read; one buffer for all connections
inline constexpr size_t kMaxQueuedWriteBytes = 1024 * 1024;  // a peer that does not read our replies
inline constexpr uint64_t kCloseGraceMs = 2000;             // FIN after the replies, else cut
inline constexpr uint64_t kSweepMs = 1000;
inline constexpr uint64_t kMergeSlackMs = 50;  // publisher send jitter + one frame, before a cut
inline constexpr uint64_t kCutEarlyMs = 25;    // the timed read comes this much before the closing
                                               // frame is due (the newest frame read may be a frame old)

/** Caps (each hit is reported with on_limit) and the read scheduler's period. */
struct RtmpServerOptions {
  rtmp::SessionOptions session = DefaultSessionOptions();  // per connection
  uint32_t max_connections = kDefaultMaxConnections;       // open at once (accept to close)
  uint32_t max_connections_per_ip = kDefaultMaxConnectionsPerIp;
  uint32_t publish_timeout_ms = kDefaultPublishTimeoutMs;  // accept → accepted publish, absolute
  uint32_t merge_reads_ms = 0;                             // merged reads of routed connections (0 = off)

  static rtmp::SessionOptions DefaultSessionOptions() {
    rtmp::SessionOptions o;
    o.pre_publish_bytes = kDefaultPrePublishBytes;
    return o;
  }
};

/** Where a routed connection's audio goes (the binding implements it over a Segmenter). The
 *  server owns it from route() until the connection is re-routed or starts closing. */
class AudioSink {
 public:
  virtual ~AudioSink() = default;
  /** One FLV AUDIODATA body, RTMP timestamp in ms. */
  virtual void push_audio(uint32_t timestamp_ms, const uint8_t* data, size_t size) = 0;
  /** Media time (ms) before the sink's next part or segment cut (0 = unknown or now). */
  virtual uint32_t ms_to_next_cut() const = 0;
};

/** What the server tells its owner, from libuv callbacks only (never after RtmpServer::release()). */
class RtmpServerEvents {
 public:
  virtual ~RtmpServerEvents() = default;
  /** A connection was accepted (under the caps) and has a session. `remote`: "ip:port". */
  virtual void on_connection(uint32_t id, const std::string& remote) = 0;
  /** One read completed `events` (audio and the rest, in message order; non-empty). `sink`: the
   *  connection's routed sink, which has taken every audio event of the read already, or nullptr.
   *  The owner may move from `events` (cleared afterwards) and must not keep `sink`. */
  virtual void on_read(uint32_t id, std::vector<rtmp::Event>& events, AudioSink* sink) = 0;
  /** The peer closed or the socket failed (never for close() / close_connection()). `code` /
   *  `message`: the session's error when the peer vanished mid-handshake or mid-message, else
   *  empty. A connection closed for a cap gets reason "limit: <cause>" right after on_limit. */
  virtual void on_closed(uint32_t id, const std::string& reason, std::string_view code, const std::string& message) = 0;
  /** No bytes for set_timeout(id, ms); once per silent period. */
  virtual void on_timeout(uint32_t id) = 0;
  /** A cap was hit: rtmp_connections | rtmp_connections_per_ip (id 0: refused at accept) |
   *  rtmp_publish_timeout | rtmp_prepublish_bytes (closed: on_closed follows) | audio_frame_bytes
   *  (the read with the session's message_too_large error follows). */
  virtual void on_limit(uint32_t id, const char* cause, const std::string& remote) = 0;
  /** A libuv handle (listener, connection, timer) now refers to the server / was closed (its
   *  close callback ran; `none_open`: it was the last one): the owner keeps the server alive
   *  while any is open. The server does nothing after on_handle_closed returns, so the owner may
   *  release it from there. */
  virtual void on_handle_opened() = 0;
  virtual void on_handle_closed(bool none_open) = 0;
};

struct Connection;  // io/connection.h

class RtmpServer {
 public:
  RtmpServer(uv_loop_t* loop, const RtmpServerOptions& options, RtmpServerEvents& events);
  RtmpServer(const RtmpServer&) = delete;
  RtmpServer& operator=(const RtmpServer&) = delete;

  /** Ends the owner's use of the server (instead of delete): closes everything, tells the owner
   *  nothing more (not even on_handle_closed), and deletes itself once libuv has closed its last
   *  handle — at once when none is open. The owner may go away right after. */
  void release();
  /** release() as a unique_ptr deleter. */
  struct Releaser {
    void operator()(RtmpServer* s) const { s->release(); }
  };

  /** libuv handles opened and not closed yet (after close(), they close on later loop turns). */
  uint32_t open_handles() const { return handles_; }
  /** Whether listen() may be called (not listening, not closed). */
  bool can_listen() const { return !listening_ && !closed_; }
  /** Listens on `host` (an IP literal; IPv6 when it has a ':') and `port` (0: a free one). 0 and
   *  the bound port in `bound_port`, or a libuv error code (then the server is closed; UV_EINVAL
   *  when it cannot listen: see can_listen). */
  int listen(const std::string& host, int port, int backlog, int* bound_port);
  /** Stops listening and closes every connection at once; no event follows. */
  void close();

  // Calls on one connection: an unknown id (or one closing) is ignored (false / 0).
  bool accept_publish(uint32_t id);
  bool reject_publish(uint32_t id, std::string_view code, std::string_view description);
  /** on_timeout after `ms` without a byte (0 = never); checked by the 1 s sweep. */
  bool set_timeout(uint32_t id, uint64_t ms);
  /** From the next read, audio goes to `sink` (nullptr: to on_read only). `merge`: merged reads
   *  allowed while the sink's next cut is far (with merge_reads_ms). */
  bool route(uint32_t id, std::unique_ptr<AudioSink> sink, bool merge);
  /** FLV audio body bytes received. */
  uint64_t audio_bytes(uint32_t id) const;
  /** Writes pending replies, then FIN (forced after kCloseGraceMs); no event follows. */
  void close_connection(uint32_t id);

 private:
  ~RtmpServer();  // release()

  struct PendingClose {
    uint32_t id;
    std::string reason, code, message;
  };

  Connection* Live(uint32_t id) const;
  bool IdTaken(uint32_t id) const;
  void OnData(Connection* c, const uint8_t* data, size_t n);
  void Flush(Connection* c, bool from_owner);
  void OnEof(Connection* c);
  void PeerGone(Connection* c, const std::string& reason, bool defer, std::string code = {}, std::string message = {});
  void NotifyClosed(const PendingClose& p);
  void LimitClose(Connection* c, const char* cause);
  void BeginClose(Connection* c, bool graceful);
  void CloseHandle(Connection* c);
  void CloseListener();
  void HandleOpened();
  void HandleClosed();  // last: may delete the server
  void InitTimer(uv_timer_t* t, bool* init);
  void CloseTimer(uv_timer_t* t);
  void StartSweep(bool now = false);
  void StopSweep();
  void StartReading(Connection* c);

  static void OnConnection(uv_stream_t* listener, int status);
  static void OnAlloc(uv_handle_t* h, size_t, uv_buf_t* buf);
  static void OnRead(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf);
  static void OnWrite(uv_write_t* req, int status);
  static void OnShutdown(uv_shutdown_t* req, int status);
  static void OnConnClosed(uv_handle_t* h);
  static void OnSweep(uv_timer_t* t);

  // The read scheduler (read_scheduler.cc).
  void UpdateMerged(Connection* c);
  void SetMerged(Connection* c, bool on);
  void ArmMergeTimer(uint64_t at);
  void ReadMerged(Connection* c);
  void StopMergeTimer();
  static void OnMergeTick(uv_timer_t* t);

  uv_loop_t* loop_;
  RtmpServerOptions options_;
  RtmpServerEvents* events_;  // a silent one after release()
  uint32_t handles_ = 0;      // libuv handles opened and not closed yet
  bool released_ = false;
  uv_tcp_t listener_{};
  bool listener_open_ = false;
  bool listening_ = false;
  bool closed_ = false;
  uv_timer_t sweep_{};
  bool sweep_init_ = false, sweep_running_ = false, sweep_closing_ = false;
  std::unique_ptr<char[]> read_buffer_;
  std::unordered_map<uint32_t, Connection*> conns_;
  std::vector<PendingClose> deferred_;  // on_closed notices for the next sweep
  uint32_t open_ = 0;                   // counted connections (accept to handle close)
  std::unordered_map<std::string, uint32_t> per_ip_;
  util::IdCounter ids_;                 // connection ids, never one in use
  // The read scheduler.
  uv_timer_t merge_timer_{};
  bool merge_init_ = false, merge_running_ = false, merge_closing_ = false;
  std::vector<uint32_t> merged_;        // ids of the merged connections
  uint64_t merge_ticks_ = 0;
  uint64_t next_regular_ = 0;           // loop time of the next regular merged read
  uint64_t timer_at_ = UINT64_MAX;      // loop time the merge timer is armed for
};

}  // namespace skylark::io
