// RTP receive for WHIP (native/core/rtp): demultiplexing (RFC 7983 §7), the SRTP packet's header,
// padding, the rollover counter (RFC 3711 §3.3.1), receiver statistics (RFC 3550 §A.3, §A.8) and
// the Opus jitter buffer (the semantics of src/live/ingest/rtp-jitter.ts).
#include <algorithm>
#include <cmath>
#include <vector>

#include "check.h"
#include "core/rtp/receive.h"

using namespace skylark::rtp;

namespace {
struct Out {
  uint64_t samples;
  std::vector<uint8_t> data;
  bool filled;
};

// A 20 ms CELT fullband Opus packet (TOC config 31, code 0) carrying `tag`.
std::vector<uint8_t> opus20(uint8_t tag) { return {0xf8, tag, 0x55}; }

struct Jitter {
  std::vector<Out> out;
  OpusJitterBuffer b;
  explicit Jitter(JitterOptions o = {60, 10000, 512})
      : b(o, [this](uint64_t s, const uint8_t* d, size_t n, bool f) { out.push_back({s, std::vector<uint8_t>(d, d + n), f}); }) {}
  void push(uint16_t seq, double now, int ts_step = 960) {
    auto p = opus20(static_cast<uint8_t>(seq));
    b.push(seq, static_cast<uint32_t>(1000 + seq * ts_step), p.data(), p.size(), now);
  }
};
}  // namespace

TEST(demux_rfc7983) {
  uint8_t rtp[12] = {0x80, 111};
  CHECK(is_rtp(rtp, sizeof rtp));
  uint8_t rtcp[12] = {0x80, 200};  // SR: payload-type field 72
  CHECK(!is_rtp(rtcp, sizeof rtcp));
  uint8_t stun[20] = {0x00, 0x01};
  CHECK(!is_rtp(stun, sizeof stun));
  uint8_t dtls[13] = {22, 0xfe, 0xfd};
  CHECK(!is_rtp(dtls, sizeof dtls));
  CHECK(!is_rtp(rtp, 11));
}

TEST(srtp_header_csrc_extension_tag) {
  // V=2, X=1, CC=1, PT 111, seq 0x1234, ts 0x01020304, SSRC 0xAABBCCDD, 1 CSRC, extension of 1 word.
  std::vector<uint8_t> p = {0x91, 0x6f, 0x12, 0x34, 1, 2, 3, 4, 0xaa, 0xbb, 0xcc, 0xdd, 0, 0, 0, 9,
                            0xbe, 0xde, 0x00, 0x01, 1, 2, 3, 4};
  RtpHeader h;
  CHECK(parse_srtp_header(p.data(), p.size(), 0, &h) == RtpStatus::kOk);
  CHECK_EQ(h.header_size, 24u);
  CHECK_EQ(h.seq, 0x1234);
  CHECK_EQ(h.timestamp, 0x01020304u);
  CHECK_EQ(h.ssrc, 0xaabbccddu);
  CHECK_EQ(h.payload_type, 111);
  // No room for a 10-byte tag after the header.
  CHECK(parse_srtp_header(p.data(), p.size(), 10, &h) == RtpStatus::kTruncated);
  // An extension length past the end.
  p[19] = 200;
  CHECK(parse_srtp_header(p.data(), p.size(), 0, &h) == RtpStatus::kTruncated);
}

TEST(padding) {
  uint8_t p[20] = {0xa0};
  p[19] = 4;
  CHECK_EQ(strip_padding(p, 12, 20), 16u);
  p[19] = 0;
  CHECK_EQ(strip_padding(p, 12, 20), 0u);
  p[19] = 9;  // runs into the header
  CHECK_EQ(strip_padding(p, 12, 20), 0u);
}

TEST(rollover_counter_rfc3711_appendix_a) {
  RolloverCounter r;
  r.reset(65530);
  CHECK_EQ(r.estimate(65531), 0);
  CHECK_EQ(r.estimate(3), 1);  // wrapped forward
  r.advance(3, 1);
  CHECK_EQ(r.roc(), 1u);
  CHECK_EQ(r.estimate(65534), 0);  // a late packet of the previous cycle
  CHECK_EQ(r.estimate(10), 1);
  RolloverCounter first;
  first.reset(5);
  CHECK_EQ(first.estimate(65533), -1);  // before the first packet's cycle: too old
}

TEST(reception_stats_loss_and_wrap) {
  ReceptionStats s;
  for (uint16_t q = 65530; q != 10; ++q) {
    if (q == 65535 || q == 2) continue;  // two lost
    s.add(q, q * 960u, q * 960.0);
  }
  ReportBlock r = s.report();
  CHECK_EQ(r.packets_lost, 2u);
  CHECK_EQ(r.highest_sequence, 65536u + 9);
  CHECK_EQ(r.fraction_lost, (2u * 256) / 16);
  CHECK_EQ(r.jitter, 0u);  // arrivals exactly on the RTP clock
  r = s.report();
  CHECK_EQ(r.fraction_lost, 0u);  // nothing new in this interval
}

TEST(jitter_in_order_passes_at_once) {
  Jitter j;
  for (uint16_t q = 0; q < 5; ++q) j.push(q, q * 20.0);
  CHECK_EQ(j.out.size(), 5u);
  CHECK_EQ(j.out[4].samples, 4u * 960);
  CHECK_EQ(j.b.size(), 0u);
  CHECK_EQ(j.b.deadline() < 0, true);
}

TEST(jitter_reorders) {
  Jitter j;
  j.push(0, 0);
  j.push(2, 40);
  CHECK_EQ(j.out.size(), 1u);
  j.push(1, 41);
  CHECK_EQ(j.out.size(), 3u);
  CHECK_EQ(j.out[1].data[1], 1);
  CHECK_EQ(j.out[2].data[1], 2);
  CHECK_EQ(j.b.stats().reordered, 1u);
  CHECK_EQ(j.b.stats().lost, 0u);
}

TEST(jitter_gives_up_after_delay_and_conceals) {
  Jitter j;
  j.push(0, 0);
  j.push(3, 60);
  CHECK(std::fabs(j.b.deadline() - 120) < 1e-9);
  j.b.flush(119);
  CHECK_EQ(j.out.size(), 1u);
  j.b.flush(120);
  // Two PLC frames (zero-length, the last TOC with code 0) then packet 3 at its place.
  CHECK_EQ(j.out.size(), 4u);
  CHECK(j.out[1].filled && j.out[2].filled);
  CHECK_EQ(j.out[1].data.size(), 1u);
  CHECK_EQ(j.out[1].data[0], 0xf8);
  CHECK_EQ(j.out[3].samples, 3u * 960);
  CHECK_EQ(j.b.stats().lost, 2u);
  CHECK_EQ(j.b.stats().filled, 2u);
  // Packet 1 arriving now is late.
  j.push(1, 130);
  CHECK_EQ(j.b.stats().late, 1u);
  j.push(3, 131);  // duplicate
  CHECK_EQ(j.b.stats().late, 2u);
}

TEST(jitter_caps_held_packets) {
  Jitter j({60, 10000, 8});
  j.push(0, 0);
  for (uint16_t q = 2; q < 40; ++q) j.push(q, 1);
  CHECK(j.b.size() <= 8u);
  CHECK_EQ(j.b.stats().lost, 1u);
}

TEST(jitter_sequence_wrap_and_restart) {
  Jitter j;
  for (uint32_t q = 65534; q < 65534 + 4; ++q) j.push(static_cast<uint16_t>(q), 0, 960);
  CHECK_EQ(j.out.size(), 4u);
  CHECK_EQ(j.out[3].samples, 3u * 960);
  j.b.restart();
  // A new source: new runs of sequence numbers and timestamps; the position goes on.
  auto p = opus20(7);
  j.b.push(100, 5, p.data(), p.size(), 10);
  CHECK_EQ(j.out.size(), 5u);
  CHECK_EQ(j.out[4].samples, 4u * 960);
}

TEST(jitter_drops_malformed_and_empty) {
  Jitter j;
  uint8_t bad[1] = {0xfb};  // code 3 without its frame-count byte
  j.b.push(0, 0, bad, 1, 0);
  j.b.push(1, 960, bad, 0, 0);
  CHECK_EQ(j.out.size(), 0u);
  CHECK_EQ(j.b.stats().received, 2u);
  CHECK_EQ(j.b.stats().late, 1u);
}

TEST(rtcp_demux_and_srtcp_trailer) {
  uint8_t sr[8 + 20 + 4 + 10] = {0x80, 200, 0, 6, 0xca, 0xfe, 0xba, 0xbe};
  CHECK(is_rtcp(sr, sizeof sr));
  CHECK(!is_rtp(sr, sizeof sr));
  uint8_t rtp[12] = {0x80, 111};
  CHECK(!is_rtcp(rtp, sizeof rtp));
  // AES-CM: … ‖ E ‖ index ‖ tag(10) (RFC 3711 §3.4).
  sr[28] = 0x80, sr[31] = 0x05;
  SrtcpTrailer t;
  CHECK(parse_srtcp_trailer(sr, sizeof sr, 10, false, &t));
  CHECK(t.encrypted);
  CHECK_EQ(t.index, 5u);
  CHECK_EQ(t.rtcp_end, 28u);
  CHECK_EQ(t.tag_at, 32u);
  // AEAD: … ‖ tag(16) ‖ E ‖ index (RFC 7714 §9.2).
  uint8_t g[8 + 20 + 16 + 4] = {0x80, 200, 0, 6};
  g[44] = 0x00, g[47] = 0x07;
  CHECK(parse_srtcp_trailer(g, sizeof g, 16, true, &t));
  CHECK(!t.encrypted);
  CHECK_EQ(t.index, 7u);
  CHECK_EQ(t.rtcp_end, 28u);
  CHECK_EQ(t.tag_at, 28u);
  CHECK(!parse_srtcp_trailer(g, 8 + 4 + 15, 16, true, &t));
}

TEST(compound_rtcp_sender_report_lsr) {
  // SR (SSRC 0x11223344, NTP 0xAABBCCDD.0xEEFF0011) then SDES: reports only, LSR = 0xCCDDEEFF.
  std::vector<uint8_t> p = {0x80, 200, 0, 6, 0x11, 0x22, 0x33, 0x44, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00, 0x11};
  p.resize(28, 0);
  p.insert(p.end(), {0x81, 202, 0, 2, 0x11, 0x22, 0x33, 0x44, 1, 2, 'a', 'b'});
  RtcpSummary s = read_sender_reports(p.data(), p.size(), 0x11223344);
  CHECK(s.valid);
  CHECK(s.reports_only);
  CHECK(s.has_sr);
  CHECK_EQ(s.lsr, 0xccddeeffu);
  // Another source's SR: no LSR taken.
  CHECK(!read_sender_reports(p.data(), p.size(), 0x99).has_sr);
  // A BYE after it: werift's.
  p.insert(p.end(), {0x81, 203, 0, 1, 0x11, 0x22, 0x33, 0x44});
  s = read_sender_reports(p.data(), p.size(), 0x11223344);
  CHECK(s.valid);
  CHECK(!s.reports_only);
  // A length running past the packet: not valid.
  p[3] = 60;
  CHECK(!read_sender_reports(p.data(), p.size(), 0x11223344).valid);
}

TEST(receiver_report_rfc3550_6_4_2) {
  ReportBlock b;
  b.fraction_lost = 25;
  b.packets_lost = 7;
  b.highest_sequence = 0x00012345;
  b.jitter = 99;
  uint8_t rr[kReceiverReportSize];
  write_receiver_report(rr, 0xaabbccdd, 0x11223344, b, 0x01020304, 0x00010000);
  const uint8_t want[kReceiverReportSize] = {0x81, 201, 0, 7,   0xaa, 0xbb, 0xcc, 0xdd, 0x11, 0x22, 0x33, 0x44, 25, 0, 0, 7,
                                             0,    1,   0x23, 0x45, 0, 0, 0, 99,         1,    2,    3,    4,    0, 1, 0, 0};
  CHECK(std::equal(rr, rr + sizeof rr, want));
  const RtcpSummary s = read_sender_reports(rr, sizeof rr, 0x11223344);
  CHECK(s.valid && s.reports_only && !s.has_sr);
}

int main() { return skylark_test::run_all(); }
