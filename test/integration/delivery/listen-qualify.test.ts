/**
 * Connections that stop qualifying end (docs/listeners.md "Connections that stop qualifying"),
 * with real clients against a real server and a live FFmpeg publisher:
 * - turning a live public stream to `playback: "token"` (PATCH) ends the `/listen` reader and the
 *   WHEP peer (werift) that brought no token; those with a valid token keep playing;
 * - a listener token expiring ends the `/listen` reader and the WHEP peer that used it;
 * - deleting the stream ends the rest.
 * The WHEP peers negotiate on loopback with the default configuration: no ICE server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { ChildProcess } from 'node:child_process';
import { RTCPeerConnection } from 'werift';
import { ListenerTokens } from '../../../src/base/auth/listener-tokens.js';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

let t: TestServer;
let pub: ChildProcess | null = null;
const peers: RTCPeerConnection[] = [];
const readers: Reader[] = [];

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_ABR_LADDER: '0' });
});
afterAll(async () => {
  for (const r of readers) r.stop();
  for (const p of peers) await p.close().catch(() => {});
  pub?.kill('SIGKILL');
  if (pub) await exited(pub);
  await t?.close();
});

const v2 = (method: string, p: string, body?: unknown) => api(t.http, t.secretKey, method, `/v2${p}`, body);

interface Reader {
  /** Bytes of audio read so far. */
  bytes(): number;
  /** The response ended or the connection closed. */
  ended(): boolean;
  stop(): void;
}

/** A `/listen` client reading the stream until the server ends it. */
async function listen(url: string): Promise<Reader> {
  let bytes = 0;
  let ended = false;
  const req = http.get(url, { agent: false });
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    req.on('response', resolve);
    req.on('error', reject);
  });
  expect(res.statusCode).toBe(200);
  res.on('data', (d: Buffer) => (bytes += d.length));
  const done = () => (ended = true);
  res.on('end', done);
  res.on('close', done);
  res.on('error', done);
  req.on('error', done);
  const r = { bytes: () => bytes, ended: () => ended, stop: () => req.destroy() };
  readers.push(r);
  await waitFor(() => bytes > 0, 10_000, 50, 'listening bytes');
  return r;
}

/** A werift WHEP client (recvonly audio), connected; `token` as `Authorization: Bearer`. */
async function whep(streamId: string, token?: string): Promise<{ pc: RTCPeerConnection; answer: string }> {
  const pc = new RTCPeerConnection({ iceUseIpv6: false, iceAdditionalHostAddresses: ['127.0.0.1'] });
  peers.push(pc);
  pc.addTransceiver('audio', { direction: 'recvonly' });
  await pc.setLocalDescription(await pc.createOffer());
  await waitFor(() => pc.iceGatheringState === 'complete', 5000, 20, 'client gathering');
  const r = await fetch(`${t.http}/whep/${streamId}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/sdp', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
    body: pc.localDescription!.sdp,
  });
  const answer = await r.text();
  expect(r.status, answer).toBe(201);
  await pc.setRemoteDescription({ type: 'answer', sdp: answer });
  await waitFor(() => pc.connectionState === 'connected', 15_000, 50, 'WHEP connected');
  return { pc, answer };
}

const webrtcListeners = async (id: string) => ((await v2('GET', `/streams/${id}/listeners?limit=100`)).json.data as Array<{ protocol: string }>).filter((l) => l.protocol === 'webrtc').length;

describe('connections that stop qualifying', () => {
  it('a PATCH to playback "token", a token expiring and a deletion end the /listen and WHEP connections that no longer qualify', async () => {
    const s = (await v2('POST', '/streams', { title: 'Qualify', reconnectWindow: 0 })).json;
    pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 120 });
    await waitFor(async () => (await v2('GET', `/streams/${s.id}`)).json.status === 'live', 20_000, 100, 'live');
    await waitFor(async () => (await fetch(s.listenUrl, { method: 'HEAD' })).status === 200, 20_000, 200, 'listening');
    const token = (await api(t.http, t.secretKey, 'POST', `/v2/streams/${s.id}/listener_tokens`)).json.token as string;

    // A public stream: two readers and two peers, one of each with a token.
    const plain = await listen(s.listenUrl);
    const withToken = await listen(`${s.listenUrl}?token=${token}`);
    const plainPeer = await whep(s.id);
    // No STUN server is contacted: the answer offers host candidates only.
    expect(plainPeer.answer).toMatch(/a=candidate:.* typ host/);
    expect(plainPeer.answer).not.toMatch(/typ (srflx|relay)/);
    const tokenPeer = await whep(s.id, token);
    await waitFor(async () => (await webrtcListeners(s.id)) === 2, 10_000, 100, 'two WebRTC listeners');

    // Turned to tokens: those without one are ended; the others keep playing.
    expect((await v2('PATCH', `/streams/${s.id}`, { playback: 'token' })).status).toBe(200);
    await waitFor(() => plain.ended(), 15_000, 50, 'the token-less /listen reader ended');
    await waitFor(async () => (await webrtcListeners(s.id)) === 1, 15_000, 100, 'the token-less WHEP peer ended');
    const before = withToken.bytes();
    await waitFor(() => withToken.bytes() > before + 10_000, 10_000, 100, 'the reader with a token still reads');
    expect(withToken.ended()).toBe(false);
    expect(tokenPeer.pc.connectionState).toBe('connected');

    // A token that expires in a few seconds: valid now, then its connections end.
    const soon = (await new ListenerTokens(t.server.nodeSecret, () => Date.now() - 24 * 3600_000 + 8000).sign(s.id, 'secret_key')).token;
    const shortReader = await listen(`${s.listenUrl}?token=${soon}`);
    await whep(s.id, soon);
    await waitFor(async () => (await webrtcListeners(s.id)) === 2, 10_000, 100, 'the short-token WHEP listener');
    await waitFor(() => shortReader.ended(), 20_000, 100, 'the short-token reader ended');
    await waitFor(async () => (await webrtcListeners(s.id)) === 1, 20_000, 100, 'the short-token WHEP peer ended');
    expect(withToken.ended()).toBe(false);

    // Deleted: everything left ends.
    expect((await v2('DELETE', `/streams/${s.id}`)).status).toBe(200);
    await waitFor(() => withToken.ended(), 15_000, 50, 'the last reader ended');
    await waitFor(() => t.server.listenerCount(s.id) === 0, 15_000, 100, 'no listener left');
  }, 120_000);
});
