// A WHIP publisher's media receive, natively (docs/behaviour.md "Go live over WHIP", docs/decisions.md
// "WHIP receive in native code"): once its peer connection is up, the publisher's UDP socket (the
// nominated ICE pair's, which werift opened) is watched by a uv_poll on Node's own loop and read
// with recvmmsg, many datagrams per wakeup. Each datagram that is RTP (RFC 7983 §7, RFC 5761 §4) is
// authenticated and decrypted in place (RFC 3711: SRTP_AES128_CM_HMAC_SHA1_80 with one AES-128-ECB
// context building the counter-mode key stream and the HMAC-SHA1 inner/outer states precomputed,
// RFC 2104 §2; SRTP_AEAD_AES_128_GCM, RFC 7714 §8, with one GCM context and only the IV set per
// packet), its rollover counter estimated (§3.3.1), counted for receiver reports (RFC 3550 §A.3,
// §A.8) and put in order by the Opus jitter buffer (core/rtp/receive.h); the ordered Opus packets go
// as Enhanced RTMP `Opus` coded-frame bodies straight into the routed AudioSink (the stream's
// passthrough segmenter), and to the owner when it wants every frame. Every datagram that is not RTP
// (STUN, DTLS, SRTCP) goes to the owner unchanged (to werift), but the SRTCP taken here (below).
// - A new SSRC (the publisher restarted its stream) is taken once one of its packets authenticates;
//   its own rollover counter and statistics start there, and the jitter buffer restarts.
// - Merged reads (as the RTMP server's, docs/decisions.md "Ingest I/O"): while routed into a sink
//   that allows it and whose next part or segment cut is more than `merge_ms` (plus slack) away,
//   the socket is not read as datagrams arrive but on a timer every `merge_ms`, aligned on the loop
//   clock so that every receiver's tick falls in one wakeup; the datagrams wait in the socket's
//   buffer and one `recvmmsg` takes them. Near a cut one read is timed just before it, then the
//   socket is read as datagrams arrive until the cut has passed, so the packet that closes a part
//   is never held back. Each datagram's arrival time is the kernel's receive timestamp
//   (SO_TIMESTAMPNS), so the jitter buffer's waits and the interarrival jitter do not depend on
//   when it was read; a jitter deadline reads the socket before it gives a packet up.
// - RTCP in native code (when `rtcp.on`): the publisher's SRTCP (RFC 3711 §3.4, RFC 7714 §9) is
//   authenticated and decrypted here (io/srtcp.h); a compound packet of sender reports, receiver
//   reports and SDES only is taken here — the current source's SR gives LSR (its NTP timestamp's
//   middle 32 bits) and its arrival for DLSR (RFC 3550 §6.4.1) — and anything else (BYE,
//   feedback, APP, XR) goes to the owner unchanged; a packet that does not authenticate is dropped
//   and counted. Receiver reports (RFC 3550 §6.4.2: one block on the current source from the
//   statistics kept here) are written every 0.5–1.5 s (§6.2's randomised interval), SRTCP-protected
//   with the next index of the reporter SSRC (E set) and sent on the socket to the nominated remote
//   address. Nothing is sent before the first authentic RTP packet.
// - Bounds: at most `max_packets` packets held by the jitter buffer, one fixed receive batch
//   (kWhipReceiveBatch datagrams of kWhipReceiveDatagram bytes), a bounded number of batches per
//   wakeup; nothing else grows with what arrives.
// No N-API here; the OpenSSL used is the one the process carries (Node's).
#pragma once
#include <sys/socket.h>
#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/rtp/receive.h"
#include "io/rtmp_server.h"
#include "io/srtcp.h"

namespace skylark::io {

constexpr size_t kWhipReceiveBatch = 16;        // datagrams per recvmmsg
constexpr size_t kWhipReceiveDatagram = 4096;   // bytes per datagram slot (a longer one is truncated: dropped)

struct WhipReceiveConfig {
  int fd = -1;  // a bound UDP socket the process owns (not closed here); nothing else may read it meanwhile
  int profile = 0;  // RFC 5764 §4.1.2: 0x0001 or 0x0007
  std::vector<uint8_t> key, salt, auth;  // the remote direction's session keys (RFC 3711 §4.3)
  uint8_t payload_type = 111;            // the negotiated Opus payload type
  uint32_t clock_rate = 48000;
  uint32_t max_frame_bytes = 65536;      // a longer Opus packet is not taken (docs/behaviour.md §13)
  uint32_t merge_ms = 0;                 // merged reads while routed (0: read as datagrams arrive)
  rtp::JitterOptions jitter;
  struct Rtcp {
    bool on = false;  // SRTCP opened and receiver reports sent here
    std::vector<uint8_t> remote_key, remote_salt, remote_auth;  // the publisher's SRTCP session keys
    std::vector<uint8_t> local_key, local_salt, local_auth;     // ours (RFC 3711 §4.3, labels 3–5)
    uint32_t reporter_ssrc = 0;  // the SSRC our reports are sent from
    uint32_t last_index = 0;     // the last SRTCP index already used for it (the next is one more)
    sockaddr_storage remote{};   // the nominated pair's remote address
  } rtcp;
};

/** What the receiver tells its owner, from libuv callbacks only (never from a call on it). */
class WhipReceiveEvents {
 public:
  virtual ~WhipReceiveEvents() = default;
  /** A datagram that is not RTP, unchanged, with its sender. Valid during the call. */
  virtual void on_datagram(const uint8_t* data, size_t size, const sockaddr_storage& from) = 0;
  /** An Opus packet in order at `samples` (48 kHz, from the first), when the owner wants frames; `segmented`: the sink has it. */
  virtual void on_frame(uint64_t samples, const uint8_t* data, size_t size, bool segmented) = 0;
  /** The end of one wakeup's work (after its datagrams or a jitter deadline). */
  virtual void on_batch_end() = 0;
  /** The socket failed (the watch stopped). */
  virtual void on_error(int uv_error) = 0;
};

/** Counters for the owner. */
struct WhipReceiveCounts {
  uint64_t packets = 0;   // RTP packets of the Opus payload type authenticated
  uint64_t bytes = 0;     // their payload bytes
  uint64_t rejected = 0;  // RTP datagrams dropped: authentication, malformed, too old, truncated
  uint64_t other = 0;     // datagrams handed back (not RTP)
  uint64_t segmented = 0; // Opus packets (PLC frames included) pushed into the routed sink
  uint64_t merged_reads = 0;  // reads on a merge tick (not as datagrams arrived)
  uint64_t srtcp = 0;          // SRTCP packets authenticated and taken here
  uint64_t srtcp_rejected = 0; // SRTCP datagrams dropped: authentication failed, malformed
  uint64_t reports_sent = 0;   // receiver reports sent from here
  uint32_t srtcp_index = 0;    // the last SRTCP index used for our reports
  int64_t ssrc = -1;      // the current SSRC (-1: none yet)
  double last_rtp_ms = -1;  // uv_hrtime ms of the last authentic RTP packet (-1: none)
};

class WhipReceiver {
 public:
  // Checks keys and profile; `error` set and start() refused when they are wrong.
  WhipReceiver(uv_loop_t* loop, const WhipReceiveConfig& config, WhipReceiveEvents& events, std::string* error);
  ~WhipReceiver();
  WhipReceiver(const WhipReceiver&) = delete;
  WhipReceiver& operator=(const WhipReceiver&) = delete;

  bool ok() const { return ok_; }
  // Starts watching the socket: 0 or a libuv error code.
  int start();
  // Stops watching (idempotent): the socket is never read here again. Nothing is reported after it.
  void stop();
  // Ordered frames go to `sink` from now on (nullptr: to the owner only); `frames`: the owner gets
  // every frame too (flagged segmented); `merge`: merged reads allowed.
  void route(std::unique_ptr<AudioSink> sink, bool frames, bool merge = false);
  bool merged() const { return merged_; }
  AudioSink* sink() const { return sink_.get(); }
  // One receiver report block on the current SSRC; false before its first packet.
  bool report(rtp::ReportBlock* out);
  const WhipReceiveCounts& counts() const { return counts_; }
  const rtp::JitterStats& jitter_stats() const { return jitter_.stats(); }
  size_t held() const { return jitter_.size(); }

  struct Srtp;

 private:
  static void OnReadable(uv_poll_t* h, int status, int events);
  static void OnTimer(uv_timer_t* t);
  void Read(bool deadline);
  void Datagram(uint8_t* data, size_t size, const sockaddr_storage& from, double now_ms);
  void Frame(uint64_t samples, const uint8_t* data, size_t size, bool filled);
  void Schedule();
  void UpdateMerged();
  void SetMerged(bool on, uint64_t at);
  static void OnMergeTick(uv_timer_t* t);
  bool Rtcp(const uint8_t* data, size_t size, double now_ms);
  static void OnReportTimer(uv_timer_t* t);
  void SendReport();
  void ScheduleReport();

  uv_loop_t* loop_;
  WhipReceiveConfig config_;
  WhipReceiveEvents& events_;
  bool ok_ = false;
  uv_poll_t* poll_ = nullptr;
  uv_timer_t* timer_ = nullptr;
  uv_timer_t* merge_timer_ = nullptr;
  uv_timer_t* report_timer_ = nullptr;
  std::unique_ptr<SrtcpContext> srtcp_in_, srtcp_out_;
  std::vector<uint8_t> rtcp_;       // a received SRTCP packet's copy, opened in place
  uint32_t lsr_ = 0;                // the current source's last SR (RFC 3550 §6.4.1) …
  double lsr_at_ = -1;              // … and when it arrived (uv_hrtime ms; -1: none)
  uint64_t rand_ = 0;               // xorshift state for the report interval
  bool merge_allowed_ = false, merged_ = false, cut_armed_ = false;
  std::unique_ptr<Srtp> srtp_, candidate_;
  rtp::RolloverCounter roc_;
  rtp::ReceptionStats stats_;
  rtp::OpusJitterBuffer jitter_;
  std::unique_ptr<AudioSink> sink_;
  bool frames_ = true;
  WhipReceiveCounts counts_;
  std::vector<uint8_t> slots_, body_;
  std::vector<sockaddr_storage> addrs_;
  std::vector<uint8_t> control_;  // one cmsg buffer per slot (the receive timestamp)
};

}  // namespace skylark::io
