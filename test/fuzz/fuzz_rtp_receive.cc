// libFuzzer target: a WHIP publisher's RTP receive after decryption (native/core/rtp): the input is
// a run of datagrams (2-byte length, then the bytes; the first input byte picks the SRTP tag size
// and the jitter buffer's cap). Each goes through demultiplexing (RFC 7983 §7), the SRTP packet's
// header (RFC 3711 §3.1), padding (RFC 3550 §5.1), the rollover counter (RFC 3711 §3.3.1),
// receiver statistics (RFC 3550 §A.3, §A.8) and the Opus jitter buffer, with time moving on and
// deadlines flushed. Datagrams that are RTCP go through the SRTCP framing instead (RFC 3711 §3.4,
// RFC 7714 §9.2: the trailer's E flag, index and tag) and the compound-packet walk that finds a
// sender report (RFC 3550 §6.1, §6.4.1), as if decrypted. Invariants: the header and tag lie inside
// the datagram; the buffer holds at most its cap; output positions never go back; every packet out
// is non-empty; the SRTCP trailer lies inside the datagram after an 8-byte header; a receiver
// report written from the statistics reads back as a valid compound packet of reports only.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/codec/opus.h"
#include "core/rtp/receive.h"

using namespace skylark;

// The sender SSRC of an RTCP packet (bytes 4..7).
static uint32_t h_ssrc(const uint8_t* d) { return uint32_t{d[4]} << 24 | uint32_t{d[5]} << 16 | uint32_t{d[6]} << 8 | d[7]; }

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
    if (rtp::is_rtcp(d, n)) {
      rtp::SrtcpTrailer tr;
      if (rtp::parse_srtcp_trailer(d, n, tag, tag == 16, &tr)) {
        if (tr.rtcp_end < 8 || tr.tag_at + tag > n || tr.index_at + 4 > n || tr.index > 0x7fffffff) std::abort();
        const rtp::RtcpSummary sr = rtp::read_sender_reports(d, tr.rtcp_end, h_ssrc(d));
        if (!sr.valid && (sr.has_sr || sr.reports_only)) std::abort();  // nothing of a malformed packet is used
      }
      continue;
    }
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
  uint8_t rr[rtp::kReceiverReportSize];
  rtp::write_receiver_report(rr, 1, 2, b, 3, 4);
  const rtp::RtcpSummary back = rtp::read_sender_reports(rr, sizeof rr, 2);
  if (!back.valid || !back.reports_only || back.has_sr || !rtp::is_rtcp(rr, sizeof rr)) std::abort();
  jitter.flush(now + 1000);
  if (jitter.size() != 0) std::abort();
  return 0;
}
