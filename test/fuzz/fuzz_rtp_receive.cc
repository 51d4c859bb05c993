// libFuzzer target: a WHIP publisher's RTP receive after decryption (native/core/rtp): the input is
// a run of datagrams (2-byte length, then the bytes; the first input byte picks the SRTP tag size
// and the jitter buffer's cap). Each goes through demultiplexing (RFC 7983 §7), the SRTP packet's
// header (RFC 3711 §3.1), padding (RFC 3550 §5.1), the rollover counter (RFC 3711 §3.3.1),
// receiver statistics (RFC 3550 §A.3, §A.8) and the Opus jitter buffer, with time moving on and
// deadlines flushed. Invariants: the header and tag lie inside the datagram; the buffer holds at
// most its cap; output positions never go back; every packet out is non-empty.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/codec/opus.h"
#include "core/rtp/receive.h"

using namespace skylark;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t tag = (data[0] & 1) ? 16 : 10;
  rtp::JitterOptions o;
  o.max_packets = 1 + (data[0] >> 1) % 64;
  o.delay_ms = 60;
  o.max_fill_ms = 200;
  uint64_t last = 0;
  bool any = false;
  rtp::OpusJitterBuffer jitter(o, [&](uint64_t samples, const uint8_t* d, size_t n, bool filled) {
    if (n == 0 || (any && samples < last)) std::abort();
    if (!filled && codec::opus_packet_samples(d, n) == 0) std::abort();
    last = samples;
    any = true;
  });
  rtp::RolloverCounter roc;
  rtp::ReceptionStats stats;
  bool first = true;
  double now = 0;
  size_t at = 1;
  while (at + 2 <= size) {
    size_t n = size_t{data[at]} << 8 | data[at + 1];
    at += 2;
    if (n > size - at) n = size - at;
    const uint8_t* d = data + at;
    at += n;
    now += (n % 7) * 10;
    if (!rtp::is_rtp(d, n)) continue;
    rtp::RtpHeader h;
    if (rtp::parse_srtp_header(d, n, tag, &h) != rtp::RtpStatus::kOk) continue;
    if (h.header_size + tag > n) std::abort();
    if (first) {
      roc.reset(h.seq);
      first = false;
    }
    const int64_t r = roc.estimate(h.seq);
    if (r >= 0) roc.advance(h.seq, static_cast<uint32_t>(r));
    size_t end = n - tag;
    if (h.padding) end = rtp::strip_padding(d, h.header_size, end);
    if (end <= h.header_size) continue;
    if (end > n) std::abort();
    stats.add(h.seq, h.timestamp, now * 48);
    if (h.ssrc % 17 == 0) jitter.restart();
    jitter.push(h.seq, h.timestamp, d + h.header_size, end - h.header_size, now);
    if (jitter.size() > o.max_packets) std::abort();
    const double due = jitter.deadline();
    if (due >= 0 && due <= now) jitter.flush(now);
  }
  const rtp::ReportBlock b = stats.report();
  if (b.fraction_lost > 255 || b.packets_lost > 0x7fffff) std::abort();
  jitter.flush(now + 1000);
  if (jitter.size() != 0) std::abort();
  return 0;
}
