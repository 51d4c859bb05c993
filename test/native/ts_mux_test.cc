// MPEG-TS writers (native/core/mux/ts): CRC-32/MPEG-2, PAT/PMT bytes, PES header, PCR, packetizer,
// PES plan, one segment written and its packets checked.
#include <cstring>
#include <vector>

#include "check.h"
#include "core/codec/aac.h"
#include "core/mux/ts/constants.h"
#include "core/mux/ts/crc32.h"
#include "core/mux/ts/packetizer.h"
#include "core/mux/ts/pes.h"
#include "core/mux/ts/pes_plan.h"
#include "core/mux/ts/psi.h"
#include "core/mux/ts/segment_writer.h"

using namespace skylark;
using namespace skylark::mux::ts;

namespace {
uint64_t read_pts(const uint8_t* p) {
  return (uint64_t(p[0] & 0x0E) << 29) | (uint64_t(p[1]) << 22) | (uint64_t(p[2] & 0xFE) << 14) |
         (uint64_t(p[3]) << 7) | (p[4] >> 1);
}
uint64_t read_pcr(const uint8_t* p) {
  return (uint64_t(p[0]) << 25) | (uint64_t(p[1]) << 17) | (uint64_t(p[2]) << 9) | (uint64_t(p[3]) << 1) | (p[4] >> 7);
}
}  // namespace

TEST(crc32_mpeg2_known_answer) {
  const char* s = "123456789";
  CHECK_EQ(crc32_mpeg2(reinterpret_cast<const uint8_t*>(s), 9), 0x0376E6E7u);
  CHECK_EQ(crc32_mpeg2(nullptr, 0), 0xFFFFFFFFu);
}

TEST(pat_bytes) {
  uint8_t buf[188];
  util::ByteWriter w(buf, sizeof buf);
  write_pat_packet(w, 0x1000, 0);
  CHECK(w.ok());
  CHECK_EQ(w.size(), 188u);
  // The PAT FFmpeg writes for program 1 → PMT 0x1000 (a widely seen known answer, CRC included).
  const uint8_t want[] = {0x47, 0x40, 0x00, 0x10, 0x00, 0x00, 0xB0, 0x0D, 0x00, 0x01, 0xC1, 0x00,
                          0x00, 0x00, 0x01, 0xF0, 0x00, 0x2A, 0xB1, 0x04, 0xB2};
  CHECK(std::memcmp(buf, want, sizeof want) == 0);
  for (size_t i = sizeof want; i < 188; ++i) CHECK_EQ(buf[i], 0xFF);
}

TEST(pmt_bytes_audio_only) {
  uint8_t buf[188];
  util::ByteWriter w(buf, sizeof buf);
  write_pmt_packet(w, 0x1000, 0x0100, 5);
  CHECK(w.ok());
  CHECK_EQ(buf[0], 0x47);
  CHECK_EQ(buf[1], 0x50);  // PUSI, PID 0x1000
  CHECK_EQ(buf[2], 0x00);
  CHECK_EQ(buf[3], 0x15);  // payload only, CC 5
  CHECK_EQ(buf[4], 0x00);  // pointer_field
  const uint8_t* s = buf + 5;
  CHECK_EQ(s[0], 0x02);
  const size_t section_length = ((s[1] & 0x0F) << 8) | s[2];
  CHECK_EQ(section_length, 18u);
  CHECK_EQ(((s[8] & 0x1F) << 8) | s[9], 0x0100);  // PCR_PID = audio PID
  CHECK_EQ(((s[10] & 0x0F) << 8) | s[11], 0);      // no program descriptors
  CHECK_EQ(s[12], 0x0F);                            // the one stream: ADTS AAC, no video
  CHECK_EQ(((s[13] & 0x1F) << 8) | s[14], 0x0100);
  CHECK_EQ(((s[15] & 0x0F) << 8) | s[16], 0);
  CHECK_EQ(crc32_mpeg2(s, 3 + section_length), 0u);  // CRC over section + CRC is 0
  const uint8_t want_crc[4] = {s[17], s[18], s[19], s[20]};
  const uint32_t crc = crc32_mpeg2(s, 17);
  CHECK_EQ(want_crc[0], crc >> 24);
  CHECK_EQ(want_crc[3], crc & 0xFF);
  for (size_t i = 5 + 3 + section_length; i < 188; ++i) CHECK_EQ(buf[i], 0xFF);
}

TEST(pes_header_and_pts) {
  uint8_t buf[14];
  util::ByteWriter w(buf, sizeof buf);
  const uint64_t pts = (uint64_t{1} << 33) + 0x123456789ull;  // wraps to 33 bits
  write_pes_header(w, 1000, pts);
  CHECK(w.ok());
  const uint8_t head[] = {0x00, 0x00, 0x01, 0xC0};
  CHECK(std::memcmp(buf, head, 4) == 0);
  CHECK_EQ((buf[4] << 8) | buf[5], 1008);
  CHECK_EQ(buf[6], 0x84);
  CHECK_EQ(buf[7], 0x80);
  CHECK_EQ(buf[8], 5);
  CHECK_EQ(buf[9] >> 4, 2);
  CHECK_EQ(buf[9] & 1, 1);
  CHECK_EQ(buf[11] & 1, 1);
  CHECK_EQ(buf[13] & 1, 1);
  CHECK_EQ(read_pts(buf + 9), pts & kPtsMask);
}

TEST(pcr_field) {
  uint8_t buf[6];
  util::ByteWriter w(buf, sizeof buf);
  write_pcr(w, 0x1ABCDEF01ull);
  CHECK_EQ(read_pcr(buf), 0x1ABCDEF01ull);
  CHECK_EQ(buf[4] & 0x7E, 0x7E);
  CHECK_EQ(buf[4] & 1, 0);
  CHECK_EQ(buf[5], 0);
}

TEST(packetizer_sizes_stuffing_and_pcr_spacing) {
  // 20 frames of 300 bytes, 1920 ticks apart (48 kHz), PCR interval 7080 ticks.
  std::vector<uint32_t> es(20, 300);
  std::vector<uint64_t> pts(20);
  for (size_t i = 0; i < pts.size(); ++i) pts[i] = 100000 + i * 1920;
  PesFrames f{es.data(), pts.data(), es.size()};
  const size_t pes_size = kPesHeaderSize + 20 * 300;
  std::vector<uint8_t> pes(pes_size);
  for (size_t i = 0; i < pes_size; ++i) pes[i] = static_cast<uint8_t>(i * 7);
  const size_t packets = count_pes_packets(kPesHeaderSize, f, 9000 - 1920);
  std::vector<uint8_t> out(packets * 188);
  util::ByteWriter w(out.data(), out.size());
  ContinuityCounter cc;
  PacketizeParams p;
  p.pid = 0x100;
  p.pcr_lead90k = 63000;
  p.pcr_interval90k = 9000 - 1920;
  p.random_access = true;
  CHECK_EQ(packetize_pes(w, cc, pes.data(), kPesHeaderSize, f, p), packets);
  CHECK(w.ok());
  CHECK_EQ(w.size(), out.size());
  std::vector<uint8_t> back;
  uint64_t last_pcr = 0;
  int pcrs = 0;
  for (size_t i = 0; i < packets; ++i) {
    const uint8_t* k = &out[i * 188];
    CHECK_EQ(k[0], 0x47);
    CHECK_EQ(((k[1] & 0x1F) << 8) | k[2], 0x100);
    CHECK_EQ((k[1] & 0x40) != 0, i == 0);
    CHECK_EQ(k[3] & 0x0F, static_cast<int>(i & 15));
    size_t at = 4;
    if (k[3] & 0x20) {
      const size_t len = k[4];
      if (len > 0) {
        const bool rai = (k[5] & 0x40) != 0;
        CHECK_EQ(rai, i == 0);
        if (k[5] & 0x10) {
          const uint64_t pcr = read_pcr(k + 6);
          if (pcrs > 0) CHECK(pcr > last_pcr && pcr - last_pcr <= 9000);
          last_pcr = pcr;
          ++pcrs;
        }
      }
      at = 5 + len;
    }
    back.insert(back.end(), k + at, k + 188);
  }
  CHECK(back == pes);
  CHECK(pcrs >= 2);
  CHECK_EQ(last_pcr + 63000 <= pts.back(), true);
}

TEST(incremental_packet_count_matches_layout) {
  uint32_t x = 7;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<uint32_t> es;
    std::vector<uint64_t> pts;
    const int n = 1 + trial % 20;
    for (int i = 0; i < n; ++i) {
      x = x * 1103515245 + 12345;
      es.push_back(8 + (x >> 16) % (trial % 3 == 0 ? 2000 : 400));
      pts.push_back(1000 + i * 1920ull);
    }
    const uint64_t interval = (trial % 4) * 3000;
    PesPacketCounter c;
    c.begin(kPesHeaderSize, es[0], pts[0], interval);
    CHECK_EQ(c.packets(), count_pes_packets(kPesHeaderSize, PesFrames{es.data(), pts.data(), 1}, interval));
    for (int k = 2; k <= n; ++k) {
      c.add(es[k - 1], pts[k - 1]);
      CHECK_EQ(c.packets(), count_pes_packets(kPesHeaderSize, PesFrames{es.data(), pts.data(), size_t(k)}, interval));
    }
  }
}

TEST(pes_plan_partitions_all_frames) {
  std::vector<uint32_t> es;
  std::vector<uint64_t> pts;
  for (int i = 0; i < 94; ++i) {
    es.push_back(300 + (i * 37) % 90);
    pts.push_back(i * 1920ull);
  }
  PesPlanner planner;
  std::vector<uint32_t> counts;
  planner.plan(es.data(), pts.data(), es.size(), 14, 8192, 7080, counts);
  uint32_t sum = 0;
  for (uint32_t c : counts) {
    CHECK(c >= 1 && c <= 14);
    sum += c;
  }
  CHECK_EQ(sum, 94u);
  // Never worse than the naive "14 frames per PES".
  size_t planned = 0, naive = 0;
  for (size_t f = 0, p = 0; p < counts.size(); f += counts[p++])
    planned += count_pes_packets(kPesHeaderSize, PesFrames{&es[f], &pts[f], counts[p]}, 7080);
  for (size_t f = 0; f < 94; f += 14) {
    size_t k = f + 14 <= 94 ? 14 : 94 - f;
    naive += count_pes_packets(kPesHeaderSize, PesFrames{&es[f], &pts[f], k}, 7080);
  }
  CHECK(planned <= naive);
  planner.plan(es.data(), pts.data(), 0, 14, 8192, 7080, counts);
  CHECK(counts.empty());
}

TEST(segment_writer_continuity_across_segments) {
  codec::AudioSpecificConfig asc;
  const uint8_t cfg[] = {0x11, 0x90};
  CHECK(codec::parse_audio_specific_config(cfg, 2, &asc) == codec::AscStatus::kOk);
  std::vector<uint8_t> raw(94 * 341, 0x21);
  std::vector<uint32_t> sizes(94, 341);
  TsSegmentWriter writer;
  FrameClock clock;
  clock.origin_pts90k = 63000;
  int next_cc[0x2000];
  for (int& c : next_cc) c = -1;
  for (int seg = 0; seg < 3; ++seg) {
    clock.first_sample = seg * 94ull * 1024;
    std::vector<uint8_t> out = writer.write(asc, AacFrames{raw.data(), sizes.data(), sizes.size()}, clock);
    CHECK(!out.empty());
    CHECK_EQ(out.size() % 188, 0u);
    // Overhead over the raw AAC bytes: < 11 % (nginx-rtmp's 11 % is the bar).
    const double overhead = (double(out.size()) / raw.size() - 1) * 100;
    if (seg == 0) std::printf("segment of 94 x 341-byte frames: %zu bytes, overhead %.2f %%\n", out.size(), overhead);
    CHECK(overhead < 11.0);
    CHECK_EQ(((out[1] & 0x1F) << 8) | out[2], 0);           // PAT first
    CHECK_EQ(((out[189] & 0x1F) << 8) | out[190], 0x1000);  // then PMT
    CHECK_EQ(out[376 + 5] & 0x50, 0x50);                    // first audio packet: RAI + PCR
    for (size_t i = 0; i < out.size(); i += 188) {
      CHECK_EQ(out[i], 0x47);
      const int pid = ((out[i + 1] & 0x1F) << 8) | out[i + 2];
      const int cc = out[i + 3] & 0x0F;
      if (next_cc[pid] >= 0) CHECK_EQ(cc, next_cc[pid]);
      next_cc[pid] = (cc + 1) & 15;
    }
  }
}

TEST_MAIN
