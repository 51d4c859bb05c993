// MP3 frame headers (MPEG-1/2/2.5 Layer III table, padding, frame length, bad fields), the MP3 frame
// splitter (partial frames, several frames per chunk, garbage and false syncs, the FLV fixture
// re-chunked across tag boundaries), OpusHead (RFC 7845 §5.1, good and bad), Opus TOC durations
// (RFC 6716 §3.1, every config and code) and the FLV/E-RTMP tag probe.
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "core/codec/flv_audio.h"
#include "core/codec/mp3.h"
#include "core/codec/opus.h"
#include "media_test_util.h"

using namespace skylark::codec;

namespace {

Mp3Header header_of(std::vector<uint8_t> b) {
  Mp3Header h;
  CHECK(parse_mp3_header(b.data(), b.size(), &h) == Mp3Status::kOk);
  return h;
}

// A synthetic Layer III frame: the header, then payload bytes that never form a sync word.
std::vector<uint8_t> make_frame(uint8_t b1, uint8_t b2, uint8_t b3, uint8_t fill) {
  Mp3Header h;
  const uint8_t hdr[4] = {0xFF, b1, b2, b3};
  if (parse_mp3_header(hdr, 4, &h) != Mp3Status::kOk) return {};
  std::vector<uint8_t> f(h.frame_size, fill);
  std::memcpy(f.data(), hdr, 4);
  for (size_t i = 4; i < f.size(); ++i) f[i] = static_cast<uint8_t>((fill + i) % 0xF0);
  return f;
}

}  // namespace

TEST(mp3_header_mpeg1_values) {
  Mp3Header h = header_of({0xFF, 0xFB, 0x90, 0x64});  // MPEG-1 L3, 128 kbps, 44.1 kHz, joint stereo
  CHECK(h.version == MpegVersion::k1);
  CHECK_EQ(h.bitrate_kbps, 128u);
  CHECK_EQ(h.sample_rate, 44100u);
  CHECK_EQ(h.channels(), 2u);
  CHECK_EQ(h.samples_per_frame, 1152u);
  CHECK_EQ(h.frame_size, 417u);  // 144 * 128000 / 44100 = 417.96
  CHECK(!h.crc);
  CHECK_EQ(h.ts_stream_type(), 0x03);
  CHECK_EQ(h.object_type_indication(), 0x6B);
  CHECK_EQ(header_of({0xFF, 0xFB, 0x92, 0x64}).frame_size, 418u);  // padding
  CHECK_EQ(header_of({0xFF, 0xFB, 0xE4, 0xC4}).frame_size, 960u);  // 320 kbps 48 kHz
  CHECK_EQ(header_of({0xFF, 0xFB, 0xE4, 0xC4}).channels(), 1u);     // mono
  CHECK_EQ(header_of({0xFF, 0xFB, 0x18, 0x00}).frame_size, 144u);  // 32 kbps 32 kHz
  CHECK_EQ(header_of({0xFF, 0xFB, 0xEA, 0x00}).frame_size, 1441u); // 320 kbps 32 kHz + padding: the largest
  CHECK(header_of({0xFF, 0xFA, 0x90, 0x00}).crc);                   // protection_bit 0
}

TEST(mp3_header_lsf_values) {
  Mp3Header h = header_of({0xFF, 0xF3, 0x40, 0xC0});  // MPEG-2 L3, 32 kbps, 22.05 kHz, mono
  CHECK(h.version == MpegVersion::k2);
  CHECK_EQ(h.sample_rate, 22050u);
  CHECK_EQ(h.bitrate_kbps, 32u);
  CHECK_EQ(h.samples_per_frame, 576u);
  CHECK_EQ(h.frame_size, 104u);  // 72 * 32000 / 22050 = 104.49
  CHECK_EQ(h.channels(), 1u);
  CHECK_EQ(h.ts_stream_type(), 0x04);
  CHECK_EQ(h.object_type_indication(), 0x69);
  CHECK_EQ(header_of({0xFF, 0xF3, 0xE8, 0x00}).frame_size, 720u);  // 160 kbps 16 kHz
  Mp3Header h25 = header_of({0xFF, 0xE3, 0x18, 0x00});               // MPEG-2.5, 8 kbps, 8 kHz
  CHECK(h25.version == MpegVersion::k25);
  CHECK_EQ(h25.sample_rate, 8000u);
  CHECK_EQ(h25.frame_size, 72u);
  CHECK_EQ(header_of({0xFF, 0xE3, 0x14, 0x00}).sample_rate, 12000u);
  CHECK_EQ(header_of({0xFF, 0xE3, 0x00 | 0x10, 0x00}).sample_rate, 11025u);
}

TEST(mp3_header_bitrate_and_rate_tables) {
  const uint32_t v1[] = {32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320};
  const uint32_t v2[] = {8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160};
  const uint32_t r1[] = {44100, 48000, 32000}, r2[] = {22050, 24000, 16000}, r25[] = {11025, 12000, 8000};
  for (uint8_t bi = 1; bi <= 14; ++bi)
    for (uint8_t ri = 0; ri < 3; ++ri)
      for (uint8_t pad = 0; pad < 2; ++pad) {
        const uint8_t b2 = static_cast<uint8_t>(bi << 4 | ri << 2 | pad << 1);
        Mp3Header a = header_of({0xFF, 0xFB, b2, 0});
        CHECK_EQ(a.bitrate_kbps, v1[bi - 1]);
        CHECK_EQ(a.sample_rate, r1[ri]);
        CHECK_EQ(a.frame_size, 144 * v1[bi - 1] * 1000 / r1[ri] + pad);
        Mp3Header b = header_of({0xFF, 0xF3, b2, 0});
        CHECK_EQ(b.bitrate_kbps, v2[bi - 1]);
        CHECK_EQ(b.sample_rate, r2[ri]);
        CHECK_EQ(b.frame_size, 72 * v2[bi - 1] * 1000 / r2[ri] + pad);
        Mp3Header c = header_of({0xFF, 0xE3, b2, 0});
        CHECK_EQ(c.sample_rate, r25[ri]);
        CHECK(c.frame_size <= kMp3MaxFrameSize);
        CHECK(a.frame_size <= kMp3MaxFrameSize);
      }
}

TEST(mp3_header_rejects_bad_fields) {
  Mp3Header h;
  auto st = [&](std::vector<uint8_t> b) { return parse_mp3_header(b.data(), b.size(), &h); };
  CHECK(st({0xFF, 0xFB, 0x90}) == Mp3Status::kTruncated);
  CHECK(st({0xFE, 0xFB, 0x90, 0x00}) == Mp3Status::kNoSync);
  CHECK(st({0xFF, 0x1B, 0x90, 0x00}) == Mp3Status::kNoSync);
  CHECK(st({0xFF, 0xEB, 0x90, 0x00}) == Mp3Status::kBadVersion);
  CHECK(st({0xFF, 0xFD, 0x90, 0x00}) == Mp3Status::kNotLayer3);  // Layer II
  CHECK(st({0xFF, 0xFF, 0x90, 0x00}) == Mp3Status::kNotLayer3);  // Layer I
  CHECK(st({0xFF, 0xF9, 0x90, 0x00}) == Mp3Status::kNotLayer3);  // reserved layer
  CHECK(st({0xFF, 0xFB, 0x00, 0x00}) == Mp3Status::kFreeFormat);
  CHECK(st({0xFF, 0xFB, 0xF0, 0x00}) == Mp3Status::kBadBitrate);
  CHECK(st({0xFF, 0xFB, 0x9C, 0x00}) == Mp3Status::kBadSampleRate);
  CHECK(st({0xFF, 0xFB, 0x90, 0x02}) == Mp3Status::kBadEmphasis);
  CHECK(std::string(mp3_status_message(Mp3Status::kFreeFormat)).find("free") != std::string::npos);
}

TEST(mp3_splitter_partial_and_multiple_frames) {
  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint8_t> stream;
  for (int i = 0; i < 12; ++i) {
    frames.push_back(make_frame(0xFB, i % 3 == 0 ? 0x92 : 0x90, 0x64, static_cast<uint8_t>(i)));
    stream.insert(stream.end(), frames.back().begin(), frames.back().end());
  }
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{100}, size_t{417}, size_t{1000}, stream.size()}) {
    Mp3FrameSplitter s;
    std::vector<std::vector<uint8_t>> got;
    size_t skipped = 0;
    for (size_t at = 0; at < stream.size(); at += chunk) {
      std::vector<Mp3FrameSplitter::Frame> out;
      skipped += s.push(stream.data() + at, std::min(chunk, stream.size() - at), out);
      for (auto& f : out) got.emplace_back(f.data, f.data + f.size);
    }
    CHECK_EQ(skipped, 0u);
    CHECK_EQ(got.size(), frames.size());
    CHECK(got == frames);
    CHECK_EQ(s.pending(), 0u);
  }
}

TEST(mp3_splitter_resyncs_over_garbage_and_false_syncs) {
  std::vector<std::vector<uint8_t>> frames;
  // 12 frames: a false sync waits for the bytes of its claimed frame (417 here) before it is refuted,
  // so enough real frames must follow the damage for everything to come out.
  for (int i = 0; i < 12; ++i) frames.push_back(make_frame(0xF3, 0x40, 0xC0, static_cast<uint8_t>(i)));
  // Garbage with a false sync word (a valid-looking header whose "next frame" is not one).
  const std::vector<uint8_t> garbage = {0x00, 0x12, 0xFF, 0xFB, 0x90, 0x64, 0x55, 0x66, 0xFF, 0x00, 0x01};
  std::vector<uint8_t> stream = garbage;
  for (size_t i = 0; i < frames.size(); ++i) {
    stream.insert(stream.end(), frames[i].begin(), frames[i].end());
    if (i == 2) stream.insert(stream.end(), garbage.begin(), garbage.end());  // damage mid-stream
  }
  Mp3FrameSplitter s;
  std::vector<std::vector<uint8_t>> got;
  size_t skipped = 0;
  for (size_t at = 0; at < stream.size(); at += 37) {
    std::vector<Mp3FrameSplitter::Frame> out;
    skipped += s.push(stream.data() + at, std::min<size_t>(37, stream.size() - at), out);
    for (auto& f : out) got.emplace_back(f.data, f.data + f.size);
  }
  CHECK_EQ(skipped, 2 * garbage.size());
  CHECK(got == frames);
}

TEST(mp3_splitter_fixture_across_tag_boundaries) {
  auto tags = media_test::read_flv_audio("mp3/sine44k1_stereo_128k.flv");
  CHECK(tags.size() > 300);
  std::vector<uint8_t> stream;
  for (auto& t : tags) {
    CHECK_EQ(t.body[0] >> 4, 2);  // SoundFormat 2
    stream.insert(stream.end(), t.body.begin() + 1, t.body.end());
  }
  size_t whole = 0, rechunked = 0, skipped = 0;
  {
    Mp3FrameSplitter s;
    for (auto& t : tags) {
      std::vector<Mp3FrameSplitter::Frame> out;
      skipped += s.push(t.body.data() + 1, t.body.size() - 1, out);
      whole += out.size();
      for (auto& f : out) CHECK_EQ(f.header.sample_rate, 44100u);
    }
  }
  {
    Mp3FrameSplitter s;
    for (size_t at = 0; at < stream.size(); at += 300) {
      std::vector<Mp3FrameSplitter::Frame> out;
      skipped += s.push(stream.data() + at, std::min<size_t>(300, stream.size() - at), out);
      rechunked += out.size();
    }
  }
  CHECK_EQ(skipped, 0u);
  CHECK_EQ(whole, tags.size());  // FFmpeg writes one frame per tag
  CHECK_EQ(rechunked, tags.size());
}

TEST(opus_head_good) {
  const uint8_t stereo[] = {'O', 'p', 'u', 's', 'H', 'e', 'a', 'd', 1, 2, 0x38, 0x01, 0x80, 0xBB, 0, 0, 0xFE, 0xFF, 0};
  OpusHead h;
  CHECK(parse_opus_head(stereo, sizeof stereo, &h) == OpusHeadStatus::kOk);
  CHECK_EQ(h.channels, 2);
  CHECK_EQ(h.pre_skip, 312);
  CHECK_EQ(h.input_sample_rate, 48000u);
  CHECK_EQ(h.output_gain, -2);
  CHECK_EQ(h.mapping_family, 0);
  CHECK_EQ(h.stream_count, 1);
  CHECK_EQ(h.coupled_count, 1);
  const uint8_t surround[] = {'O', 'p', 'u', 's', 'H', 'e', 'a', 'd', 1, 6, 0x38, 0x01, 0x44, 0xAC, 0, 0, 0, 0, 1,
                              4, 2, 0, 4, 1, 2, 3, 5};
  CHECK(parse_opus_head(surround, sizeof surround, &h) == OpusHeadStatus::kOk);
  CHECK_EQ(h.channels, 6);
  CHECK_EQ(h.stream_count, 4);
  CHECK_EQ(h.coupled_count, 2);
  CHECK_EQ(h.mapping[5], 5);
  CHECK_EQ(h.input_sample_rate, 44100u);
  // The fixture's OpusHead (the first Ogg packet).
  auto packets = media_test::read_ogg_packets("opus/sine48k_stereo_128k.ogg");
  CHECK(packets.size() > 400);
  CHECK(parse_opus_head(packets[0].data(), packets[0].size(), &h) == OpusHeadStatus::kOk);
  CHECK_EQ(h.pre_skip, 312);
  CHECK(std::memcmp(packets[1].data(), "OpusTags", 8) == 0);
}

TEST(opus_head_bad) {
  std::vector<uint8_t> good = {'O', 'p', 'u', 's', 'H', 'e', 'a', 'd', 1, 2, 0x38, 0x01, 0x80, 0xBB, 0, 0, 0, 0, 0};
  OpusHead h;
  auto st = [&](std::vector<uint8_t> b) { return parse_opus_head(b.data(), b.size(), &h); };
  auto with = [&](size_t at, uint8_t v) { auto b = good; b[at] = v; return b; };
  CHECK(st(good) == OpusHeadStatus::kOk);
  CHECK(st({good.begin(), good.end() - 1}) == OpusHeadStatus::kTruncated);
  CHECK(st({good.begin(), good.begin() + 4}) == OpusHeadStatus::kTruncated);
  CHECK(st(with(0, 'o')) == OpusHeadStatus::kBadMagic);
  CHECK(st(with(8, 0x10)) == OpusHeadStatus::kBadVersion);
  CHECK(st(with(8, 0x0F)) == OpusHeadStatus::kOk);  // minor versions are compatible
  CHECK(st(with(9, 0)) == OpusHeadStatus::kBadChannels);
  CHECK(st(with(9, 3)) == OpusHeadStatus::kBadChannels);  // family 0: mono or stereo
  CHECK(st(with(18, 2)) == OpusHeadStatus::kBadMappingFamily);
  CHECK(st(with(18, 255)) == OpusHeadStatus::kBadMappingFamily);
  auto fam1 = with(18, 1);
  CHECK(st(fam1) == OpusHeadStatus::kTruncated);  // no mapping table
  fam1.insert(fam1.end(), {1, 1, 0, 1});
  CHECK(st(fam1) == OpusHeadStatus::kOk);
  auto bad = fam1; bad[19] = 0;  // 0 streams
  CHECK(st(bad) == OpusHeadStatus::kBadStreamCounts);
  bad = fam1; bad[20] = 2;       // coupled > streams
  CHECK(st(bad) == OpusHeadStatus::kBadStreamCounts);
  bad = fam1; bad[22] = 2;       // mapping to stream 2 of 1+1
  CHECK(st(bad) == OpusHeadStatus::kBadMapping);
  bad = fam1; bad[22] = 255;     // silent channel is allowed
  CHECK(st(bad) == OpusHeadStatus::kOk);
  bad = fam1; bad[9] = 9;        // family 1: at most 8 channels
  CHECK(st(bad) == OpusHeadStatus::kBadChannels);
}

TEST(opus_toc_durations_every_config_and_code) {
  // RFC 6716 Table 2: configs 0-11 SILK (10/20/40/60 ms), 12-15 Hybrid (10/20), 16-31 CELT (2.5/5/10/20).
  const uint32_t want[32] = {480, 960, 1920, 2880, 480, 960, 1920, 2880, 480, 960, 1920, 2880,
                             480, 960, 480, 960, 120, 240, 480, 960, 120, 240, 480, 960,
                             120, 240, 480, 960, 120, 240, 480, 960};
  for (uint8_t config = 0; config < 32; ++config) {
    CHECK_EQ(opus_frame_samples(config), want[config]);
    for (uint8_t stereo = 0; stereo < 2; ++stereo) {
      const uint8_t toc = static_cast<uint8_t>(config << 3 | stereo << 2);
      const uint8_t c0[] = {toc, 1, 2, 3};
      CHECK_EQ(opus_packet_samples(c0, 4), want[config]);          // code 0: one frame
      const uint8_t c1[] = {static_cast<uint8_t>(toc | 1), 1, 2, 3, 4};
      CHECK_EQ(opus_packet_samples(c1, 5), 2 * want[config]);      // code 1: two equal frames
      CHECK_EQ(opus_packet_samples(c1, 4), 0u);                    // odd payload: malformed
      const uint8_t c2[] = {static_cast<uint8_t>(toc | 2), 1, 9};
      CHECK_EQ(opus_packet_samples(c2, 3), 2 * want[config]);      // code 2: two frames
      CHECK_EQ(opus_packet_samples(c2, 1), 0u);
      for (uint8_t m = 0; m <= 63; ++m) {
        const uint8_t c3[] = {static_cast<uint8_t>(toc | 3), m, 0, 0};
        const uint32_t total = want[config] * m;
        const uint32_t expect = (m == 0 || total > 5760) ? 0 : total;
        CHECK_EQ(opus_packet_samples(c3, 4), expect);              // code 3: M frames, <= 120 ms
      }
      CHECK_EQ(opus_packet_samples(c0, 0), 0u);
      const uint8_t lone3[] = {static_cast<uint8_t>(toc | 3)};
      CHECK_EQ(opus_packet_samples(lone3, 1), 0u);
    }
  }
  // Every packet of the fixture is 20 ms (libopus default).
  auto packets = media_test::read_ogg_packets("opus/sine48k_stereo_128k.ogg");
  for (size_t i = 2; i < packets.size(); ++i) CHECK_EQ(opus_packet_samples(packets[i].data(), packets[i].size()), 960u);
}

TEST(probe_audio_tag_classic_and_enhanced) {
  auto probe = [](std::vector<uint8_t> b) { return probe_audio_tag(b.data(), b.size()); };
  AudioTagProbe p = probe({0xAF, 0x00, 0x11, 0x90});
  CHECK(p.codec == AudioCodec::kAac && p.packet == FlvAudioPacket::kSequenceHeader);
  CHECK(probe({0xAF, 0x01, 0x21}).packet == FlvAudioPacket::kCodedFrame);
  p = probe({0x2F, 0xFF, 0xFB});
  CHECK(p.codec == AudioCodec::kMp3 && p.packet == FlvAudioPacket::kCodedFrame);
  CHECK(std::string(p.codec_name) == "mp3");
  CHECK(probe({0xE2, 0xFF}).codec == AudioCodec::kMp3);  // SoundFormat 14: MP3 8 kHz
  CHECK(std::string(probe({0x3E, 0x00}).codec_name) == "pcm_le");
  CHECK(std::string(probe({0x7E, 0x00}).codec_name) == "g711a");
  CHECK(std::string(probe({0xBE, 0x00}).codec_name) == "speex");
  p = probe({0x90, 'O', 'p', 'u', 's', 'O', 'p', 'u', 's'});
  CHECK(p.codec == AudioCodec::kOpus && p.packet == FlvAudioPacket::kSequenceHeader);
  CHECK(std::string(p.codec_name) == "opus");
  CHECK(probe({0x91, 'O', 'p', 'u', 's', 0xFC}).packet == FlvAudioPacket::kCodedFrame);
  CHECK(probe({0x92, 'O', 'p', 'u', 's'}).packet == FlvAudioPacket::kSequenceEnd);
  CHECK(probe({0x94, 'O', 'p', 'u', 's', 1}).packet == FlvAudioPacket::kOther);  // MultichannelConfig
  CHECK(probe({0x91, 'm', 'p', '4', 'a', 0x21}).codec == AudioCodec::kAac);
  CHECK(probe({0x91, '.', 'm', 'p', '3', 0xFF}).codec == AudioCodec::kMp3);
  p = probe({0x91, 'f', 'L', 'a', 'C', 0});
  CHECK(p.codec == AudioCodec::kNone && std::string(p.codec_name) == "fLaC");
  p = probe({0x95, 0x01, 'O', 'p', 'u', 's', 0});  // multitrack
  CHECK(p.multitrack && p.codec == AudioCodec::kOpus && p.packet == FlvAudioPacket::kOther);
  CHECK(std::string(probe({0xAF, 0x00, 0x11, 0x90}).codec_name) == "aac");
  p = probe({0x91, 'm', 'p', '4', 'a', 0, 0, 0});
  CHECK(std::string(p.codec_name) == "aac" && p.packet == FlvAudioPacket::kCodedFrame);
  p = probe({0x91, '.', 'm', 'p', '3', 0, 0, 0});
  CHECK(std::string(p.codec_name) == "mp3" && p.packet == FlvAudioPacket::kCodedFrame);
  CHECK(probe({0x91, 'f', 'L', 'a', 'C', 0, 0, 0}).packet == FlvAudioPacket::kCodedFrame);
  p = probe({0x3E, 0x00});
  CHECK(p.codec == AudioCodec::kNone && p.packet == FlvAudioPacket::kCodedFrame);  // classic codecs: frames
  p = probe({});
  CHECK(std::string(p.codec_name) == "unknown" && p.packet == FlvAudioPacket::kOther);
  CHECK(std::string(probe({0x91, 'O', 'p'}).codec_name) == "unknown");  // truncated FourCC
  CHECK(std::string(probe({0x91, 0x01, 'p', 'u', 's'}).codec_name) == "?pus");
}

TEST_MAIN
