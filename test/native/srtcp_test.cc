// SRTCP (native/io/srtcp.h): open and protect against published vectors — libsrtp's SRTCP test
// packets (test/srtp_driver.c `srtp_validate`, `srtp_validate_gcm`: SSRC 0xcafebabe, SRTCP index 1)
// with session keys derived from their master keys by the SRTP key derivation (RFC 3711 §4.3.1,
// itself checked against RFC 3711 Appendix B.3) — and the rejections: a flipped bit anywhere, a
// truncated packet, a packet that is not RTCP.
#include <openssl/evp.h>

#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "io/srtcp.h"

using skylark::io::SrtcpContext;
using Bytes = std::vector<uint8_t>;

namespace {
Bytes hex(const char* s) {
  Bytes out;
  for (size_t i = 0; s[i] && s[i + 1]; i += 2) {
    if (s[i] == ' ') { --i; continue; }
    out.push_back(static_cast<uint8_t>(std::stoi(std::string(s + i, 2), nullptr, 16)));
  }
  return out;
}

Bytes aes_ecb(const Bytes& key, const Bytes& block) {
  Bytes out(16 + 16);
  int n = 0, m = 0;
  EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
  EVP_EncryptInit_ex(c, EVP_aes_128_ecb(), nullptr, key.data(), nullptr);
  EVP_CIPHER_CTX_set_padding(c, 0);
  EVP_EncryptUpdate(c, out.data(), &n, block.data(), 16);
  EVP_EncryptFinal_ex(c, out.data() + n, &m);
  EVP_CIPHER_CTX_free(c);
  out.resize(16);
  return out;
}

// RFC 3711 §4.3.1 with kdr 0: `len` bytes of AES-CM key stream at x = label‖0⁴⁸ XOR salt (14 bytes, zero padded).
Bytes kdf(const Bytes& master_key, Bytes salt, uint8_t label, size_t len) {
  salt.resize(14, 0);
  salt[7] ^= label;
  Bytes out;
  for (uint16_t j = 0; out.size() < len; ++j) {
    Bytes block = salt;
    block.push_back(static_cast<uint8_t>(j >> 8));
    block.push_back(static_cast<uint8_t>(j));
    Bytes ks = aes_ecb(master_key, block);
    out.insert(out.end(), ks.begin(), ks.end());
  }
  out.resize(len);
  return out;
}

// The SRTCP session keys (labels 3, 4, 5) of a master key and salt.
bool srtcp(SrtcpContext& ctx, int profile, const Bytes& key, const Bytes& salt) {
  std::string error;
  return ctx.init(profile, kdf(key, salt, 3, 16), kdf(key, salt, 5, 14), kdf(key, salt, 4, 20), &error);
}

const Bytes kCmKey = hex("e1f97a0d3e018be0d64fa32c06de4139"), kCmSalt = hex("0ec675ad498afeebb6960b3aabe6");
const Bytes kRtcp = hex("81c8000bcafebabeabababababababababababababababab");
const Bytes kCmSrtcp = hex("81c8000bcafebabe7128035be487b9bdbef89041f977a5a880000001993e08cd54d6c1230798");
const Bytes kGcmKey = hex("000102030405060708090a0b0c0d0e0f"), kGcmSalt = hex("a0a1a2a3a4a5a6a7a8a9aaab");
const Bytes kGcmSrtcp = hex("81c8000bcafebabec98b8b5df0392a55852b6c21ac8e7025c52c6fbea2b3b446ea31123ba88ce61e80000001");
}  // namespace

TEST(kdf_rfc3711_appendix_b3) {
  const Bytes key = hex("E1F97A0D3E018BE0D64FA32C06DE4139"), salt = hex("0EC675AD498AFEEBB6960B3AABE6");
  CHECK(kdf(key, salt, 0, 16) == hex("C61E7A93744F39EE10734AFE3FF7A087"));
  CHECK(kdf(key, salt, 2, 14) == hex("30CBBC08863D8C85D49DB34A9AE1"));
  CHECK(kdf(key, salt, 1, 20) == hex("CEBE321F6FF7716B6FD4AB49AF256A156D38BAA4"));
}

TEST(aes_cm_protect_matches_libsrtp) {
  SrtcpContext ctx;
  CHECK(srtcp(ctx, 0x0001, kCmKey, kCmSalt));
  Bytes b = kRtcp;
  b.resize(kRtcp.size() + ctx.overhead());
  CHECK_EQ(ctx.protect(b.data(), kRtcp.size(), 1), kCmSrtcp.size());
  CHECK(b == kCmSrtcp);
}

TEST(aes_cm_open_matches_libsrtp) {
  SrtcpContext ctx;
  CHECK(srtcp(ctx, 0x0001, kCmKey, kCmSalt));
  Bytes b = kCmSrtcp;
  uint32_t index = 0;
  CHECK_EQ(ctx.open(b.data(), b.size(), &index), kRtcp.size());
  CHECK_EQ(index, 1u);
  CHECK(Bytes(b.begin(), b.begin() + kRtcp.size()) == kRtcp);
}

TEST(gcm_protect_and_open_match_libsrtp) {
  SrtcpContext ctx;
  CHECK(srtcp(ctx, 0x0007, kGcmKey, kGcmSalt));
  Bytes b = kRtcp;
  b.resize(kRtcp.size() + ctx.overhead());
  CHECK_EQ(ctx.protect(b.data(), kRtcp.size(), 1), kGcmSrtcp.size());
  CHECK(b == kGcmSrtcp);
  uint32_t index = 0;
  Bytes c = kGcmSrtcp;
  CHECK_EQ(ctx.open(c.data(), c.size(), &index), kRtcp.size());
  CHECK_EQ(index, 1u);
  CHECK(Bytes(c.begin(), c.begin() + kRtcp.size()) == kRtcp);
}

TEST(forged_truncated_and_foreign_packets_are_rejected) {
  for (int profile : {0x0001, 0x0007}) {
    SrtcpContext ctx;
    CHECK(profile == 1 ? srtcp(ctx, 1, kCmKey, kCmSalt) : srtcp(ctx, 7, kGcmKey, kGcmSalt));
    const Bytes good = profile == 1 ? kCmSrtcp : kGcmSrtcp;
    uint32_t index = 0;
    for (size_t i = 0; i < good.size(); ++i) {
      for (uint8_t bit : {uint8_t{0x01}, uint8_t{0x80}}) {
        Bytes b = good;
        b[i] ^= bit;
        CHECK_EQ(ctx.open(b.data(), b.size(), &index), 0u);
      }
    }
    for (size_t n = 0; n < good.size(); ++n) {
      Bytes b(good.begin(), good.begin() + n);
      CHECK_EQ(ctx.open(b.data(), b.size(), &index), 0u);
    }
    Bytes stun = good;
    stun[0] = 0x00;
    CHECK_EQ(ctx.open(stun.data(), stun.size(), &index), 0u);
  }
}

TEST(round_trip_many_indexes) {
  for (int profile : {0x0001, 0x0007}) {
    SrtcpContext ctx;
    CHECK(srtcp(ctx, profile, kCmKey, kCmSalt));
    for (uint32_t index : {0u, 1u, 65535u, 65536u, 0x7fffffffu}) {
      Bytes plain = hex("81c90007deadbeef0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c");
      Bytes b = plain;
      b.resize(plain.size() + ctx.overhead());
      const size_t n = ctx.protect(b.data(), plain.size(), index);
      CHECK_EQ(n, plain.size() + ctx.overhead());
      uint32_t got = 0;
      CHECK_EQ(ctx.open(b.data(), n, &got), plain.size());
      CHECK_EQ(got, index);
      CHECK(Bytes(b.begin(), b.begin() + plain.size()) == plain);
    }
  }
}

TEST(keys_of_the_wrong_size_are_refused) {
  SrtcpContext a, b, c;
  std::string error;
  CHECK(!a.init(0x0002, Bytes(16), Bytes(14), Bytes(20), &error));
  CHECK(!b.init(0x0001, Bytes(16), Bytes(12), Bytes(20), &error));
  CHECK(!c.init(0x0007, Bytes(32), Bytes(12), Bytes(), &error));
  uint32_t index = 0;
  Bytes p = kCmSrtcp;
  CHECK_EQ(c.open(p.data(), p.size(), &index), 0u);
}

int main() { return skylark_test::run_all(); }
