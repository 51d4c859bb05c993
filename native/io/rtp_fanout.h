// The WebRTC fan-out's media path (docs/listeners.md "WebRTC"): one stream packet becomes one SRTP
// packet per peer, written with a non-blocking sendto on the peer's UDP socket, in one call for all
// of the stream's peers.
// - RTP (RFC 3550 §5.1): V=2, no padding/extension/CSRC; sequence number, timestamp and marker of
//   the stream; payload type and SSRC of the peer.
// - SRTP (RFC 3711): SRTP_AES128_CM_HMAC_SHA1_80 (§4.1.1 AES-128 counter mode, §4.2.1 HMAC-SHA1
//   truncated to 80 bits) or SRTP_AEAD_AES_128_GCM (RFC 7714 §8, 16-byte tag), with the session
//   keys (§4.3) the caller derived. The rollover counter is counted per peer (§3.3.1), from 0 at the
//   peer's first packet.
// - Per peer: one OpenSSL cipher context keyed once. AES-CM: AES-128-ECB, from which the packet's
//   counter-mode key stream is built (its counter blocks encrypted in one pass), so no cipher is
//   re-initialised per packet; and the inner/outer SHA-1 states of the HMAC after the padded key
//   block (RFC 2104 §2). GCM: AES-128-GCM, only the IV set per packet. Nothing is allocated per
//   packet: every packet is built in one scratch buffer of the fan-out.
// - A send that would block (EAGAIN/EWOULDBLOCK, ENOBUFS) or fails counts a drop for that peer;
//   the packet is not retried and the call never blocks.
// No N-API here; the OpenSSL used is the one the process carries (Node's).
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace skylark::io {

// RFC 5764 §4.1.2 / RFC 7714 §14.2 protection profile numbers.
constexpr int kSrtpAes128CmHmacSha1_80 = 0x0001;
constexpr int kSrtpAeadAes128Gcm = 0x0007;

// Largest payload `Send` takes (bytes): what fits in one UDP datagram with the RTP header and tag.
constexpr size_t kRtpFanoutMaxPayload = 65507 - 12 - 16;

// One peer's description. `key` 16 bytes; `salt` 14 bytes (AES-CM) or at least 12 (GCM: the first
// 12 are used, RFC 7714 §12); `auth` 20 bytes (AES-CM only).
struct RtpPeerConfig {
  int fd = -1;                 // a UDP socket this process owns (not closed by the fan-out)
  std::string host;            // the remote address of the ICE pair, IPv4 or IPv6 literal
  uint16_t port = 0;
  uint32_t ssrc = 0;
  uint8_t payload_type = 0;    // 0..127
  int profile = 0;
  std::vector<uint8_t> key, salt, auth;
};

struct RtpPeerCounts {
  uint64_t packets = 0;   // SRTP packets written
  uint64_t bytes = 0;     // their bytes (header, payload, tag)
  uint64_t drops = 0;     // packets not written (socket full, send error)
  uint64_t drop_run = 0;  // drops since the last packet written
  int last_errno = 0;     // errno of the last failed send (0: none yet)
  uint32_t roc = 0;       // rollover counter (RFC 3711 §3.3.1)
  int32_t last_seq = -1;  // the last sequence number seen (-1: none yet)
};

class RtpFanout {
 public:
  RtpFanout();
  ~RtpFanout();
  RtpFanout(const RtpFanout&) = delete;
  RtpFanout& operator=(const RtpFanout&) = delete;

  // Adds a peer (enabled). Returns its id (≥ 1), or 0 with `error` set when the configuration is
  // invalid (unknown profile, key sizes, address, fd < 0) or OpenSSL refuses the key.
  uint32_t Add(const RtpPeerConfig& config, std::string* error);
  // Forgets a peer (its socket is never written again). False: no such peer.
  bool Remove(uint32_t id);
  // A disabled peer is skipped by Send (no write, no drop); its rollover counter still follows the
  // stream's sequence numbers. False: no such peer.
  bool SetEnabled(uint32_t id, bool enabled);
  // Moves a peer to another socket and remote address (a newly nominated ICE pair); keys and
  // rollover counter stay. False: no such peer or a bad address.
  bool Retarget(uint32_t id, int fd, const std::string& host, uint16_t port);
  // One stream packet to every enabled peer. `payload_size` ≤ kRtpFanoutMaxPayload (the caller
  // checks). Returns the packets written; drops are counted per peer and in `Totals`.
  size_t Send(uint16_t seq, uint32_t timestamp, const uint8_t* payload, size_t payload_size, bool marker);
  // Builds the SRTP packet `Send` would write to peer `id` (advancing its rollover counter the
  // same way) into `out` without writing it. False: no such peer.
  bool Protect(uint32_t id, uint16_t seq, uint32_t timestamp, const uint8_t* payload, size_t payload_size, bool marker,
               std::vector<uint8_t>* out);
  // Counters of peer `id`. False: no such peer.
  bool Counts(uint32_t id, RtpPeerCounts* out) const;
  // Sum over every peer ever added (removed ones included).
  RtpPeerCounts Totals() const { return totals_; }
  size_t size() const { return peers_.size(); }

  struct Peer;

 private:
  Peer* Find(uint32_t id) const;
  size_t Build(Peer& p, uint16_t seq, uint32_t timestamp, const uint8_t* payload, size_t payload_size, bool marker);

  std::vector<std::unique_ptr<Peer>> peers_;  // dense, in no particular order
  std::unordered_map<uint32_t, size_t> index_;
  std::vector<uint8_t> scratch_;
  std::vector<uint8_t> keystream_;  // AES-CM key stream of one packet
  uint32_t next_id_ = 1;
  RtpPeerCounts totals_;
};

}  // namespace skylark::io
