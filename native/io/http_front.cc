#include "io/http_front.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>

#include "core/http/request_line.h"
#include "io/import_hook.h"

namespace skylark::io {
namespace {

// Per fd: 1 while a connection the HTTP server accepted has not been read from yet.
std::atomic<uint8_t>* g_fresh = nullptr;
size_t g_fresh_size = 0;
std::atomic<Http10Handoff> g_handoff{nullptr};
std::atomic<const HttpFrontOptions*> g_options{nullptr};
std::atomic<uint64_t> g_http10{0}, g_capped{0}, g_incomplete{0};
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

int HookAccept4(int sockfd, struct sockaddr* addr, socklen_t* addrlen, int flags) {
  const socklen_t given = addrlen ? *addrlen : 0;
  const int fd = ::accept4(sockfd, addr, addrlen, flags);
  if (Tracked(fd)) {
    g_fresh[fd].store(1, std::memory_order_relaxed);
    RememberPeer(fd, addr, addrlen ? *addrlen : 0, given);
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

int HookClose(int fd) {
  if (Tracked(fd)) {
    g_fresh[fd].store(0, std::memory_order_relaxed);
    if (PeerSlot* peers = g_peers.load(std::memory_order_relaxed)) peers[fd].len.store(0, std::memory_order_relaxed);
  }
  return ::close(fd);
}

ssize_t HookRecv(int fd, void* buf, size_t len, int flags) {
  const ssize_t n = ::recv(fd, buf, len, flags);
  if (n <= 0 || !Tracked(fd) || g_fresh[fd].load(std::memory_order_relaxed) == 0) return n;
  g_fresh[fd].store(0, std::memory_order_relaxed);
  const auto* bytes = static_cast<const uint8_t*>(buf);
  const http::RequestLine line = http::ParseRequestLine(bytes, static_cast<size_t>(n));
  if (line.version == http::RequestVersion::kIncomplete) {
    g_incomplete.fetch_add(1, std::memory_order_relaxed);
    return n;
  }
  if (const HttpFrontOptions* o = g_options.load(std::memory_order_acquire); o && o->send_buffer_bytes > 0) {
    for (const auto& prefix : o->capped_prefixes) {
      if (!http::TargetStartsWith(line, prefix)) continue;
      const int bytes_cap = o->send_buffer_bytes;
      if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes_cap, sizeof bytes_cap) == 0) g_capped.fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  if (line.version != http::RequestVersion::kHttp10) return n;
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
  if (ReplaceImport(object_suffix, "accept4", reinterpret_cast<void*>(&HookAccept4), &error) == 0) return error;
  if (closes && ReplaceImport(object_suffix, "getpeername", reinterpret_cast<void*>(&HookGetpeername), &unused) == 0) g_peers.store(nullptr);
  g_installed = true;
  return "";
}

void SetHttp10Handoff(Http10Handoff handoff) { g_handoff.store(handoff, std::memory_order_release); }

HttpFrontCounts GetHttpFrontCounts() {
  return {g_http10.load(std::memory_order_relaxed), g_capped.load(std::memory_order_relaxed), g_incomplete.load(std::memory_order_relaxed),
          g_peer_hits.load(std::memory_order_relaxed)};
}

}  // namespace skylark::io
