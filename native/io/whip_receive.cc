// A WHIP publisher's native receive (io/whip_receive.h). The low-level SHA-1 calls keep the HMAC's
// precomputed inner/outer states as plain structs copied per packet (no allocation), which
// OpenSSL 3 marks deprecated but still exports (as io/rtp_fanout.cc does).
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include "io/whip_receive.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <time.h>

#include <cmath>
#include <cstring>

#include "io/rtp_fanout.h"

namespace skylark::io {

namespace {
constexpr int kMaxBatchesPerWakeup = 8;  // then the loop's other work runs; the poll fires again
constexpr size_t kControl = 64;          // cmsg room per datagram: CMSG_SPACE(sizeof(timespec)) and more
double NowMs() { return static_cast<double>(uv_hrtime()) / 1e6; }
double RealMs() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}
// The kernel's receive time of a datagram (SO_TIMESTAMPNS, CLOCK_REALTIME ms), or a negative number.
double ReceiveTimeMs(msghdr& h) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS && c->cmsg_len >= CMSG_LEN(sizeof(timespec))) {
      timespec t;
      std::memcpy(&t, CMSG_DATA(c), sizeof t);
      return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
    }
  }
  return -1;
}
void Put32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
}  // namespace

// The SRTP receive context of one SSRC (RFC 3711 §3.3, §4.1.1, §4.2; RFC 7714 §8, §9.1).
struct WhipReceiver::Srtp {
  uint32_t ssrc = 0;
  bool gcm = false;
  size_t tag = 10;
  uint8_t base[16] = {};  // AES-CM: salt XOR (SSRC·2^64); GCM: salt XOR (00 00 ‖ SSRC ‖ 0…)
  EVP_CIPHER_CTX* cipher = nullptr;
  SHA_CTX inner{}, outer{};
  std::vector<uint8_t> keystream;

  ~Srtp() {
    if (cipher) EVP_CIPHER_CTX_free(cipher);
  }

  // Keys from `c` for `ssrc`; false when OpenSSL refuses them (sizes were checked by the receiver).
  bool Init(const WhipReceiveConfig& c, uint32_t s) {
    ssrc = s;
    gcm = c.profile == kSrtpAeadAes128Gcm;
    tag = gcm ? 16 : 10;
    cipher = EVP_CIPHER_CTX_new();
    if (!cipher) return false;
    if (gcm) {
      if (EVP_DecryptInit_ex(cipher, EVP_aes_128_gcm(), nullptr, c.key.data(), nullptr) != 1) return false;
      std::memcpy(base, c.salt.data(), 12);
      for (int i = 0; i < 4; ++i) base[2 + i] ^= static_cast<uint8_t>(s >> (24 - 8 * i));
      return true;
    }
    if (EVP_EncryptInit_ex(cipher, EVP_aes_128_ecb(), nullptr, c.key.data(), nullptr) != 1 ||
        EVP_CIPHER_CTX_set_padding(cipher, 0) != 1) {
      return false;
    }
    std::memcpy(base, c.salt.data(), 14);
    for (int i = 0; i < 4; ++i) base[4 + i] ^= static_cast<uint8_t>(s >> (24 - 8 * i));
    uint8_t pad[64];
    for (auto [state, byte] : {std::pair{&inner, 0x36}, std::pair{&outer, 0x5c}}) {
      std::memset(pad, byte, sizeof pad);
      for (size_t i = 0; i < c.auth.size(); ++i) pad[i] ^= c.auth[i];
      SHA1_Init(state);
      SHA1_Update(state, pad, sizeof pad);
    }
    return true;
  }

  // Checks and decrypts `b[0, len)` (header `hl` bytes, payload, tag) in place: true when the tag
  // is right (then `b[hl, len - tag)` is plain). AES-CM leaves `b` unchanged when it is not.
  bool Open(uint8_t* b, size_t hl, size_t len, uint16_t seq, uint32_t roc) {
    const size_t end = len - tag;
    uint8_t iv[16];
    std::memcpy(iv, base, 16);
    if (gcm) {
      // IV = salt XOR (00 00 ‖ SSRC ‖ ROC ‖ SEQ); AAD = the RTP header (RFC 7714 §8.1, §9.1).
      for (int i = 0; i < 4; ++i) iv[6 + i] ^= static_cast<uint8_t>(roc >> (24 - 8 * i));
      iv[10] ^= static_cast<uint8_t>(seq >> 8);
      iv[11] ^= static_cast<uint8_t>(seq);
      int outl = 0;
      if (EVP_DecryptInit_ex(cipher, nullptr, nullptr, nullptr, iv) != 1) return false;
      if (EVP_DecryptUpdate(cipher, nullptr, &outl, b, static_cast<int>(hl)) != 1) return false;
      if (end > hl && EVP_DecryptUpdate(cipher, b + hl, &outl, b + hl, static_cast<int>(end - hl)) != 1) return false;
      if (EVP_CIPHER_CTX_ctrl(cipher, EVP_CTRL_GCM_SET_TAG, 16, b + end) != 1) return false;
      return EVP_DecryptFinal_ex(cipher, b + end, &outl) == 1;
    }
    // Tag = first 80 bits of HMAC-SHA1(k_a, packet ‖ ROC) (RFC 3711 §4.2), checked first.
    uint8_t r[4], md[SHA_DIGEST_LENGTH];
    Put32(r, roc);
    SHA_CTX h = inner;
    SHA1_Update(&h, b, end);
    SHA1_Update(&h, r, 4);
    SHA1_Final(md, &h);
    h = outer;
    SHA1_Update(&h, md, sizeof md);
    SHA1_Final(md, &h);
    if (CRYPTO_memcmp(md, b + end, 10) != 0) return false;
    // Key stream (RFC 3711 §4.1.1): IV = (k_s·2^16) XOR (SSRC·2^64) XOR (i·2^16), block j in the
    // IV's low 16 bits, built for every block and encrypted in one ECB pass.
    for (int i = 0; i < 4; ++i) iv[8 + i] ^= static_cast<uint8_t>(roc >> (24 - 8 * i));
    iv[12] ^= static_cast<uint8_t>(seq >> 8);
    iv[13] ^= static_cast<uint8_t>(seq);
    const size_t n = end - hl, blocks = (n + 15) / 16;
    if (keystream.size() < 16 * blocks) keystream.resize(16 * blocks);
    uint8_t* ks = keystream.data();
    for (size_t j = 0; j < blocks; ++j) {
      std::memcpy(ks + 16 * j, iv, 14);
      ks[16 * j + 14] = static_cast<uint8_t>(j >> 8);
      ks[16 * j + 15] = static_cast<uint8_t>(j);
    }
    int outl = 0;
    if (blocks && EVP_EncryptUpdate(cipher, ks, &outl, ks, static_cast<int>(16 * blocks)) != 1) return false;
    for (size_t i = 0; i < n; ++i) b[hl + i] ^= ks[i];
    return true;
  }
};

WhipReceiver::WhipReceiver(uv_loop_t* loop, const WhipReceiveConfig& c, WhipReceiveEvents& events, std::string* error)
    : loop_(loop),
      config_(c),
      events_(events),
      jitter_(c.jitter, [this](uint64_t s, const uint8_t* d, size_t n, bool f) { Frame(s, d, n, f); }) {
  const bool cm = c.profile == kSrtpAes128CmHmacSha1_80, gcm = c.profile == kSrtpAeadAes128Gcm;
  if (!cm && !gcm) { *error = "unsupported SRTP protection profile"; return; }
  if (c.key.size() != 16) { *error = "the SRTP session key must be 16 bytes (AES-128)"; return; }
  if (cm && (c.salt.size() != 14 || c.auth.size() != 20)) { *error = "AES-CM needs a 14-byte salt and a 20-byte auth key"; return; }
  if (gcm && c.salt.size() < 12) { *error = "AES-GCM needs a 12-byte salt"; return; }
  if (c.fd < 0) { *error = "fd must be a socket descriptor"; return; }
  if (c.jitter.max_packets == 0) { *error = "maxPackets must be at least 1"; return; }
  Srtp probe;
  if (!probe.Init(c, 0)) { *error = "OpenSSL refused the SRTP key"; return; }
  if (c.rtcp.on) {
    const int family = c.rtcp.remote.ss_family;
    if (family != AF_INET && family != AF_INET6) { *error = "the remote address must be IPv4 or IPv6"; return; }
    srtcp_in_ = std::make_unique<SrtcpContext>();
    srtcp_out_ = std::make_unique<SrtcpContext>();
    if (!srtcp_in_->init(c.profile, c.rtcp.remote_key, c.rtcp.remote_salt, c.rtcp.remote_auth, error) ||
        !srtcp_out_->init(c.profile, c.rtcp.local_key, c.rtcp.local_salt, c.rtcp.local_auth, error)) {
      return;
    }
    counts_.srtcp_index = c.rtcp.last_index & 0x7fffffff;
    rand_ = uv_hrtime() | 1;
  }
  slots_.resize(kWhipReceiveBatch * kWhipReceiveDatagram);
  addrs_.resize(kWhipReceiveBatch);
  control_.resize(kWhipReceiveBatch * kControl);
  ok_ = true;
}

WhipReceiver::~WhipReceiver() { stop(); }

int WhipReceiver::start() {
  if (!ok_) return UV_EINVAL;
  if (poll_) return 0;
  poll_ = new uv_poll_t;
  if (int err = uv_poll_init_socket(loop_, poll_, config_.fd)) {
    delete poll_;
    poll_ = nullptr;
    return err;
  }
  poll_->data = this;
  timer_ = new uv_timer_t;
  uv_timer_init(loop_, timer_);
  timer_->data = this;
  merge_timer_ = new uv_timer_t;
  uv_timer_init(loop_, merge_timer_);
  merge_timer_->data = this;
  if (srtcp_out_) {
    report_timer_ = new uv_timer_t;
    uv_timer_init(loop_, report_timer_);
    report_timer_->data = this;
    ScheduleReport();
  }
  // Arrival times from the kernel: a datagram read late (merged reads) keeps its own time.
  const int on = 1;
  setsockopt(config_.fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
  if (int err = uv_poll_start(poll_, UV_READABLE, &WhipReceiver::OnReadable)) {
    stop();
    return err;
  }
  return 0;
}

void WhipReceiver::stop() {
  // The handles outlive this object until libuv has closed them.
  if (poll_) {
    uv_poll_stop(poll_);
    uv_close(reinterpret_cast<uv_handle_t*>(poll_), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
    poll_ = nullptr;
  }
  for (uv_timer_t** t : {&timer_, &merge_timer_, &report_timer_}) {
    if (!*t) continue;
    uv_timer_stop(*t);
    uv_close(reinterpret_cast<uv_handle_t*>(*t), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
    *t = nullptr;
  }
  merged_ = false;
  sink_.reset();
}

void WhipReceiver::route(std::unique_ptr<AudioSink> sink, bool frames, bool merge) {
  sink_ = std::move(sink);
  frames_ = frames || !sink_;
  merge_allowed_ = merge && sink_ != nullptr;
  cut_armed_ = false;
  UpdateMerged();
}

// How the socket is read from now on: on merge ticks, on merge ticks with one timed read before the
// coming cut, or as datagrams arrive (io/whip_receive.h "Merged reads").
void WhipReceiver::UpdateMerged() {
  if (!poll_) return;
  const uint64_t m = config_.merge_ms;
  if (m == 0 || !merge_allowed_ || !sink_) {
    cut_armed_ = false;
    return SetMerged(false, 0);
  }
  const uint64_t now = uv_now(loop_);
  const uint64_t left = sink_->ms_to_next_cut();
  if (left > m + kMergeSlackMs) {
    cut_armed_ = false;
    return SetMerged(true, (now / m + 1) * m);  // aligned: every receiver's tick in one wakeup
  }
  if (!cut_armed_ && left > kCutEarlyMs) {
    cut_armed_ = true;
    return SetMerged(true, now + left - kCutEarlyMs);
  }
  SetMerged(false, 0);
}

void WhipReceiver::SetMerged(bool on, uint64_t at) {
  if (!on) {
    if (merged_) {
      merged_ = false;
      uv_timer_stop(merge_timer_);
      uv_poll_start(poll_, UV_READABLE, &WhipReceiver::OnReadable);
    }
    return;
  }
  if (!merged_) {
    merged_ = true;
    uv_poll_stop(poll_);
  }
  const uint64_t now = uv_now(loop_);
  uv_timer_start(merge_timer_, &WhipReceiver::OnMergeTick, at > now ? at - now : 0, 0);
}

void WhipReceiver::OnMergeTick(uv_timer_t* t) {
  auto* self = static_cast<WhipReceiver*>(t->data);
  ++self->counts_.merged_reads;
  self->Read(false);
}

bool WhipReceiver::report(rtp::ReportBlock* out) {
  if (counts_.ssrc < 0) return false;
  *out = stats_.report();
  return true;
}

void WhipReceiver::OnReadable(uv_poll_t* h, int status, int) {
  auto* self = static_cast<WhipReceiver*>(h->data);
  if (status < 0) {
    self->stop();
    self->events_.on_error(status);
    return;
  }
  self->Read(false);
}

// A jitter deadline: what waits in the socket is read first (a merged read may not have come yet),
// then the packets given up.
void WhipReceiver::OnTimer(uv_timer_t* t) { static_cast<WhipReceiver*>(t->data)->Read(true); }

void WhipReceiver::Read(bool deadline) {
  mmsghdr msgs[kWhipReceiveBatch];
  iovec iov[kWhipReceiveBatch];
  for (int round = 0; round < kMaxBatchesPerWakeup && poll_; ++round) {
    for (size_t i = 0; i < kWhipReceiveBatch; ++i) {
      iov[i] = {slots_.data() + i * kWhipReceiveDatagram, kWhipReceiveDatagram};
      std::memset(&msgs[i], 0, sizeof msgs[i]);
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_name = &addrs_[i];
      msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
      msgs[i].msg_hdr.msg_control = control_.data() + i * kControl;
      msgs[i].msg_hdr.msg_controllen = kControl;
    }
    const int n = recvmmsg(config_.fd, msgs, kWhipReceiveBatch, MSG_DONTWAIT, nullptr);
    if (n <= 0) break;  // EAGAIN (nothing more) or an error the next poll reports
    const double now = NowMs(), real = RealMs();
    for (int i = 0; i < n && poll_; ++i) {
      if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
        ++counts_.rejected;
        continue;
      }
      // The arrival on the monotonic clock: now, less how long ago the kernel received it.
      const double at = ReceiveTimeMs(msgs[i].msg_hdr);
      const double age = at < 0 || at > real ? 0 : real - at;
      Datagram(slots_.data() + i * kWhipReceiveDatagram, msgs[i].msg_len, addrs_[i], now - (age > 10000 ? 10000 : age));
    }
    if (static_cast<size_t>(n) < kWhipReceiveBatch) break;
  }
  if (!poll_) return;  // stopped from a callback: nothing more is reported
  if (deadline) jitter_.flush(NowMs());
  UpdateMerged();
  Schedule();
  events_.on_batch_end();
}

void WhipReceiver::Datagram(uint8_t* data, size_t size, const sockaddr_storage& from, double now) {
  if (!rtp::is_rtp(data, size)) {
    if (srtcp_in_ && rtp::is_rtcp(data, size) && Rtcp(data, size, now)) return;
    ++counts_.other;
    events_.on_datagram(data, size, from);
    return;
  }
  const size_t tag = config_.profile == kSrtpAeadAes128Gcm ? 16 : 10;
  rtp::RtpHeader h;
  if (rtp::parse_srtp_header(data, size, tag, &h) != rtp::RtpStatus::kOk) return void(++counts_.rejected);
  const bool known = srtp_ && h.ssrc == srtp_->ssrc;
  Srtp* ctx = srtp_.get();
  if (!known) {
    if (!candidate_ || candidate_->ssrc != h.ssrc) {
      candidate_ = std::make_unique<Srtp>();
      if (!candidate_->Init(config_, h.ssrc)) return void((candidate_.reset(), ++counts_.rejected));
    }
    ctx = candidate_.get();
  }
  const int64_t roc = known ? roc_.estimate(h.seq) : 0;
  if (roc < 0 || !ctx->Open(data, h.header_size, size, h.seq, static_cast<uint32_t>(roc))) return void(++counts_.rejected);
  if (known) {
    roc_.advance(h.seq, static_cast<uint32_t>(roc));
  } else {
    // A new source (RFC 3550 §8.2: the publisher restarted): its own counters from here.
    if (srtp_) jitter_.restart();
    srtp_ = std::move(candidate_);
    roc_.reset(h.seq);
    stats_ = rtp::ReceptionStats();
    lsr_at_ = -1;  // its sender reports start over
    counts_.ssrc = h.ssrc;
  }
  size_t end = size - tag;
  if (h.padding) end = rtp::strip_padding(data, h.header_size, end);
  if (end <= h.header_size) return void(++counts_.rejected);
  stats_.add(h.seq, h.timestamp, now * config_.clock_rate / 1000);
  if (h.payload_type != config_.payload_type) return;
  ++counts_.packets;
  counts_.bytes += end - h.header_size;
  counts_.last_rtp_ms = now;
  if (end - h.header_size > config_.max_frame_bytes) return;
  jitter_.push(h.seq, h.timestamp, data + h.header_size, end - h.header_size, now);
}

// A datagram that is RTCP: true when it was taken here (sender reports, or dropped as forged),
// false when it goes to the owner unchanged (RTCP that werift handles).
bool WhipReceiver::Rtcp(const uint8_t* data, size_t size, double now) {
  rtcp_.assign(data, data + size);
  uint32_t index = 0;
  const size_t n = srtcp_in_->open(rtcp_.data(), rtcp_.size(), &index);
  if (n == 0) return ++counts_.srtcp_rejected, true;
  const uint32_t ssrc = counts_.ssrc < 0 ? 0 : static_cast<uint32_t>(counts_.ssrc);
  const rtp::RtcpSummary r = rtp::read_sender_reports(rtcp_.data(), n, ssrc);
  if (!r.valid) return ++counts_.srtcp_rejected, true;
  if (!r.reports_only) return false;
  ++counts_.srtcp;
  if (r.has_sr && counts_.ssrc >= 0) {
    lsr_ = r.lsr;
    lsr_at_ = now;
  }
  return true;
}

void WhipReceiver::ScheduleReport() {
  if (!report_timer_) return;
  rand_ ^= rand_ << 13;
  rand_ ^= rand_ >> 7;
  rand_ ^= rand_ << 17;
  uv_timer_start(report_timer_, &WhipReceiver::OnReportTimer, 500 + rand_ % 1001, 0);  // RFC 3550 §6.2: 0.5–1.5 × 1 s
}

void WhipReceiver::OnReportTimer(uv_timer_t* t) {
  auto* self = static_cast<WhipReceiver*>(t->data);
  self->SendReport();
  self->ScheduleReport();
}

// One receiver report (RFC 3550 §6.4.2), SRTCP-protected, sent to the remote address.
void WhipReceiver::SendReport() {
  if (counts_.ssrc < 0 || !srtcp_out_) return;
  uint8_t b[rtp::kReceiverReportSize + 32];
  const rtp::ReportBlock block = stats_.report();
  uint32_t lsr = 0, dlsr = 0;
  if (lsr_at_ >= 0) {
    lsr = lsr_;
    const double d = (NowMs() - lsr_at_) / 1000 * 65536;
    dlsr = d <= 0 ? 0 : d >= 4294967295.0 ? 0xffffffffu : static_cast<uint32_t>(d);
  }
  rtp::write_receiver_report(b, config_.rtcp.reporter_ssrc, static_cast<uint32_t>(counts_.ssrc), block, lsr, dlsr);
  const uint32_t index = (counts_.srtcp_index + 1) & 0x7fffffff;
  const size_t n = srtcp_out_->protect(b, rtp::kReceiverReportSize, index);
  if (n == 0) return;
  counts_.srtcp_index = index;
  const sockaddr_storage& to = config_.rtcp.remote;
  const socklen_t len = to.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (sendto(config_.fd, b, n, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to), len) == static_cast<ssize_t>(n)) ++counts_.reports_sent;
}

void WhipReceiver::Frame(uint64_t samples, const uint8_t* data, size_t size, bool) {
  if (sink_) {
    // An Enhanced RTMP `Opus` coded-frame body: 0x91, FourCC "Opus", the packet.
    if (body_.size() < size + 5) body_.resize(size + 5);
    body_[0] = 0x91;
    std::memcpy(body_.data() + 1, "Opus", 4);
    std::memcpy(body_.data() + 5, data, size);
    ++counts_.segmented;
    sink_->push_audio(static_cast<uint32_t>(std::llround(static_cast<double>(samples) / 48.0)), body_.data(), size + 5);
  }
  if (frames_) events_.on_frame(samples, data, size, sink_ != nullptr);
}

void WhipReceiver::Schedule() {
  if (!timer_) return;
  const double at = jitter_.deadline();
  if (at < 0) {
    uv_timer_stop(timer_);
    return;
  }
  const double wait = std::ceil(at - NowMs());
  uv_timer_start(timer_, &WhipReceiver::OnTimer, wait < 1 ? 1 : static_cast<uint64_t>(wait), 0);
}

}  // namespace skylark::io
