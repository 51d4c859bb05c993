// Bounds-checked big/little-endian byte reader and writers over caller-owned memory.
//
//   ByteReader r(data, size);            // never reads past `size`
//   uint32_t len = r.be24();             // on underrun: returns 0, sets a sticky failure
//   if (!r.ok()) ...                     // check once after a group of reads
//
//   ByteWriter w(buf, cap);              // fixed buffer (size first, then write): sticky overflow
//   VecWriter  v(vec);                   // appends to a std::vector<uint8_t>
//
// Plain C++20, header-only, no exceptions, no allocation (VecWriter grows the caller's vector).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

namespace skylark::util {

/** Read-only view over bytes with a cursor. All reads are bounds-checked; an underrun makes the
 *  reader fail (sticky): it then returns zeros/empty spans and `ok()` stays false. */
class ByteReader {
 public:
  ByteReader() = default;
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  explicit ByteReader(std::span<const uint8_t> s) : data_(s.data()), size_(s.size()) {}

  bool ok() const { return ok_; }
  size_t pos() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }
  bool empty() const { return pos_ >= size_; }
  const uint8_t* cursor() const { return data_ + pos_; }
  /** True when `n` more bytes can be read (does not fail the reader). */
  bool has(size_t n) const { return ok_ && n <= size_ - pos_; }

  /** Next byte without consuming it (0 and no failure if at the end). */
  uint8_t peek_u8() const { return has(1) ? data_[pos_] : 0; }

  uint8_t u8() { return take(1) ? data_[pos_ - 1] : 0; }
  uint16_t be16() { return static_cast<uint16_t>(be(2)); }
  uint32_t be24() { return static_cast<uint32_t>(be(3)); }
  uint32_t be32() { return static_cast<uint32_t>(be(4)); }
  uint64_t be64() { return be(8); }
  uint16_t le16() { return static_cast<uint16_t>(le(2)); }
  uint32_t le32() { return static_cast<uint32_t>(le(4)); }
  /** IEEE-754 double, big-endian (AMF0 number). */
  double f64be() {
    uint64_t bits = be(8);
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  /** `n` bytes as a span pointing into the input (no copy); empty span + failure on underrun. */
  std::span<const uint8_t> bytes(size_t n) {
    if (!take(n)) return {};
    return {data_ + pos_ - n, n};
  }
  /** `n` bytes as a string_view pointing into the input (no copy). */
  std::string_view str(size_t n) {
    auto b = bytes(n);
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  bool skip(size_t n) { return take(n); }
  /** Marks the reader failed (e.g. a semantic check on a value just read). */
  void fail() { ok_ = false; }

 private:
  bool take(size_t n) {
    if (!has(n)) { ok_ = false; return false; }
    pos_ += n;
    return true;
  }
  uint64_t be(size_t n) {
    if (!take(n)) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | data_[pos_ - n + i];
    return v;
  }
  uint64_t le(size_t n) {
    if (!take(n)) return 0;
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | data_[pos_ - n + i];
    return v;
  }

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t pos_ = 0;
  bool ok_ = true;
};

/** Shared put_* methods; `Derived` provides `uint8_t* reserve(size_t n)` (nullptr = no room). */
template <class Derived>
class WriterBase {
 public:
  void u8(uint8_t v) { if (auto* p = self().reserve(1)) p[0] = v; }
  void be16(uint16_t v) { put_be(v, 2); }
  void be24(uint32_t v) { put_be(v, 3); }
  void be32(uint32_t v) { put_be(v, 4); }
  void be64(uint64_t v) { put_be(v, 8); }
  void le16(uint16_t v) { put_le(v, 2); }
  void le32(uint32_t v) { put_le(v, 4); }
  /** IEEE-754 double, big-endian (AMF0 number). */
  void f64be(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    put_be(bits, 8);
  }
  void bytes(const void* src, size_t n) {
    if (n == 0) return;
    if (auto* p = self().reserve(n)) std::memcpy(p, src, n);
  }
  void bytes(std::span<const uint8_t> s) { bytes(s.data(), s.size()); }
  void str(std::string_view s) { bytes(s.data(), s.size()); }
  /** `n` copies of `v` (e.g. 0xFF stuffing). */
  void fill(uint8_t v, size_t n) {
    if (n == 0) return;
    if (auto* p = self().reserve(n)) std::memset(p, v, n);
  }

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
  void put_be(uint64_t v, size_t n) {
    if (auto* p = self().reserve(n))
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * (n - 1 - i)));
  }
  void put_le(uint64_t v, size_t n) {
    if (auto* p = self().reserve(n))
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
  }
};

/** Writes into a fixed, caller-owned buffer of `cap` bytes. Overflow writes nothing more and makes
 *  the writer fail (sticky): compute the size first, allocate once, write, then assert `ok()`. */
class ByteWriter : public WriterBase<ByteWriter> {
 public:
  ByteWriter(uint8_t* buf, size_t cap) : buf_(buf), cap_(cap) {}
  explicit ByteWriter(std::span<uint8_t> s) : buf_(s.data()), cap_(s.size()) {}
  bool ok() const { return ok_; }
  size_t size() const { return pos_; }
  size_t capacity() const { return cap_; }
  size_t remaining() const { return cap_ - pos_; }
  uint8_t* data() { return buf_; }
  /** Overwrites bytes already written at `at` (e.g. a length field patched afterwards). */
  void patch_be16(size_t at, uint16_t v) {
    if (at + 2 > pos_) { ok_ = false; return; }
    buf_[at] = static_cast<uint8_t>(v >> 8);
    buf_[at + 1] = static_cast<uint8_t>(v);
  }
  uint8_t* reserve(size_t n) {
    if (!ok_ || n > cap_ - pos_) { ok_ = false; return nullptr; }
    uint8_t* p = buf_ + pos_;
    pos_ += n;
    return p;
  }

 private:
  uint8_t* buf_;
  size_t cap_;
  size_t pos_ = 0;
  bool ok_ = true;
};

/** Appends to a caller-owned std::vector<uint8_t> (which may already hold bytes). */
class VecWriter : public WriterBase<VecWriter> {
 public:
  explicit VecWriter(std::vector<uint8_t>& out) : out_(out) {}
  size_t size() const { return out_.size(); }
  std::vector<uint8_t>& vec() { return out_; }
  uint8_t* reserve(size_t n) {
    size_t at = out_.size();
    out_.resize(at + n);
    return out_.data() + at;
  }

 private:
  std::vector<uint8_t>& out_;
};

}  // namespace skylark::util
