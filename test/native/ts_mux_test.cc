// MPEG-TS writers (native/core/mux/ts): CRC-32/MPEG-2, PAT/PMT bytes, PES header, PCR, packetizer,
// PES plan, one segment written and its packets checked; timed ID3 (Apple timed metadata): the PMT
// with its descriptors, the ID3 PES on its own PID, segments with tags demuxed back by a test reader.
#include <cstring>
#include <map>
#include <string>
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
#include "core/mux/id3/tag.h"
#include "media_test_util.h"

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

// A test demuxer: PAT → PMT (program info descriptors, each stream with its ES descriptors), then
// each PID's PES packets reassembled, in the order their first packets come. Checks sync bytes,
// continuity per PID (across the segments fed to one Demux), PES lengths and section CRCs.
struct PmtStream {
  uint8_t stream_type = 0;
  int pid = -1;
  std::vector<uint8_t> es_info;
};
struct Pmt {
  int pcr_pid = -1;
  std::vector<uint8_t> program_info;
  std::vector<PmtStream> streams;
};
struct Pes {
  int pid = -1;
  uint8_t stream_id = 0;
  uint64_t pts = 0;
  std::vector<uint8_t> payload;
  size_t packet = 0;  // index of its first TS packet in the segment
};
struct Demux {
  std::map<int, int> next_cc;
  bool ok = true;
  std::string why;
  void fail(const std::string& w) { if (ok) { ok = false; why = w; } }
  // One segment: its PMT and PES packets (PES never span segments).
  bool segment(const std::vector<uint8_t>& seg, Pmt& pmt, std::vector<Pes>& pes) {
    if (seg.size() % 188 != 0) fail("not whole packets");
    int pmt_pid = -1;
    std::map<int, size_t> open;  // pid → index in `pes` of its PES being reassembled
    for (size_t i = 0; i + 188 <= seg.size() && ok; i += 188) {
      const uint8_t* k = seg.data() + i;
      if (k[0] != 0x47) fail("sync byte");
      const int pid = ((k[1] & 0x1F) << 8) | k[2];
      const bool pusi = k[1] & 0x40;
      const int cc = k[3] & 0x0F;
      if (next_cc.count(pid) && cc != next_cc[pid]) fail("continuity counter of PID " + std::to_string(pid));
      next_cc[pid] = (cc + 1) & 15;
      size_t at = 4;
      if (k[3] & 0x20) at = 5 + k[4];
      if (at > 188) { fail("adaptation field length"); break; }
      if (pid == 0) {
        const uint8_t* sct = k + at + 1;
        pmt_pid = ((sct[10] & 0x1F) << 8) | sct[11];
        continue;
      }
      if (pid == pmt_pid) {
        const uint8_t* sct = k + at + 1;
        const size_t len = ((sct[1] & 0x0F) << 8) | sct[2];
        if (crc32_mpeg2(sct, 3 + len) != 0) fail("PMT CRC");
        pmt = {};
        pmt.pcr_pid = ((sct[8] & 0x1F) << 8) | sct[9];
        const size_t info = ((sct[10] & 0x0F) << 8) | sct[11];
        pmt.program_info.assign(sct + 12, sct + 12 + info);
        for (size_t e = 12 + info; e + 5 <= 3 + len - 4;) {
          PmtStream st;
          st.stream_type = sct[e];
          st.pid = ((sct[e + 1] & 0x1F) << 8) | sct[e + 2];
          const size_t es = ((sct[e + 3] & 0x0F) << 8) | sct[e + 4];
          st.es_info.assign(sct + e + 5, sct + e + 5 + es);
          pmt.streams.push_back(st);
          e += 5 + es;
        }
        continue;
      }
      if (pusi) {
        Pes p;
        p.pid = pid;
        p.packet = i / 188;
        open[pid] = pes.size();
        pes.push_back(p);
      }
      if (!open.count(pid)) { fail("payload before a PES start"); break; }
      auto& cur = pes[open[pid]].payload;
      cur.insert(cur.end(), k + at, k + 188);
    }
    for (auto& p : pes) {
      const auto& b = p.payload;
      if (b.size() < 14 || b[0] != 0 || b[1] != 0 || b[2] != 1) { fail("PES start code"); continue; }
      p.stream_id = b[3];
      if (size_t((b[4] << 8) | b[5]) + 6 != b.size()) fail("PES_packet_length");
      if ((b[7] & 0xC0) != 0x80 || b[8] != 5) fail("PTS only");
      p.pts = read_pts(b.data() + 9);
      p.payload.erase(p.payload.begin(), p.payload.begin() + 14);
    }
    return ok;
  }
};
}  // namespace

TEST(pmt_bytes_with_timed_id3) {
  uint8_t buf[188];
  util::ByteWriter w(buf, sizeof buf);
  write_pmt_packet(w, 0x1000, 0x0100, 0, kStreamTypeMpeg1Audio, 0x0101);
  CHECK(w.ok());
  CHECK_EQ(w.size(), 188u);
  const uint8_t* s = buf + 5;
  const size_t section_length = ((s[1] & 0x0F) << 8) | s[2];
  CHECK_EQ(section_length, 9u + 17 + 5 + 5 + 15 + 4);
  CHECK_EQ(crc32_mpeg2(s, 3 + section_length), 0u);
  CHECK_EQ(((s[8] & 0x1F) << 8) | s[9], 0x0100);  // PCR stays on the audio PID
  CHECK_EQ(((s[10] & 0x0F) << 8) | s[11], 17);     // program_info_length
  // metadata_pointer_descriptor: tag 0x25, length 15, 0xFFFF 'ID3 ' 0xFF 'ID3 ', service 0,
  // locator 0 / carriage 0 / reserved, program_number 1.
  const uint8_t pointer[] = {0x25, 15, 0xFF, 0xFF, 'I', 'D', '3', ' ', 0xFF, 'I', 'D', '3', ' ', 0x00, 0x1F, 0x00, 0x01};
  CHECK(std::memcmp(s + 12, pointer, sizeof pointer) == 0);
  const uint8_t* es = s + 12 + 17;
  CHECK_EQ(es[0], 0x03);
  CHECK_EQ(((es[1] & 0x1F) << 8) | es[2], 0x0100);
  CHECK_EQ(((es[3] & 0x0F) << 8) | es[4], 0);
  es += 5;
  CHECK_EQ(es[0], 0x15);                            // metadata in PES packets
  CHECK_EQ(((es[1] & 0x1F) << 8) | es[2], 0x0101);
  CHECK_EQ(((es[3] & 0x0F) << 8) | es[4], 15);
  // metadata_descriptor: tag 0x26, length 13, the formats, service 0, decoder_config 0, DSM-CC 0.
  const uint8_t desc[] = {0x26, 13, 0xFF, 0xFF, 'I', 'D', '3', ' ', 0xFF, 'I', 'D', '3', ' ', 0x00, 0x0F};
  CHECK(std::memcmp(es + 5, desc, sizeof desc) == 0);
  for (size_t i = 5 + 3 + section_length; i < 188; ++i) CHECK_EQ(buf[i], 0xFF);
  // Without a metadata PID: the audio-only PMT, byte for byte.
  uint8_t a[188], b[188];
  util::ByteWriter wa(a, 188), wb(b, 188);
  write_pmt_packet(wa, 0x1000, 0x0100, 5, kStreamTypeAdtsAac);
  write_pmt_packet(wb, 0x1000, 0x0100, 5, kStreamTypeAdtsAac, 0);
  CHECK(std::memcmp(a, b, 188) == 0);
}

TEST(id3_pes_header_is_private_stream_1) {
  uint8_t buf[14];
  util::ByteWriter w(buf, sizeof buf);
  write_pes_header(w, 300, 123456789, kStreamIdPrivate1);
  CHECK(w.ok());
  CHECK(buf[0] == 0 && buf[1] == 0 && buf[2] == 1 && buf[3] == 0xBD);
  CHECK_EQ((buf[4] << 8) | buf[5], 308);
  CHECK_EQ(buf[6], 0x84);  // data_alignment_indicator: the payload starts with the tag
  CHECK_EQ(read_pts(buf + 9), 123456789u);
}

TEST(plain_pes_packetizer) {
  for (size_t size : {1u, 183u, 184u, 185u, 368u, 600u}) {
    std::vector<uint8_t> pes(size);
    for (size_t i = 0; i < size; ++i) pes[i] = static_cast<uint8_t>(i * 13 + 1);
    const size_t packets = count_plain_pes_packets(size);
    CHECK_EQ(packets, (size + 183) / 184);
    std::vector<uint8_t> out(packets * 188);
    util::ByteWriter w(out.data(), out.size());
    ContinuityCounter cc;
    cc.next();
    CHECK_EQ(packetize_plain_pes(w, cc, 0x101, pes.data(), size), packets);
    CHECK(w.ok() && w.size() == out.size());
    std::vector<uint8_t> back;
    for (size_t i = 0; i < packets; ++i) {
      const uint8_t* k = &out[i * 188];
      CHECK_EQ(k[0], 0x47);
      CHECK_EQ(((k[1] & 0x1F) << 8) | k[2], 0x101);
      CHECK_EQ((k[1] & 0x40) != 0, i == 0);
      CHECK_EQ(k[3] & 0x0F, static_cast<int>((i + 1) & 15));
      size_t at = 4;
      if (k[3] & 0x20) {
        at = 5 + k[4];
        if (k[4] > 0) CHECK_EQ(k[5], 0x00);  // stuffing only: no PCR, no RAI
      }
      back.insert(back.end(), k + at, k + 188);
    }
    CHECK(back == pes);
  }
}

TEST(segment_writer_timed_id3_round_trip) {
  // MP3-like frames (stream_type 0x03, frames as they are): 38 frames of 417 bytes per segment.
  const size_t n = 38;
  std::vector<uint8_t> raw;
  std::vector<uint32_t> sizes(n, 417);
  for (size_t i = 0; i < n; ++i) raw.insert(raw.end(), 417, static_cast<uint8_t>(i));
  const auto t1 = mux::id3::now_playing_tag({"First", "A", "", ""});
  const auto t2 = mux::id3::now_playing_tag({"Second", "B", "C", "https://x.test/2"});
  const auto big = mux::id3::now_playing_tag({std::string(256, 'T'), std::string(256, 'A'), std::string(256, 'L'), ""});
  TsAudioFormat format{kStreamTypeMpeg1Audio, nullptr, true};
  FrameClock clock;
  clock.origin_pts90k = 63000;
  clock.samples_per_frame = 1152;
  clock.sample_rate = 44100;
  TsSegmentWriter writer, plain;
  Demux d;
  for (int seg = 0; seg < 4; ++seg) {
    clock.first_sample = seg * n * 1152ull;
    std::vector<TsMetadata> tags;
    if (seg == 0) tags = {{0, t1.data(), t1.size()}};
    if (seg == 1) tags = {{7, t2.data(), t2.size()}, {20, big.data(), big.size()}, {3, t1.data(), t1.size()} /* out of order: left out */,
                          {n, t1.data(), t1.size()} /* past the end: left out */};
    const std::vector<uint8_t> out = writer.write(format, AudioFrames{raw.data(), sizes.data(), n}, clock, tags.data(), tags.size());
    CHECK(!out.empty());
    Pmt pmt;
    std::vector<Pes> pes;
    CHECK(d.segment(out, pmt, pes));
    if (!d.ok) std::fprintf(stderr, "demux: %s\n", d.why.c_str());
    // Every segment's PMT declares the ID3 stream, with its descriptors.
    CHECK_EQ(pmt.pcr_pid, 0x100);
    CHECK_EQ(pmt.streams.size(), 2u);
    CHECK(pmt.program_info.size() == 17 && pmt.program_info[0] == 0x25);
    if (pmt.streams.size() == 2) {
      CHECK(pmt.streams[0].stream_type == 0x03 && pmt.streams[0].pid == 0x100);
      CHECK(pmt.streams[1].stream_type == 0x15 && pmt.streams[1].pid == 0x101);
      CHECK(pmt.streams[1].es_info.size() == 15 && pmt.streams[1].es_info[0] == 0x26 &&
            std::memcmp(&pmt.streams[1].es_info[4], "ID3 ", 4) == 0);
    }
    // Audio frames come back whole and in order; each ID3 PES comes just before the audio PES that
    // holds its frame, with that frame's PTS.
    std::vector<uint8_t> audio;
    std::vector<const Pes*> id3;
    for (size_t i = 0; i < pes.size(); ++i) {
      if (pes[i].pid == 0x100) {
        CHECK_EQ(pes[i].stream_id, 0xC0);
        audio.insert(audio.end(), pes[i].payload.begin(), pes[i].payload.end());
        continue;
      }
      CHECK_EQ(pes[i].pid, 0x101);
      CHECK_EQ(pes[i].stream_id, 0xBD);
      id3.push_back(&pes[i]);
      size_t a = i + 1;
      while (a < pes.size() && pes[a].pid != 0x100) ++a;
      CHECK(a < pes.size() && pes[a].pts <= pes[i].pts && pes[i].pts - pes[a].pts < kMaxPesDurationMs * 90);
      if (a + 1 < pes.size()) CHECK(pes[a + 1].pts > pes[i].pts);
    }
    CHECK(audio == raw);
    const size_t want = seg == 0 ? 1 : seg == 1 ? 2 : 0;
    CHECK_EQ(id3.size(), want);
    if (seg == 0 && id3.size() == 1) {
      CHECK_EQ(id3[0]->pts, clock.pts_of(0));
      CHECK(id3[0]->payload == t1);
      CHECK_EQ(id3[0]->packet, 2u);  // right after PAT and PMT
    }
    if (seg == 1 && id3.size() == 2) {
      CHECK_EQ(id3[0]->pts, clock.pts_of(7));
      CHECK(id3[0]->payload == t2);
      CHECK_EQ(id3[1]->pts, clock.pts_of(20));
      CHECK(id3[1]->payload == big);  // a tag over several packets reassembles
      const media_test::Id3Tag t = media_test::read_id3(id3[0]->payload.data(), id3[0]->payload.size());
      CHECK(t.ok && t.find("WXXX") && t.find("WXXX")->url == "https://x.test/2");
    }
    // The audio is packetized the same with or without tags: without the ID3 PID's packets, each
    // segment is byte for byte the one written without tags (and the counters agree throughout).
    const std::vector<uint8_t> ref = plain.write(format, AudioFrames{raw.data(), sizes.data(), n}, clock);
    std::vector<uint8_t> stripped;
    for (size_t i = 0; i < out.size(); i += 188)
      if ((((out[i + 1] & 0x1F) << 8) | out[i + 2]) != 0x101) stripped.insert(stripped.end(), &out[i], &out[i] + 188);
    CHECK(stripped == ref);
    CHECK_EQ(out == ref, want == 0);
  }
  // The ID3 PID's counter went on across segments (each step checked by Demux): next = packets % 16.
  const size_t id3_packets = count_plain_pes_packets(kPesHeaderSize + t1.size()) +
                             count_plain_pes_packets(kPesHeaderSize + t2.size()) +
                             count_plain_pes_packets(kPesHeaderSize + big.size());
  CHECK(big.size() > 2 * 184);
  CHECK_EQ(d.next_cc[0x101], static_cast<int>(id3_packets & 15));
}


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
