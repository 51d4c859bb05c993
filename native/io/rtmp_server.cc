// io::RtmpServer: accept, per-connection reads and writes, the sweep, closes (io/rtmp_server.h).
// The read scheduler (merged reads) is read_scheduler.cc.
#include "io/rtmp_server.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/util/address_group.h"
#include "io/connection.h"

namespace skylark::io {

namespace {

// The owner after release(): hears nothing.
class Silent final : public RtmpServerEvents {
 public:
  void on_connection(uint32_t, const std::string&) override {}
  void on_read(uint32_t, std::vector<rtmp::Event>&, AudioSink*) override {}
  void on_closed(uint32_t, const std::string&, std::string_view, const std::string&) override {}
  void on_timeout(uint32_t) override {}
  void on_limit(uint32_t, const char*, const std::string&) override {}
  void on_handle_opened() override {}
  void on_handle_closed(bool) override {}
};
Silent g_silent;

}  // namespace

RtmpServer::RtmpServer(uv_loop_t* loop, const RtmpServerOptions& options, RtmpServerEvents& events)
    : loop_(loop), options_(options), events_(&events), read_buffer_(new char[kReadBufferBytes]) {}

RtmpServer::~RtmpServer() = default;

void RtmpServer::release() {
  if (released_) return;
  released_ = true;
  events_ = &g_silent;
  close();
  if (handles_ == 0) delete this;
}

// Every libuv handle of the server counts from init to its close callback: the owner keeps the
// server alive meanwhile, and a released server lives until the last one is closed.
void RtmpServer::HandleOpened() {
  ++handles_;
  events_->on_handle_opened();
}

void RtmpServer::HandleClosed() {
  const bool none_open = --handles_ == 0;
  if (released_) {
    if (none_open) delete this;
    return;
  }
  events_->on_handle_closed(none_open);  // may release this server: nothing after it
}

// ── calls from the owner ─────────────────────────────────────────────────────────────────────

int RtmpServer::listen(const std::string& host, int port, int backlog, int* bound_port) {
  if (!can_listen()) return UV_EINVAL;
  sockaddr_storage addr{};
  int err = host.find(':') != std::string::npos
                ? uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(&addr))
                : uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(&addr));
  if (err == 0) err = uv_tcp_init(loop_, &listener_);
  if (err != 0) {
    closed_ = true;
    return err;
  }
  listener_.data = this;
  listener_open_ = true;
  HandleOpened();  // until the listener's close callback
  err = uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&addr), 0);
  if (err == 0)
    err = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), std::clamp(backlog, 1, 65535), &RtmpServer::OnConnection);
  if (err != 0) {
    closed_ = true;  // a failed server is not reused: make a new one
    CloseListener();
    return err;
  }
  listening_ = true;
  sockaddr_storage bound{};
  int len = sizeof(bound);
  uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&bound), &len);
  *bound_port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                            : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return 0;
}

void RtmpServer::close() {
  closed_ = true;
  listening_ = false;
  CloseListener();
  for (auto& [id, c] : conns_) {
    c->closing = true;
    c->sink.reset();
    CloseHandle(c);
  }
  StopSweep();
  StopMergeTimer();
}

bool RtmpServer::accept_publish(uint32_t id) {
  Connection* c = Live(id);
  if (!c) return false;
  c->session->accept_publish();
  Flush(c, /*from_owner=*/true);
  return true;
}

bool RtmpServer::reject_publish(uint32_t id, std::string_view code, std::string_view description) {
  Connection* c = Live(id);
  if (!c) return false;
  c->session->reject_publish(code, description);
  Flush(c, /*from_owner=*/true);
  return true;
}

bool RtmpServer::set_timeout(uint32_t id, uint64_t ms) {
  Connection* c = Live(id);
  if (!c) return false;
  c->timeout_ms = ms;
  c->last_read = uv_now(loop_);
  c->timeout_sent = false;
  return true;
}

bool RtmpServer::route(uint32_t id, std::unique_ptr<AudioSink> sink, bool merge) {
  Connection* c = Live(id);
  if (!c) return false;
  c->sink = std::move(sink);
  c->merge_allowed = merge;
  UpdateMerged(c);
  return true;
}

uint64_t RtmpServer::audio_bytes(uint32_t id) const {
  const Connection* c = Live(id);
  return c ? c->audio_bytes : 0;
}

void RtmpServer::close_connection(uint32_t id) {
  if (Connection* c = Live(id)) BeginClose(c, /*graceful=*/true);
}

// ── connections ──────────────────────────────────────────────────────────────────────────────

// The open connection `id`, or nullptr (unknown, closing).
Connection* RtmpServer::Live(uint32_t id) const {
  auto it = conns_.find(id);
  if (it == conns_.end() || it->second->closing) return nullptr;
  return it->second;
}

// An id is in use while its connection exists or its owner has yet to hear of its close.
bool RtmpServer::IdTaken(uint32_t id) const {
  if (conns_.count(id) != 0) return true;
  for (const PendingClose& p : deferred_)
    if (p.id == id) return true;
  return false;
}

// One read: the session's events go to the routed sink (audio) and to the owner (all of them).
void RtmpServer::OnData(Connection* c, const uint8_t* data, size_t n) {
  c->last_read = uv_now(loop_);
  c->timeout_sent = false;
  c->session->push(data, n);
  auto& events = c->session->events();
  Flush(c, /*from_owner=*/false);
  if (c->closing) {
    events.clear();
    return;
  }
  const rtmp::Session& session = *c->session;
  const uint32_t pre_publish_bytes = options_.session.pre_publish_bytes;
  if (session.limit() == rtmp::Limit::kPrePublishBytes ||
      (!session.publish_accepted() && pre_publish_bytes > 0 &&
       session.held_bytes() + c->tcp.write_queue_size > pre_publish_bytes)) {
    events.clear();
    LimitClose(c, "rtmp_prepublish_bytes");
    return;
  }
  if (session.limit() == rtmp::Limit::kAudioMessageBytes && !c->audio_limit_sent) {
    c->audio_limit_sent = true;
    events_->on_limit(c->id, "audio_frame_bytes", c->remote);
    if (c->closing) {
      events.clear();
      return;
    }
  }
  if (events.empty()) return;
  AudioSink* sink = c->sink.get();
  for (const rtmp::Event& e : events) {
    if (e.type != rtmp::Event::Type::kAudio) continue;
    c->audio_bytes += e.data.size;
    if (sink) sink->push_audio(e.timestamp, e.data.data.get(), e.data.size);
  }
  if (sink) UpdateMerged(c);
  events_->on_read(c->id, events, sink);
  events.clear();
}

// Writes the session's pending replies: directly when nothing is queued, else queued. A failed
// write closes the connection; the owner hears on_closed at once, or on the next loop turn when
// `from_owner` (a call from the owner is on the stack).
void RtmpServer::Flush(Connection* c, bool from_owner) {
  auto& out = c->session->output();
  if (out.empty() || c->closing) {
    if (c->closing) out.clear();
    return;
  }
  auto* stream = reinterpret_cast<uv_stream_t*>(&c->tcp);
  size_t done = 0;
  if (c->tcp.write_queue_size == 0) {
    uv_buf_t b = uv_buf_init(reinterpret_cast<char*>(out.data()), static_cast<unsigned>(out.size()));
    int n = uv_try_write(stream, &b, 1);
    if (n > 0) {
      done = static_cast<size_t>(n);
    } else if (n != UV_EAGAIN && n != UV_ENOSYS) {
      out.clear();
      PeerGone(c, std::string("socket error: ") + uv_strerror(n), from_owner);
      return;
    }
  }
  if (done < out.size()) {
    auto* w = new WriteReq();
    w->bytes.assign(out.begin() + static_cast<std::ptrdiff_t>(done), out.end());
    w->req.data = c;
    uv_buf_t b = uv_buf_init(reinterpret_cast<char*>(w->bytes.data()), static_cast<unsigned>(w->bytes.size()));
    int err = uv_write(&w->req, stream, &b, 1, &RtmpServer::OnWrite);
    if (err != 0) {
      delete w;
      out.clear();
      PeerGone(c, std::string("socket error: ") + uv_strerror(err), from_owner);
      return;
    }
  }
  out.clear();
  if (out.capacity() > 64 * 1024) out.shrink_to_fit();
  if (c->tcp.write_queue_size > kMaxQueuedWriteBytes) PeerGone(c, "peer does not read", from_owner);
}

// The peer closed its side: the session says whether it vanished mid-message.
void RtmpServer::OnEof(Connection* c) {
  c->session->end();
  std::string code, message;
  for (const rtmp::Event& e : c->session->events()) {
    if (e.type != rtmp::Event::Type::kError) continue;
    code = std::string(util::status_code(e.code));
    message = e.message;
  }
  c->session->events().clear();
  PeerGone(c, "peer closed", false, std::move(code), std::move(message));
}

// The peer is gone (EOF, socket error): the owner hears on_closed once (`code`/`message`: the
// session's error when the peer vanished mid-message), then the handle closes.
void RtmpServer::PeerGone(Connection* c, const std::string& reason, bool defer, std::string code, std::string message) {
  if (c->closing) return;
  BeginClose(c, /*graceful=*/false);
  PendingClose p{c->id, reason, std::move(code), std::move(message)};
  if (defer) {
    deferred_.push_back(std::move(p));
    StartSweep(/*now=*/true);
    return;
  }
  NotifyClosed(p);
}

void RtmpServer::NotifyClosed(const PendingClose& p) { events_->on_closed(p.id, p.reason, p.code, p.message); }

// Closes a connection for a cap at once (no more reads, no grace): on_limit, then on_closed.
void RtmpServer::LimitClose(Connection* c, const char* cause) {
  if (c->closing) return;
  BeginClose(c, /*graceful=*/false);
  events_->on_limit(c->id, cause, c->remote);
  NotifyClosed(PendingClose{c->id, std::string("limit: ") + cause, {}, {}});
}

// Stops reading and closes the handle: after the queued writes and a FIN when graceful (forced
// after kCloseGraceMs by the sweep), else at once.
void RtmpServer::BeginClose(Connection* c, bool graceful) {
  if (c->closing) return;
  c->closing = true;
  c->closing_since = uv_now(loop_);
  c->sink.reset();
  uv_read_stop(reinterpret_cast<uv_stream_t*>(&c->tcp));
  if (graceful) {
    auto* req = new uv_shutdown_t();
    req->data = c;
    if (uv_shutdown(req, reinterpret_cast<uv_stream_t*>(&c->tcp), &RtmpServer::OnShutdown) == 0) return;
    delete req;
  }
  CloseHandle(c);
}

void RtmpServer::CloseHandle(Connection* c) {
  if (!c->handle_open) return;
  c->handle_open = false;
  uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), &RtmpServer::OnConnClosed);
}

void RtmpServer::CloseListener() {
  if (!listener_open_) return;
  listener_open_ = false;
  uv_close(reinterpret_cast<uv_handle_t*>(&listener_),
           [](uv_handle_t* h) { static_cast<RtmpServer*>(h->data)->HandleClosed(); });
}

void RtmpServer::StartReading(Connection* c) {
  uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp), &RtmpServer::OnAlloc, &RtmpServer::OnRead);
}

// ── timers ───────────────────────────────────────────────────────────────────────────────────

// Initializes one of the server's timers once: unref'd (connections and the listener keep the
// loop alive, not timers), counted as an open handle until its close callback.
void RtmpServer::InitTimer(uv_timer_t* t, bool* init) {
  if (*init) return;
  uv_timer_init(loop_, t);
  t->data = this;
  *init = true;
  HandleOpened();
  uv_unref(reinterpret_cast<uv_handle_t*>(t));
}

void RtmpServer::CloseTimer(uv_timer_t* t) {
  uv_close(reinterpret_cast<uv_handle_t*>(t),
           [](uv_handle_t* h) { static_cast<RtmpServer*>(h->data)->HandleClosed(); });
}

// The sweep timer: every kSweepMs while connections exist; `now` = also on the next loop turn
// (deferred on_closed notices).
void RtmpServer::StartSweep(bool now) {
  if (closed_ || (sweep_running_ && !now)) return;
  InitTimer(&sweep_, &sweep_init_);
  uv_timer_start(&sweep_, &RtmpServer::OnSweep, now ? 0 : kSweepMs, kSweepMs);
  sweep_running_ = true;
}

void RtmpServer::StopSweep() {
  if (sweep_init_ && sweep_running_) uv_timer_stop(&sweep_);
  sweep_running_ = false;
  if (closed_ && sweep_init_ && !sweep_closing_) {
    sweep_closing_ = true;
    CloseTimer(&sweep_);
  }
}

// ── libuv callbacks ──────────────────────────────────────────────────────────────────────────

namespace {

// The peer's per-IP count key (core/util/address_group.h: IPv6 by /64) and "ip:port" ("?" when unknown).
void PeerName(uv_tcp_t* tcp, std::string* ip_out, std::string* remote_out) {
  sockaddr_storage addr{};
  int len = sizeof(addr);
  if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ip_out->assign(1, '?');
    remote_out->assign(1, '?');
    return;
  }
  char ip[64] = {0};
  int port = 0;
  if (addr.ss_family == AF_INET6) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
    uv_ip6_name(a6, ip, sizeof(ip));
    port = ntohs(a6->sin6_port);
    *ip_out = util::AddressGroupV6(a6->sin6_addr.s6_addr);
    *remote_out = std::string(ip) + ":" + std::to_string(port);
    return;
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
    uv_ip4_name(a4, ip, sizeof(ip));
    port = ntohs(a4->sin_port);
  }
  *ip_out = ip;
  *remote_out = std::string(ip) + ":" + std::to_string(port);
}

}  // namespace

void RtmpServer::OnConnection(uv_stream_t* listener, int status) {
  auto* self = static_cast<RtmpServer*>(listener->data);
  if (status != 0 || self->closed_) return;
  auto* c = new Connection();
  c->server = self;
  if (uv_tcp_init(self->loop_, &c->tcp) != 0) {
    delete c;
    return;
  }
  c->tcp.data = c;
  self->HandleOpened();  // until the connection handle's close callback
  if (uv_accept(listener, reinterpret_cast<uv_stream_t*>(&c->tcp)) != 0) {
    c->closing = true;
    self->CloseHandle(c);  // not in conns_: freed by the close callback
    return;
  }
  PeerName(&c->tcp, &c->ip, &c->remote);
  // The caps, before anything is allocated for the connection.
  const auto from_ip = self->per_ip_.find(c->ip);
  const char* refused = nullptr;
  if (self->open_ >= self->options_.max_connections) refused = "rtmp_connections";
  else if (from_ip != self->per_ip_.end() && from_ip->second >= self->options_.max_connections_per_ip)
    refused = "rtmp_connections_per_ip";
  const uint32_t id = refused ? 0 : self->ids_.next([self](uint32_t i) { return self->IdTaken(i); });
  if (id == 0) {
    c->closing = true;
    self->CloseHandle(c);  // not in conns_: freed by the close callback
    self->events_->on_limit(0, refused ? refused : "rtmp_connections", c->remote);
    return;
  }
  c->counted = true;
  ++self->open_;
  ++self->per_ip_[c->ip];
  uv_tcp_nodelay(&c->tcp, 1);
  c->id = id;
  c->session = std::make_unique<rtmp::Session>(self->options_.session);
  c->last_read = c->accepted_at = uv_now(self->loop_);
  self->conns_[c->id] = c;
  self->StartSweep();
  self->StartReading(c);
  self->events_->on_connection(c->id, c->remote);
}

void RtmpServer::OnAlloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
  auto* c = static_cast<Connection*>(h->data);
  // One buffer for every connection: a read is consumed (copied by the session) before the next.
  buf->base = c->server->read_buffer_.get();
  buf->len = kReadBufferBytes;
}

void RtmpServer::OnRead(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
  auto* c = static_cast<Connection*>(s->data);
  RtmpServer* self = c->server;
  if (c->closing) return;
  if (nread > 0) {
    self->OnData(c, reinterpret_cast<const uint8_t*>(buf->base), static_cast<size_t>(nread));
    return;
  }
  if (nread == 0) return;  // EAGAIN
  if (nread == UV_EOF) {
    self->OnEof(c);
    return;
  }
  self->PeerGone(c, std::string("socket error: ") + uv_strerror(static_cast<int>(nread)), false);
}

void RtmpServer::OnWrite(uv_write_t* req, int status) {
  auto* w = reinterpret_cast<WriteReq*>(req);
  auto* c = static_cast<Connection*>(req->data);
  delete w;
  if (status != 0 && status != UV_ECANCELED && !c->closing)
    c->server->PeerGone(c, std::string("socket error: ") + uv_strerror(status), false);
}

void RtmpServer::OnShutdown(uv_shutdown_t* req, int) {
  auto* c = static_cast<Connection*>(req->data);
  delete req;
  c->server->CloseHandle(c);
}

void RtmpServer::OnConnClosed(uv_handle_t* h) {
  auto* c = static_cast<Connection*>(h->data);
  RtmpServer* self = c->server;
  auto it = self->conns_.find(c->id);
  if (it != self->conns_.end() && it->second == c) self->conns_.erase(it);
  if (c->counted) {
    --self->open_;
    auto ip = self->per_ip_.find(c->ip);
    if (ip != self->per_ip_.end() && --ip->second == 0) self->per_ip_.erase(ip);
  }
  delete c;
  if (self->conns_.empty() && self->deferred_.empty() && !self->closed_) self->StopSweep();
  self->HandleClosed();
}

// Once a second while connections exist: delivers deferred on_closed notices, force-closes
// graceful closes that hang, closes connections past the publish deadline and tells the owner of
// connections silent past their timeout.
void RtmpServer::OnSweep(uv_timer_t* t) {
  auto* self = static_cast<RtmpServer*>(t->data);
  if (!self->deferred_.empty()) {
    std::vector<PendingClose> pending;
    pending.swap(self->deferred_);
    for (const PendingClose& p : pending) self->NotifyClosed(p);
  }
  const uint64_t now = uv_now(self->loop_);
  std::vector<uint32_t> timed_out, late;
  for (auto& [id, c] : self->conns_) {
    if (c->closing) {
      if (now - c->closing_since >= kCloseGraceMs) self->CloseHandle(c);
    } else if (!c->session->publish_accepted() && now - c->accepted_at >= self->options_.publish_timeout_ms) {
      late.push_back(id);
    } else if (c->timeout_ms > 0 && !c->timeout_sent && now - c->last_read >= c->timeout_ms) {
      c->timeout_sent = true;
      timed_out.push_back(id);
    }
  }
  for (uint32_t id : late)
    if (Connection* c = self->Live(id)) self->LimitClose(c, "rtmp_publish_timeout");
  for (uint32_t id : timed_out)
    if (self->Live(id)) self->events_->on_timeout(id);
}

}  // namespace skylark::io
