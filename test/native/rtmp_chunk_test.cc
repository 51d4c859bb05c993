// Chunk stream demuxer: header types, csid encodings, extended timestamps in both conventions,
// chunk sizes, caps and the protocol violations (RTMP spec 1.0 §5.3).
#include "check.h"
#include "rtmp_test_util.h"

using namespace skylark;
using namespace skylark::rtmp;
using rtmp_test::Bytes;
using rtmp_test::Client;
using util::Status;

namespace {
struct Out {
  std::vector<Message> msgs;
  ChunkReader::Result last = ChunkReader::Result::kNeedMore;
  Status status = Status::kOk;
};
// Feeds `in` to a reader in pieces of `step` (applying Set Chunk Size like the session does).
Out demux(const Bytes& in, size_t step, uint32_t max_message = kDefaultMaxMessageBytes) {
  Out o;
  ChunkReader r(max_message);
  for (size_t i = 0; i < in.size() && o.last != ChunkReader::Result::kError; i += step) {
    size_t n = std::min(step, in.size() - i), pos = 0;
    while (pos < n) {
      size_t used = 0;
      Message m;
      o.last = r.next(in.data() + i + pos, n - pos, used, m);
      pos += used;
      if (o.last == ChunkReader::Result::kError) break;
      if (o.last == ChunkReader::Result::kNeedMore) break;
      if (m.type == kMsgSetChunkSize) r.set_chunk_size(util::ByteReader(m.body.data.get(), 4).be32());
      if (m.type == kMsgAbort) r.abort(util::ByteReader(m.body.data.get(), 4).be32());
      o.msgs.push_back(std::move(m));
    }
  }
  o.status = r.status();
  return o;
}
Bytes payload(size_t n, uint8_t seed) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 31);
  return b;
}
bool same(const Message& m, const Bytes& b) {
  return m.body.size == b.size() && (b.empty() || std::equal(b.begin(), b.end(), m.body.data.get()));
}
}  // namespace

TEST(chunk_header_types_and_deltas) {
  Client c;
  Bytes a = payload(300, 1), b = payload(300, 2), d = payload(10, 3);
  c.message(4, kMsgAudio, 1, 1000, a, 0);  // 3 chunks at 128
  c.message(4, kMsgAudio, 1, 20, b, 1);    // delta 20
  c.message(4, kMsgAudio, 1, 23, b, 2);    // delta 23, same length/type
  c.message(4, kMsgAudio, 1, 23, b, 3);    // same delta again
  c.message(4, kMsgAudio, 1, 5, d, 1);     // new length
  for (size_t step : {c.bytes.size(), size_t{1}, size_t{7}, size_t{129}}) {
    Out o = demux(c.bytes, step);
    CHECK_EQ(o.msgs.size(), 5u);
    if (o.msgs.size() != 5) continue;
    CHECK_EQ(o.msgs[0].timestamp, 1000u);
    CHECK_EQ(o.msgs[1].timestamp, 1020u);
    CHECK_EQ(o.msgs[2].timestamp, 1043u);
    CHECK_EQ(o.msgs[3].timestamp, 1066u);
    CHECK_EQ(o.msgs[4].timestamp, 1071u);
    CHECK(same(o.msgs[0], a) && same(o.msgs[1], b) && same(o.msgs[3], b) && same(o.msgs[4], d));
    CHECK_EQ(o.msgs[0].stream_id, 1u);
    CHECK_EQ(o.msgs[4].stream_id, 1u);
  }
}

TEST(chunk_csid_encodings) {
  Client c;
  Bytes p = payload(200, 9);
  for (uint32_t csid : {2u, 63u, 64u, 319u, 320u, 65599u}) c.message(csid, kMsgAudio, 1, csid, p);
  Out o = demux(c.bytes, 1);
  CHECK_EQ(o.msgs.size(), 6u);
  uint32_t want[] = {2, 63, 64, 319, 320, 65599};
  for (size_t i = 0; i < o.msgs.size() && i < 6; ++i) {
    CHECK_EQ(o.msgs[i].csid, want[i]);
    CHECK_EQ(o.msgs[i].timestamp, want[i]);
    CHECK(same(o.msgs[i], p));
  }
}

TEST(chunk_extended_timestamp_both_conventions) {
  for (bool ffmpeg_style : {true, false}) {
    Client c;
    c.ext_on_type3 = ffmpeg_style;
    Bytes p = payload(300, 4);
    c.message(4, kMsgAudio, 1, 0x01000000, p, 0);  // absolute ≥ 0xFFFFFF
    c.message(4, kMsgAudio, 1, 0x01000000, p, 3);  // type 3 new message: delta = 0x01000000
    c.message(5, kMsgAudio, 1, 0xFFFFFF, p, 0);    // exactly 0xFFFFFF
    c.message(5, kMsgAudio, 1, 20, p, 1);          // back to a small delta
    c.message(5, kMsgAudio, 1, 20, p, 3);
    for (size_t step : {c.bytes.size(), size_t{1}, size_t{3}, size_t{130}}) {
      Out o = demux(c.bytes, step);
      CHECK_EQ(o.msgs.size(), 5u);
      if (o.msgs.size() != 5) continue;
      CHECK_EQ(o.msgs[0].timestamp, 0x01000000u);
      CHECK_EQ(o.msgs[1].timestamp, 0x02000000u);
      CHECK_EQ(o.msgs[2].timestamp, 0xFFFFFFu);
      CHECK_EQ(o.msgs[3].timestamp, 0xFFFFFFu + 20);
      CHECK_EQ(o.msgs[4].timestamp, 0xFFFFFFu + 40);
      for (auto& m : o.msgs) CHECK(same(m, p));
    }
  }
}

TEST(chunk_extended_timestamp_short_payload_without_repeat) {
  // Type-3 continuation that carries only 2 payload bytes, no repeated extended timestamp: the
  // 4 peeked bytes are 2 payload bytes + the next chunk's header; they must be replayed.
  Client c;
  c.ext_on_type3 = false;
  Bytes p = payload(130, 5);
  c.message(4, kMsgAudio, 1, 0x02000000, p, 0);
  c.message(6, kMsgAudio, 1, 7, payload(3, 6), 0);
  c.message(4, kMsgAudio, 1, 0x02000000, p, 3);
  // Its last chunk holds 2 bytes: the peek completes only once 4 bytes follow (the next chunk).
  c.message(6, kMsgAudio, 1, 7, payload(3, 6), 0);
  for (size_t step : {c.bytes.size(), size_t{1}, size_t{2}, size_t{5}}) {
    Out o = demux(c.bytes, step);
    CHECK_EQ(o.msgs.size(), 4u);
    if (o.msgs.size() != 4) continue;
    CHECK(same(o.msgs[0], p));
    CHECK(same(o.msgs[1], payload(3, 6)));
    CHECK(same(o.msgs[2], p));
    CHECK_EQ(o.msgs[2].timestamp, 0x04000000u);
  }
}

TEST(chunk_set_chunk_size_applies_between_messages) {
  Client c;
  Bytes big = payload(10000, 7);
  c.set_chunk_size(4096);
  c.message(4, kMsgAudio, 1, 0, big);
  c.set_chunk_size(0x7FFFFFFF);  // valid maximum: buffers are never sized from it
  c.message(4, kMsgAudio, 1, 0, big);
  c.set_chunk_size(1);
  c.message(4, kMsgAudio, 1, 0, payload(50, 8));
  Out o = demux(c.bytes, 1);
  CHECK_EQ(o.msgs.size(), 6u);
  if (o.msgs.size() == 6) {
    CHECK(same(o.msgs[1], big));
    CHECK(same(o.msgs[3], big));
    CHECK(same(o.msgs[5], payload(50, 8)));
  }
}

TEST(chunk_first_chunk_must_be_type0) {
  for (unsigned fmt : {1u, 2u, 3u}) {
    Client c;
    c.message(4, kMsgAudio, 1, 0, payload(10, 1), fmt);
    Out o = demux(c.bytes, 1);
    CHECK(o.last == ChunkReader::Result::kError);
    CHECK(o.status == Status::kProtocolViolation);
  }
}

TEST(chunk_length_change_mid_message) {
  Client c;
  Bytes p = payload(300, 1);
  c.message(4, kMsgAudio, 1, 0, p);
  c.bytes.resize(12 + 128);  // cut after the first chunk
  c.message(4, kMsgAudio, 1, 0, payload(200, 1), 1);  // type 1 with another length
  Out o = demux(c.bytes, 1);
  CHECK(o.status == Status::kProtocolViolation);
}

TEST(chunk_message_caps_before_allocation) {
  Client c;
  c.message(4, kMsgAudio, 1, 0, Bytes{});
  // Declared 16 MiB - 1 audio message: rejected from the header alone.
  c.bytes = {0x04, 0, 0, 0, 0xFF, 0xFF, 0xFF, kMsgAudio, 1, 0, 0, 0};
  Out o = demux(c.bytes, 1);
  CHECK(o.status == Status::kMessageTooLarge);
  // Command above 64 KiB.
  Client d;
  d.bytes = {0x03, 0, 0, 0, 0x01, 0x00, 0x01, kMsgCommandAmf0, 0, 0, 0, 0};
  CHECK(demux(d.bytes, 1).status == Status::kMessageTooLarge);
  // Control message above 64 bytes.
  Client e;
  e.bytes = {0x02, 0, 0, 0, 0, 0, 65, kMsgSetChunkSize, 0, 0, 0, 0};
  CHECK(demux(e.bytes, 1).status == Status::kMessageTooLarge);
  // A smaller configured cap.
  Client f;
  f.message(4, kMsgAudio, 1, 0, payload(5000, 1));
  CHECK(demux(f.bytes, 1, 4096).status == Status::kMessageTooLarge);
  CHECK(demux(f.bytes, 1, 8192).msgs.size() == 1);
}

TEST(chunk_video_is_dropped_without_buffering) {
  Client c;
  c.set_chunk_size(65536);
  Bytes v = payload(3 * 1024 * 1024, 2);  // above the 1 MiB cap: read through, not buffered
  c.message(6, kMsgVideo, 1, 0, v);
  c.message(4, kMsgAudio, 1, 5, payload(100, 3));
  c.message(7, kMsgAggregate, 1, 5, payload(100, 3));
  c.message(8, 42 /* unknown */, 1, 5, payload(100, 3));
  Out o = demux(c.bytes, 100000);
  CHECK(o.status == Status::kOk);
  CHECK_EQ(o.msgs.size(), 2u);  // set chunk size + audio
  if (o.msgs.size() == 2) CHECK(o.msgs[1].type == kMsgAudio);
}

TEST(chunk_stream_limit) {
  Client c;
  for (uint32_t i = 0; i < kMaxChunkStreams; ++i) c.message(10 + i, kMsgAudio, 1, 0, payload(4, 1));
  Out o = demux(c.bytes, c.bytes.size());
  CHECK(o.status == Status::kOk);
  CHECK_EQ(o.msgs.size(), kMaxChunkStreams);
  c.message(10 + kMaxChunkStreams, kMsgAudio, 1, 0, payload(4, 1));
  CHECK(demux(c.bytes, c.bytes.size()).status == Status::kChunkStreamLimit);
}

TEST(chunk_inflight_budget) {
  // Many chunk streams each start a 1 MiB audio message and never finish it.
  Client c;
  for (uint32_t i = 0; i < 10; ++i) {
    uint8_t h[] = {static_cast<uint8_t>(10 + i), 0, 0, 0, 0x10, 0x00, 0x00, kMsgAudio, 1, 0, 0, 0};
    c.bytes.insert(c.bytes.end(), h, h + sizeof h);
    Bytes p = payload(128, 1);
    c.bytes.insert(c.bytes.end(), p.begin(), p.end());
  }
  CHECK(demux(c.bytes, 1000).status == Status::kMessageTooLarge);
}

TEST(chunk_abort_drops_partial_message) {
  Client c;
  Bytes p = payload(300, 1);
  c.message(4, kMsgAudio, 1, 0, p);
  c.bytes.resize(12 + 128);  // only the first chunk
  Bytes csid4;
  util::VecWriter(csid4).be32(4);
  c.message(2, kMsgAbort, 0, 0, csid4);
  c.message(4, kMsgAudio, 1, 0, payload(20, 2));  // a fresh type-0 message on the same csid
  Out o = demux(c.bytes, 1);
  CHECK(o.status == Status::kOk);
  CHECK_EQ(o.msgs.size(), 2u);
  if (o.msgs.size() == 2) CHECK(same(o.msgs[1], payload(20, 2)));
}

TEST(chunk_empty_message) {
  Client c;
  c.message(4, kMsgAudio, 1, 0, Bytes{});
  c.message(4, kMsgAudio, 1, 0, payload(3, 1));
  Out o = demux(c.bytes, 1);
  CHECK_EQ(o.msgs.size(), 2u);
}

TEST(chunk_writer_round_trip) {
  Bytes out;
  Bytes p = payload(10000, 3);
  write_message(out, 4096, 3, kMsgCommandAmf0, 7, 0x12345678, p);
  Out o = demux(Bytes{}, 1);
  ChunkReader r;
  r.set_chunk_size(4096);
  size_t used = 0;
  Message m;
  CHECK(r.next(out.data(), out.size(), used, m) == ChunkReader::Result::kMessage);
  CHECK_EQ(used, out.size());
  CHECK(same(m, p));
  CHECK_EQ(m.timestamp, 0x12345678u);
  CHECK_EQ(m.stream_id, 7u);
}

TEST_MAIN
