// The receive side of RTP for a WHIP publisher (docs/behaviour.md "Go live over WHIP"), pure:
// no sockets, no crypto, no Node. What native/io/whip_receive.cc reads off the publisher's UDP
// socket goes through these, in this order:
// - `is_rtp`: demultiplexing (RFC 7983 §7, RFC 5761 §4): first byte 128–191 and the second byte's
//   low 7 bits not 64–95 is RTP; everything else (STUN, DTLS, SRTCP) is not.
// - `parse_srtp_header`: the RTP header of an SRTP packet (RFC 3550 §5.1, RFC 3711 §3.1): version
//   2, CSRCs and a header extension skipped; room for the authentication tag checked.
// - `RolloverCounter`: the packet index's rollover counter guessed as RFC 3711 §3.3.1 (Appendix A)
//   says, updated only after a packet authenticated.
// - `ReceptionStats`: receiver statistics of one SSRC for receiver reports (RFC 3550 §6.4.1:
//   extended highest sequence number and loss §A.3, interarrival jitter §A.8).
// - `OpusJitterBuffer`: packets in sequence order, timed by the RTP clock, with the semantics of
//   src/live/ingest/rtp-jitter.ts: held up to `delay_ms` for the ones before them, gaps up to
//   `max_fill_ms` filled with Opus PLC frames (a TOC byte with code 0 and no frame data, RFC 6716
//   §3.2.1), late and duplicate packets dropped and counted, at most `max_packets` held.
// - SRTCP framing (RFC 3711 §3.4, RFC 7714 §9.2): `is_rtcp`, `parse_srtcp_trailer` (the E flag and
//   SRTCP index after or before the tag), `read_sender_reports` (a compound RTCP packet walked,
//   RFC 3550 §6.1, the sender report's NTP middle 32 bits taken for LSR, §6.4.1) and
//   `write_receiver_report` (RFC 3550 §6.4.2). The crypto is native/io/srtcp.h's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace skylark::rtp {

/** RFC 7983 §7 + RFC 5761 §4: whether the datagram is RTP (not STUN, DTLS, RTCP/SRTCP). */
bool is_rtp(const uint8_t* data, size_t size);

struct RtpHeader {
  uint16_t seq = 0;
  uint32_t timestamp = 0;
  uint32_t ssrc = 0;
  uint8_t payload_type = 0;
  bool padding = false;
  size_t header_size = 0;  // fixed header + CSRCs + extension: where the (encrypted) payload starts
};

enum class RtpStatus : uint8_t {
  kOk = 0,
  kNotRtp,     // shorter than 12 bytes, version not 2, or an RTCP payload type (RFC 5761 §4)
  kTruncated,  // CSRCs/extension/tag run past the datagram
};

/**
 * Reads the RTP header of an SRTP packet `data[0, size)` whose last `tag_size` bytes are the
 * authentication tag (RFC 3711 §3.1). kOk: `out->header_size + tag_size <= size`.
 */
RtpStatus parse_srtp_header(const uint8_t* data, size_t size, size_t tag_size, RtpHeader* out);

/**
 * After decryption: the payload's end once RTP padding is removed (RFC 3550 §5.1: the last byte
 * counts the padding bytes, itself included), or 0 when the padding count is 0 or runs into the
 * header (a malformed packet). `end` is where the payload ends before padding is removed.
 */
size_t strip_padding(const uint8_t* data, size_t header_size, size_t end);

/** RFC 3711 §3.3.1 (Appendix A): the rollover counter of one SSRC's receive. */
class RolloverCounter {
 public:
  /** The ROC `seq` most likely belongs to; -1 when it would be before the first (too old). */
  int64_t estimate(uint16_t seq) const;
  /** After a packet with (`seq`, `roc`) authenticated: s_l and ROC move to the highest index. */
  void advance(uint16_t seq, uint32_t roc);
  /** Starts over at `seq` (the first packet of an SSRC) with ROC 0. */
  void reset(uint16_t seq);
  uint32_t roc() const { return roc_; }

 private:
  uint32_t roc_ = 0;
  int32_t sl_ = -1;
};

/** RFC 7983 §7 + RFC 5761 §4: whether the datagram is RTCP (SRTCP): first byte 128–191, packet type 192–223. */
bool is_rtcp(const uint8_t* data, size_t size);

/** The SRTCP trailer of a packet (RFC 3711 §3.4; RFC 7714 §9.2 for AEAD). */
struct SrtcpTrailer {
  bool encrypted = false;  // the E flag
  uint32_t index = 0;      // 31 bits
  size_t rtcp_end = 0;     // where the RTCP packet (its encrypted part included) ends
  size_t tag_at = 0;       // where the authentication tag starts
  size_t index_at = 0;     // where E ‖ SRTCP index starts
};

/**
 * Reads the trailer of an SRTCP packet `data[0, size)` with a `tag_size`-byte tag: AES-CM
 * (`aead` false) ends with E ‖ index, then the tag (RFC 3711 §3.4); AEAD (RFC 7714 §9.2) with the
 * tag, then E ‖ index. False when the packet cannot hold an 8-byte RTCP header and the trailer, or
 * is not RTCP.
 */
bool parse_srtcp_trailer(const uint8_t* data, size_t size, size_t tag_size, bool aead, SrtcpTrailer* out);

/** What a (decrypted) compound RTCP packet carries for the receive side (RFC 3550 §6.1, §6.4.1). */
struct RtcpSummary {
  bool valid = false;       // version 2 everywhere, the lengths add up to the packet, first SR or RR
  bool reports_only = true; // only SR, RR and SDES (nothing that werift's own RTCP handling needs)
  bool has_sr = false;      // a sender report of `ssrc` (the one asked for)
  uint32_t lsr = 0;         // its NTP timestamp's middle 32 bits (LSR, §6.4.1)
};

/**
 * Walks compound RTCP `data[0, size)`; the SR looked for is the one whose sender SSRC is `ssrc`.
 * A malformed packet (empty, a version other than 2, a length past the end) gives all fields false.
 */
RtcpSummary read_sender_reports(const uint8_t* data, size_t size, uint32_t ssrc);

constexpr size_t kReceiverReportSize = 32;  // RR header (8) + one report block (24)

struct ReportBlock;

/**
 * Writes an RTCP receiver report (RFC 3550 §6.4.2) from `reporter` with one report block on
 * `source` into `out` (kReceiverReportSize bytes); `lsr`, `dlsr` (1/65536 s) per §6.4.1.
 */
void write_receiver_report(uint8_t* out, uint32_t reporter, uint32_t source, const ReportBlock& block, uint32_t lsr, uint32_t dlsr);

/** One receiver report block's fields (RFC 3550 §6.4.1). */
struct ReportBlock {
  uint32_t fraction_lost = 0;  // 0..255
  uint32_t packets_lost = 0;   // cumulative, clamped to 0..0x7FFFFF
  uint32_t highest_sequence = 0;
  uint32_t jitter = 0;         // RTP clock units
};

/** Receiver statistics of one SSRC (RFC 3550 §A.1 without probation, §A.3, §A.8). */
class ReceptionStats {
 public:
  /** One packet: `arrival` in RTP clock units (any origin). */
  void add(uint16_t seq, uint32_t timestamp, double arrival);
  /** The report block now; starts the next interval for `fraction_lost`. */
  ReportBlock report();
  uint64_t received() const { return received_; }

 private:
  uint64_t received_ = 0;
  int64_t base_ = -1, highest_ = -1;
  int64_t expected_prior_ = 0, received_prior_ = 0;
  double jitter_ = 0;
  bool have_transit_ = false;
  int32_t last_transit_ = 0;
};

/** What the jitter buffer counts (as src/live/ingest/rtp-jitter.ts `JitterStats`). */
struct JitterStats {
  uint64_t received = 0;   // packets taken in
  uint64_t reordered = 0;  // arrived after a later one
  uint64_t lost = 0;       // given up (their audio concealed)
  uint64_t late = 0;       // dropped: late, duplicate, malformed
  uint64_t filled = 0;     // PLC frames made
};

struct JitterOptions {
  uint32_t delay_ms = 60;
  uint32_t max_fill_ms = 10000;
  uint32_t max_packets = 512;
};

/**
 * The jitter buffer of one publish: Opus packets in, in sequence order out, each at its position
 * in 48 kHz samples counted from the first packet (monotone), gaps filled. Pure: the caller passes
 * the time (ms, any origin) and calls `flush` at `deadline()`.
 */
class OpusJitterBuffer {
 public:
  /** One packet out: position (samples), the Opus packet (valid during the call), a PLC frame. */
  using Out = std::function<void(uint64_t samples, const uint8_t* data, size_t size, bool filled)>;

  OpusJitterBuffer(const JitterOptions& o, Out out) : o_(o), out_(std::move(out)) {}

  /** One RTP packet's fields; `payload` is copied when it has to wait. */
  void push(uint16_t seq, uint32_t timestamp, const uint8_t* payload, size_t size, double now_ms);
  /** Sends what may go at `now_ms`; `force` gaps are given up whatever their wait. */
  void flush(double now_ms, uint64_t force = 0);
  /** A new SSRC: what is held goes out; the next packet starts new runs (the position goes on). */
  void restart();
  /** When `flush` should next be called (ms), or a negative number when nothing waits. */
  double deadline() const;
  size_t size() const { return held_.size(); }
  const JitterStats& stats() const { return stats_; }

 private:
  struct Held {
    int64_t ts;
    double at;
    std::vector<uint8_t> payload;
  };
  void emit(int64_t ts, const uint8_t* data, size_t size);
  int64_t extend_seq(uint16_t seq) const;
  int64_t extend_ts(uint32_t ts) const;

  JitterOptions o_;
  Out out_;
  JitterStats stats_;
  std::map<int64_t, Held> held_;
  bool started_ = false;
  int64_t next_seq_ = 0, highest_seq_ = 0;
  int64_t next_ts_ = 0;
  uint64_t position_ = 0;
  int last_toc_ = -1;
};

}  // namespace skylark::rtp
