// SRTCP of one direction (RFC 3711 §3.4: AES-CM with HMAC-SHA1-80, SRTP_AES128_CM_HMAC_SHA1_80;
// RFC 7714 §9: AEAD_AES_128_GCM, SRTP_AEAD_AES_128_GCM) with the session keys already derived
// (RFC 3711 §4.3: labels 3, 4 and 5): `open` authenticates and decrypts a received compound packet
// in place, `protect` encrypts and authenticates one to send. The SRTCP index of the packets sent
// is the caller's (RFC 3711 §3.3.2: 31 bits, one more per packet of the SSRC); no replay list is
// kept for the packets received (what they carry is only read for the receiver reports).
// Used by the WHIP receive (io/whip_receive.h) for the publisher's sender reports and the server's
// receiver reports. No libuv and no N-API: the C++ tests build it alone with OpenSSL.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace skylark::io {

class SrtcpContext {
 public:
  SrtcpContext();
  ~SrtcpContext();
  SrtcpContext(const SrtcpContext&) = delete;
  SrtcpContext& operator=(const SrtcpContext&) = delete;

  /**
   * `profile` 0x0001 (key 16 bytes, salt 14, auth 20) or 0x0007 (key 16, salt ≥ 12; auth unused):
   * the SRTCP session keys of one direction. False (and `error` set) when they do not fit or
   * OpenSSL refuses them.
   */
  bool init(int profile, const std::vector<uint8_t>& key, const std::vector<uint8_t>& salt, const std::vector<uint8_t>& auth, std::string* error);

  /** Bytes `protect` adds: E ‖ index (4) and the tag (10 for AES-CM, 16 for GCM). */
  size_t overhead() const { return 4 + tag_; }
  size_t tag_size() const { return tag_; }
  bool aead() const { return gcm_; }

  /**
   * Authenticates and decrypts SRTCP `data[0, size)` in place: the length of the plain compound
   * RTCP packet now at `data` (0: rejected — not SRTCP, too short, wrong tag; `data` may then be
   * changed). `index` gets the packet's SRTCP index.
   */
  size_t open(uint8_t* data, size_t size, uint32_t* index);

  /**
   * Protects compound RTCP `data[0, size)` in place with SRTCP index `index` (31 bits; E set):
   * `data` must have room for `size + overhead()` bytes. The SRTCP length, or 0 when OpenSSL fails
   * or `size` is under 8.
   */
  size_t protect(uint8_t* data, size_t size, uint32_t index);

 private:
  struct State;
  std::unique_ptr<State> s_;
  bool gcm_ = false;
  size_t tag_ = 10;
};

}  // namespace skylark::io
