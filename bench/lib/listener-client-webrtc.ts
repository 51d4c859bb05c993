/**
 * A load-client process for the WebRTC part of bench/listeners.bench.ts: `count` werift peers, each
 * a WHEP session (`POST /whep/<stream>` with a recvonly offer, non-trickle), counting the RTP
 * packets each receives inside the measuring window by sequence number (loss = gaps between the
 * first and last sequence number seen in the window). DELETEs its sessions at the end. Once a peer
 * connects, its SRTP packets are counted without being decrypted (one in 50 verified), see `light`.
 *
 * Config: one JSON argument {url, count, rampPerSec, from, to, exitAt}. Prints one JSON line:
 * per peer {received, expected} plus setup failures.
 */
import { RTCPeerConnection, RTCRtpCodecParameters, SrtpAuthenticationError, type RTCRtpTransceiver } from 'werift';

interface Cfg {
  url: string;
  count: number;
  rampPerSec: number;
  from: number;
  to: number;
  exitAt: number;
}
const cfg = JSON.parse(process.argv[2]!) as Cfg;
/** Count raw datagrams once connected (see `light`) unless BENCH_WEBRTC_CLIENT_FULL=1 (werift's receiver). */
const LIGHT = process.env.BENCH_WEBRTC_CLIENT_FULL !== '1';
const VERIFY_EVERY = 50;
const errors: Record<string, number> = {};
const err = (k: string) => (errors[k] = (errors[k] ?? 0) + 1);

interface PeerStat {
  received: number;
  first: number; // extended seq of the first packet in the window
  last: number;
  connected: boolean;
  location: string | null;
  pc: RTCPeerConnection;
}
const peers: PeerStat[] = [];

async function startPeer(): Promise<void> {
  const pc = new RTCPeerConnection({
    codecs: { audio: [new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2, payloadType: 111 })], video: [] },
    headerExtensions: { audio: [], video: [] },
    iceUseIpv6: false,
    iceAdditionalHostAddresses: ['127.0.0.1'],
  });
  const st: PeerStat = { received: 0, first: -1, last: -1, connected: false, location: null, pc };
  peers.push(st);
  let ext = -1; // extended sequence number
  const count = (s: number) => {
    const now = Date.now();
    if (ext < 0) ext = s;
    else {
      const delta = (s - (ext & 0xffff) + 0x10000) % 0x10000;
      if (delta < 0x8000) ext += delta;
      else return; // late/duplicate
    }
    if (now < cfg.from || now >= cfg.to) return;
    if (st.first < 0) st.first = ext;
    st.last = ext;
    st.received++;
  };
  const transceiver = pc.addTransceiver('audio', { direction: 'recvonly' });
  if (!LIGHT) pc.onTrack.subscribe((track) => track.onReceiveRtp.subscribe((rtp) => count(rtp.header.sequenceNumber)));
  pc.connectionStateChange.subscribe((s) => {
    if (s !== 'connected' || st.connected) return;
    st.connected = true;
    if (LIGHT) light(transceiver, count);
  });
  await pc.setLocalDescription(await pc.createOffer());
  await new Promise<void>((r) => {
    if (pc.iceGatheringState === 'complete') return r();
    pc.iceGatheringStateChange.subscribe((s) => s === 'complete' && r());
  });
  const res = await fetch(cfg.url, { method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: pc.localDescription!.sdp });
  if (res.status !== 201) {
    err(`whep ${res.status}`);
    return;
  }
  st.location = new URL(res.headers.get('location')!, cfg.url).href;
  await pc.setRemoteDescription({ type: 'answer', sdp: await res.text() });
  // Like a player: a session not connected after 10 s is hung up and tried again (before the window).
  setTimeout(() => {
    if (st.connected || Date.now() > cfg.from - 2000) return;
    retries++;
    peers.splice(peers.indexOf(st), 1);
    if (st.location) fetch(st.location, { method: 'DELETE' }).catch(() => {});
    pc.close().catch(() => {});
    startPeer().catch((e) => err(`setup: ${(e as Error).message.slice(0, 60)}`));
  }, 10_000);
}
let retries = 0;

/**
 * The light receiver: once connected, each SRTP packet is counted by its RTP sequence number (in
 * clear in SRTP, RFC 3711 §3.1) and then dropped in werift's SRTP session instead of being
 * decrypted and handed to werift's RTP receiver, so the client processes cost less than the server
 * they load. One packet in `VERIFY_EVERY` is still decrypted and authenticated by werift (failures
 * count as errors `srtp auth`). DTLS, STUN and SRTCP stay werift's.
 */
function light(transceiver: RTCRtpTransceiver, count: (seq: number) => void): void {
  const srtp = (transceiver.receiver.dtlsTransport as unknown as { srtp?: { decrypt(b: Buffer): Buffer } }).srtp;
  if (!srtp) {
    err('no srtp session');
    return;
  }
  const decrypt = srtp.decrypt;
  let n = 0;
  srtp.decrypt = (b: Buffer) => {
    if (b.length >= 12) count(b.readUInt16BE(2));
    if (++n % VERIFY_EVERY === 0) {
      try {
        decrypt(b);
      } catch {
        err('srtp auth');
      }
    }
    throw DROPPED; // werift drops the packet quietly
  };
}
const DROPPED = new SrtpAuthenticationError('counted by the bench client');

let started = 0;
const t0 = Date.now();
const ramp = setInterval(() => {
  const target = Math.min(cfg.count, Math.ceil(((Date.now() - t0) / 1000) * cfg.rampPerSec));
  while (started < target) {
    started++;
    startPeer().catch((e) => err(`setup: ${(e as Error).message.slice(0, 60)}`));
  }
  if (started >= cfg.count) clearInterval(ramp);
}, 50);

setTimeout(async () => {
  const out = {
    started,
    retries,
    connected: peers.filter((p) => p.connected).length,
    errors,
    peers: peers.map((p) => ({ received: p.received, expected: p.first < 0 ? 0 : p.last - p.first + 1 })),
  };
  process.stdout.write(JSON.stringify(out) + '\n');
  await Promise.allSettled(peers.map((p) => (p.location ? fetch(p.location, { method: 'DELETE' }) : null)));
  process.exit(0);
}, Math.max(0, cfg.exitAt - Date.now()));
