// The caps of an RTMP session (native/core/rtmp): the audio message cap, the pre-publish byte cap
// (partial messages refused before allocation, replies not taken), the in-flight budget after the
// publish, and connection ids that are never handed out while in use (native/core/util/ids.h).
#include <set>

#include "check.h"
#include "core/util/ids.h"
#include "rtmp_test_util.h"

using namespace skylark;
using namespace skylark::rtmp;
using rtmp_test::Amf;
using rtmp_test::Bytes;
using rtmp_test::Client;
using util::Status;
using Type = Event::Type;

namespace {
// Pushes `in` (in pieces of `step`), draining events and, unless `keep_output`, the replies; accepts
// a publish when `accept`. Returns the error event's code ("" when none) and records the most
// bytes the session held after any push.
struct Fed {
  std::string error;
  size_t audio = 0;
  uint64_t max_held = 0;
};
Fed feed(Session& s, const Bytes& in, size_t step, bool accept, bool keep_output = false) {
  Fed f;
  for (size_t i = 0; i < in.size(); i += step) {
    s.push(in.data() + i, std::min(step, in.size() - i));
    f.max_held = std::max(f.max_held, s.held_bytes());
    for (auto& e : s.events()) {
      if (e.type == Type::kError) f.error = std::string(util::status_code(e.code));
      if (e.type == Type::kAudio) ++f.audio;
      if (e.type == Type::kPublish && accept) s.accept_publish();
    }
    s.events().clear();
    if (!keep_output) s.output().clear();
  }
  return f;
}
// A message header (type 0 chunk) declaring `length` bytes of `type` on `csid`, then `send` bytes
// of its payload: 0, or the whole first chunk (the chunk size), so the next header starts a chunk.
void partial(Client& c, uint32_t csid, uint8_t type, uint32_t length, size_t send) {
  c.basic(0, csid);
  util::VecWriter w(c.bytes);
  w.be24(0);
  w.be24(length);
  w.u8(type);
  w.le32(type == kMsgAudio ? 1 : 0);
  for (size_t i = 0; i < send; ++i) c.bytes.push_back(static_cast<uint8_t>(i));
}
Bytes aac_frame(size_t payload) {
  Bytes b = {0xAF, 0x01};
  b.resize(2 + payload, 0x21);
  return b;
}
}  // namespace

TEST(audio_message_cap_is_a_session_error_before_the_payload) {
  SessionOptions o;
  o.max_audio_message_bytes = 1024;
  Session s(o);
  Client c = rtmp_test::publisher();
  c.message(4, kMsgAudio, 1, 0, aac_frame(1022));  // exactly the cap: fine
  Fed f = feed(s, c.bytes, c.bytes.size(), true);
  CHECK(f.error == std::string());
  CHECK_EQ(f.audio, 1u);
  // One byte over, declared in the header: refused from the header alone, nothing allocated.
  Client d;
  partial(d, 4, kMsgAudio, 1025, 0);
  f = feed(s, d.bytes, 1, true);
  CHECK(f.error == std::string("message_too_large"));
  CHECK(s.limit() == Limit::kAudioMessageBytes);
  CHECK_EQ(s.held_bytes(), 0u);
  // Commands are not audio: a 2 KiB command is within the command cap.
  Session t(o);
  Client e = rtmp_test::publisher();
  e.command(Amf().str("FCUnpublish").num(9).null().str(std::string(2000, 'x')).b);
  CHECK(feed(t, e.bytes, e.bytes.size(), true).error == std::string());
  CHECK(t.limit() == Limit::kNone);
}

TEST(without_an_audio_cap_the_message_cap_applies_and_is_no_limit) {
  SessionOptions o;
  o.max_message_bytes = 4096;
  Session s(o);
  Client c = rtmp_test::publisher();
  partial(c, 4, kMsgAudio, 5000, 0);
  CHECK(feed(s, c.bytes, 7, true).error == std::string("message_too_large"));
  CHECK(s.limit() == Limit::kNone);
}

TEST(pre_publish_partial_messages_are_capped_before_allocation) {
  SessionOptions o;
  o.pre_publish_bytes = 8192;
  // Before any publish: two commands of 6000 bytes started and never finished (12000 > 8192).
  Client c;
  c.handshake();
  partial(c, 3, kMsgCommandAmf0, 6000, 128);
  partial(c, 4, kMsgCommandAmf0, 6000, 0);
  Session s(o);
  Fed f = feed(s, c.bytes, 100, false);
  CHECK(f.error == std::string("prepublish_limit"));
  CHECK(s.limit() == Limit::kPrePublishBytes);
  CHECK(f.max_held <= 8192u);
  // The same bytes without the cap are fine (the connection would just hold them).
  Session u;
  CHECK(feed(u, c.bytes, 100, false).error == std::string());
  CHECK_EQ(u.held_bytes(), 12000u);
  // One partial audio message declared larger than the cap, before publish: refused at its header.
  Client d;
  d.handshake();
  partial(d, 4, kMsgAudio, 100 * 1024, 0);
  Session v(o);
  CHECK(feed(v, d.bytes, d.bytes.size(), false).error == std::string("prepublish_limit"));
  CHECK_EQ(v.held_bytes(), 0u);
}

TEST(pre_publish_cap_counts_replies_not_taken) {
  SessionOptions o;
  o.pre_publish_bytes = 8192;
  // S0+S1+S2 (3073 bytes) plus a Ping Response per Ping Request, never taken from output().
  Client c;
  c.handshake();
  Bytes ping = {0, 6, 0, 0, 0, 1};
  for (int i = 0; i < 400; ++i) c.message(2, kMsgUserControl, 0, 0, ping);
  Session s(o);
  Fed f = feed(s, c.bytes, 512, false, /*keep_output=*/true);
  CHECK(f.error == std::string("prepublish_limit"));
  CHECK(s.limit() == Limit::kPrePublishBytes);
  // Taken as they come (what the listener does), the same pings are fine.
  Session t(o);
  CHECK(feed(t, c.bytes, 512, false).error == std::string());
}

TEST(after_the_publish_is_accepted_the_in_flight_budget_is_the_normal_one) {
  SessionOptions o;
  o.pre_publish_bytes = 8192;
  o.max_audio_message_bytes = 8192 + 5;
  Session s(o);
  Client c = rtmp_test::publisher();
  Fed f = feed(s, c.bytes, c.bytes.size(), true);
  CHECK(f.error == std::string());
  CHECK(s.publish_accepted());
  Client d;
  partial(d, 5, kMsgCommandAmf0, 6000, 128);
  partial(d, 6, kMsgCommandAmf0, 6000, 0);
  CHECK(feed(s, d.bytes, d.bytes.size(), true).error == std::string());
  CHECK_EQ(s.held_bytes(), 12000u);
  // The budget is the largest per-type cap (commands, 64 KiB) + 256 KiB, not 1 MiB + 256 KiB.
  ChunkReader r(kDefaultMaxMessageBytes, 8192 + 5);
  CHECK_EQ(r.default_inflight_budget(), uint64_t{kMaxCommandMessageBytes} + kInflightSlackBytes);
  ChunkReader plain;
  CHECK_EQ(plain.default_inflight_budget(), uint64_t{kDefaultMaxMessageBytes} + kInflightSlackBytes);
}

TEST(a_recorded_ffmpeg_publish_fits_the_production_caps) {
  SessionOptions o;
  o.pre_publish_bytes = 64 * 1024;
  o.max_audio_message_bytes = 8192 + 5;
  const auto fixture = skylark_test::read_fixture("rtmp/ffmpeg-aac-48k.bin");
  Bytes in(fixture.begin(), fixture.end());
  for (size_t step : {size_t{1}, size_t{1000}, in.size()}) {
    Session s(o);
    Fed f = feed(s, in, step, true);
    CHECK(f.error == std::string());
    CHECK(f.audio > 100u);
  }
}

TEST(ids_are_never_handed_out_while_in_use) {
  util::IdCounter ids(5);
  std::set<uint32_t> used;
  auto taken = [&](uint32_t i) { return used.count(i) != 0; };
  for (uint32_t want = 1; want <= 5; ++want) {
    const uint32_t id = ids.next(taken);
    CHECK_EQ(id, want);
    used.insert(id);
  }
  CHECK_EQ(ids.next(taken), 0u);  // all five in use
  used.erase(2);
  used.erase(4);
  CHECK_EQ(ids.next(taken), 2u);  // wraps, skips 1 (in use)
  used.insert(2);
  CHECK_EQ(ids.next(taken), 4u);
  used.insert(4);
  used.erase(1);
  CHECK_EQ(ids.next(taken), 1u);
  // A long-lived id survives any number of wraps without being handed out again.
  util::IdCounter many(7);
  std::set<uint32_t> live = {3};
  for (int i = 0; i < 100; ++i) {
    const uint32_t id = many.next([&](uint32_t x) { return live.count(x) != 0; });
    CHECK(id != 3u && id != 0u);
  }
}

TEST_MAIN
