// The per-address cap key of the RTMP listener (core/util/address_group.h).
#include "check.h"

#include "core/util/address_group.h"

using skylark::util::AddressGroupV4;
using skylark::util::AddressGroupV6;

TEST(ipv4_as_is) {
  const uint8_t a[4] = {192, 0, 2, 7};
  CHECK(AddressGroupV4(a) == "192.0.2.7");
}

TEST(ipv6_grouped_by_64) {
  const uint8_t a[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, 0xaa, 0xbb, 0, 0, 0, 0, 0, 1};
  const uint8_t b[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0};
  const uint8_t c[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 3, 0xaa, 0xbb, 0, 0, 0, 0, 0, 1};
  CHECK(AddressGroupV6(a) == "2001:db8:1:2::/64");
  CHECK(AddressGroupV6(a) == AddressGroupV6(b));
  CHECK(AddressGroupV6(a) != AddressGroupV6(c));
}

TEST(ipv4_mapped_is_ipv4) {
  const uint8_t m[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  const uint8_t v4[4] = {127, 0, 0, 1};
  CHECK(AddressGroupV6(m) == AddressGroupV4(v4));
  const uint8_t loop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  CHECK(AddressGroupV6(loop6) == "0:0:0:0::/64");
}

TEST_MAIN
