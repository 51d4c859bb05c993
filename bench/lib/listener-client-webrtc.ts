/**
 * A load-client process for the WebRTC part of bench/listeners.bench.ts: `count` werift peers, each
 * a WHEP session (`POST /whep/<stream>` with a recvonly offer, non-trickle), counting the RTP
 * packets each receives inside the measuring window by sequence number (loss = gaps between the
 * first and last sequence number seen in the window). DELETEs its sessions at the end. Once a peer
 * connects, its RTP packets are counted off its UDP socket without werift (one in 50 verified),
 * see `light`. With `janus` in the config, each peer signals through Janus's streaming plugin
 * instead (bench/lib/janus-peer.ts: Janus offers, the peer answers) and is counted the same way.
 *
 * Config: one JSON argument {url, count, rampPerSec, from, to, exitAt}. Prints one JSON line:
 * per peer {received, expected}, setup failures, and the process's CPU time in the window (`cpuMs`).
 */
import type { RemoteInfo, Socket } from 'node:dgram';
import { RTCPeerConnection, RTCRtpCodecParameters, SrtpAuthenticationError, type RTCRtpTransceiver } from 'werift';
import { janusWatch } from './janus-peer.js';

interface Cfg {
  /** The WHEP endpoint; with `janus`, the Janus HTTP API base instead (bench/lib/janus-peer.ts). */
  url: string;
  /** Signal through Janus's streaming plugin ("watch" mountpoint `janus.mountpoint`) instead of WHEP. */
  janus?: { mountpoint: number };
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
/**
 * Connected peers' sockets are read in bursts, every READ_MS (BENCH_WEBRTC_CLIENT_READ_MS; 0: as
 * datagrams come): between bursts they are out of the event loop, so ≈ 5 queued datagrams are read
 * per wake-up and per EAGAIN instead of one, and the server's `sendto` on loopback wakes no reader,
 * as with a remote listener.
 */
const READ_MS = Number(process.env.BENCH_WEBRTC_CLIENT_READ_MS ?? 100);
const errors: Record<string, number> = {};
const err = (k: string) => (errors[k] = (errors[k] ?? 0) + 1);

interface PeerStat {
  received: number;
  first: number; // extended seq of the first packet in the window
  last: number;
  connected: boolean;
  /** Ends the session on the server (WHEP DELETE, Janus `destroy`); null before it exists. */
  hangup: (() => Promise<unknown>) | null;
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
  const st: PeerStat = { received: 0, first: -1, last: -1, connected: false, hangup: null, pc };
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
  const transceiver = cfg.janus ? null : pc.addTransceiver('audio', { direction: 'recvonly' });
  if (!LIGHT) pc.onTrack.subscribe((track) => track.onReceiveRtp.subscribe((rtp) => count(rtp.header.sequenceNumber)));
  pc.connectionStateChange.subscribe((s) => {
    if (s !== 'connected' || st.connected) return;
    st.connected = true;
    // Janus's offer made the transceiver (setRemoteDescription); WHEP's is ours.
    const rx = transceiver ?? pc.getTransceivers()[0];
    if (LIGHT && rx) light(rx, count);
  });
  const gathered = () =>
    new Promise<void>((r) => {
      if (pc.iceGatheringState === 'complete') return r();
      pc.iceGatheringStateChange.subscribe((s) => s === 'complete' && r());
    });
  if (cfg.janus) {
    const w = await janusWatch(cfg.url, cfg.janus.mountpoint, async (offer) => {
      await pc.setRemoteDescription({ type: 'offer', sdp: offer });
      await pc.setLocalDescription(await pc.createAnswer());
      await gathered();
      return pc.localDescription!.sdp;
    }).catch((e: Error) => {
      err(`janus: ${e.message.slice(0, 60)}`);
      return null;
    });
    if (!w) return;
    st.hangup = w.hangup;
  } else {
    await pc.setLocalDescription(await pc.createOffer());
    await gathered();
    const res = await fetchOnce(cfg.url, { method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: pc.localDescription!.sdp });
    if (res.status !== 201) {
      err(`whep ${res.status}`);
      return;
    }
    const location = new URL(res.headers.get('location')!, cfg.url).href;
    st.hangup = () => fetch(location, { method: 'DELETE' });
    await pc.setRemoteDescription({ type: 'answer', sdp: await res.text() });
  }
  // Like a player: a session not connected after 10 s is hung up and tried again (before the window).
  setTimeout(() => {
    if (st.connected || Date.now() > cfg.from - 2000) return;
    retries++;
    peers.splice(peers.indexOf(st), 1);
    st.hangup?.().catch(() => {});
    pc.close().catch(() => {});
    startPeer().catch(setupFailed);
  }, 10_000);
}
let retries = 0;
/**
 * `fetch`, sent again once on a fresh connection when the pooled keep-alive connection it went out
 * on was closed before any answer (the server closes connections idle 10 s, docs/http.md "Idle
 * connections"; a loaded client may not have seen the close yet), as browsers do.
 */
async function fetchOnce(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (e) {
    const code = (e as { cause?: { code?: string } }).cause?.code;
    if (code !== 'UND_ERR_SOCKET' && code !== 'ECONNRESET') throw e;
    closedBeforeAnswer++;
    return fetch(url, init);
  }
}
let closedBeforeAnswer = 0;
/** A setup that threw: its message and, for a failed fetch, the network error under it (ECONNRESET, …). */
const setupFailed = (e: Error & { cause?: { code?: string } }) => err(`setup: ${e.message.slice(0, 60)}${e.cause?.code ? ` (${e.cause.code})` : ''}`);

/**
 * The light receiver: once connected, the peer's UDP sockets (one per local ICE candidate) are
 * read here first. A datagram whose first byte is 128–191 is RTP or RTCP (RFC 7983 §7); one whose payload
 * type byte is not 192–223 (RTCP, RFC 5761 §4) is RTP: it is counted by its sequence number (in
 * clear in SRTP, RFC 3711 §3.1) and dropped without reaching werift, so the client processes cost
 * far less than the server they load. One RTP packet in `VERIFY_EVERY` still goes through werift
 * and is decrypted and authenticated there, then dropped (failures count as errors `srtp auth`), as
 * does every packet within 100 of the sequence number wrap (werift's rollover counter needs them).
 * STUN (0–3: consent freshness, RFC 7675), DTLS (20–63) and SRTCP stay werift's.
 */
/** werift's window around the sequence number wrap for its rollover counter (`MaxROCDisorder`, RFC 3711 §3.3.1). */
const ROC_EDGE = 100;

function light(transceiver: RTCRtpTransceiver, count: (seq: number) => void): void {
  const dtls = transceiver.receiver.dtlsTransport as unknown as {
    srtp?: { decrypt(b: Buffer): Buffer };
    iceTransport: { connection: { protocols: Array<{ transport?: { socket?: Socket } }> } };
  };
  const srtp = dtls.srtp;
  // Every local candidate's socket: the media comes to the nominated pair's, whichever werift reports.
  const sockets = dtls.iceTransport.connection.protocols.flatMap((p) => (p.transport?.socket ? [p.transport.socket] : []));
  if (!srtp || !sockets.length) {
    err(srtp ? 'no ICE socket' : 'no srtp session');
    return;
  }
  const decrypt = srtp.decrypt;
  srtp.decrypt = (b: Buffer) => {
    try {
      decrypt(b);
    } catch {
      err('srtp auth');
    }
    throw DROPPED; // werift drops the packet quietly
  };
  let n = 0;
  for (const socket of sockets) {
    const h = udpHandle(socket);
    if (READ_MS > 0 && h) {
      paused.add(h);
      socket.once('close', () => paused.delete(h)); // before a closing handle could be started again
    }
    const werift = socket.listeners('message') as Array<(d: Buffer, info: RemoteInfo) => void>;
    socket.removeAllListeners('message');
    socket.on('message', (d: Buffer, info: RemoteInfo) => {
      const b0 = d[0]!;
      if (b0 >= 128 && b0 <= 191 && d.length >= 12) {
        const pt = d[1]!;
        if (pt < 192 || pt > 223) {
          const seq = d.readUInt16BE(2);
          count(seq);
          // werift moves its rollover counter only on seeing both sides of the wrap within 100 of
          // it: every packet there goes to werift, or a wrap between two checked ones would fail
          // every check after it.
          if (++n % VERIFY_EVERY !== 0 && seq >= ROC_EDGE && seq < 65536 - ROC_EDGE) return;
        }
      }
      for (const l of werift) l.call(socket, d, info);
    });
  }
}
interface UdpHandle {
  recvStart(): number;
  recvStop(): number;
}
/** The libuv UDP handle of a dgram socket (Node keeps it in an own symbol property, 'state symbol'). */
function udpHandle(socket: Socket): UdpHandle | null {
  const o = socket as unknown as Record<symbol, { handle?: UdpHandle } | undefined>;
  const sym = Object.getOwnPropertySymbols(o).find((x) => x.description === 'state symbol');
  const h = sym ? o[sym]?.handle : undefined;
  return h && typeof h.recvStart === 'function' && typeof h.recvStop === 'function' ? h : null;
}
/** The handles read in bursts: started on a timer, stopped again after one pass of the event loop's poll phase. */
const paused = new Set<UdpHandle>();
if (READ_MS > 0) {
  const stopAll = () => {
    for (const h of paused) h.recvStop();
  };
  setInterval(() => {
    for (const h of paused) h.recvStart();
    setImmediate(stopAll); // after the poll phase has read what was queued
  }, READ_MS).unref();
  setImmediate(stopAll);
}

const DROPPED = new SrtpAuthenticationError('counted by the bench client');

let started = 0;
const t0 = Date.now();
const ramp = setInterval(() => {
  const target = Math.min(cfg.count, Math.ceil(((Date.now() - t0) / 1000) * cfg.rampPerSec));
  while (started < target) {
    started++;
    startPeer().catch(setupFailed);
  }
  if (started >= cfg.count) clearInterval(ramp);
}, 50);

// This process's CPU time (user + system) inside the measuring window, in ms.
let cpuFrom: NodeJS.CpuUsage | null = null;
let cpuMs = NaN;
setTimeout(() => (cpuFrom = process.cpuUsage()), Math.max(0, cfg.from - Date.now()));
setTimeout(() => {
  if (!cpuFrom) return;
  const d = process.cpuUsage(cpuFrom);
  cpuMs = (d.user + d.system) / 1000;
}, Math.max(0, cfg.to - Date.now()));

setTimeout(async () => {
  const out = {
    started,
    cpuMs,
    retries,
    closedBeforeAnswer,
    connected: peers.filter((p) => p.connected).length,
    errors,
    peers: peers.map((p) => ({ received: p.received, expected: p.first < 0 ? 0 : p.last - p.first + 1 })),
  };
  process.stdout.write(JSON.stringify(out) + '\n');
  await Promise.allSettled(peers.map((p) => p.hangup?.()));
  process.exit(0);
}, Math.max(0, cfg.exitAt - Date.now()));
