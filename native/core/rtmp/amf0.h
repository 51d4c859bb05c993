// AMF0 (Action Message Format 0, Adobe AMF0 spec, 2006): decoder into a flat node list, and an
// encoder for the handful of shapes the RTMP server sends.
//
// Decoding never allocates from a count in the input: strict-array and ECMA-array counts are only
// checked against the bytes left; objects end at their 0x00 0x00 0x09 marker. Nesting is limited
// to kMaxDepth, the number of nodes to kMaxNodes, strings point into the input (no copy).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/util/bytes.h"
#include "core/util/status.h"

namespace skylark::rtmp {

/** AMF0 type markers (AMF0 spec §2.1). */
enum class Amf0Type : uint8_t {
  kNumber = 0x00,
  kBoolean = 0x01,
  kString = 0x02,
  kObject = 0x03,
  kMovieClip = 0x04,  // reserved, rejected
  kNull = 0x05,
  kUndefined = 0x06,
  kReference = 0x07,  // kept as a leaf (index in `number`), never resolved
  kEcmaArray = 0x08,
  kObjectEnd = 0x09,  // only valid as a terminator, never a node
  kStrictArray = 0x0A,
  kDate = 0x0B,       // `number` = ms since epoch (the time-zone field is read and dropped)
  kLongString = 0x0C,
  kUnsupported = 0x0D,
  kRecordSet = 0x0E,  // reserved, rejected
  kXmlDocument = 0x0F,
  kTypedObject = 0x10,  // `str` = class name, children = properties
  kAvmPlus = 0x11,    // switch to AMF3: rejected
};

inline constexpr size_t kAmf0MaxDepth = 16;           // containers nested deeper → amf0_too_deep
inline constexpr size_t kAmf0MaxNodes = 8192;         // values per decode → amf0_invalid
inline constexpr size_t kAmf0MaxLongString = 65536;   // long string / XML bytes → amf0_invalid

/** One decoded value. Containers (object, ECMA array, strict array, typed object) are followed in
 *  the node list by their children, pre-order; `subtree` counts the node and all its descendants,
 *  so the next sibling of node i is i + nodes[i].subtree. `key` is the property name when the
 *  parent is an object/ECMA array/typed object. Strings and keys point into the decoded input. */
struct Amf0Node {
  Amf0Type type = Amf0Type::kNull;
  bool boolean = false;
  uint32_t children = 0;
  uint32_t subtree = 1;
  double number = 0;
  std::string_view key;
  std::string_view str;
};

/** Decodes every top-level value in `data` into `out` (cleared first). Top-level values are the
 *  roots: node 0, then node 0 + subtree, and so on. Returns kOk, kAmf0Invalid or kAmf0TooDeep. */
util::Status amf0_decode_all(std::span<const uint8_t> data, std::vector<Amf0Node>& out);

/** Read-only cursor over a decoded node list. An invalid view (`!valid()`) answers every question
 *  with "no"/empty, so lookups can be chained without checks. */
class Amf0View {
 public:
  Amf0View() = default;
  Amf0View(const std::vector<Amf0Node>* nodes, size_t index) : nodes_(nodes), index_(index) {}

  bool valid() const { return nodes_ != nullptr && index_ < nodes_->size(); }
  const Amf0Node* node() const { return valid() ? &(*nodes_)[index_] : nullptr; }
  Amf0Type type() const { return valid() ? node()->type : Amf0Type::kUndefined; }
  bool is_number() const { return valid() && type() == Amf0Type::kNumber; }
  bool is_string() const {
    return valid() && (type() == Amf0Type::kString || type() == Amf0Type::kLongString);
  }
  bool is_boolean() const { return valid() && type() == Amf0Type::kBoolean; }
  bool is_null_or_undefined() const {
    return valid() && (type() == Amf0Type::kNull || type() == Amf0Type::kUndefined);
  }
  /** Object, ECMA array or typed object: has named properties. */
  bool is_object() const {
    return valid() && (type() == Amf0Type::kObject || type() == Amf0Type::kEcmaArray ||
                       type() == Amf0Type::kTypedObject);
  }
  bool is_strict_array() const { return valid() && type() == Amf0Type::kStrictArray; }

  double number() const { return valid() ? node()->number : 0; }
  bool boolean() const { return valid() && node()->boolean; }
  std::string_view str() const { return valid() ? node()->str : std::string_view{}; }
  std::string_view key() const { return valid() ? node()->key : std::string_view{}; }
  uint32_t child_count() const { return valid() ? node()->children : 0; }

  /** First child (or invalid). */
  Amf0View first_child() const {
    return valid() && node()->children > 0 ? Amf0View(nodes_, index_ + 1) : Amf0View();
  }
  /** Next sibling within the same parent or root list (the caller bounds the walk by a count). */
  Amf0View next() const { return valid() ? Amf0View(nodes_, index_ + node()->subtree) : Amf0View(); }
  /** Property `name` of an object-like value (first match), or invalid. */
  Amf0View get(std::string_view name) const;

 private:
  const std::vector<Amf0Node>* nodes_ = nullptr;
  size_t index_ = 0;
};

/** The `n`-th root value of a decoded list, or an invalid view. */
Amf0View amf0_root(const std::vector<Amf0Node>& nodes, size_t n);

// ---- encoder (appends to a VecWriter) ----
void amf0_put_number(util::VecWriter& w, double v);
void amf0_put_bool(util::VecWriter& w, bool v);
/** String or, above 65535 bytes, long string. */
void amf0_put_string(util::VecWriter& w, std::string_view s);
void amf0_put_null(util::VecWriter& w);
void amf0_put_undefined(util::VecWriter& w);
void amf0_begin_object(util::VecWriter& w);
/** A property name inside an object (the value follows with one of the put functions). */
void amf0_put_key(util::VecWriter& w, std::string_view key);
void amf0_end_object(util::VecWriter& w);

}  // namespace skylark::rtmp
