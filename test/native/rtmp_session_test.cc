// RTMP server session: recorded FFmpeg publishes (whole, byte by byte, random splits), the replies
// FFmpeg/OBS expect, and the bad inputs (each must end in one sticky error event, never a crash).
#include <random>

#include "check.h"
#include "rtmp_test_util.h"

using namespace skylark;
using namespace skylark::rtmp;
using rtmp_test::Amf;
using rtmp_test::Bytes;
using rtmp_test::Client;
using rtmp_test::has_error;
using rtmp_test::run;
using util::Status;
using Type = Event::Type;

namespace {
struct Summary {
  std::string app, stream, publish_type;
  size_t audio = 0, errors = 0, metadata = 0, unpublish = 0, four_ccs = 0;
  uint32_t publish_stream_id = 0;
  double audiocodecid = -1;  // onMetaData
  std::vector<uint32_t> ts;
  std::vector<Bytes> bodies;
  Type last_type = Type::kError;  // the last event's type, and its stream id
  uint32_t last_stream_id = 0;
};
Summary summarize(const std::vector<Event>& ev) {
  Summary s;
  for (auto& e : ev) {
    s.last_type = e.type;
    s.last_stream_id = e.stream_id;
    if (e.type == Type::kConnect) {
      s.app = e.app;
      s.four_ccs = e.four_cc_list.size();
    }
    if (e.type == Type::kPublish) {
      s.stream = e.stream_name;
      s.publish_type = e.publish_type;
      s.publish_stream_id = e.stream_id;
    }
    if (e.type == Type::kMetadata) {
      ++s.metadata;
      for (const MetaValue& v : e.metadata)
        if (v.key == "audiocodecid" && v.kind == MetaValue::Kind::kNumber) s.audiocodecid = v.number;
    }
    if (e.type == Type::kUnpublish) ++s.unpublish;
    if (e.type == Type::kError) ++s.errors;
    if (e.type == Type::kAudio) {
      ++s.audio;
      s.ts.push_back(e.timestamp);
      s.bodies.emplace_back(e.data.data.get(), e.data.data.get() + e.data.size);
    }
  }
  return s;
}
std::vector<Message> replies(Session& s) { return rtmp_test::parse_output(s.output()); }
}  // namespace

TEST(session_fixture_whole_bytewise_and_random_splits) {
  for (const char* name : {"rtmp/ffmpeg-aac-48k.bin", "rtmp/ffmpeg-aac-44k-mono.bin", "rtmp/ffmpeg-aac-48k-extts.bin"}) {
    Bytes in = skylark_test::read_fixture(name);
    Summary whole = summarize(run(in, in.size()));
    CHECK(whole.app == "live/stm_test");
    CHECK(whole.stream == "sk_euw1_testkey");
    CHECK_EQ(whole.errors, 0u);
    CHECK_EQ(whole.metadata, 1u);
    CHECK_EQ(whole.unpublish, 1u);
    CHECK(whole.audio > 100);
    CHECK(!whole.bodies.empty() && whole.bodies[0].size() >= 2 && whole.bodies[0][0] == 0xAF &&
          whole.bodies[0][1] == 0x00);  // AAC sequence header first
    size_t frames = 0;  // then AAC raw frames only
    for (size_t i = 1; i < whole.bodies.size(); ++i)
      frames += whole.bodies[i].size() >= 2 && whole.bodies[i][0] == 0xAF && whole.bodies[i][1] == 0x01;
    CHECK_EQ(frames, whole.bodies.size() - 1);
    CHECK_EQ(whole.four_ccs, 0u);  // FFmpeg sends no E-RTMP fourCcList
    CHECK(whole.publish_type == "live");
    CHECK_EQ(whole.publish_stream_id, 1u);
    CHECK(whole.audiocodecid == 10);  // onMetaData: AAC
    for (size_t i = 1; i < whole.ts.size(); ++i) CHECK(whole.ts[i] >= whole.ts[i - 1]);
    CHECK(!whole.ts.empty() && whole.ts.back() > 2500);
    CHECK(whole.last_type == Type::kUnpublish && whole.last_stream_id == 1);  // the last event
    if (std::string(name).find("extts") != std::string::npos) {  // a real extended timestamp
      CHECK(whole.ts.size() > 1 && whole.ts[1] > 0xFFFFFFu && whole.ts.back() > 20000000u);
    }
    Summary bytewise = summarize(run(in, 1));
    CHECK(bytewise.ts == whole.ts);
    CHECK(bytewise.bodies == whole.bodies);
    CHECK(bytewise.app == whole.app && bytewise.stream == whole.stream);
    std::mt19937 rng(42);
    for (int round = 0; round < 5; ++round) {
      Session s;
      std::vector<Event> all;
      for (size_t i = 0; i < in.size();) {
        size_t n = std::min<size_t>(in.size() - i, 1 + rng() % 700);
        s.push(in.data() + i, n);
        i += n;
        for (auto& e : s.events()) all.push_back(std::move(e));
        s.events().clear();
      }
      Summary r = summarize(all);
      CHECK(r.ts == whole.ts);
      CHECK(r.bodies == whole.bodies);
    }
    Session s;
    run(in, in.size(), &s);
    CHECK_EQ(s.bytes_in(), in.size());
  }
}

TEST(session_handshake_replies) {
  Client c;
  c.handshake();
  Session s;
  s.push(c.bytes.data(), 1 + kHandshakeSize);
  auto& out = s.output();
  CHECK_EQ(out.size(), 1 + 2 * kHandshakeSize);
  if (out.size() != 1 + 2 * kHandshakeSize) return;
  CHECK_EQ(out[0], 3);
  for (int i = 1; i <= 8; ++i) CHECK_EQ(out[i], 0);  // S1 time and zero (version) bytes
  CHECK(std::equal(out.begin() + 1 + kHandshakeSize, out.end(), c.bytes.begin() + 1));  // S2 == C1
  CHECK(s.state() == Session::State::kHandshake);
  s.push(c.bytes.data() + 1 + kHandshakeSize, kHandshakeSize);
  CHECK(s.state() == Session::State::kAwaitConnect);
  CHECK(s.events().empty());
}

TEST(session_connect_and_publish_replies) {
  Client c = rtmp_test::publisher();
  Session s;
  s.push(c.bytes.data(), c.bytes.size());
  auto& ev = s.events();
  CHECK_EQ(ev.size(), 2u);
  if (ev.size() != 2) return;
  CHECK(ev[0].type == Type::kConnect && ev[0].app == "live/stm_test" && ev[0].flash_ver == "FMLE/3.0");
  CHECK(ev[0].tc_url == "rtmp://127.0.0.1/live/stm_test");
  CHECK(ev[1].type == Type::kPublish && ev[1].stream_name == "sk_euw1_testkey" &&
        ev[1].publish_type == "live" && ev[1].stream_id == 1);
  CHECK(s.accept_publish());
  CHECK(!s.accept_publish());  // nothing pending any more
  auto m = replies(s);
  // WinAck, SetPeerBW, SetChunkSize, _result(connect), _result(releaseStream), _result(FCPublish),
  // onFCPublish, _result(createStream), StreamBegin, onStatus.
  CHECK_EQ(m.size(), 10u);
  if (m.size() != 10) return;
  auto be32 = [](const Message& x) { return util::ByteReader(x.body.data.get(), x.body.size).be32(); };
  CHECK(m[0].type == kMsgWindowAckSize && be32(m[0]) == 2500000);
  CHECK(m[1].type == kMsgSetPeerBandwidth && m[1].body.size == 5 && be32(m[1]) == 2500000 && m[1].body.data[4] == 2);
  CHECK(m[2].type == kMsgSetChunkSize && be32(m[2]) == 4096);
  std::vector<Amf0Node> n;
  CHECK(amf0_decode_all(m[3].body.span(), n) == Status::kOk);
  CHECK(amf0_root(n, 0).str() == "_result");
  CHECK(amf0_root(n, 1).number() == 1);
  CHECK(amf0_root(n, 2).get("fmsVer").is_string());
  CHECK(amf0_root(n, 2).get("capabilities").number() == 31);
  CHECK(amf0_root(n, 3).get("level").str() == "status");
  CHECK(amf0_root(n, 3).get("code").str() == "NetConnection.Connect.Success");
  CHECK(amf0_root(n, 3).get("description").is_string());
  CHECK(amf0_root(n, 3).get("objectEncoding").number() == 0);
  CHECK(rtmp_test::cmd_name(m[4]) == "_result");
  CHECK(rtmp_test::cmd_name(m[5]) == "_result");
  CHECK(rtmp_test::cmd_name(m[6]) == "onFCPublish");
  CHECK(amf0_decode_all(m[7].body.span(), n) == Status::kOk);
  CHECK(amf0_root(n, 0).str() == "_result" && amf0_root(n, 1).number() == 4);
  CHECK(amf0_root(n, 2).type() == Amf0Type::kNull && amf0_root(n, 3).number() == 1);
  CHECK(m[8].type == kMsgUserControl && m[8].body.size == 6 && m[8].body.data[1] == 0 && be32(m[8]) == 0);
  CHECK_EQ(util::ByteReader(m[8].body.data.get() + 2, 4).be32(), 1u);  // StreamBegin(1)
  CHECK(m[9].type == kMsgCommandAmf0 && m[9].stream_id == 1);
  CHECK(amf0_decode_all(m[9].body.span(), n) == Status::kOk);
  CHECK(amf0_root(n, 0).str() == "onStatus");
  CHECK(amf0_root(n, 3).get("level").str() == "status");
  CHECK(amf0_root(n, 3).get("code").str() == "NetStream.Publish.Start");
  s.events().clear();
  // Audio now flows; then FFmpeg's FCUnpublish + deleteStream give one unpublish.
  Client more;
  more.message(4, kMsgAudio, 1, 0, Bytes{0xAF, 0x00, 0x11, 0x90});
  more.command(Amf().str("FCUnpublish").num(6).null().str("sk_euw1_testkey").b);
  more.command(Amf().str("deleteStream").num(7).null().num(1).b);
  s.push(more.bytes.data(), more.bytes.size());
  CHECK_EQ(ev.size(), 2u);
  if (ev.size() == 2) {
    CHECK(ev[0].type == Type::kAudio && ev[0].data.size == 4);
    CHECK(ev[1].type == Type::kUnpublish && ev[1].stream_id == 1);
  }
}

TEST(session_reject_publish) {
  Client c = rtmp_test::publisher();
  Session s;
  s.push(c.bytes.data(), c.bytes.size());
  CHECK(s.reject_publish("NetStream.Publish.BadName", "unknown stream key"));
  CHECK(!s.reject_publish("NetStream.Publish.BadName", "again"));
  auto m = replies(s);
  CHECK(!m.empty());
  if (m.empty()) return;
  std::vector<Amf0Node> n;
  CHECK(amf0_decode_all(m.back().body.span(), n) == Status::kOk);
  CHECK(amf0_root(n, 0).str() == "onStatus");
  CHECK(amf0_root(n, 3).get("level").str() == "error");
  CHECK(amf0_root(n, 3).get("code").str() == "NetStream.Publish.BadName");
  CHECK(amf0_root(n, 3).get("description").str() == "unknown stream key");
  CHECK_EQ(m.back().stream_id, 1u);
  // Audio after a reject is dropped.
  s.events().clear();
  Client more;
  more.message(4, kMsgAudio, 1, 0, Bytes{0xAF, 0x00, 0x11, 0x90});
  s.push(more.bytes.data(), more.bytes.size());
  CHECK(s.events().empty());
}

TEST(session_reject_running_publish) {
  // Media refused after the accept (e.g. a codec the stream does not take): onStatus level error.
  Client c = rtmp_test::publisher();
  Session s;
  s.push(c.bytes.data(), c.bytes.size());
  CHECK(s.accept_publish());
  const size_t before = replies(s).size();
  CHECK(s.reject_publish("NetStream.Publish.Rejected", "This stream accepts aac audio, not mp3."));
  auto m = replies(s);
  CHECK_EQ(m.size(), before + 1);
  if (m.empty()) return;
  std::vector<Amf0Node> n;
  CHECK(amf0_decode_all(m.back().body.span(), n) == Status::kOk);
  CHECK(amf0_root(n, 0).str() == "onStatus");
  CHECK(amf0_root(n, 3).get("level").str() == "error");
  CHECK(amf0_root(n, 3).get("code").str() == "NetStream.Publish.Rejected");
  CHECK_EQ(m.back().stream_id, 1u);
  // Audio after it is dropped.
  s.events().clear();
  Client more;
  more.message(4, kMsgAudio, 1, 0, Bytes{0xAF, 0x01, 0x21});
  s.push(more.bytes.data(), more.bytes.size());
  CHECK(s.events().empty());
}

TEST(session_audio_and_control_events_in_message_order) {
  // Audio, FCUnpublish, audio: the second audio is dropped (no longer publishing); order kept.
  Client c = rtmp_test::publisher();
  c.message(4, kMsgAudio, 1, 0, Bytes{0xAF, 0x01, 0x21});
  c.message(4, kMsgAudio, 1, 21, Bytes{0xAF, 0x01, 0x22}, 1);
  c.command(Amf().str("FCUnpublish").num(6).null().str("sk_euw1_testkey").b);
  c.message(4, kMsgAudio, 1, 21, Bytes{0xAF, 0x01, 0x23}, 1);
  for (size_t step : {c.bytes.size(), size_t{1}}) {
    std::vector<Type> types;
    for (const Event& e : run(c.bytes, step)) types.push_back(e.type);
    CHECK((types == std::vector<Type>{Type::kConnect, Type::kPublish, Type::kAudio, Type::kAudio, Type::kUnpublish}));
  }
  // Replies: none for audio (after the accept's, the session's output stays empty).
  Session s;
  Client pub = rtmp_test::publisher();
  s.push(pub.bytes.data(), pub.bytes.size());
  s.accept_publish();
  s.events().clear();
  s.output().clear();
  Client audio;
  audio.message(4, kMsgAudio, 1, 0, Bytes{0xAF, 0x01, 0x21});
  s.push(audio.bytes.data(), audio.bytes.size());
  CHECK_EQ(s.events().size(), 1u);
  CHECK(s.output().empty());
}

TEST(session_ping_window_ack_and_metadata) {
  Client c = rtmp_test::publisher();
  Bytes ping = {0, 6, 0, 0, 0x12, 0x34};
  c.message(2, kMsgUserControl, 0, 0, ping);
  Bytes win;
  util::VecWriter(win).be32(1000);
  c.message(2, kMsgWindowAckSize, 0, 0, win);
  c.message(4, kMsgAudio, 1, 0, Bytes(1200, 0xAF));
  Bytes meta = Amf().str("@setDataFrame").str("onMetaData").b;
  meta.insert(meta.end(), {0x08, 0, 0, 0, 3});
  Amf tail;
  tail.key("audiosamplerate").num(44100).key("stereo").boolean(true).key("encoder").str("obs")
      .key("nested").obj().key("x").num(1).end().key("nil").null().end();
  meta.insert(meta.end(), tail.b.begin(), tail.b.end());
  c.message(5, kMsgDataAmf0, 1, 0, meta);
  Session s;
  s.push(c.bytes.data(), c.bytes.size());
  auto m = replies(s);
  bool pong = false, ack = false;
  for (auto& x : m) {
    if (x.type == kMsgUserControl && x.body.size == 6 && x.body.data[1] == 7 &&
        util::ByteReader(x.body.data.get() + 2, 4).be32() == 0x1234) pong = true;
    if (x.type == kMsgAck) ack = true;
  }
  CHECK(pong);
  CHECK(ack);
  const Event* md = nullptr;
  for (auto& e : s.events())
    if (e.type == Type::kMetadata) md = &e;
  CHECK(md != nullptr);
  if (md) {
    CHECK_EQ(md->metadata.size(), 3u);  // nested object and null skipped
    CHECK(md->metadata[0].key == "audiosamplerate" && md->metadata[0].number == 44100);
    CHECK(md->metadata[1].kind == MetaValue::Kind::kBoolean && md->metadata[1].boolean);
    CHECK(md->metadata[2].str == "obs");
  }
}

// ---- bad input: one sticky error event each ----
namespace {
void expect_error(const Bytes& in, Status code, const char* what) {
  for (size_t step : {in.size(), size_t{1}}) {
    Session s;
    auto ev = run(in, step, &s);
    size_t errors = 0;
    for (auto& e : ev) errors += e.type == Type::kError;
    if (!has_error(ev, code) || errors != 1) {
      std::fprintf(stderr, "  case %s (step %zu): want %s\n", what, step, util::status_code(code).data());
      ++skylark_test::failures();
    }
    CHECK(s.failed());
    // Sticky: more (valid) input produces nothing, but is counted.
    Client more = rtmp_test::publisher();
    uint64_t before = s.bytes_in();
    s.push(more.bytes.data(), more.bytes.size());
    CHECK(s.events().empty());
    CHECK_EQ(s.bytes_in(), before + more.bytes.size());
    CHECK(!s.accept_publish());
  }
}
Client connected() {
  Client c;
  c.handshake();
  c.command(rtmp_test::connect_cmd());
  return c;
}
}  // namespace

TEST(session_bad_input) {
  const char* http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  expect_error(Bytes(http, http + std::strlen(http)), Status::kHandshakeInvalid, "garbage");
  Bytes v6(1 + 2 * kHandshakeSize, 0);
  v6[0] = 6;  // RTMPE
  expect_error(v6, Status::kHandshakeInvalid, "rtmpe");

  Client big = connected();  // declared 16 MiB - 1 (the 24-bit maximum; "2 GB" cannot be declared)
  big.bytes.insert(big.bytes.end(), {0x04, 0, 0, 0, 0xFF, 0xFF, 0xFF, kMsgAudio, 1, 0, 0, 0, 0xAF});
  expect_error(big.bytes, Status::kMessageTooLarge, "huge message");

  for (uint32_t bad : {0u, 0x80000000u, 0xFFFFFFFFu}) {
    Client c = connected();
    Bytes b;
    util::VecWriter(b).be32(bad);
    c.message(2, kMsgSetChunkSize, 0, 0, b);
    expect_error(c.bytes, Status::kChunkSizeInvalid, "chunk size");
  }

  Client bomb = connected();  // deep nesting inside a command
  Amf deep;
  deep.str("publish").num(5).null();
  for (int i = 0; i < 1000; ++i) deep.obj().key("a");
  deep.null();
  bomb.command(deep.b, 1);
  expect_error(bomb.bytes, Status::kAmf0TooDeep, "amf deep");

  Client counts = connected();  // strict array claiming 4 billion elements
  Bytes arr = Amf().str("publish").num(5).null().b;
  arr.insert(arr.end(), {0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x05, 0x05});
  counts.command(arr, 1);
  expect_error(counts.bytes, Status::kAmf0Invalid, "amf counts");

  Client wrong_app;
  wrong_app.handshake();
  wrong_app.command(Amf().str("connect").num(1).obj().key("app").num(7).end().b);
  expect_error(wrong_app.bytes, Status::kCommandInvalid, "app is a number");

  Client no_name;
  no_name.handshake();
  no_name.command(Amf().num(1).num(1).b);
  expect_error(no_name.bytes, Status::kCommandInvalid, "command name is a number");

  Client wrong_pub = connected();
  wrong_pub.command(Amf().str("publish").num(5).null().num(42).b, 1);
  expect_error(wrong_pub.bytes, Status::kCommandInvalid, "publish name is a number");

  Client long_name = connected();
  long_name.command(rtmp_test::publish_cmd(std::string(1025, 'k')), 1);
  expect_error(long_name.bytes, Status::kStreamNameTooLong, "long name");
  Client ok_name = connected();
  ok_name.command(rtmp_test::publish_cmd(std::string(1024, 'k')), 1);
  CHECK(!has_error(run(ok_name.bytes, 1), Status::kStreamNameTooLong));

  Client not_first;
  not_first.handshake();
  not_first.message(4, kMsgAudio, 1, 0, Bytes{1, 2, 3}, 1);
  expect_error(not_first.bytes, Status::kProtocolViolation, "type-1 first chunk");

  Client many = connected();
  for (uint32_t i = 0; i <= kMaxChunkStreams; ++i) many.message(10 + i, kMsgAudio, 1, 0, Bytes{1});
  expect_error(many.bytes, Status::kChunkStreamLimit, "chunk streams");

  Client twice = connected();
  twice.command(rtmp_test::connect_cmd());
  expect_error(twice.bytes, Status::kProtocolViolation, "connect twice");

  Client early;
  early.handshake();
  early.command(rtmp_test::publish_cmd(), 1);
  expect_error(early.bytes, Status::kProtocolViolation, "publish before connect");
}

TEST(session_publisher_vanishes_mid_chunk) {
  Bytes in = skylark_test::read_fixture("rtmp/ffmpeg-aac-48k.bin");
  // Cut inside an audio message in the middle of the fixture (the first that leaves a partial).
  bool found = false;
  for (size_t cut = in.size() / 2; cut < in.size() / 2 + 2000 && !found; ++cut) {
    Session s;
    Bytes head(in.begin(), in.begin() + cut);
    auto ev = run(head, 997, &s);
    CHECK(!has_error(ev, Status::kProtocolViolation));
    s.end();
    if (s.failed()) {
      found = true;
      CHECK(!s.events().empty() && s.events().back().code == Status::kProtocolViolation);
    }
  }
  CHECK(found);
  // The complete fixture ends between messages: end() is quiet.
  Session whole;
  run(in, in.size(), &whole);
  whole.end();
  CHECK(!whole.failed());
  // Mid-handshake.
  Session hs;
  hs.push(in.data(), 100);
  hs.end();
  CHECK(hs.failed());
  // No bytes at all (a port probe): quiet.
  Session none;
  none.end();
  CHECK(!none.failed());
}

TEST(session_truncations_never_crash) {
  // Every prefix of the first 4 KiB of the fixture, whole and byte by byte: no error events.
  Bytes in = skylark_test::read_fixture("rtmp/ffmpeg-aac-44k-mono.bin");
  for (size_t cut = 0; cut < 4096 && cut < in.size(); cut += 13) {
    Bytes head(in.begin(), in.begin() + cut);
    CHECK(!has_error(run(head, head.size() ? head.size() : 1), Status::kProtocolViolation));
  }
}

TEST_MAIN
