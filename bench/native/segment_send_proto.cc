// A prototype of a native send path for HLS segments, for bench/segment-send.bench.ts: a small
// single-threaded epoll HTTP/1.1 keep-alive server that answers every GET with one fixed body (the
// bytes of a real segment, read at start from a file), with the response headers Skylark sends
// for a segment, written in one of four ways:
//
//   two-sends  send(headers, MSG_MORE), then send(body): what the HTTP library does for a body
//              larger than its cork buffer (the baseline; 2 write calls per response)
//   writev     headers and body in one sendmsg(2) with two iovecs ("a larger socket write")
//   sendfile   send(headers, MSG_MORE), then sendfile(2) of the body from a copy of it on a tmpfs
//              (nginx's way: the kernel takes page-cache pages, the body is not copied from user
//              memory)
//   zerocopy   one sendmsg(2) of headers + body with MSG_ZEROCOPY after SO_ZEROCOPY; completions
//              are read from the socket's error queue (Documentation/networking/msg_zerocopy.rst).
//              On loopback the kernel copies zerocopy pages anyway when it delivers them to the
//              local receiving socket, so this mode measures the pinning and notification cost
//              without the saving.
//
//   segment_send_proto <two-sends|writev|sendfile|zerocopy> <body-file> [tmpfs-dir, default /dev/shm]
//
// Listens on 127.0.0.1:0 and prints the port on its first stdout line. SIGUSR1 prints one JSON line
// of counters (responses, and system calls by kind) to stdout; SIGTERM/SIGINT stop it. Linux, C++17,
// no dependencies: g++ -O2 -std=c++17 -o segment_send_proto segment_send_proto.cc
//
// HTTP/1.1 framing (RFC 9112): a request is a request-line, header field lines, and an empty line
// (§2.1); a request with neither Content-Length nor Transfer-Encoding has no body (§6.3), which is
// what a GET here must be (one that announces a body is answered by closing the connection, as the
// server does not read bodies). Connections persist unless the request says "Connection: close" or
// is HTTP/1.0 without keep-alive (§9.3); pipelined requests are answered one after another in the
// order received (§9.3.2). Each response carries Content-Length, so it ends where the body ends (§6.3).
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif
#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif
#ifndef SO_EE_CODE_ZEROCOPY_COPIED
#define SO_EE_CODE_ZEROCOPY_COPIED 1
#endif

namespace {

enum class Mode { kTwoSends, kWritev, kSendfile, kZerocopy };

constexpr size_t kInCap = 8192;       // request bytes buffered per connection (headers only)
constexpr unsigned kMaxPending = 32;  // pipelined requests accepted before reading pauses
constexpr size_t kHeadCap = 512;      // the response header block's size bound

// Counters printed on SIGUSR1: the bench reads them before and after a run.
struct Stats {
  uint64_t accepts = 0, closes = 0, requests = 0, responses = 0;
  uint64_t recv_calls = 0, send_calls = 0, sendmsg_calls = 0, sendfile_calls = 0;
  uint64_t errqueue_calls = 0, epoll_waits = 0, epoll_ctls = 0, accept_calls = 0;
  uint64_t eagain = 0, partial_writes = 0;
  uint64_t zc_notified = 0, zc_copied = 0, zc_nobufs = 0;  // zerocopy: sends completed, of them copied, ENOBUFS fallbacks
};
Stats g_stats;

volatile sig_atomic_t g_dump = 0;
volatile sig_atomic_t g_stop = 0;

Mode g_mode = Mode::kTwoSends;
std::string g_body;       // the segment's bytes (never changed or freed: zerocopy pages stay valid)
int g_body_fd = -1;       // sendfile: the same bytes in a tmpfs file (unlinked, kept open)
std::string g_head;       // the response header block, rebuilt when the Date second changes
time_t g_head_second = 0;
int g_epoll = -1;

struct Conn {
  int fd = -1;
  uint32_t interest = 0;      // the events epoll watches for now
  size_t in_len = 0;          // request bytes buffered
  unsigned pending = 0;       // complete requests not yet fully answered
  bool close_after = false;   // the last accepted request asked to close: stop reading, close when answered
  bool responding = false;    // a response is partly written
  const char* head = nullptr; // unsent header bytes of the response in progress (g_head or head_copy)
  size_t head_len = 0;
  size_t body_off = 0;        // body bytes of the response in progress already written
  char head_copy[kHeadCap];   // the unsent header bytes, kept across the loop (g_head may be rebuilt)
  char in[kInCap];
};

void OnSignal(int sig) {
  if (sig == SIGUSR1) g_dump = 1;
  else g_stop = 1;
}

// The header block Skylark sends for a segment (src/delivery/hls/routes.ts) with a Date (RFC 9110
// §6.6.1, IMF-fixdate), rebuilt at most once a second.
void RefreshHead() {
  const time_t now = time(nullptr);
  if (now == g_head_second && !g_head.empty()) return;
  g_head_second = now;
  struct tm tm;
  gmtime_r(&now, &tm);
  char date[64];
  strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  char buf[kHeadCap];
  const int n = snprintf(buf, sizeof buf,
                         "HTTP/1.1 200 OK\r\n"
                         "Content-Type: video/iso.segment\r\n"
                         "Cache-Control: public, max-age=31536000, immutable\r\n"
                         "Access-Control-Allow-Origin: *\r\n"
                         "Date: %s\r\n"
                         "Content-Length: %zu\r\n"
                         "\r\n",
                         date, g_body.size());
  g_head.assign(buf, static_cast<size_t>(n));
}

void PrintStats() {
  const Stats& s = g_stats;
  printf("{\"accepts\":%" PRIu64 ",\"closes\":%" PRIu64 ",\"requests\":%" PRIu64 ",\"responses\":%" PRIu64
         ",\"recv\":%" PRIu64 ",\"send\":%" PRIu64 ",\"sendmsg\":%" PRIu64 ",\"sendfile\":%" PRIu64
         ",\"errqueue\":%" PRIu64 ",\"epollWait\":%" PRIu64 ",\"epollCtl\":%" PRIu64 ",\"accept\":%" PRIu64
         ",\"eagain\":%" PRIu64 ",\"partialWrites\":%" PRIu64 ",\"zcNotified\":%" PRIu64 ",\"zcCopied\":%" PRIu64
         ",\"zcNobufs\":%" PRIu64 "}\n",
         s.accepts, s.closes, s.requests, s.responses, s.recv_calls, s.send_calls, s.sendmsg_calls, s.sendfile_calls,
         s.errqueue_calls, s.epoll_waits, s.epoll_ctls, s.accept_calls, s.eagain, s.partial_writes, s.zc_notified,
         s.zc_copied, s.zc_nobufs);
  fflush(stdout);
}

void CloseConn(Conn* c) {
  close(c->fd);  // also removes it from the epoll set (no other descriptor refers to the socket)
  ++g_stats.closes;
  delete c;
}

// Watches `want` (EPOLLIN/EPOLLOUT) for the connection; one epoll_ctl only when it changes.
bool SetInterest(Conn* c, uint32_t want) {
  if (want == c->interest) return true;
  epoll_event ev{};
  ev.events = want;  // level-triggered; EPOLLERR and EPOLLHUP are always reported
  ev.data.ptr = c;
  ++g_stats.epoll_ctls;
  if (epoll_ctl(g_epoll, EPOLL_CTL_MOD, c->fd, &ev) != 0) return false;
  c->interest = want;
  return true;
}

// Case-insensitive: does [p, p+n) equal the lower-case `lit`?
bool EqualsLower(const char* p, size_t n, const char* lit) {
  const size_t m = strlen(lit);
  if (n != m) return false;
  for (size_t i = 0; i < n; ++i) {
    char ch = p[i];
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    if (ch != lit[i]) return false;
  }
  return true;
}

// Case-insensitive: does [p, p+n) contain the lower-case `token` (a connection option)?
bool ContainsLower(const char* p, size_t n, const char* token) {
  const size_t m = strlen(token);
  for (size_t i = 0; i + m <= n; ++i) {
    if (EqualsLower(p + i, m, token)) return true;
  }
  return false;
}

enum class Parsed { kOk, kClose, kBad };

// One request's head [p, p+n), CRLF CRLF included (RFC 9112 §2.1): a GET with no body; whether the
// connection persists after it (§9.3).
Parsed ParseRequest(const char* p, size_t n) {
  if (n < 4 || memcmp(p, "GET ", 4) != 0) return Parsed::kBad;
  const char* line_end = static_cast<const char*>(memmem(p, n, "\r\n", 2));
  const size_t line_len = static_cast<size_t>(line_end - p);
  const bool http10 = line_len >= 8 && memcmp(line_end - 8, "HTTP/1.0", 8) == 0;
  bool close = http10, keep_alive = false;
  // Field lines: name ":" OWS value OWS CRLF (§5).
  const char* q = line_end + 2;
  const char* end = p + n - 2;  // the final empty line's CRLF
  while (q < end) {
    const char* eol = static_cast<const char*>(memmem(q, static_cast<size_t>(end - q), "\r\n", 2));
    if (!eol) eol = end;
    const char* colon = static_cast<const char*>(memchr(q, ':', static_cast<size_t>(eol - q)));
    if (colon) {
      const size_t name_len = static_cast<size_t>(colon - q);
      const char* v = colon + 1;
      const size_t v_len = static_cast<size_t>(eol - v);
      if (EqualsLower(q, name_len, "connection")) {
        if (ContainsLower(v, v_len, "close")) close = true;
        if (ContainsLower(v, v_len, "keep-alive")) keep_alive = true;
      } else if (EqualsLower(q, name_len, "transfer-encoding")) {
        return Parsed::kBad;  // a body we do not read (§6.3)
      } else if (EqualsLower(q, name_len, "content-length")) {
        for (size_t i = 0; i < v_len; ++i) {
          if (v[i] >= '1' && v[i] <= '9') return Parsed::kBad;  // a non-zero body length
        }
      }
    }
    q = eol + 2;
  }
  if (http10 && keep_alive) close = false;
  return close ? Parsed::kClose : Parsed::kOk;
}

// Takes every complete request out of the input buffer. False: a malformed request or a head
// larger than the buffer (the connection is to be closed).
bool TakeRequests(Conn* c) {
  size_t off = 0;
  while (!c->close_after && c->pending < kMaxPending) {
    const char* p = c->in + off;
    const size_t avail = c->in_len - off;
    const char* end = static_cast<const char*>(memmem(p, avail, "\r\n\r\n", 4));
    if (!end) break;
    const size_t n = static_cast<size_t>(end - p) + 4;
    const Parsed r = ParseRequest(p, n);
    if (r == Parsed::kBad) return false;
    if (r == Parsed::kClose) c->close_after = true;
    ++c->pending;
    ++g_stats.requests;
    off += n;
  }
  if (off > 0) {
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
  }
  if (c->close_after) c->in_len = 0;  // nothing after a closing request is answered
  return !(c->in_len == kInCap && c->pending == 0);
}

// Accounts `n` written bytes to the response in progress: header bytes first, then body bytes.
void Advance(Conn* c, size_t n) {
  const size_t h = n < c->head_len ? n : c->head_len;
  c->head += h;
  c->head_len -= h;
  c->body_off += n - h;
}

enum class Wrote { kDone, kBlocked, kError };

// What a write call's result means: bytes written, or blocked (EAGAIN), or a connection error.
Wrote Classify(ssize_t n, Conn* c) {
  if (n >= 0) {
    Advance(c, static_cast<size_t>(n));
    return Wrote::kDone;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    ++g_stats.eagain;
    return Wrote::kBlocked;
  }
  return errno == EINTR ? Wrote::kBlocked : Wrote::kError;
}

// Header bytes with MSG_MORE (send(2): more data follows; with TCP_NODELAY the kernel still waits
// for the next write before it builds the packet). Blocked when not all of them went.
Wrote SendHeadMore(Conn* c) {
  if (c->head_len == 0) return Wrote::kDone;
  ++g_stats.send_calls;
  const Wrote w = Classify(send(c->fd, c->head, c->head_len, MSG_NOSIGNAL | MSG_MORE), c);
  if (w != Wrote::kDone) return w;
  if (c->head_len != 0) {
    ++g_stats.partial_writes;
    return Wrote::kBlocked;
  }
  return Wrote::kDone;
}

// One sendmsg(2) of what is left of the headers and the body; `flags` adds MSG_ZEROCOPY.
Wrote SendGathered(Conn* c, int flags) {
  iovec iov[2];
  int cnt = 0;
  if (c->head_len) iov[cnt++] = {const_cast<char*>(c->head), c->head_len};
  iov[cnt++] = {const_cast<char*>(g_body.data()) + c->body_off, g_body.size() - c->body_off};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<size_t>(cnt);
  ++g_stats.sendmsg_calls;
  ssize_t n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | flags);
  if (n < 0 && errno == ENOBUFS && (flags & MSG_ZEROCOPY)) {
    // The socket's option-memory budget for pending zerocopy notifications is used up
    // (net.core.optmem_max): send this one by copying, as msg_zerocopy.rst suggests.
    ++g_stats.zc_nobufs;
    ++g_stats.sendmsg_calls;
    n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
  }
  return Classify(n, c);
}

// Writes as much of the response in progress as the socket takes, per mode.
Wrote WriteResponse(Conn* c) {
  const size_t body_len = g_body.size();
  while (c->head_len != 0 || c->body_off < body_len) {
    Wrote w = Wrote::kDone;
    switch (g_mode) {
      case Mode::kTwoSends: {
        w = SendHeadMore(c);
        if (w != Wrote::kDone) return w;
        ++g_stats.send_calls;
        w = Classify(send(c->fd, g_body.data() + c->body_off, body_len - c->body_off, MSG_NOSIGNAL), c);
        break;
      }
      case Mode::kWritev:
        w = SendGathered(c, 0);
        break;
      case Mode::kZerocopy:
        w = SendGathered(c, MSG_ZEROCOPY);
        break;
      case Mode::kSendfile: {
        w = SendHeadMore(c);
        if (w != Wrote::kDone) return w;
        off_t off = static_cast<off_t>(c->body_off);
        ++g_stats.sendfile_calls;
        const ssize_t n = sendfile(c->fd, g_body_fd, &off, body_len - c->body_off);
        w = Classify(n, c);  // sendfile(2) advanced `off` by n: the same as body_off + n
        break;
      }
    }
    if (w != Wrote::kDone) return w;
    if (c->head_len != 0 || c->body_off < body_len) {
      // A partial write: the socket buffer is full; wait for EPOLLOUT rather than try again now
      // (the next call would most likely fail with EAGAIN).
      ++g_stats.partial_writes;
      return Wrote::kBlocked;
    }
  }
  return Wrote::kDone;
}

// Answers pending requests in order until done or blocked; then sets what to wait for. False: close.
bool Serve(Conn* c) {
  bool blocked = false;
  for (;;) {
    // Requests left in the buffer when the pending cap paused the parsing.
    if (c->pending == 0 && c->in_len > 0 && !TakeRequests(c)) return false;
    if (c->pending == 0) break;
    if (!c->responding) {
      c->responding = true;
      c->head = g_head.data();
      c->head_len = g_head.size();
      c->body_off = 0;
    }
    const Wrote w = WriteResponse(c);
    if (w == Wrote::kError) return false;
    if (w == Wrote::kBlocked) {
      if (c->head_len != 0 && c->head != c->head_copy) {
        // Keep the unsent header bytes: g_head may be rebuilt before the socket is writable.
        memcpy(c->head_copy, c->head, c->head_len);
        c->head = c->head_copy;
      }
      blocked = true;
      break;
    }
    c->responding = false;
    --c->pending;
    ++g_stats.responses;
  }
  if (c->pending == 0 && c->close_after) return false;
  uint32_t want = blocked ? static_cast<uint32_t>(EPOLLOUT) : 0u;
  if (!c->close_after && c->pending < kMaxPending && c->in_len < kInCap) want |= EPOLLIN;
  return SetInterest(c, want);
}

// Reads what the socket has (one recv per readiness: epoll is level-triggered, so more is reported
// again), takes the complete requests and answers them.
bool OnReadable(Conn* c) {
  ++g_stats.recv_calls;
  const ssize_t n = recv(c->fd, c->in + c->in_len, kInCap - c->in_len, 0);
  if (n == 0) return false;  // the client closed
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      ++g_stats.eagain;
      return true;
    }
    return false;
  }
  c->in_len += static_cast<size_t>(n);
  if (!TakeRequests(c)) return false;
  return Serve(c);
}

// zerocopy: reads one batch of completion notifications from the error queue (each covers a range
// of sends; msg_zerocopy.rst "Notification Parsing"). False when the queue held something else or
// nothing (a real socket error: close).
bool ReapCompletions(Conn* c) {
  char control[128];
  msghdr msg{};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ++g_stats.errqueue_calls;
  if (recvmsg(c->fd, &msg, MSG_ERRQUEUE) < 0) return errno == EAGAIN || errno == EINTR;
  bool ok = false;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
    const bool ip = (cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
                    (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR);
    if (!ip) continue;
    sock_extended_err err;
    memcpy(&err, CMSG_DATA(cm), sizeof err);
    if (err.ee_errno != 0 || err.ee_origin != SO_EE_ORIGIN_ZEROCOPY) return false;
    const uint64_t count = static_cast<uint64_t>(err.ee_data - err.ee_info) + 1;  // sends [ee_info, ee_data]
    g_stats.zc_notified += count;
    if (err.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) g_stats.zc_copied += count;
    ok = true;
  }
  return ok;
}

void AcceptAll(int lfd) {
  for (;;) {
    ++g_stats.accept_calls;
    const int fd = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN (all taken), or EMFILE and the like: try again on the next event
    ++g_stats.accepts;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // as the HTTP library does
    if (g_mode == Mode::kZerocopy) setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one);
    Conn* c = new Conn();
    c->fd = fd;
    c->interest = EPOLLIN;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c;
    ++g_stats.epoll_ctls;
    if (epoll_ctl(g_epoll, EPOLL_CTL_ADD, fd, &ev) != 0) CloseConn(c);
  }
}

bool ReadFile(const char* path, std::string* out) {
  FILE* f = fopen(path, "rb");
  if (!f) return false;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
  const bool ok = !ferror(f);
  fclose(f);
  return ok;
}

// sendfile: the body copied into a file on a tmpfs (page-cache pages, as nginx's open_file_cache
// serves a hot file), unlinked at once and kept open.
int BodyFile(const char* dir) {
  std::string path = std::string(dir) + "/segment-send-proto-XXXXXX";
  std::vector<char> tmpl(path.begin(), path.end());
  tmpl.push_back('\0');
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) return -1;
  unlink(tmpl.data());
  size_t off = 0;
  while (off < g_body.size()) {
    const ssize_t n = write(fd, g_body.data() + off, g_body.size() - off);
    if (n <= 0) {
      close(fd);
      return -1;
    }
    off += static_cast<size_t>(n);
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s <two-sends|writev|sendfile|zerocopy> <body-file> [tmpfs-dir]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "two-sends") g_mode = Mode::kTwoSends;
  else if (mode == "writev") g_mode = Mode::kWritev;
  else if (mode == "sendfile") g_mode = Mode::kSendfile;
  else if (mode == "zerocopy") g_mode = Mode::kZerocopy;
  else {
    fprintf(stderr, "unknown mode '%s'\n", argv[1]);
    return 2;
  }
  if (!ReadFile(argv[2], &g_body) || g_body.empty()) {
    fprintf(stderr, "cannot read a body from %s\n", argv[2]);
    return 1;
  }
  if (g_mode == Mode::kSendfile) {
    g_body_fd = BodyFile(argc > 3 ? argv[3] : "/dev/shm");
    if (g_body_fd < 0) {
      perror("body file");
      return 1;
    }
  }
  RefreshHead();

  struct sigaction sa{};
  sa.sa_handler = OnSignal;  // no SA_RESTART: epoll_wait returns EINTR and the loop sees the flag
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t alen = sizeof addr;
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(lfd, 4096) != 0 ||
      getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) {
    perror("listen");
    return 1;
  }
  g_epoll = epoll_create1(EPOLL_CLOEXEC);
  epoll_event lev{};
  lev.events = EPOLLIN;
  lev.data.ptr = nullptr;  // the listening socket
  epoll_ctl(g_epoll, EPOLL_CTL_ADD, lfd, &lev);
  printf("%u\n", ntohs(addr.sin_port));
  fflush(stdout);

  std::vector<epoll_event> events(512);
  while (!g_stop) {
    if (g_dump) {
      g_dump = 0;
      PrintStats();
    }
    RefreshHead();
    ++g_stats.epoll_waits;
    const int n = epoll_wait(g_epoll, events.data(), static_cast<int>(events.size()), -1);
    if (n < 0) continue;  // EINTR: a signal
    for (int i = 0; i < n; ++i) {
      Conn* c = static_cast<Conn*>(events[i].data.ptr);
      const uint32_t ev = events[i].events;
      if (!c) {
        AcceptAll(lfd);
        continue;
      }
      bool ok = true;
      if (ev & EPOLLERR) ok = g_mode == Mode::kZerocopy && ReapCompletions(c);
      if (ok && (ev & EPOLLOUT)) ok = Serve(c);
      if (ok && (ev & (EPOLLIN | EPOLLHUP))) ok = OnReadable(c);  // EPOLLHUP: recv sees 0 or the error
      if (!ok) CloseConn(c);
    }
  }
  PrintStats();
  return 0;
}
