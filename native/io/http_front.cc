#include "io/http_front.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/http/framing.h"
#include "core/http/reload.h"
#include "io/import_hook.h"

namespace skylark::io {
namespace {

// Per fd: kFresh while a connection the HTTP server accepted has not had its first request line
// read, kCapped once its send buffer was capped.
constexpr uint8_t kFresh = 1;
constexpr uint8_t kCapped = 2;
std::atomic<uint8_t>* g_fresh = nullptr;
size_t g_fresh_size = 0;
std::atomic<Http10Handoff> g_handoff{nullptr};
std::atomic<const HttpFrontOptions*> g_options{nullptr};
std::atomic<uint64_t> g_http10{0}, g_capped{0}, g_incomplete{0}, g_refused{0};
std::mutex g_install_mu;
bool g_installed = false;

// Per fd: the peer address `accept4` returned for a connection the HTTP server accepted (IPv4 or
// IPv6; `len` 0 = none known), so that its `getpeername` calls need no system call. A connection's
// peer address never changes; the slot is written by the thread that accepted the connection,
// read by the same thread (the HTTP server serves a connection on the thread that accepted it),
// and cleared when the HTTP server closes the descriptor. Mapped lazily: untouched slots cost no
// memory.
struct PeerSlot {
  std::atomic<uint8_t> len;
  uint8_t bytes[sizeof(sockaddr_in6)];
};
static_assert(sizeof(sockaddr_in6) <= 255 && sizeof(sockaddr_in) <= sizeof(sockaddr_in6));
std::atomic<PeerSlot*> g_peers{nullptr};
std::atomic<uint64_t> g_peer_hits{0};

// Per fd, what the HTTP library has of a connection: read and written by the thread that serves
// it (and cleared on close). Mapped lazily, like the peer slots.
struct ConnSlot {
  uint32_t passed_at;  // monotonic seconds of the last read handed to the library (or the accept)
  uint32_t active_at;  // monotonic seconds of the last byte read or written (or the accept); the sweep reads it
  uint8_t open;        // 1 from the library's accept to its close; the sweep reads it
  uint8_t lock;        // held by the idle sweep while it decides and shuts down, and by the close hook
  uint8_t state;
  // A blocking playlist reload of this connection is held here (not by the library): the front
  // owes it an answer. Set by the serving thread, cleared (under `lock`) by whoever answers it or
  // by the close hook; `cell_a`/`cell_b` are its held-cap cells, given back by whoever clears it.
  uint8_t held_here;
  uint32_t gen;        // bumped at every accept and close: a waiter answers only its own connection
  uint32_t passed_ms;  // monotonic ms (mod 2^32) of the last read handed to the library (or the accept)
  uint32_t written_ms; // monotonic ms (mod 2^32) when the library last wrote all it had (its idle timer starts then)
  int32_t cell_a, cell_b;
};
std::atomic<int> g_max_conn_fd{-1};  // the highest descriptor ever accepted (the sweep's bound)
std::atomic<uint64_t> g_open_conns{0};  // connections accepted and not yet closed (OpenHttpConnections)
std::atomic<uint64_t> g_idle_closed{0};
constexpr uint8_t kPending = 1;  // the library got a request whose answer it has not fully written
// The connection is the library's for good: it sent something not framed exactly (a read that did
// not end where a request ends, a body, a header on neither list of core/http/framing.h, bytes
// llhttp refused), more than one request in a read, or a request other than GET/HEAD under the
// prefix (docs/http.md "Framing").
constexpr uint8_t kForeign = 2;
// The last framed read handed on ended inside a request head (it is not whole yet): the idle sweep
// treats the connection as waiting for its client, not for an answer. Cleared by any write.
constexpr uint8_t kHeadOpen = 4;
ConnSlot* g_conns = nullptr;     // null: objects are never answered here

// Per fd: the first bytes of a new connection whose request line is not whole yet (docs/http.md
// "Framing"): kept until it is, and then handed on with what follows (the library is told the
// read would block meanwhile). At most kMaxLineBytes; freed on close.
struct LineBytes {
  uint32_t len;
  uint8_t bytes[];
};
constexpr size_t kMaxLineBytes = 8192;
LineBytes** g_lines = nullptr;  // null: never kept (the close hook is missing)
constexpr ssize_t kPassOn = -2;

uint32_t NowSeconds() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint32_t>(ts.tv_sec);
}

// Monotonic milliseconds (mod 2^32: compare differences only).
uint32_t NowMs() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint32_t>(static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000);
}

inline bool Tracked(int fd) { return fd >= 0 && static_cast<size_t>(fd) < g_fresh_size; }

void RememberPeer(int fd, const struct sockaddr* addr, socklen_t addrlen, socklen_t given) {
  PeerSlot* peers = g_peers.load(std::memory_order_relaxed);
  if (!peers) return;
  PeerSlot& slot = peers[fd];
  slot.len.store(0, std::memory_order_relaxed);
  // Only a whole IPv4 or IPv6 address (the kernel reports the full length even when it truncated).
  if (addr == nullptr || addrlen > given) return;
  const bool v4 = addr->sa_family == AF_INET && addrlen == sizeof(sockaddr_in);
  const bool v6 = addr->sa_family == AF_INET6 && addrlen == sizeof(sockaddr_in6);
  if (!v4 && !v6) return;
  std::memcpy(slot.bytes, addr, addrlen);
  slot.len.store(static_cast<uint8_t>(addrlen), std::memory_order_release);
}

// Idle connections (docs/http.md "Idle connections"): some builds of the HTTP library never time a
// connection out. Once a second a thread of the front's own shuts down the connections that moved
// no byte either way for kIdleSeconds while nothing was outstanding (a silent connection, a
// half-sent head, an idle keep-alive), or for kIdlePendingSeconds while an answer was
// outstanding. The library then sees the peer gone and closes the connection as its own timeout
// would. A slot's lock is held by the sweep from its check to its shutdown and by the close hook
// around close(2), so a descriptor is never shut down after it was closed and reused.
constexpr uint32_t kIdleSeconds = 10;
constexpr uint32_t kIdlePendingSeconds = 60;

inline void LockSlot(ConnSlot& c) {
  while (__atomic_exchange_n(&c.lock, 1, __ATOMIC_ACQUIRE) != 0) sched_yield();
}
inline void UnlockSlot(ConnSlot& c) { __atomic_store_n(&c.lock, 0, __ATOMIC_RELEASE); }

void SweepIdleOnce() {
  const uint32_t now = NowSeconds();
  const int last = g_max_conn_fd.load(std::memory_order_relaxed);
  for (int fd = 0; fd <= last; ++fd) {
    ConnSlot& c = g_conns[fd];
    if (__atomic_load_n(&c.open, __ATOMIC_ACQUIRE) == 0) continue;
    if (__atomic_exchange_n(&c.lock, 1, __ATOMIC_ACQUIRE) != 0) continue;  // closing now
    const uint32_t idle = now - __atomic_load_n(&c.active_at, __ATOMIC_RELAXED);
    const uint8_t state = __atomic_load_n(&c.state, __ATOMIC_RELAXED);
    const bool pending = (state & kPending) != 0 && (state & kHeadOpen) == 0;
    if (__atomic_load_n(&c.open, __ATOMIC_RELAXED) != 0 && idle >= kIdleSeconds && (!pending || idle >= kIdlePendingSeconds) && idle < (1u << 31)) {
      if (__atomic_exchange_n(&c.open, 0, __ATOMIC_RELAXED) != 0) g_open_conns.fetch_sub(1, std::memory_order_relaxed);  // shut down once; the library's close follows
      (void)::shutdown(fd, SHUT_RDWR);
      g_idle_closed.fetch_add(1, std::memory_order_relaxed);
    }
    UnlockSlot(c);
  }
}

void StartIdleSweep() {
  std::thread([] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      SweepIdleOnce();
    }
  }).detach();
}

int HookAccept4(int sockfd, struct sockaddr* addr, socklen_t* addrlen, int flags) {
  const socklen_t given = addrlen ? *addrlen : 0;
  const int fd = ::accept4(sockfd, addr, addrlen, flags);
  if (Tracked(fd)) {
    g_fresh[fd].store(kFresh, std::memory_order_relaxed);
    RememberPeer(fd, addr, addrlen ? *addrlen : 0, given);
    if (g_conns) {
      const uint32_t now = NowSeconds();
      g_conns[fd].passed_at = now;
      g_conns[fd].passed_ms = NowMs();
      g_conns[fd].written_ms = g_conns[fd].passed_ms;
      g_conns[fd].state = 0;
      __atomic_store_n(&g_conns[fd].held_here, 0, __ATOMIC_RELAXED);
      __atomic_add_fetch(&g_conns[fd].gen, 1, __ATOMIC_RELEASE);
      __atomic_store_n(&g_conns[fd].active_at, now, __ATOMIC_RELAXED);
      if (__atomic_exchange_n(&g_conns[fd].open, 1, __ATOMIC_ACQ_REL) == 0) g_open_conns.fetch_add(1, std::memory_order_relaxed);
      int seen = g_max_conn_fd.load(std::memory_order_relaxed);
      while (fd > seen && !g_max_conn_fd.compare_exchange_weak(seen, fd, std::memory_order_relaxed)) {
      }
    }
  }
  return fd;
}

int HookGetpeername(int fd, struct sockaddr* addr, socklen_t* addrlen) {
  PeerSlot* peers = g_peers.load(std::memory_order_relaxed);
  if (peers && Tracked(fd) && addr != nullptr && addrlen != nullptr) {
    const PeerSlot& slot = peers[fd];
    const uint8_t len = slot.len.load(std::memory_order_acquire);
    if (len != 0) {
      // As getpeername(2): copy at most *addrlen bytes, report the address's full length.
      std::memcpy(addr, slot.bytes, std::min<socklen_t>(len, *addrlen));
      *addrlen = len;
      g_peer_hits.fetch_add(1, std::memory_order_relaxed);
      return 0;
    }
  }
  return ::getpeername(fd, addr, addrlen);
}

// Gathered writes. The HTTP library writes a response larger than its cork buffer (16 KiB) in two
// sends: the buffered status line and headers with MSG_MORE ("more follows at once"), then the
// body straight from its memory. Those bytes are held back here instead and go out with the next
// write on the same descriptor, in one sendmsg(2) of two iovecs: one system call per response
// instead of two, the same bytes in the same order. The library is told they were written; the
// next write's return value counts only its own bytes that the kernel took (0 while held bytes
// are still waiting, so the library keeps its own and writes again when the socket is writable).
// The library always follows a MSG_MORE send with a write on the same socket (at once, or when it
// uncorks), so held bytes live between two consecutive writes of one connection. They are kept
// per descriptor, in the thread's scratch buffer while they wait for the very next write and in
// a buffer of their own when they must outlive it; closing the descriptor drops them.
constexpr size_t kMaxHeld = 16 * 1024 + 512;  // the library's cork buffer, and then some
struct HeldBytes {
  size_t len = 0;
  uint8_t bytes[kMaxHeld];
};
// Per fd: held bytes that outlived the write after them (rare: the kernel took less than them).
std::atomic<std::atomic<HeldBytes*>*> g_held{nullptr};
constexpr int kMaxIov = 64;  // iovecs per gathered write; a longer writev is written in part (as writev may be)
std::atomic<uint64_t> g_coalesced{0};
// Per HTTP thread: the bytes held for the next write, and whose they are (-1: none).
thread_local HeldBytes* t_scratch = nullptr;
thread_local int t_scratch_fd = -1;

// Moves the thread's scratch bytes into their descriptor's own buffer (another descriptor writes first).
void ParkScratch() {
  if (t_scratch_fd < 0) return;
  const int fd = t_scratch_fd;
  t_scratch_fd = -1;
  std::atomic<HeldBytes*>* table = g_held.load(std::memory_order_relaxed);
  HeldBytes* own = table[fd].load(std::memory_order_relaxed);
  if (!own) {
    own = static_cast<HeldBytes*>(std::malloc(sizeof(HeldBytes)));
    if (!own) {  // out of memory: send them as they are (they were asked to go out anyway)
      (void)::send(fd, t_scratch->bytes, t_scratch->len, MSG_NOSIGNAL | MSG_DONTWAIT);
      return;
    }
    own->len = 0;
    table[fd].store(own, std::memory_order_relaxed);
  }
  std::memcpy(own->bytes + own->len, t_scratch->bytes, t_scratch->len);  // own is empty here: see HeldFor
  own->len += t_scratch->len;
}

// The bytes held for `fd`, or null.
HeldBytes* HeldFor(int fd) {
  if (t_scratch_fd == fd) return t_scratch;
  if (t_scratch_fd >= 0) ParkScratch();
  HeldBytes* own = g_held.load(std::memory_order_relaxed)[fd].load(std::memory_order_relaxed);
  return own && own->len ? own : nullptr;
}

void ForgetHeld(HeldBytes* h, int fd) {
  h->len = 0;
  if (h == t_scratch) {
    t_scratch_fd = -1;
    return;
  }
  g_held.load(std::memory_order_relaxed)[fd].store(nullptr, std::memory_order_relaxed);
  std::free(h);
}

// Writes the held bytes of `fd` and then `iov[0..count)` in one sendmsg. Returns what the library's
// write call returns: how many of its own bytes went out (0 while held bytes remain), or -1 with
// errno.
ssize_t SendAfterHeld(int fd, HeldBytes* h, const struct iovec* iov, int count, int flags) {
  struct iovec all[kMaxIov];
  all[0] = {h->bytes, h->len};
  int n_iov = 1;
  for (int i = 0; i < count && n_iov < kMaxIov; ++i) all[n_iov++] = iov[i];
  struct msghdr msg {};
  msg.msg_iov = all;
  msg.msg_iovlen = static_cast<size_t>(n_iov);
  const ssize_t n = ::sendmsg(fd, &msg, flags & ~MSG_MORE);
  if (n < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ForgetHeld(h, fd);  // the connection is gone
    return -1;
  }
  g_coalesced.fetch_add(1, std::memory_order_relaxed);
  const size_t sent = static_cast<size_t>(n);
  if (sent < h->len) {
    std::memmove(h->bytes, h->bytes + sent, h->len - sent);
    h->len -= sent;
    if (h == t_scratch) ParkScratch();  // they must outlive this call
    return 0;
  }
  const ssize_t own = static_cast<ssize_t>(sent - h->len);
  ForgetHeld(h, fd);
  return own;
}

// Media objects answered here (docs/http.md "Media objects answered in native code"). The server
// stores the answer to `GET <path>` of an immutable object (an LL-HLS part of a public stream); a
// read that llhttp frames as exactly one plain GET of a stored path (core/http/framing.h) on a
// connection framed exactly so far (kForeign unset) where the HTTP library has nothing
// outstanding is answered with one sendmsg, and the library is told the read would block: it
// never sees that request. What the library must see, it sees: every other request, every
// request on a connection that sent it anything else (a body, an unknown header, a head split
// across reads, more than one request in a read, anything but GET/HEAD under /hls/), anything while
// an answer of its own is not fully written, and one request every kPassEverySeconds, so that
// its idle timeout (armed when its last answer ended) never fires on a busy connection.
struct StoredObject {
  std::string head;  // status line and header fields up to the request id's prefix
  std::string tail;  // "Content-Length: N" CRLF CRLF and the body
};
std::mutex g_objects_mu;
std::unordered_map<std::string, std::shared_ptr<const StoredObject>> g_objects;  // guarded by g_objects_mu
std::atomic<size_t> g_object_count{0};
std::atomic<uint64_t> g_object_hits{0}, g_object_cut{0}, g_request_ids{0};
std::atomic<bool> g_answering{true};  // SetHttpObjectsAnswering
std::atomic<size_t> g_reload_layers{0};  // layers whose blocking reloads are held here (below)
std::atomic<bool> g_reloads_on{false};   // SetHeldReloads
constexpr std::string_view kObjectPrefix = "/hls/";
constexpr size_t kMaxObjects = 1 << 16;
constexpr uint32_t kPassEverySeconds = 4;

// Whether the read `f` is one request a connection may carry and still be answered here later:
// exactly one whole GET or HEAD under the prefix, HTTP/1.1, no body, headers on the lists.
bool StaysFramed(const http::Framing& f) {
  if (f.end != http::FrameEnd::kExact || f.heads_count != 1 || f.fields == http::Fields::kOther) return false;
  const http::RequestHead& h = f.heads[0];
  return h.method != http::Method::kOther && h.http_major == 1 && h.http_minor == 1 && h.target.starts_with(kObjectPrefix);
}

// The library got a read of `fd` (`f`: its framing, null when it was not framed): its answer is
// outstanding until its write completes.
void HandedOn(int fd, const http::Framing* f) {
  ConnSlot& c = g_conns[fd];
  const bool answering = (c.state & kPending) != 0;
  uint8_t state = c.state | kPending;
  if (f == nullptr || !StaysFramed(*f)) state |= kForeign;
  // A read with no whole head while an answer is outstanding is that request's body (or the next
  // request, pipelined): the answer, not a half-sent head, is what the connection waits for.
  if (!answering && f != nullptr && f->end == http::FrameEnd::kPartial && f->heads_count == 0) state |= kHeadOpen;
  c.state = state;
  c.passed_at = NowSeconds();
  c.passed_ms = NowMs();
}

// The library wrote the last of what it had for `fd`.
inline void WrittenOut(int fd) {
  if (!g_conns) return;
  g_conns[fd].state &= static_cast<uint8_t>(~(kPending | kHeadOpen));
  g_conns[fd].written_ms = NowMs();
}

// Formats the per-answer middle of the head: the request id's counter (base 36), Date (RFC 9110
// §6.6.1, IMF-fixdate, cached per second and thread) and the library's own banner field, as the
// library writes them. Returns its length.
size_t AnswerMiddle(char* out) {
  thread_local time_t t_second = 0;
  thread_local char t_date[40];
  const time_t now = time(nullptr);
  if (now != t_second) {
    struct tm tm {};
    gmtime_r(&now, &tm);
    strftime(t_date, sizeof t_date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    t_second = now;
  }
  char digits[16];
  size_t nd = 0;
  uint64_t id = g_request_ids.fetch_add(1, std::memory_order_relaxed);
  do {
    const unsigned d = static_cast<unsigned>(id % 36);
    digits[nd++] = static_cast<char>(d < 10 ? '0' + d : 'a' + d - 10);
    id /= 36;
  } while (id != 0 && nd < sizeof digits);
  size_t at = 0;
  while (nd > 0) out[at++] = digits[--nd];
  const int more = snprintf(out + at, 96, "\r\nDate: %s\r\nuWebSockets: 20\r\n", t_date);
  return at + static_cast<size_t>(more > 0 ? more : 0);
}

// Whether a read may hold a request the store answers, by its first bytes alone (else it is
// handed on unframed).
inline bool MayBeObjectRequest(const uint8_t* bytes, ssize_t n) {
  const std::string_view data(reinterpret_cast<const char*>(bytes), static_cast<size_t>(n));
  return data.starts_with("GET /hls/") || data.starts_with("HEAD /hls/");
}

ssize_t TakeReload(int fd, const http::RequestHead& h, const uint8_t* bytes, ssize_t n);

// Answers the read of `fd` (`n` bytes, framed as `f`) from the store when it may (see above). Returns
// kPassOn to hand the read to the library, else what the library's recv returns: -1 with EAGAIN
// (answered), -1 with the error (the connection failed), or 0 when only part of the answer went
// out (the library closes the connection, as after an orderly close).
ssize_t AnswerFromStore(int fd, const http::Framing& f, const uint8_t* bytes, ssize_t n) {
  const ConnSlot& c = g_conns[fd];
  if (c.state != 0 || c.held_here != 0 || t_scratch_fd == fd) return kPassOn;
  if (NowSeconds() - c.passed_at >= kPassEverySeconds) return kPassOn;
  // Exactly one whole GET, HTTP/1.1, no body, only plain header fields, CRLF line ends, and the
  // read ends where it ends (core/http/framing.h).
  if (f.end != http::FrameEnd::kExact || f.heads_count != 1 || f.fields != http::Fields::kPlain || !f.crlf) return kPassOn;
  if (!MayBeObjectRequest(bytes, n)) return kPassOn;  // the request begins the read (no empty line before it)
  const http::RequestHead& h = f.heads[0];
  if (h.method != http::Method::kGet || h.http_major != 1 || h.http_minor != 1) return kPassOn;
  if (h.target.find('?') != std::string_view::npos) {
    return g_reloads_on.load(std::memory_order_relaxed) && g_reload_layers.load(std::memory_order_relaxed) != 0 ? TakeReload(fd, h, bytes, n) : kPassOn;
  }
  if (!g_answering.load(std::memory_order_relaxed)) return kPassOn;
  thread_local std::string t_key;  // keeps its capacity: no allocation per read once warm
  t_key.assign(h.target);
  std::shared_ptr<const StoredObject> obj;
  {
    std::lock_guard<std::mutex> lock(g_objects_mu);
    const auto it = g_objects.find(t_key);
    if (it == g_objects.end()) return kPassOn;
    obj = it->second;
  }
  char middle[128];
  const size_t middle_len = AnswerMiddle(middle);
  struct iovec iov[3] = {{const_cast<char*>(obj->head.data()), obj->head.size()}, {middle, middle_len}, {const_cast<char*>(obj->tail.data()), obj->tail.size()}};
  struct msghdr msg {};
  msg.msg_iov = iov;
  msg.msg_iovlen = 3;
  const ssize_t total = static_cast<ssize_t>(obj->head.size() + middle_len + obj->tail.size());
  const ssize_t sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent == total) {
    g_object_hits.fetch_add(1, std::memory_order_relaxed);
    errno = EAGAIN;
    return -1;
  }
  if (sent < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? kPassOn : -1;
  g_object_cut.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

// Blocking playlist reloads held here (docs/http.md "Blocking reloads held in native code"). The
// server publishes, per public LL-HLS layer, where the layer is (the segment in progress, its
// parts, the parts of the segment before it), the reload's timeout and four rendered answers (the
// playlist and its delta update, each as answered when what was asked for is listed and as
// answered when the wait ran out). A read framed as exactly one plain GET of
// `<layer path>?sid=…&_HLS_msn=M&_HLS_part=P[&_HLS_skip=YES]` (in any order, each once, nothing
// else) on a connection the store could answer is answered at once when the layer lists the part,
// or else held: a waiter per connection, answered from the thread that publishes the part (or the
// timeout thread) under the connection's slot lock. What the server must still learn (the
// session named by `sid`, from which address, of which layer) is queued for it in batches.
struct ReloadWaiter {
  int fd;
  uint32_t gen;
  uint64_t msn;
  uint64_t part;
  bool skip;
  uint32_t deadline_ms;
};
struct ReloadLayer {
  HeldReloadState at{};
  std::shared_ptr<const StoredObject> answers[4];  // [hit full, hit delta, timed out full, timed out delta]
  std::vector<ReloadWaiter> waiters;               // in arrival order (each with its own deadline: see TakeReload)
};
std::mutex g_reloads_mu;
std::unordered_map<std::string, std::unique_ptr<ReloadLayer>> g_reloads;  // guarded by g_reloads_mu
std::atomic<size_t> g_reload_waiting{0};  // reloads held now
std::atomic<uint64_t> g_reload_hits{0}, g_reload_held{0}, g_reload_timeouts{0}, g_reload_cut{0}, g_reload_broken{0};
constexpr size_t kMaxReloadWaiting = size_t{1} << 20;
// A held reload is answered within this long (ms) of the library's last answer on its connection:
// 0.5 s before the library's idle timer can first fire (8 s).
constexpr uint32_t kHeldWithinMs = 7500;
// Shortest hold worth taking here (ms): a reload with less left before kHeldWithinMs goes to the routes.
constexpr uint32_t kMinHeldMs = 1000;
constexpr size_t kMaxReloadLayers = 4096;
// The held caps' shared counts (the server's node-wide counter: [total, …, cells …]) and limits.
std::atomic<int32_t*> g_cap_cells{nullptr};
int32_t g_cap_cell_count = 0, g_cap_total = 0, g_cap_per_address = 0;
// An address group (IPv4 as is, IPv6 by /64) → its two cells, as the server's counter picks them.
struct GroupKey {
  uint64_t bits;
  uint8_t v6;
  bool operator==(const GroupKey& o) const { return bits == o.bits && v6 == o.v6; }
};
struct GroupHash {
  size_t operator()(const GroupKey& k) const { return std::hash<uint64_t>()(k.bits * 0x9E3779B97F4A7C15ull ^ k.v6); }
};
std::mutex g_groups_mu;
std::unordered_map<GroupKey, std::pair<int32_t, int32_t>, GroupHash> g_group_cells;  // guarded by g_groups_mu
constexpr size_t kMaxGroups = 65536;
// Sessions and addresses the server is told about in batches (DrainHeldReloadSessions).
std::mutex g_sessions_mu;
std::vector<HeldReloadSession> g_sessions;          // guarded by g_sessions_mu
std::vector<std::string> g_wanted_groups;           // addresses whose cells are not known yet
constexpr size_t kMaxSessions = 65536;  // queued at most (a few more when HTTP threads race); beyond, reloads go to the server
std::atomic<size_t> g_sessions_queued{0};
// The server's listener count (an Int32 it stores on every join and leave) and the most it tracks:
// a reload whose session might be new is answered here only while the count plus every session
// queued stays below it (a new session over it is refused by the server: the routes answer that).
std::atomic<const int32_t*> g_listener_count{nullptr};
int32_t g_listener_max = 0;
constexpr size_t kMaxWanted = 4096;
constexpr size_t kMaxUserAgent = 512;

inline http::LayerPosition PositionOf(const HeldReloadState& at) { return {at.next_sequence, at.open_parts, at.previous_parts}; }

// The group key of a peer address (false: none known).
bool GroupOf(const PeerSlot& slot, GroupKey* key, char* text, size_t text_size) {
  const uint8_t len = slot.len.load(std::memory_order_acquire);
  if (len == sizeof(sockaddr_in)) {
    sockaddr_in a;
    std::memcpy(&a, slot.bytes, sizeof a);
    key->bits = a.sin_addr.s_addr;
    key->v6 = 0;
    return inet_ntop(AF_INET, &a.sin_addr, text, static_cast<socklen_t>(text_size)) != nullptr;
  }
  if (len != sizeof(sockaddr_in6)) return false;
  sockaddr_in6 a;
  std::memcpy(&a, slot.bytes, sizeof a);
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(a.sin6_addr.s6_addr, kMapped, 12) == 0) {  // ::ffff:a.b.c.d is that IPv4 address
    uint32_t v4;
    std::memcpy(&v4, a.sin6_addr.s6_addr + 12, 4);
    key->bits = v4;
    key->v6 = 0;
    return inet_ntop(AF_INET, a.sin6_addr.s6_addr + 12, text, static_cast<socklen_t>(text_size)) != nullptr;
  }
  std::memcpy(&key->bits, a.sin6_addr.s6_addr, 8);
  key->v6 = 1;
  return inet_ntop(AF_INET6, &a.sin6_addr, text, static_cast<socklen_t>(text_size)) != nullptr;
}

// Takes one held slot for `key`'s cells, as the server's counter does (add, then take back over a
// cap). False when a cap is reached or the cells are not known (the request then goes to the server).
bool AcquireCells(const GroupKey& key, const char* address, int32_t* a, int32_t* b) {
  int32_t* cells = g_cap_cells.load(std::memory_order_acquire);
  if (!cells) return false;
  {
    std::lock_guard<std::mutex> lock(g_groups_mu);
    const auto it = g_group_cells.find(key);
    if (it == g_group_cells.end()) {
      std::lock_guard<std::mutex> ls(g_sessions_mu);
      if (g_wanted_groups.size() < kMaxWanted) g_wanted_groups.emplace_back(address);
      return false;
    }
    *a = it->second.first;
    *b = it->second.second;
  }
  if (__atomic_fetch_add(&cells[0], 1, __ATOMIC_SEQ_CST) >= g_cap_total) {
    __atomic_fetch_sub(&cells[0], 1, __ATOMIC_SEQ_CST);
    return false;
  }
  const int32_t na = __atomic_fetch_add(&cells[*a], 1, __ATOMIC_SEQ_CST);
  const int32_t nb = __atomic_fetch_add(&cells[*b], 1, __ATOMIC_SEQ_CST);
  if (std::min(na, nb) >= g_cap_per_address) {
    __atomic_fetch_sub(&cells[*a], 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_sub(&cells[*b], 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_sub(&cells[0], 1, __ATOMIC_SEQ_CST);
    return false;
  }
  return true;
}

void ReleaseCells(int32_t a, int32_t b) {
  int32_t* cells = g_cap_cells.load(std::memory_order_acquire);
  if (!cells) return;
  __atomic_fetch_sub(&cells[a], 1, __ATOMIC_SEQ_CST);
  __atomic_fetch_sub(&cells[b], 1, __ATOMIC_SEQ_CST);
  __atomic_fetch_sub(&cells[0], 1, __ATOMIC_SEQ_CST);
}

// Ends the hold of `c` (the slot lock held, `held_here` set): gives its cells back.
void EndHold(ConnSlot& c) {
  __atomic_store_n(&c.held_here, 0, __ATOMIC_RELAXED);
  ReleaseCells(c.cell_a, c.cell_b);
  g_reload_waiting.fetch_sub(1, std::memory_order_relaxed);
}

// Writes `obj` (status line and headers, a request id, Date, banner, Content-Length, body) to `fd`
// in one sendmsg. Returns whether all of it went out.
bool SendStored(int fd, const StoredObject& obj) {
  char middle[128];
  const size_t middle_len = AnswerMiddle(middle);
  struct iovec iov[3] = {{const_cast<char*>(obj.head.data()), obj.head.size()}, {middle, middle_len}, {const_cast<char*>(obj.tail.data()), obj.tail.size()}};
  struct msghdr msg {};
  msg.msg_iov = iov;
  msg.msg_iovlen = 3;
  const ssize_t total = static_cast<ssize_t>(obj.head.size() + middle_len + obj.tail.size());
  return ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == total;
}

// Answers a held waiter with `obj`, if its connection still waits (any thread).
void AnswerWaiter(const ReloadWaiter& w, const StoredObject& obj, bool timed_out) {
  ConnSlot& c = g_conns[w.fd];
  LockSlot(c);
  if (__atomic_load_n(&c.held_here, __ATOMIC_RELAXED) && __atomic_load_n(&c.gen, __ATOMIC_ACQUIRE) == w.gen && __atomic_load_n(&c.open, __ATOMIC_RELAXED)) {
    EndHold(c);
    if (SendStored(w.fd, obj)) {
      (timed_out ? g_reload_timeouts : g_reload_hits).fetch_add(1, std::memory_order_relaxed);
      __atomic_store_n(&c.active_at, NowSeconds(), __ATOMIC_RELAXED);
    } else {  // a client that stopped reading: closed, as a cut stored answer is
      g_reload_cut.fetch_add(1, std::memory_order_relaxed);
      (void)::shutdown(w.fd, SHUT_RDWR);
    }
  }
  UnlockSlot(c);
}

// Answers or holds the read of `fd` (`n` bytes framed as `f`, exactly one plain GET, checked by the
// caller) when it is a blocking reload the front may take. Returns kPassOn, or what the library's
// recv returns (-1 with EAGAIN: answered or held; 0: an answer cut short).
ssize_t TakeReload(int fd, const http::RequestHead& h, const uint8_t* bytes, ssize_t n) {
  const size_t qmark = h.target.find('?');
  if (qmark == std::string_view::npos || !h.target.substr(0, qmark).ends_with("/index.m3u8")) return kPassOn;
  http::ReloadQuery q;
  if (!http::ParseReloadQuery(h.target.substr(qmark + 1), &q)) return kPassOn;
  ConnSlot& c = g_conns[fd];
  PeerSlot* peers = g_peers.load(std::memory_order_relaxed);
  GroupKey group{};
  char address[INET6_ADDRSTRLEN];
  if (!peers || !GroupOf(peers[fd], &group, address, sizeof address)) return kPassOn;
  // A session the server cannot be told about, or could not admit, is not answered here.
  if (!q.sid.empty()) {
    const size_t queued = g_sessions_queued.load(std::memory_order_relaxed);
    const int32_t* count = g_listener_count.load(std::memory_order_acquire);
    if (queued >= kMaxSessions || !count) return kPassOn;
    if (static_cast<int64_t>(__atomic_load_n(count, __ATOMIC_RELAXED)) + static_cast<int64_t>(queued) >= g_listener_max) return kPassOn;
  }
  std::string_view ua;
  if (!http::UserAgentOf(std::string_view(reinterpret_cast<const char*>(bytes), static_cast<size_t>(n)), kMaxUserAgent, &ua)) return kPassOn;
  thread_local std::string t_path;
  t_path.assign(h.target.substr(0, qmark));
  std::shared_ptr<const StoredObject> now;
  {
    std::lock_guard<std::mutex> lock(g_reloads_mu);
    const auto it = g_reloads.find(t_path);
    if (it == g_reloads.end()) return kPassOn;
    ReloadLayer& l = *it->second;
    if (q.msn > l.at.next_sequence + 1) return kPassOn;  // 400: the routes' answer
    if (http::Reached(PositionOf(l.at), q.msn, q.part)) {
      now = l.answers[q.skip ? 1 : 0];
    } else {
      // Held only while the library's own idle timer cannot fire: it is armed when the library's
      // last answer ended (or at the accept; never before the last read it got) and fires 8 s or
      // more after that (10 s, counted in 4-s ticks). The wait ends at the reload's timeout or
      // 0.5 s before that, whichever comes first (then answered as timed out, as the routes would
      // after the timeout); a reload with less than kMinHeldMs of that left goes to the routes.
      const uint32_t since = static_cast<int32_t>(c.written_ms - c.passed_ms) > 0 ? c.written_ms : c.passed_ms;
      const uint32_t now_ms = NowMs();
      const uint32_t idle_ms = now_ms - since;
      if (idle_ms + kMinHeldMs > kHeldWithinMs) return kPassOn;
      const uint32_t hold_ms = std::min<uint32_t>(l.at.timeout_ms, kHeldWithinMs - idle_ms);
      if (g_reload_waiting.load(std::memory_order_relaxed) >= kMaxReloadWaiting) return kPassOn;
      if (!AcquireCells(group, address, &c.cell_a, &c.cell_b)) return kPassOn;
      __atomic_store_n(&c.held_here, 1, __ATOMIC_RELEASE);
      g_reload_waiting.fetch_add(1, std::memory_order_relaxed);
      l.waiters.push_back({fd, __atomic_load_n(&c.gen, __ATOMIC_ACQUIRE), q.msn, q.part, q.skip, now_ms + hold_ms});
    }
  }
  if (!q.sid.empty()) {
    std::lock_guard<std::mutex> lock(g_sessions_mu);
    g_sessions.push_back({std::string(t_path), std::string(q.sid), std::string(address), std::string(ua)});
    g_sessions_queued.store(g_sessions.size(), std::memory_order_relaxed);
  }
  if (!now) {
    g_reload_held.fetch_add(1, std::memory_order_relaxed);
    errno = EAGAIN;
    return -1;
  }
  if (SendStored(fd, *now)) {
    g_reload_hits.fetch_add(1, std::memory_order_relaxed);
    errno = EAGAIN;
    return -1;
  }
  g_reload_cut.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

// A read on a connection whose reload is held here (a request pipelined behind it, or the close):
// the hold ends without an answer and the connection is closed, as the library closes a connection
// that pipelines a request behind one it answers later. Returns what the library's recv returns.
ssize_t ReadWhileHeld(int fd, ssize_t n) {
  ConnSlot& c = g_conns[fd];
  LockSlot(c);
  const bool held = __atomic_load_n(&c.held_here, __ATOMIC_RELAXED) != 0;
  if (held) {
    EndHold(c);
    if (n > 0) (void)::shutdown(fd, SHUT_RDWR);
  }
  UnlockSlot(c);
  if (held && n > 0) g_reload_broken.fetch_add(1, std::memory_order_relaxed);
  return held && n > 0 ? 0 : n;
}

// Answers the waiters whose wait ran out (the timeout thread), with the playlist as it is, no-store.
void ExpireReloads() {
  const uint32_t now = NowMs();
  std::vector<std::pair<ReloadWaiter, std::shared_ptr<const StoredObject>>> due;
  {
    std::lock_guard<std::mutex> lock(g_reloads_mu);
    for (auto& [path, l] : g_reloads) {
      auto& ws = l->waiters;
      size_t keep = 0;
      for (size_t i = 0; i < ws.size(); ++i) {
        const ReloadWaiter& w = ws[i];
        const bool gone = __atomic_load_n(&g_conns[w.fd].gen, __ATOMIC_ACQUIRE) != w.gen;
        if (gone) continue;
        if (static_cast<int32_t>(now - w.deadline_ms) >= 0) {
          due.emplace_back(w, l->answers[w.skip ? 3 : 2]);
        } else {
          ws[keep++] = w;
        }
      }
      ws.resize(keep);
    }
  }
  for (const auto& [w, obj] : due) AnswerWaiter(w, *obj, true);
}

void StartReloadTimer() {
  std::thread([] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(g_reload_waiting.load(std::memory_order_relaxed) ? 50 : 200));
      if (g_reload_layers.load(std::memory_order_relaxed) != 0) ExpireReloads();
    }
  }).detach();
}

ssize_t HookSend(int fd, const void* buf, size_t len, int flags) {
  if (!g_held.load(std::memory_order_relaxed) || !Tracked(fd)) return ::send(fd, buf, len, flags);
  HeldBytes* h = HeldFor(fd);
  if ((flags & MSG_MORE) && len > 0 && (h ? h->len : 0) + len <= kMaxHeld) {
    if (!h) {
      if (!t_scratch) t_scratch = static_cast<HeldBytes*>(std::calloc(1, sizeof(HeldBytes)));
      if (!t_scratch) return ::send(fd, buf, len, flags);
      h = t_scratch;
      t_scratch_fd = fd;
    }
    std::memcpy(h->bytes + h->len, buf, len);
    h->len += len;
    return static_cast<ssize_t>(len);
  }
  ssize_t n;
  if (!h) {
    n = ::send(fd, buf, len, flags);
  } else {
    const struct iovec one{const_cast<void*>(buf), len};
    n = SendAfterHeld(fd, h, &one, 1, flags | MSG_NOSIGNAL);
  }
  if (n > 0 && g_conns) __atomic_store_n(&g_conns[fd].active_at, NowSeconds(), __ATOMIC_RELAXED);
  if (n == static_cast<ssize_t>(len) && !(flags & MSG_MORE)) WrittenOut(fd);
  return n;
}

ssize_t HookWritev(int fd, const struct iovec* iov, int count) {
  if (!g_held.load(std::memory_order_relaxed) || !Tracked(fd) || count < 0) return ::writev(fd, iov, count);
  HeldBytes* h = HeldFor(fd);
  const ssize_t n = h ? SendAfterHeld(fd, h, iov, count, MSG_NOSIGNAL) : ::writev(fd, iov, count);
  size_t total = 0;
  for (int i = 0; i < count; ++i) total += iov[i].iov_len;
  if (n > 0 && g_conns) __atomic_store_n(&g_conns[fd].active_at, NowSeconds(), __ATOMIC_RELAXED);
  if (n >= 0 && static_cast<size_t>(n) == total) WrittenOut(fd);
  return n;
}

// Held bytes go out before the write side closes (the library has them as written).
int HookShutdown(int fd, int how) {
  if (g_held.load(std::memory_order_relaxed) && Tracked(fd) && how != SHUT_RD) {
    if (HeldBytes* h = HeldFor(fd)) (void)SendAfterHeld(fd, h, nullptr, 0, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  return ::shutdown(fd, how);
}

int HookClose(int fd) {
  if (Tracked(fd)) {
    g_fresh[fd].store(0, std::memory_order_relaxed);
    if (g_lines && g_lines[fd]) {
      std::free(g_lines[fd]);
      g_lines[fd] = nullptr;
    }
    if (PeerSlot* peers = g_peers.load(std::memory_order_relaxed)) peers[fd].len.store(0, std::memory_order_relaxed);
    if (g_conns) {
      ConnSlot& c = g_conns[fd];
      LockSlot(c);  // the sweep never shuts down a descriptor this close frees for reuse
      if (__atomic_load_n(&c.held_here, __ATOMIC_RELAXED)) EndHold(c);
      __atomic_add_fetch(&c.gen, 1, __ATOMIC_RELEASE);
      c.state = 0;
      if (__atomic_exchange_n(&c.open, 0, __ATOMIC_RELAXED) != 0) g_open_conns.fetch_sub(1, std::memory_order_relaxed);
      if (std::atomic<HeldBytes*>* table = g_held.load(std::memory_order_relaxed)) {
        if (t_scratch_fd == fd) t_scratch_fd = -1;
        if (HeldBytes* own = table[fd].exchange(nullptr, std::memory_order_relaxed)) std::free(own);
      }
      const int r = ::close(fd);
      UnlockSlot(c);
      return r;
    }
    if (std::atomic<HeldBytes*>* table = g_held.load(std::memory_order_relaxed)) {
      if (t_scratch_fd == fd) t_scratch_fd = -1;
      if (HeldBytes* own = table[fd].exchange(nullptr, std::memory_order_relaxed)) std::free(own);
    }
  }
  return ::close(fd);
}

// The send buffer cap (docs/http.md "The send buffer of progressive listeners"): set once on a
// connection any of whose requests targets a capped prefix. `f` is the read's framing (its
// request targets), or null when the connection is no longer framed (or the read holds more heads
// than the framing lists one by one): then a request line that
// starts the read or follows a line end is looked for (a body that looks like one caps the buffer
// too, which only sizes it).
void CapIfAsked(int fd, const http::Framing* f, const uint8_t* bytes, size_t n) {
  const HttpFrontOptions* o = g_options.load(std::memory_order_acquire);
  if (!o || o->send_buffer_bytes <= 0 || o->capped_prefixes.empty()) return;
  if (g_fresh[fd].load(std::memory_order_relaxed) & kCapped) return;
  const std::string_view data(reinterpret_cast<const char*>(bytes), n);
  bool asked = false;
  for (const auto& prefix : o->capped_prefixes) {
    if (f && f->heads_count < http::kMaxFramedHeads) {
      const size_t shown = std::min<size_t>(f->heads_count + (f->line_complete && f->heads_count < http::kMaxFramedHeads ? 1 : 0), http::kMaxFramedHeads);
      for (size_t i = 0; i < shown && !asked; ++i) asked = f->heads[i].target.starts_with(prefix);
    } else {
      for (size_t at = data.find(prefix); at != std::string_view::npos && !asked; at = data.find(prefix, at + 1)) {
        const std::string_view before = data.substr(0, at);
        for (std::string_view method : {"GET ", "HEAD "}) {
          if (!before.ends_with(method)) continue;
          const size_t line = at - method.size();
          asked = asked || line == 0 || data[line - 1] == '\n';
        }
      }
    }
    if (asked) break;
  }
  if (!asked) return;
  const int bytes_cap = o->send_buffer_bytes;
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes_cap, sizeof bytes_cap) == 0) g_capped.fetch_add(1, std::memory_order_relaxed);
  g_fresh[fd].fetch_or(kCapped, std::memory_order_relaxed);
}

// Keeps the first bytes of a connection whose request line is not whole (see LineBytes). Returns
// false when they cannot be kept (over the bound, no memory, the close hook missing).
bool KeepLine(int fd, const uint8_t* bytes, size_t n) {
  if (!g_lines || n >= kMaxLineBytes) return false;
  auto* kept = static_cast<LineBytes*>(std::realloc(g_lines[fd], sizeof(LineBytes) + n));
  if (!kept) return false;
  kept->len = static_cast<uint32_t>(n);
  std::memcpy(kept->bytes, bytes, n);
  g_lines[fd] = kept;
  return true;
}

// Reads into `buf` after the bytes kept for `fd` (which it puts first), as recv does: returns the
// byte count (kept and new), 0 when the peer closed, -1 with errno. The kept bytes are forgotten
// once returned, or when the connection ends.
ssize_t RecvAfterKept(int fd, uint8_t* buf, size_t len, int flags) {
  LineBytes* kept = g_lines[fd];
  if (len <= kept->len) {  // the library reads into a buffer far larger than kMaxLineBytes
    errno = ENOBUFS;
    return -1;
  }
  const ssize_t n = ::recv(fd, buf + kept->len, len - kept->len, flags);
  if (n < 0) return -1;  // EAGAIN: keep waiting (the library polls again); else the connection failed
  if (n == 0) return 0;  // closed: the kept bytes go with the connection (freed on close)
  std::memcpy(buf, kept->bytes, kept->len);
  const ssize_t total = n + static_cast<ssize_t>(kept->len);
  std::free(kept);
  g_lines[fd] = nullptr;
  return total;
}

// A new connection's first request line is whole in `f` (the framing of `n` bytes): hands an
// HTTP/1.0 connection off. Returns `n` to go on, or 0 when handed off (the library sees an
// orderly close).
ssize_t FirstLine(int fd, const http::Framing& f, const uint8_t* bytes, ssize_t n) {
  const http::RequestHead& h = f.heads[0];
  if (h.http_major != 1 || h.http_minor != 0) return n;
  const Http10Handoff handoff = g_handoff.load(std::memory_order_acquire);
  if (!handoff) return n;
  const int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return n;
  if (!handoff(dup, bytes, static_cast<size_t>(n))) {
    close(dup);
    return n;
  }
  g_http10.fetch_add(1, std::memory_order_relaxed);
  // The HTTP server sees an orderly close and closes its descriptor; the socket lives on in `dup`.
  return 0;
}

// A request the parser refused (RFC 9112 §5.1, §6.3: 400 and close), read where the HTTP library
// has nothing outstanding on the connection (its first read, or a read of a connection framed so
// far whose answers are all written): answered here with a 400 in one send, and the library sees
// an orderly close. The library itself would stay silent until its idle timeout. Returns what the
// library's recv returns then (0).
ssize_t RefuseMalformed(int fd) {
  static constexpr std::string_view kBadRequest = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
  (void)::send(fd, kBadRequest.data(), kBadRequest.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)::shutdown(fd, SHUT_WR);
  g_refused.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

ssize_t HookRecv(int fd, void* buf, size_t len, int flags) {
  if (!Tracked(fd)) return ::recv(fd, buf, len, flags);
  auto* bytes = static_cast<uint8_t*>(buf);
  const ssize_t n = (g_lines && g_lines[fd]) ? RecvAfterKept(fd, bytes, len, flags) : ::recv(fd, buf, len, flags);
  if (n <= 0) return n;
  if (g_conns && __atomic_load_n(&g_conns[fd].held_here, __ATOMIC_ACQUIRE)) return ReadWhileHeld(fd, n);
  // A new connection: its first request line, framed by llhttp (docs/http.md "Framing").
  http::Framing framing;
  const http::Framing* framed = nullptr;
  if (g_fresh[fd].load(std::memory_order_relaxed) & kFresh) {
    framing = http::FrameRequests(bytes, static_cast<size_t>(n));
    framed = &framing;
    if (!framing.line_complete) g_incomplete.fetch_add(1, std::memory_order_relaxed);
    if (!framing.line_complete && framing.end == http::FrameEnd::kPartial && static_cast<size_t>(n) < len && KeepLine(fd, bytes, static_cast<size_t>(n))) {
      errno = EAGAIN;  // the line is not whole yet: nothing to read until it is
      return -1;
    }
    g_fresh[fd].fetch_and(static_cast<uint8_t>(~kFresh), std::memory_order_relaxed);
    if (framing.refused) return RefuseMalformed(fd);
    CapIfAsked(fd, framed, bytes, static_cast<size_t>(n));
    if (framing.line_complete && FirstLine(fd, framing, bytes, n) == 0) return 0;
  }
  // Bytes for the library (or the store): the connection is active (a first line still being
  // kept is not, so a half-sent line is closed 10 s after the connection opened).
  if (g_conns) __atomic_store_n(&g_conns[fd].active_at, NowSeconds(), __ATOMIC_RELAXED);
  if (!g_conns) {
    if (!framed) CapIfAsked(fd, nullptr, bytes, static_cast<size_t>(n));
    return n;
  }
  if (g_conns[fd].state & kForeign) {
    if (!framed) CapIfAsked(fd, nullptr, bytes, static_cast<size_t>(n));
    return n;
  }
  // A framed connection: one llhttp pass over the read, unless its first bytes already say it is
  // no object request (then it is the library's for good).
  if (!framed) {
    if (!MayBeObjectRequest(bytes, n)) {
      CapIfAsked(fd, nullptr, bytes, static_cast<size_t>(n));
      HandedOn(fd, nullptr);
      return n;
    }
    framing = http::FrameRequests(bytes, static_cast<size_t>(n));
    framed = &framing;
    if (framing.refused && !(g_conns[fd].state & kPending) && t_scratch_fd != fd) return RefuseMalformed(fd);
    CapIfAsked(fd, framed, bytes, static_cast<size_t>(n));
  }
  if ((g_object_count.load(std::memory_order_relaxed) != 0 && g_answering.load(std::memory_order_relaxed)) ||
      (g_reload_layers.load(std::memory_order_relaxed) != 0 && g_reloads_on.load(std::memory_order_relaxed))) {
    const ssize_t answered = AnswerFromStore(fd, framing, bytes, n);
    if (answered != kPassOn) return answered;
  }
  HandedOn(fd, framed);
  return n;
}

}  // namespace

std::string InstallHttpFront(const std::string& object_suffix, const HttpFrontOptions& options, Http10Handoff handoff) {
  std::lock_guard<std::mutex> lock(g_install_mu);
  // Options are published once and never freed (a read in flight on another thread may hold them).
  g_options.store(new HttpFrontOptions(options), std::memory_order_release);
  g_handoff.store(handoff, std::memory_order_release);
  if (g_installed) return "";
  struct rlimit lim {};
  size_t size = 65536;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_max != RLIM_INFINITY) size = static_cast<size_t>(lim.rlim_max);
  if (size > (size_t{1} << 22)) size = size_t{1} << 22;
  if (size < 1024) size = 1024;
  g_fresh = new std::atomic<uint8_t>[size]();
  void* peers = mmap(nullptr, size * sizeof(PeerSlot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (peers != MAP_FAILED) g_peers.store(static_cast<PeerSlot*>(peers));  // zero-filled: every len 0
  g_fresh_size = size;
  std::string error;
  // recv first: a connection accepted before accept4 is hooked is simply never fresh. close before
  // accept4 and getpeername after it: a remembered address is always cleared when its descriptor
  // closes, and a connection accepted before the hooks has no address remembered (its
  // getpeername goes to the kernel). A library that does not import getpeername or close keeps
  // asking the kernel (the cache is then not installed).
  if (ReplaceImport(object_suffix, "recv", reinterpret_cast<void*>(&HookRecv), &error) == 0) return error;
  std::string unused;
  const bool closes = ReplaceImport(object_suffix, "close", reinterpret_cast<void*>(&HookClose), &unused) > 0;
  if (!closes) g_peers.store(nullptr);
  if (closes) {
    void* lines = mmap(nullptr, size * sizeof(LineBytes*), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (lines != MAP_FAILED) g_lines = static_cast<LineBytes**>(lines);  // zero-filled: none kept
  }
  if (ReplaceImport(object_suffix, "accept4", reinterpret_cast<void*>(&HookAccept4), &error) == 0) return error;
  if (closes && ReplaceImport(object_suffix, "getpeername", reinterpret_cast<void*>(&HookGetpeername), &unused) == 0) g_peers.store(nullptr);
  // Gathered writes need every write path of the library hooked (send and writev), and close.
  if (closes) {
    void* table = mmap(nullptr, size * sizeof(std::atomic<HeldBytes*>), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (table != MAP_FAILED) {
      auto* held = static_cast<std::atomic<HeldBytes*>*>(table);  // zero-filled: every slot null
      // writev first: until send is hooked nothing is ever held.
      if (ReplaceImport(object_suffix, "writev", reinterpret_cast<void*>(&HookWritev), &unused) > 0 &&
          ReplaceImport(object_suffix, "shutdown", reinterpret_cast<void*>(&HookShutdown), &unused) > 0) {
        // Objects are answered here only when every write of the library is seen (an answer of its
        // own must be known to be out before one of ours may follow).
        // A connection accepted before the hooks (the server installs them before it listens) has
        // passed_at 0: its first read is handed on, and from then on it is tracked like any other.
        void* conns = mmap(nullptr, size * sizeof(ConnSlot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        g_held.store(held);
        if (ReplaceImport(object_suffix, "send", reinterpret_cast<void*>(&HookSend), &unused) > 0 && conns != MAP_FAILED) {
          g_conns = static_cast<ConnSlot*>(conns);
          StartIdleSweep();
          StartReloadTimer();
        }
      } else {
        munmap(table, size * sizeof(std::atomic<HeldBytes*>));
      }
    }
  }
  g_installed = true;
  return "";
}

void SetHttp10Handoff(Http10Handoff handoff) { g_handoff.store(handoff, std::memory_order_release); }

uint64_t OpenHttpConnections() { return g_open_conns.load(std::memory_order_relaxed); }

HttpFrontCounts GetHttpFrontCounts() {
  return {g_http10.load(std::memory_order_relaxed),      g_capped.load(std::memory_order_relaxed),      g_incomplete.load(std::memory_order_relaxed),
          g_peer_hits.load(std::memory_order_relaxed),   g_coalesced.load(std::memory_order_relaxed),   g_object_hits.load(std::memory_order_relaxed),
          g_object_cut.load(std::memory_order_relaxed),  g_object_count.load(std::memory_order_relaxed), g_refused.load(std::memory_order_relaxed),
          g_idle_closed.load(std::memory_order_relaxed)};
}

bool PutHttpObject(std::string_view path, std::string_view head, const uint8_t* body, size_t size) {
  if (path.size() <= kObjectPrefix.size() || path.substr(0, kObjectPrefix.size()) != kObjectPrefix) return false;
  auto obj = std::make_shared<StoredObject>();
  obj->head.assign(head);
  char length[48];
  const int n = snprintf(length, sizeof length, "Content-Length: %zu\r\n\r\n", size);
  obj->tail.reserve(static_cast<size_t>(n) + size);
  obj->tail.append(length, static_cast<size_t>(n));
  obj->tail.append(reinterpret_cast<const char*>(body), size);
  std::lock_guard<std::mutex> lock(g_objects_mu);
  auto it = g_objects.find(std::string(path));
  if (it != g_objects.end()) {
    it->second = std::move(obj);
    return true;
  }
  if (g_objects.size() >= kMaxObjects) return false;
  g_objects.emplace(std::string(path), std::move(obj));
  g_object_count.store(g_objects.size(), std::memory_order_relaxed);
  return true;
}

bool DeleteHttpObject(std::string_view path) {
  std::lock_guard<std::mutex> lock(g_objects_mu);
  const bool erased = g_objects.erase(std::string(path)) > 0;
  g_object_count.store(g_objects.size(), std::memory_order_relaxed);
  return erased;
}

bool HttpObjectsAnswered() { return g_conns != nullptr; }

void SetHttpObjectsAnswering(bool on) { g_answering.store(on, std::memory_order_relaxed); }

namespace {
std::shared_ptr<const StoredObject> MakeStored(std::string_view head, std::string_view body) {
  auto obj = std::make_shared<StoredObject>();
  obj->head.assign(head);
  char length[48];
  const int n = snprintf(length, sizeof length, "Content-Length: %zu\r\n\r\n", body.size());
  obj->tail.reserve(static_cast<size_t>(n) + body.size());
  obj->tail.append(length, static_cast<size_t>(n));
  obj->tail.append(body);
  return obj;
}
}  // namespace

bool PutHeldReload(std::string_view path, const HeldReloadState& at, const std::string_view heads[4], const std::string_view bodies[4]) {
  if (!path.starts_with(kObjectPrefix) || !path.ends_with("/index.m3u8") || at.timeout_ms == 0 || at.timeout_ms > 60000) return false;
  std::shared_ptr<const StoredObject> answers[4];
  for (int i = 0; i < 4; ++i) answers[i] = MakeStored(heads[i], bodies[i]);
  std::vector<std::pair<ReloadWaiter, std::shared_ptr<const StoredObject>>> due;
  {
    std::lock_guard<std::mutex> lock(g_reloads_mu);
    auto it = g_reloads.find(std::string(path));
    if (it == g_reloads.end()) {
      if (g_reloads.size() >= kMaxReloadLayers) return false;
      it = g_reloads.emplace(std::string(path), std::make_unique<ReloadLayer>()).first;
      g_reload_layers.store(g_reloads.size(), std::memory_order_relaxed);
    }
    ReloadLayer& l = *it->second;
    l.at = at;
    for (int i = 0; i < 4; ++i) l.answers[i] = answers[i];
    size_t keep = 0;
    for (const ReloadWaiter& w : l.waiters) {
      if (http::Reached(PositionOf(at), w.msn, w.part)) due.emplace_back(w, answers[w.skip ? 1 : 0]);
      else l.waiters[keep++] = w;
    }
    l.waiters.resize(keep);
  }
  for (const auto& [w, obj] : due) AnswerWaiter(w, *obj, false);
  return true;
}

bool DeleteHeldReload(std::string_view path, std::string_view final_head, std::string_view final_body) {
  std::unique_ptr<ReloadLayer> gone;
  {
    std::lock_guard<std::mutex> lock(g_reloads_mu);
    const auto it = g_reloads.find(std::string(path));
    if (it == g_reloads.end()) return false;
    gone = std::move(it->second);
    g_reloads.erase(it);
    g_reload_layers.store(g_reloads.size(), std::memory_order_relaxed);
  }
  const auto last = final_head.empty() ? nullptr : MakeStored(final_head, final_body);
  for (const ReloadWaiter& w : gone->waiters) AnswerWaiter(w, last ? *last : *gone->answers[w.skip ? 3 : 2], !last);
  return true;
}

void SetHeldReloads(bool on) { g_reloads_on.store(on, std::memory_order_relaxed); }

bool SetHeldReloadCaps(int32_t* cells, size_t count, int32_t max_total, int32_t max_per_address) {
  if (cells == nullptr || count < 3 || count > (size_t{1} << 24)) return false;
  std::lock_guard<std::mutex> lock(g_groups_mu);
  g_group_cells.clear();  // cells of another memory
  g_cap_cell_count = static_cast<int32_t>(count);
  g_cap_total = max_total;
  g_cap_per_address = max_per_address;
  g_cap_cells.store(cells, std::memory_order_release);
  return true;
}

bool PutHeldReloadCells(std::string_view address, int32_t a, int32_t b) {
  if (a <= 0 || b <= 0 || a >= g_cap_cell_count || b >= g_cap_cell_count || address.size() >= INET6_ADDRSTRLEN) return false;
  char text[INET6_ADDRSTRLEN];
  std::memcpy(text, address.data(), address.size());
  text[address.size()] = 0;
  PeerSlot slot{};
  if (inet_pton(AF_INET, text, slot.bytes + offsetof(sockaddr_in, sin_addr)) == 1) {
    reinterpret_cast<sockaddr_in*>(slot.bytes)->sin_family = AF_INET;
    slot.len.store(sizeof(sockaddr_in));
  } else if (inet_pton(AF_INET6, text, slot.bytes + offsetof(sockaddr_in6, sin6_addr)) == 1) {
    reinterpret_cast<sockaddr_in6*>(slot.bytes)->sin6_family = AF_INET6;
    slot.len.store(sizeof(sockaddr_in6));
  } else {
    return false;
  }
  GroupKey key{};
  char unused[INET6_ADDRSTRLEN];
  if (!GroupOf(slot, &key, unused, sizeof unused)) return false;
  std::lock_guard<std::mutex> lock(g_groups_mu);
  if (g_group_cells.size() >= kMaxGroups) g_group_cells.clear();
  g_group_cells[key] = {a, b};
  return true;
}

bool SetHeldReloadListeners(const int32_t* count, int32_t max) {
  if (count == nullptr || max <= 0) return false;
  g_listener_max = max;
  g_listener_count.store(count, std::memory_order_release);
  return true;
}

void DrainHeldReloadSessions(std::vector<HeldReloadSession>* sessions, std::vector<std::string>* wanted) {
  std::lock_guard<std::mutex> lock(g_sessions_mu);
  sessions->swap(g_sessions);
  wanted->swap(g_wanted_groups);
  g_sessions_queued.store(0, std::memory_order_relaxed);
}

HeldReloadCounts GetHeldReloadCounts() {
  return {g_reload_hits.load(std::memory_order_relaxed), g_reload_held.load(std::memory_order_relaxed), g_reload_timeouts.load(std::memory_order_relaxed),
          g_reload_cut.load(std::memory_order_relaxed), g_reload_broken.load(std::memory_order_relaxed), g_reload_waiting.load(std::memory_order_relaxed),
          g_reload_layers.load(std::memory_order_relaxed)};
}

}  // namespace skylark::io
