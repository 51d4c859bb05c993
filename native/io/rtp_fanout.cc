// RTP + SRTP per peer and the non-blocking UDP writes of the WebRTC fan-out (io/rtp_fanout.h).
// The low-level SHA-1 calls keep the HMAC's precomputed inner/outer states as plain structs copied
// per packet (no allocation), which OpenSSL 3 marks deprecated but still exports.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include "io/rtp_fanout.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <sys/socket.h>

#include <cstring>

#ifndef MSG_NOSIGNAL  // a UDP send never raises SIGPIPE; the flag only exists on some systems
#define MSG_NOSIGNAL 0
#endif

namespace skylark::io {

namespace {
constexpr size_t kRtpHeader = 12;
constexpr size_t kMaxTag = 16;

void Put16(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void Put32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

// `host:port` into `out`; false when `host` is no IPv4/IPv6 literal.
bool ParseAddress(const std::string& host, uint16_t port, sockaddr_storage* out, socklen_t* len) {
  std::memset(out, 0, sizeof(*out));
  auto* v4 = reinterpret_cast<sockaddr_in*>(out);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    *len = sizeof(sockaddr_in);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(out);
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    *len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}
}  // namespace

struct RtpFanout::Peer {
  uint32_t id = 0;
  int fd = -1;
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  uint32_t ssrc = 0;
  uint8_t payload_type = 0;
  bool gcm = false;
  bool enabled = true;
  size_t tag = 10;
  // AES-CM: the IV's fixed part, salt XOR (SSRC·2^64) (16 bytes, RFC 3711 §4.1.1); GCM: the
  // 12-byte salt XOR (00 00 ‖ SSRC ‖ 0…) (RFC 7714 §8.1).
  uint8_t base[16] = {};
  // AES-CM: AES-128-ECB with the session key, set once; the packet's key stream is built from it
  // (RFC 3711 §4.1.1), so no cipher is re-initialised per packet. GCM: AES-128-GCM with the key set
  // once and only the IV set per packet.
  EVP_CIPHER_CTX* cipher = nullptr;
  SHA_CTX inner{}, outer{};  // HMAC-SHA1 states after the padded key block (RFC 2104 §2)
  uint32_t roc = 0;
  int32_t last_seq = -1;
  RtpPeerCounts counts;

  ~Peer() {
    if (cipher) EVP_CIPHER_CTX_free(cipher);
  }
};

RtpFanout::RtpFanout() : scratch_(kRtpHeader + 1500 + kMaxTag), keystream_(1504) {}
RtpFanout::~RtpFanout() = default;

uint32_t RtpFanout::Add(const RtpPeerConfig& c, std::string* error) {
  auto p = std::make_unique<Peer>();
  const bool cm = c.profile == kSrtpAes128CmHmacSha1_80;
  p->gcm = c.profile == kSrtpAeadAes128Gcm;
  if (!cm && !p->gcm) return *error = "unsupported SRTP protection profile", 0;
  if (c.key.size() != 16) return *error = "the SRTP session key must be 16 bytes (AES-128)", 0;
  if (cm && (c.salt.size() != 14 || c.auth.size() != 20)) return *error = "AES-CM needs a 14-byte salt and a 20-byte auth key", 0;
  if (p->gcm && c.salt.size() < 12) return *error = "AES-GCM needs a 12-byte salt", 0;
  if (c.fd < 0) return *error = "fd must be a socket descriptor", 0;
  if (c.payload_type > 127) return *error = "payload type must be 0..127", 0;
  if (!ParseAddress(c.host, c.port, &p->addr, &p->addr_len)) return *error = "host must be an IPv4 or IPv6 address", 0;
  p->fd = c.fd;
  p->ssrc = c.ssrc;
  p->payload_type = c.payload_type;
  p->tag = p->gcm ? 16 : 10;
  p->cipher = EVP_CIPHER_CTX_new();
  const EVP_CIPHER* alg = p->gcm ? EVP_aes_128_gcm() : EVP_aes_128_ecb();
  if (!p->cipher || EVP_EncryptInit_ex(p->cipher, alg, nullptr, c.key.data(), nullptr) != 1 ||
      (cm && EVP_CIPHER_CTX_set_padding(p->cipher, 0) != 1)) {
    return *error = "OpenSSL refused the SRTP key", 0;
  }
  if (cm) {
    std::memcpy(p->base, c.salt.data(), 14);
    for (int i = 0; i < 4; ++i) p->base[4 + i] ^= static_cast<uint8_t>(c.ssrc >> (24 - 8 * i));
    uint8_t pad[64];
    for (auto [state, byte] : {std::pair{&p->inner, 0x36}, std::pair{&p->outer, 0x5c}}) {
      std::memset(pad, byte, sizeof pad);
      for (size_t i = 0; i < c.auth.size(); ++i) pad[i] ^= c.auth[i];
      SHA1_Init(state);
      SHA1_Update(state, pad, sizeof pad);
    }
  } else {
    std::memcpy(p->base, c.salt.data(), 12);
    for (int i = 0; i < 4; ++i) p->base[2 + i] ^= static_cast<uint8_t>(c.ssrc >> (24 - 8 * i));
  }
  p->id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;
  index_[p->id] = peers_.size();
  const uint32_t id = p->id;
  peers_.push_back(std::move(p));
  return id;
}

RtpFanout::Peer* RtpFanout::Find(uint32_t id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : peers_[it->second].get();
}

bool RtpFanout::Remove(uint32_t id) {
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  const size_t at = it->second;
  index_.erase(it);
  if (at + 1 != peers_.size()) {
    peers_[at] = std::move(peers_.back());
    index_[peers_[at]->id] = at;
  }
  peers_.pop_back();
  return true;
}

bool RtpFanout::SetEnabled(uint32_t id, bool enabled) {
  Peer* p = Find(id);
  if (p) p->enabled = enabled;
  return p != nullptr;
}

bool RtpFanout::Retarget(uint32_t id, int fd, const std::string& host, uint16_t port) {
  Peer* p = Find(id);
  sockaddr_storage addr;
  socklen_t len = 0;
  if (!p || fd < 0 || !ParseAddress(host, port, &addr, &len)) return false;
  p->fd = fd;
  p->addr = addr;
  p->addr_len = len;
  return true;
}

bool RtpFanout::Counts(uint32_t id, RtpPeerCounts* out) const {
  const Peer* p = Find(id);
  if (!p) return false;
  *out = p->counts;
  out->roc = p->roc;
  out->last_seq = p->last_seq;
  return true;
}

// The rollover counter follows the stream's sequence numbers (RFC 3711 §3.3.1): a step back by
// more than half the space is a wrap.
static void Advance(RtpFanout::Peer& p, uint16_t seq) {
  if (p.last_seq >= 0 && seq < p.last_seq && p.last_seq - seq > 0x8000) ++p.roc;
  p.last_seq = seq;
}

size_t RtpFanout::Build(Peer& p, uint16_t seq, uint32_t timestamp, const uint8_t* payload, size_t n, bool marker) {
  const size_t need = kRtpHeader + n + kMaxTag;
  if (scratch_.size() < need) scratch_.resize(need);
  uint8_t* b = scratch_.data();
  b[0] = 0x80;
  b[1] = static_cast<uint8_t>((marker ? 0x80 : 0) | p.payload_type);
  Put16(b + 2, seq);
  Put32(b + 4, timestamp);
  Put32(b + 8, p.ssrc);
  const size_t len = kRtpHeader + n;
  uint8_t iv[16];
  std::memcpy(iv, p.base, 16);
  if (!p.gcm) {
    // IV = (k_s·2^16) XOR (SSRC·2^64) XOR (i·2^16), i = ROC·2^16 + SEQ (RFC 3711 §4.1.1); key
    // stream block j = AES(IV + j), j in the IV's low 16 bits (zero in IV): built and encrypted in
    // one ECB pass, then XORed into the payload.
    for (int i = 0; i < 4; ++i) iv[8 + i] ^= static_cast<uint8_t>(p.roc >> (24 - 8 * i));
    iv[12] ^= static_cast<uint8_t>(seq >> 8);
    iv[13] ^= static_cast<uint8_t>(seq);
    const size_t blocks = (n + 15) / 16;
    if (keystream_.size() < 16 * blocks) keystream_.resize(16 * blocks);
    uint8_t* ks = keystream_.data();
    for (size_t j = 0; j < blocks; ++j) {
      std::memcpy(ks + 16 * j, iv, 14);
      Put16(ks + 16 * j + 14, static_cast<uint32_t>(j));
    }
    int outl = 0;
    if (blocks && EVP_EncryptUpdate(p.cipher, ks, &outl, ks, static_cast<int>(16 * blocks)) != 1) return 0;
    for (size_t i = 0; i < n; ++i) b[kRtpHeader + i] = payload[i] ^ ks[i];
    // Tag = first 80 bits of HMAC-SHA1(k_a, packet ‖ ROC) (RFC 3711 §4.2).
    uint8_t roc[4], md[SHA_DIGEST_LENGTH];
    Put32(roc, p.roc);
    SHA_CTX h = p.inner;
    SHA1_Update(&h, b, len);
    SHA1_Update(&h, roc, 4);
    SHA1_Final(md, &h);
    h = p.outer;
    SHA1_Update(&h, md, sizeof md);
    SHA1_Final(md, &h);
    std::memcpy(b + len, md, 10);
    return len + 10;
  }
  // IV = salt XOR (00 00 ‖ SSRC ‖ ROC ‖ SEQ); AAD = the RTP header (RFC 7714 §8.1, §9.1).
  for (int i = 0; i < 4; ++i) iv[6 + i] ^= static_cast<uint8_t>(p.roc >> (24 - 8 * i));
  iv[10] ^= static_cast<uint8_t>(seq >> 8);
  iv[11] ^= static_cast<uint8_t>(seq);
  int outl = 0;
  if (EVP_EncryptInit_ex(p.cipher, nullptr, nullptr, nullptr, iv) != 1) return 0;
  if (EVP_EncryptUpdate(p.cipher, nullptr, &outl, b, kRtpHeader) != 1) return 0;
  if (n && EVP_EncryptUpdate(p.cipher, b + kRtpHeader, &outl, payload, static_cast<int>(n)) != 1) return 0;
  if (EVP_EncryptFinal_ex(p.cipher, b + len, &outl) != 1) return 0;
  if (EVP_CIPHER_CTX_ctrl(p.cipher, EVP_CTRL_GCM_GET_TAG, 16, b + len) != 1) return 0;
  return len + 16;
}

size_t RtpFanout::Send(uint16_t seq, uint32_t timestamp, const uint8_t* payload, size_t n, bool marker) {
  size_t sent = 0;
  for (auto& ptr : peers_) {
    Peer& p = *ptr;
    Advance(p, seq);
    if (!p.enabled) continue;
    const size_t len = Build(p, seq, timestamp, payload, n, marker);
    const ssize_t w = len ? sendto(p.fd, scratch_.data(), len, MSG_DONTWAIT | MSG_NOSIGNAL,
                                   reinterpret_cast<const sockaddr*>(&p.addr), p.addr_len)
                          : -1;
    if (w == static_cast<ssize_t>(len)) {
      ++p.counts.packets;
      p.counts.bytes += len;
      p.counts.drop_run = 0;
      ++totals_.packets;
      totals_.bytes += len;
      ++sent;
    } else {
      ++p.counts.drops;
      ++p.counts.drop_run;
      p.counts.last_errno = len ? errno : EINVAL;
      ++totals_.drops;
    }
  }
  return sent;
}

bool RtpFanout::Protect(uint32_t id, uint16_t seq, uint32_t timestamp, const uint8_t* payload, size_t n, bool marker,
                        std::vector<uint8_t>* out) {
  Peer* p = Find(id);
  if (!p) return false;
  Advance(*p, seq);
  const size_t len = Build(*p, seq, timestamp, payload, n, marker);
  out->assign(scratch_.data(), scratch_.data() + len);
  return true;
}

}  // namespace skylark::io
