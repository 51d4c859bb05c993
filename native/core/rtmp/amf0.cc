// AMF0 decoder/encoder; see amf0.h.
#include "core/rtmp/amf0.h"

namespace skylark::rtmp {
namespace {

using util::ByteReader;
using util::Status;

class Decoder {
 public:
  Decoder(std::span<const uint8_t> data, std::vector<Amf0Node>& out) : r_(data), out_(out) {}

  Status run() {
    while (!r_.empty()) {
      Status s = value(0, {});
      if (s != Status::kOk) return s;
    }
    return Status::kOk;
  }

 private:
  Status push(Amf0Type type, std::string_view key, size_t& index) {
    if (out_.size() >= kAmf0MaxNodes) return Status::kAmf0Invalid;
    index = out_.size();
    Amf0Node n;
    n.type = type;
    n.key = key;
    out_.push_back(n);
    return Status::kOk;
  }

  // UTF-8 string with a u16 length (also property names).
  bool short_string(std::string_view& s) {
    uint16_t len = r_.be16();
    s = r_.str(len);
    return r_.ok();
  }

  // Properties until the 0x00 0x00 0x09 end marker.
  Status properties(size_t index, size_t depth) {
    uint32_t count = 0;
    for (;;) {
      std::string_view key;
      if (!short_string(key)) return Status::kAmf0Invalid;
      if (key.empty() && r_.peek_u8() == static_cast<uint8_t>(Amf0Type::kObjectEnd)) {
        r_.u8();
        break;
      }
      if (r_.empty()) return Status::kAmf0Invalid;
      Status s = value(depth + 1, key);
      if (s != Status::kOk) return s;
      ++count;
    }
    out_[index].children = count;
    out_[index].subtree = static_cast<uint32_t>(out_.size() - index);
    return Status::kOk;
  }

  Status value(size_t depth, std::string_view key) {
    if (!r_.has(1)) return Status::kAmf0Invalid;
    auto type = static_cast<Amf0Type>(r_.u8());
    size_t index = 0;
    Status s;
    switch (type) {
      case Amf0Type::kNumber:
        if ((s = push(type, key, index)) != Status::kOk) return s;
        out_[index].number = r_.f64be();
        break;
      case Amf0Type::kBoolean:
        if ((s = push(type, key, index)) != Status::kOk) return s;
        out_[index].boolean = r_.u8() != 0;
        break;
      case Amf0Type::kString:
        if ((s = push(type, key, index)) != Status::kOk) return s;
        if (!short_string(out_[index].str)) return Status::kAmf0Invalid;
        break;
      case Amf0Type::kLongString:
      case Amf0Type::kXmlDocument: {
        if ((s = push(type, key, index)) != Status::kOk) return s;
        uint32_t len = r_.be32();
        if (!r_.ok() || len > kAmf0MaxLongString) return Status::kAmf0Invalid;
        out_[index].str = r_.str(len);
        break;
      }
      case Amf0Type::kNull:
      case Amf0Type::kUndefined:
      case Amf0Type::kUnsupported:
        if ((s = push(type, key, index)) != Status::kOk) return s;
        break;
      case Amf0Type::kReference:
        if ((s = push(type, key, index)) != Status::kOk) return s;
        out_[index].number = r_.be16();
        break;
      case Amf0Type::kDate:
        if ((s = push(type, key, index)) != Status::kOk) return s;
        out_[index].number = r_.f64be();
        r_.be16();  // time zone, reserved
        break;
      case Amf0Type::kObject:
      case Amf0Type::kEcmaArray:
      case Amf0Type::kTypedObject: {
        if (depth + 1 > kAmf0MaxDepth) return Status::kAmf0TooDeep;
        if ((s = push(type, key, index)) != Status::kOk) return s;
        if (type == Amf0Type::kTypedObject && !short_string(out_[index].str)) return Status::kAmf0Invalid;
        // The ECMA count is advisory (never trusted, never used to allocate): read to the marker.
        if (type == Amf0Type::kEcmaArray) r_.be32();
        if (!r_.ok()) return Status::kAmf0Invalid;
        return properties(index, depth);
      }
      case Amf0Type::kStrictArray: {
        if (depth + 1 > kAmf0MaxDepth) return Status::kAmf0TooDeep;
        if ((s = push(type, key, index)) != Status::kOk) return s;
        uint32_t count = r_.be32();
        // Every element takes at least one byte: a count above the bytes left is a lie.
        if (!r_.ok() || count > r_.remaining()) return Status::kAmf0Invalid;
        for (uint32_t i = 0; i < count; ++i) {
          if ((s = value(depth + 1, {})) != Status::kOk) return s;
        }
        out_[index].children = count;
        out_[index].subtree = static_cast<uint32_t>(out_.size() - index);
        return Status::kOk;
      }
      default:  // object end out of place, movie clip, record set, AVM+ (AMF3), unknown
        return Status::kAmf0Invalid;
    }
    return r_.ok() ? Status::kOk : Status::kAmf0Invalid;
  }

  ByteReader r_;
  std::vector<Amf0Node>& out_;
};

}  // namespace

util::Status amf0_decode_all(std::span<const uint8_t> data, std::vector<Amf0Node>& out) {
  out.clear();
  return Decoder(data, out).run();
}

Amf0View Amf0View::get(std::string_view name) const {
  if (!is_object()) return {};
  Amf0View c = first_child();
  for (uint32_t i = 0; i < node()->children; ++i, c = c.next()) {
    if (c.key() == name) return c;
  }
  return {};
}

Amf0View amf0_root(const std::vector<Amf0Node>& nodes, size_t n) {
  size_t i = 0;
  for (; i < nodes.size() && n > 0; --n) i += nodes[i].subtree;
  return i < nodes.size() ? Amf0View(&nodes, i) : Amf0View();
}

void amf0_put_number(util::VecWriter& w, double v) {
  w.u8(static_cast<uint8_t>(Amf0Type::kNumber));
  w.f64be(v);
}
void amf0_put_bool(util::VecWriter& w, bool v) {
  w.u8(static_cast<uint8_t>(Amf0Type::kBoolean));
  w.u8(v ? 1 : 0);
}
void amf0_put_string(util::VecWriter& w, std::string_view s) {
  if (s.size() > 0xFFFF) {
    w.u8(static_cast<uint8_t>(Amf0Type::kLongString));
    w.be32(static_cast<uint32_t>(s.size()));
  } else {
    w.u8(static_cast<uint8_t>(Amf0Type::kString));
    w.be16(static_cast<uint16_t>(s.size()));
  }
  w.str(s);
}
void amf0_put_null(util::VecWriter& w) { w.u8(static_cast<uint8_t>(Amf0Type::kNull)); }
void amf0_put_undefined(util::VecWriter& w) { w.u8(static_cast<uint8_t>(Amf0Type::kUndefined)); }
void amf0_begin_object(util::VecWriter& w) { w.u8(static_cast<uint8_t>(Amf0Type::kObject)); }
void amf0_put_key(util::VecWriter& w, std::string_view key) {
  size_t n = key.size() > 0xFFFF ? 0xFFFF : key.size();
  w.be16(static_cast<uint16_t>(n));
  w.str(key.substr(0, n));
}
void amf0_end_object(util::VecWriter& w) {
  w.be16(0);
  w.u8(static_cast<uint8_t>(Amf0Type::kObjectEnd));
}

}  // namespace skylark::rtmp
