/**
 * WHEP offers that never connect (docs/behaviour.md §13, §4): an answered offer is pending, not a
 * listener, until its peer connects.
 * - 40 offers with real SDP (from a werift peer) that never connect: no listener counted, no
 *   `listener.joined`, no codec process; at most one UDP socket each while pending (fds, UDP
 *   sockets and RSS read from /proc under ceilings); all dropped after the offer timeout, fds and
 *   UDP sockets back to the baseline, each timeout counted.
 * - The caps: per client address (`X-Forwarded-For` through a trusted proxy) and in total, each
 *   answered 429 `too_many_pending_offers` with `Retry-After`, CORS and the JSON envelope, counted
 *   on the node's Limits; a DELETE gives a slot back.
 * - A real werift peer that connects and receives audio is counted once (`listener.joined` once),
 *   holds no pending slot, and leaves on DELETE.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { RTCPeerConnection } from 'werift';
import { api, startInProcess, waitFor, waitSteady, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import type { ChildProcess } from 'node:child_process';

/** Offers answered and not connected, per address (the default) and in total (set low here). */
const PER_IP = 8;
const TOTAL = 40;
const OFFER_TIMEOUT_MS = 2000;

let t: TestServer;
let pub: ChildProcess;
let stream: any;
/** A real SDP offer (werift, recvonly audio, host candidates) whose peer is closed: it never connects. */
let deadOffer = '';

beforeAll(async () => {
  t = await startInProcess({
    SKYLARK_TRUSTED_PROXIES: '127.0.0.1/32',
    SKYLARK_WHEP_MAX_PENDING: String(TOTAL),
    SKYLARK_WHEP_MAX_PENDING_PER_IP: String(PER_IP),
    SKYLARK_WHEP_OFFER_TIMEOUT_MS: String(OFFER_TIMEOUT_MS),
  });
  stream = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Pending offers', reconnectWindow: 1 })).json;
  pub = publish(`${stream.rtmpUrl}/${stream.streamKey}`, { seconds: 90 });
  await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${stream.id}`)).json.status === 'live', 15_000, 100, 'live');
  const pc = new RTCPeerConnection({ iceUseIpv6: false });
  pc.addTransceiver('audio', { direction: 'recvonly' });
  await pc.setLocalDescription(await pc.createOffer());
  await waitFor(() => pc.iceGatheringState === 'complete', 5000, 20, 'client gathering');
  deadOffer = pc.localDescription!.sdp;
  await pc.close();
  // Warm-up (werift's code paths, the shared DTLS certificate): one offer, then DELETE.
  const r = await post(deadOffer, '192.0.2.200');
  expect(r.status).toBe(201);
  expect((await fetch(`${t.http}${r.headers.get('location')}`, { method: 'DELETE' })).status).toBe(200);
}, 60_000);

afterAll(async () => {
  pub?.kill('SIGKILL');
  if (pub) await exited(pub);
  await t?.close();
});

/** POSTs an offer as the client `forwardedFor` (through the trusted proxy 127.0.0.1), or as 127.0.0.1 itself. */
async function post(sdp: string, forwardedFor?: string) {
  const r = await fetch(`${t.http}/whep/${stream.id}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/sdp', ...(forwardedFor ? { 'X-Forwarded-For': forwardedFor } : {}) },
    body: sdp,
  });
  return { status: r.status, headers: r.headers, body: await r.text() };
}
const del = async (location: string) => (await fetch(`${t.http}${location}`, { method: 'DELETE' })).status;

/** Open fds of this process (server and test share it). */
const fds = () => readdirSync('/proc/self/fd').length;
/** UDP sockets of this process: its socket fds whose inodes /proc/net/udp{,6} list. */
function udpSockets(): number {
  const inodes = new Set<string>();
  for (const f of ['/proc/net/udp', '/proc/net/udp6']) {
    for (const line of readFileSync(f, 'utf8').split('\n').slice(1)) {
      const inode = line.trim().split(/\s+/)[9];
      if (inode) inodes.add(inode);
    }
  }
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (m && inodes.has(m[1]!)) n++;
    } catch {
      /* closed meanwhile */
    }
  }
  return n;
}
const rssBytes = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))![1]) * 1024;
/** Child FFmpeg codec processes (AAC→Opus) of this process. */
function codecProcesses(): number {
  let n = 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid && readFileSync(`/proc/${d}/cmdline`, 'utf8').includes('libopus')) n++;
    } catch {
      /* gone */
    }
  }
  return n;
}
const listenerEvents = (type: string) =>
  (t.server.db.prepare('SELECT data FROM events WHERE type = ?').all(type) as Array<{ data: string }>).filter((e) => JSON.parse(e.data).object.streamId === stream.id).length;
const limit = (cause: string) => t.server.limits.count(cause as never);

function expectTooMany(r: { status: number; headers: Headers; body: string }) {
  expect(r.status).toBe(429);
  expect(r.headers.get('retry-after')).toBe(String(OFFER_TIMEOUT_MS / 1000));
  expect(r.headers.get('access-control-allow-origin')).toBe('*');
  expect(JSON.parse(r.body).error).toMatchObject({ type: 'rate_limit_error', code: 'too_many_pending_offers' });
}

describe('WHEP offers not yet connected', () => {
  it('caps pending offers per client address; a DELETE gives the slot back', async () => {
    const before = limit('whep_pending_per_ip');
    const a: string[] = [];
    for (let i = 0; i < PER_IP; i++) {
      const r = await post(deadOffer, '203.0.113.1');
      expect(r.status).toBe(201);
      a.push(r.headers.get('location')!);
    }
    expectTooMany(await post(deadOffer, '203.0.113.1'));
    expect(limit('whep_pending_per_ip')).toBe(before + 1);
    // Another address is not affected.
    const b = await post(deadOffer, '203.0.113.2');
    expect(b.status).toBe(201);
    // A DELETE frees one slot of that address.
    expect(await del(a.pop()!)).toBe(200);
    const again = await post(deadOffer, '203.0.113.1');
    expect(again.status).toBe(201);
    for (const l of [...a, b.headers.get('location')!, again.headers.get('location')!]) expect(await del(l)).toBe(200);
  });

  it('holds 40 offers that never connect without counting them, under the caps, and drops them after the timeout', async () => {
    await waitSteady(fds, 10_000, 100, 'the previous test\'s sockets closed'); // the baseline counts no socket still closing
    const base = { fds: fds(), udp: udpSockets(), rss: rssBytes() };
    const timeouts = limit('whep_offer_timeout');
    const totalHits = limit('whep_pending');
    // Sequential: one keep-alive HTTP connection, so the fd count is the offers' own.
    for (let i = 0; i < TOTAL; i++) {
      const r = await post(deadOffer, `203.0.113.${10 + (i % 5)}`);
      expect(r.status, r.body).toBe(201);
      // One host candidate: the HTTP host (127.0.0.1), one UDP socket.
      expect(r.body.match(/^a=candidate:.*$/gm)).toEqual([expect.stringMatching(/ 127\.0\.0\.1 \d+ typ host/)]);
    }
    const held = { fds: fds(), udp: udpSockets(), rss: rssBytes() };
    // The total cap: a 41st offer, from yet another address.
    expectTooMany(await post(deadOffer, '203.0.113.99'));
    expect(limit('whep_pending')).toBe(totalHits + 1);

    // One UDP socket per pending offer (the answer's one host candidate), no other fd.
    expect(held.udp - base.udp).toBeLessThanOrEqual(TOTAL);
    expect(held.fds - base.fds).toBeLessThanOrEqual(TOTAL + 4);
    expect(held.rss - base.rss).toBeLessThan(20 * 1024 * 1024);
    // Not listeners: no count, no event, no codec process.
    expect((await api(t.http, t.secretKey, 'GET', `/v2/streams/${stream.id}`)).json.listenerCount).toBe(0);
    expect(codecProcesses()).toBe(0);

    // Dropped after the offer timeout: every socket closed.
    await waitFor(() => limit('whep_offer_timeout') === timeouts + TOTAL, 10_000, 100, 'the offers to expire');
    await waitFor(() => udpSockets() <= base.udp && fds() <= base.fds, 5000, 100, 'fds and UDP sockets back to the baseline');
    const stats = (await api(t.http, t.secretKey, 'GET', `/v2/streams/${stream.id}/stats`)).json;
    expect(stats).toMatchObject({ listenerCount: 0, totalListeners: 0 });
    expect(listenerEvents('listener.joined')).toBe(0);
    expect(listenerEvents('listener.left')).toBe(0);
    // The slots are free again.
    const r = await post(deadOffer, '203.0.113.99');
    expect(r.status).toBe(201);
    expect(await del(r.headers.get('location')!)).toBe(200);
  });

  it('counts a real peer once it connects, once, and frees its pending slot', async () => {
    const joined = listenerEvents('listener.joined');
    const pc = new RTCPeerConnection({ iceUseIpv6: false, iceAdditionalHostAddresses: ['127.0.0.1'] });
    try {
      const transceiver = pc.addTransceiver('audio', { direction: 'recvonly' });
      let packets = 0;
      transceiver.onTrack.subscribe((track) => track.onReceiveRtp.subscribe(() => packets++));
      await pc.setLocalDescription(await pc.createOffer());
      await waitFor(() => pc.iceGatheringState === 'complete', 5000, 20, 'client gathering');
      const r = await post(pc.localDescription!.sdp);
      expect(r.status, r.body).toBe(201);
      await pc.setRemoteDescription({ type: 'answer', sdp: r.body });
      await waitFor(() => pc.connectionState === 'connected', 10_000, 50, 'connected');
      await waitFor(() => packets > 10, 15_000, 100, 'audio packets');
      await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${stream.id}`)).json.listenerCount === 1, 5000, 100, 'listener counted');
      const listeners = (await api(t.http, t.secretKey, 'GET', `/v2/streams/${stream.id}/listeners`)).json.data;
      expect(listeners).toHaveLength(1);
      expect(listeners[0]).toMatchObject({ protocol: 'webrtc', streamId: stream.id, country: null });
      await waitFor(() => listenerEvents('listener.joined') === joined + 1, 5000, 50, 'listener.joined');
      // The connected peer holds no pending slot: its address may still send PER_IP offers.
      const extra: string[] = [];
      for (let i = 0; i < PER_IP; i++) {
        const o = await post(deadOffer);
        expect(o.status, o.body).toBe(201);
        extra.push(o.headers.get('location')!);
      }
      for (const l of extra) expect(await del(l)).toBe(200);
      // Still one listener, joined once.
      expect((await api(t.http, t.secretKey, 'GET', `/v2/streams/${stream.id}/stats`)).json).toMatchObject({ listenerCount: 1, totalListeners: 1 });
      expect(listenerEvents('listener.joined')).toBe(joined + 1);
      expect(await del(r.headers.get('location')!)).toBe(200);
      await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${stream.id}`)).json.listenerCount === 0, 5000, 100, 'listener left');
      await waitFor(() => listenerEvents('listener.left') === 1, 5000, 50, 'listener.left');
      expect(listenerEvents('listener.joined')).toBe(joined + 1);
    } finally {
      await pc.close();
    }
  });
});
