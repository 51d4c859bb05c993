// AMF0 decoder/encoder: every type, round trips, and the bombs (depth, counts, node cap, truncation).
#include <cmath>

#include "check.h"
#include "rtmp_test_util.h"

using namespace skylark;
using namespace skylark::rtmp;
using rtmp_test::Amf;
using rtmp_test::Bytes;
using util::Status;

TEST(amf0_decodes_every_type) {
  Bytes b = Amf().num(1.5).boolean(true).str("hi").null().raw({0x06}).obj().key("a").num(2)
                .key("o").obj().key("x").str("y").end().end().b;
  // ECMA array (count 99, ignored), strict array [1, "s"], date, long string, reference, typed object
  b.insert(b.end(), {0x08, 0, 0, 0, 99, 0, 1, 'k', 0x01, 0x00, 0, 0, 0x09});
  b.insert(b.end(), {0x0A, 0, 0, 0, 2, 0x00, 0x3F, 0xF0, 0, 0, 0, 0, 0, 0, 0x02, 0, 1, 's'});
  b.insert(b.end(), {0x0B, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  b.insert(b.end(), {0x0C, 0, 0, 0, 3, 'l', 'o', 'n'});
  b.insert(b.end(), {0x07, 0, 4});
  b.insert(b.end(), {0x10, 0, 1, 'C', 0, 1, 'p', 0x05, 0, 0, 0x09});
  std::vector<Amf0Node> n;
  CHECK(amf0_decode_all(b, n) == Status::kOk);
  CHECK(amf0_root(n, 0).number() == 1.5);
  CHECK(amf0_root(n, 1).boolean());
  CHECK(amf0_root(n, 2).str() == "hi");
  CHECK(amf0_root(n, 3).type() == Amf0Type::kNull);
  CHECK(amf0_root(n, 4).type() == Amf0Type::kUndefined);
  Amf0View o = amf0_root(n, 5);
  CHECK(o.is_object());
  CHECK_EQ(o.child_count(), 2u);
  CHECK(o.get("a").number() == 2);
  CHECK(o.get("o").get("x").str() == "y");
  CHECK(!o.get("missing").valid());
  Amf0View ecma = amf0_root(n, 6);
  CHECK(ecma.type() == Amf0Type::kEcmaArray);
  CHECK_EQ(ecma.child_count(), 1u);
  CHECK(!ecma.get("k").boolean());
  Amf0View arr = amf0_root(n, 7);
  CHECK(arr.is_strict_array());
  CHECK_EQ(arr.child_count(), 2u);
  CHECK(arr.first_child().number() == 1.0);
  CHECK(arr.first_child().next().str() == "s");
  CHECK(amf0_root(n, 8).type() == Amf0Type::kDate);
  CHECK(amf0_root(n, 8).number() == 2.0);
  CHECK(amf0_root(n, 9).str() == "lon");
  CHECK(amf0_root(n, 10).type() == Amf0Type::kReference);
  CHECK(amf0_root(n, 11).str() == "C");
  CHECK(amf0_root(n, 11).get("p").is_null_or_undefined());
  CHECK(!amf0_root(n, 12).valid());
}

TEST(amf0_encoder_round_trips) {
  std::string big(70000, 'x');
  Bytes b = Amf().str("_result").num(-0.25).obj().key("k").str(big).key("b").boolean(false).end().b;
  std::vector<Amf0Node> n;
  CHECK(amf0_decode_all(b, n) == Status::kAmf0Invalid);  // long string above kAmf0MaxLongString
  big.resize(65536);
  b = Amf().str("_result").num(-0.25).obj().key("k").str(big).key("b").boolean(false).end().b;
  CHECK(amf0_decode_all(b, n) == Status::kOk);
  CHECK(amf0_root(n, 2).get("k").type() == Amf0Type::kLongString);
  CHECK_EQ(amf0_root(n, 2).get("k").str().size(), 65536u);
  CHECK(amf0_root(n, 1).number() == -0.25);
}

TEST(amf0_depth_limit) {
  auto nested = [](size_t depth) {
    Amf a;
    for (size_t i = 0; i < depth; ++i) { a.obj(); a.key("a"); }
    a.null();
    for (size_t i = 0; i < depth; ++i) a.end();
    return a.b;
  };
  std::vector<Amf0Node> n;
  CHECK(amf0_decode_all(nested(kAmf0MaxDepth), n) == Status::kOk);
  CHECK(amf0_decode_all(nested(kAmf0MaxDepth + 1), n) == Status::kAmf0TooDeep);
  // 100k nested strict arrays of one element: rejected at depth 17, no stack blow-up.
  Bytes deep;
  for (int i = 0; i < 100000; ++i) deep.insert(deep.end(), {0x0A, 0, 0, 0, 1});
  CHECK(amf0_decode_all(deep, n) == Status::kAmf0TooDeep);
}

TEST(amf0_counts_are_not_trusted) {
  std::vector<Amf0Node> n;
  Bytes strict = {0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x05};  // 4 billion elements, 1 byte left
  CHECK(amf0_decode_all(strict, n) == Status::kAmf0Invalid);
  CHECK(n.capacity() < 1024);
  Bytes ecma = {0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0x09};  // huge advisory count, empty
  CHECK(amf0_decode_all(ecma, n) == Status::kOk);
  CHECK_EQ(amf0_root(n, 0).child_count(), 0u);
  Bytes many(kAmf0MaxNodes + 1, 0x05);  // more nulls than the node cap
  CHECK(amf0_decode_all(many, n) == Status::kAmf0Invalid);
}

TEST(amf0_rejects_malformed) {
  std::vector<Amf0Node> n;
  CHECK(amf0_decode_all(Bytes{0x09}, n) == Status::kAmf0Invalid);        // object end alone
  CHECK(amf0_decode_all(Bytes{0x11, 0x02}, n) == Status::kAmf0Invalid);  // AMF3 switch
  CHECK(amf0_decode_all(Bytes{0x04}, n) == Status::kAmf0Invalid);        // movie clip
  CHECK(amf0_decode_all(Bytes{0x0C, 0xFF, 0xFF, 0xFF, 0xFF}, n) == Status::kAmf0Invalid);
  CHECK(amf0_decode_all(Bytes{0x03, 0, 1, 'a'}, n) == Status::kAmf0Invalid);  // key without value
  CHECK(amf0_decode_all(Bytes{}, n) == Status::kOk);
  CHECK(n.empty());
  // Every proper prefix of a command is rejected without reading past the end (ASan checks).
  Bytes full = rtmp_test::connect_cmd();
  for (size_t len = 1; len < full.size(); ++len) {
    Bytes prefix(full.begin(), full.begin() + len);
    CHECK(amf0_decode_all(prefix, n) != Status::kOk || len == 10 || len == 19 /* "connect", + number */);
  }
  CHECK(amf0_decode_all(full, n) == Status::kOk);
}

TEST_MAIN
