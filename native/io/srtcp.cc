// SRTCP (io/srtcp.h). The low-level SHA-1 calls keep the HMAC's precomputed inner/outer states as
// plain structs copied per packet (RFC 2104 §2), which OpenSSL 3 marks deprecated but still exports
// (as io/whip_receive.cc and io/rtp_fanout.cc do).
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include "io/srtcp.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <cstring>

namespace skylark::io {

namespace {
constexpr int kProfileCm = 0x0001, kProfileGcm = 0x0007;
void put32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
uint32_t be32(const uint8_t* p) { return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3]; }
bool is_rtcp(const uint8_t* d, size_t n) { return n >= 8 && (d[0] & 0xc0) == 0x80 && d[1] >= 192 && d[1] <= 223; }
}  // namespace

struct SrtcpContext::State {
  EVP_CIPHER_CTX* enc = nullptr;  // AES-128-ECB (key stream) or AES-128-GCM encrypt
  EVP_CIPHER_CTX* dec = nullptr;  // AES-128-GCM decrypt
  uint8_t salt[14] = {};
  SHA_CTX inner{}, outer{};
  std::vector<uint8_t> ks;
  ~State() {
    if (enc) EVP_CIPHER_CTX_free(enc);
    if (dec) EVP_CIPHER_CTX_free(dec);
  }

  // AES-CM (RFC 3711 §4.1.1 for SRTCP: the index in place of ROC ‖ SEQ): XORs `b[0, n)` with the
  // key stream of `ssrc` and `index`.
  bool Ctr(uint8_t* b, size_t n, uint32_t ssrc, uint32_t index) {
    uint8_t iv[16] = {};
    put32(iv + 4, ssrc);
    put32(iv + 10, index);  // i·2^16: bytes 10..13
    for (int i = 0; i < 14; ++i) iv[i] ^= salt[i];
    const size_t blocks = (n + 15) / 16;
    if (ks.size() < 16 * blocks) ks.resize(16 * blocks);
    for (size_t j = 0; j < blocks; ++j) {
      std::memcpy(ks.data() + 16 * j, iv, 14);
      ks[16 * j + 14] = static_cast<uint8_t>(j >> 8);
      ks[16 * j + 15] = static_cast<uint8_t>(j);
    }
    int outl = 0;
    if (blocks && EVP_EncryptUpdate(enc, ks.data(), &outl, ks.data(), static_cast<int>(16 * blocks)) != 1) return false;
    for (size_t i = 0; i < n; ++i) b[i] ^= ks[i];
    return true;
  }

  // HMAC-SHA1 of `b[0, n)`, first 10 bytes into `tag` (RFC 3711 §4.2; SRTCP authenticates the
  // packet with E ‖ index, no ROC).
  void Hmac(const uint8_t* b, size_t n, uint8_t* tag) {
    uint8_t md[SHA_DIGEST_LENGTH];
    SHA_CTX h = inner;
    SHA1_Update(&h, b, n);
    SHA1_Final(md, &h);
    h = outer;
    SHA1_Update(&h, md, sizeof md);
    SHA1_Final(md, &h);
    std::memcpy(tag, md, 10);
  }

  // RFC 7714 §9.1: IV = salt XOR (00 00 ‖ SSRC ‖ 00 00 ‖ 0 ‖ index).
  void GcmIv(uint32_t ssrc, uint32_t index, uint8_t* iv) const {
    std::memset(iv, 0, 12);
    put32(iv + 2, ssrc);
    put32(iv + 8, index & 0x7fffffff);
    for (int i = 0; i < 12; ++i) iv[i] ^= salt[i];
  }
};

SrtcpContext::SrtcpContext() : s_(std::make_unique<State>()) {}
SrtcpContext::~SrtcpContext() = default;

bool SrtcpContext::init(int profile, const std::vector<uint8_t>& key, const std::vector<uint8_t>& salt, const std::vector<uint8_t>& auth, std::string* error) {
  gcm_ = profile == kProfileGcm;
  tag_ = gcm_ ? 16 : 10;
  if (profile != kProfileCm && !gcm_) return *error = "unsupported SRTP protection profile", false;
  if (key.size() != 16) return *error = "the SRTCP session key must be 16 bytes (AES-128)", false;
  if (!gcm_ && (salt.size() != 14 || auth.size() != 20)) return *error = "AES-CM SRTCP needs a 14-byte salt and a 20-byte auth key", false;
  if (gcm_ && salt.size() < 12) return *error = "AES-GCM SRTCP needs a 12-byte salt", false;
  std::memcpy(s_->salt, salt.data(), gcm_ ? 12 : 14);
  s_->enc = EVP_CIPHER_CTX_new();
  if (!s_->enc) return *error = "OpenSSL refused the SRTCP key", false;
  if (gcm_) {
    s_->dec = EVP_CIPHER_CTX_new();
    if (!s_->dec || EVP_EncryptInit_ex(s_->enc, EVP_aes_128_gcm(), nullptr, key.data(), nullptr) != 1 ||
        EVP_DecryptInit_ex(s_->dec, EVP_aes_128_gcm(), nullptr, key.data(), nullptr) != 1) {
      return *error = "OpenSSL refused the SRTCP key", false;
    }
    return true;
  }
  if (EVP_EncryptInit_ex(s_->enc, EVP_aes_128_ecb(), nullptr, key.data(), nullptr) != 1 || EVP_CIPHER_CTX_set_padding(s_->enc, 0) != 1) {
    return *error = "OpenSSL refused the SRTCP key", false;
  }
  uint8_t pad[64];
  for (auto [state, byte] : {std::pair{&s_->inner, 0x36}, std::pair{&s_->outer, 0x5c}}) {
    std::memset(pad, byte, sizeof pad);
    for (size_t i = 0; i < auth.size(); ++i) pad[i] ^= auth[i];
    SHA1_Init(state);
    SHA1_Update(state, pad, sizeof pad);
  }
  return true;
}

size_t SrtcpContext::open(uint8_t* d, size_t size, uint32_t* index) {
  if (!s_->enc || !is_rtcp(d, size) || size < 8 + 4 + tag_) return 0;
  const size_t end = size - 4 - tag_;  // the RTCP packet's end
  const uint32_t ssrc = be32(d + 4);
  if (!gcm_) {
    // RFC 3711 §3.4: … ‖ E ‖ index ‖ tag; the tag covers everything before it.
    uint8_t tag[10];
    s_->Hmac(d, size - 10, tag);
    if (CRYPTO_memcmp(tag, d + size - 10, 10) != 0) return 0;
    const uint32_t e_index = be32(d + end);
    *index = e_index & 0x7fffffff;
    if ((e_index >> 31) && !s_->Ctr(d + 8, end - 8, ssrc, *index)) return 0;
    return end;
  }
  // RFC 7714 §9.2: header (8) ‖ encrypted ‖ tag (16) ‖ E ‖ index; AAD = header ‖ E ‖ index when
  // encrypted, else everything before the tag ‖ E ‖ index (§17).
  const uint32_t e_index = be32(d + size - 4);
  *index = e_index & 0x7fffffff;
  const bool encrypted = (e_index >> 31) != 0;
  uint8_t iv[12];
  s_->GcmIv(ssrc, *index, iv);
  EVP_CIPHER_CTX* c = s_->dec;
  int outl = 0;
  if (EVP_DecryptInit_ex(c, nullptr, nullptr, nullptr, iv) != 1) return 0;
  if (EVP_DecryptUpdate(c, nullptr, &outl, d, static_cast<int>(encrypted ? 8 : end)) != 1) return 0;
  if (EVP_DecryptUpdate(c, nullptr, &outl, d + size - 4, 4) != 1) return 0;
  if (encrypted && end > 8 && EVP_DecryptUpdate(c, d + 8, &outl, d + 8, static_cast<int>(end - 8)) != 1) return 0;
  if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, d + end) != 1) return 0;
  uint8_t scratch[16];
  if (EVP_DecryptFinal_ex(c, scratch, &outl) != 1) return 0;
  return end;
}

size_t SrtcpContext::protect(uint8_t* d, size_t size, uint32_t index) {
  if (!s_->enc || size < 8) return 0;
  index &= 0x7fffffff;
  const uint32_t ssrc = be32(d + 4);
  if (!gcm_) {
    if (!s_->Ctr(d + 8, size - 8, ssrc, index)) return 0;
    put32(d + size, 0x80000000u | index);
    s_->Hmac(d, size + 4, d + size + 4);
    return size + 14;
  }
  uint8_t iv[12], e_index[4];
  s_->GcmIv(ssrc, index, iv);
  put32(e_index, 0x80000000u | index);
  EVP_CIPHER_CTX* c = s_->enc;
  int outl = 0;
  if (EVP_EncryptInit_ex(c, nullptr, nullptr, nullptr, iv) != 1) return 0;
  if (EVP_EncryptUpdate(c, nullptr, &outl, d, 8) != 1 || EVP_EncryptUpdate(c, nullptr, &outl, e_index, 4) != 1) return 0;
  if (size > 8 && EVP_EncryptUpdate(c, d + 8, &outl, d + 8, static_cast<int>(size - 8)) != 1) return 0;
  uint8_t scratch[16];
  if (EVP_EncryptFinal_ex(c, scratch, &outl) != 1) return 0;
  if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, d + size) != 1) return 0;
  std::memcpy(d + size + 16, e_index, 4);
  return size + 20;
}

}  // namespace skylark::io
