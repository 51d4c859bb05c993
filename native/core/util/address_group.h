// The key one client's connections are counted under (per-address caps): an IPv4 address as it
// is, an IPv4-mapped IPv6 address (RFC 4291 §2.5.5.2) as its IPv4 address, any other IPv6 address
// by its /64 prefix (RFC 4291 §2.5.4: a subscriber or host is routinely given a whole /64).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace skylark::util {

// `ipv4`: 4 bytes in network order.
inline std::string AddressGroupV4(const uint8_t* ipv4) {
  char key[16];
  std::snprintf(key, sizeof key, "%u.%u.%u.%u", ipv4[0], ipv4[1], ipv4[2], ipv4[3]);
  return key;
}

// `ipv6`: 16 bytes in network order.
inline std::string AddressGroupV6(const uint8_t* ipv6) {
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(ipv6, kMapped, sizeof kMapped) == 0) return AddressGroupV4(ipv6 + 12);
  char key[32];
  std::snprintf(key, sizeof key, "%x:%x:%x:%x::/64", (ipv6[0] << 8) | ipv6[1], (ipv6[2] << 8) | ipv6[3], (ipv6[4] << 8) | ipv6[5],
                (ipv6[6] << 8) | ipv6[7]);
  return key;
}

}  // namespace skylark::util
