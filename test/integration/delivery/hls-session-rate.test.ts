/**
 * Per-address limits on a live stream published by FFmpeg (docs/listeners.md "Per-address caps",
 * "Sessions per address"), with raw requests:
 * - one client address starts at most `SKYLARK_HLS_SESSIONS_PER_IP_PER_MINUTE` (default 60)
 *   counted HLS sessions a minute: the 61st session id minted and used from 127.0.0.1 within a
 *   minute is served its playlist but creates no 61st listener, and the hit is counted as the
 *   `hls_sessions_per_ip` limit;
 * - IPv6 clients (here through a trusted proxy's X-Forwarded-For) are grouped by /64: sixty
 *   addresses of one /64 use up its rate, an address of another /64 is counted;
 * - the progressive listening cap per address counts a /64 as one address too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

let t: TestServer;
let pub: ChildProcess;
let stream: any;

const stats = async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${stream.id}/stats`)).json;

/** Mints a session (multivariant playlist) and starts it (its media playlist), as a player does; resolves to the media playlist's status. */
async function session(headers: Record<string, string> = {}): Promise<number> {
  const mv = await fetch(stream.hlsUrl, { headers });
  expect(mv.status).toBe(200);
  const uri = (await mv.text()).split('\n').find((l) => l && !l.startsWith('#'))!;
  expect(uri).toMatch(/sid=/);
  const media = await fetch(new URL(uri, stream.hlsUrl), { headers });
  await media.arrayBuffer();
  return media.status;
}

beforeAll(async () => {
  // 127.0.0.1 is a trusted proxy so that X-Forwarded-For can name IPv6 clients; without the header the client is 127.0.0.1.
  t = await startInProcess({ SKYLARK_TRUSTED_PROXIES: '127.0.0.1/32', SKYLARK_ABR_LADDER: '0', SKYLARK_LISTEN_MAX_CONNECTIONS_PER_IP: '1' });
  stream = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Rate', reconnectWindow: 5 })).json;
  pub = publish(`${stream.rtmpUrl}/${stream.streamKey}`, { seconds: 120 });
  await waitFor(async () => (await fetch(stream.hlsUrl)).status === 200, 30_000, 200, 'HLS');
}, 60_000);
afterAll(async () => {
  pub?.kill('SIGKILL');
  if (pub) await exited(pub);
  await t?.close();
});

describe('HLS sessions per address per minute', () => {
  it('the 61st session minted from 127.0.0.1 within a minute is served but not counted', async () => {
    const limit = () => t.server.limits.count('hls_sessions_per_ip');
    const hits0 = limit();
    for (let i = 0; i < 60; i++) expect(await session()).toBe(200);
    await waitFor(async () => (await stats()).listenerCount === 60, 10_000, 100, '60 listeners');
    expect(limit()).toBe(hits0);
    // The 61st: a playable answer (no error a player would retry at once), no new listener.
    expect(await session()).toBe(200);
    await waitFor(() => limit() === hits0 + 1, 10_000, 50, 'the hls_sessions_per_ip hit');
    const s = await stats();
    expect(s.listenerCount).toBe(60);
    expect(s.totalListeners).toBe(60);
  }, 60_000);

  it('groups IPv6 clients by /64: one /64 shares a rate, another /64 has its own', async () => {
    const before = (await stats()).totalListeners;
    for (let i = 1; i <= 61; i++) await session({ 'X-Forwarded-For': `2001:db8:aa:1::${i.toString(16)}` });
    await waitFor(async () => (await stats()).totalListeners === before + 60, 10_000, 100, '60 listeners of 2001:db8:aa:1::/64');
    // One more from another /64 is counted; the first /64 stays at 60.
    await session({ 'X-Forwarded-For': '2001:db8:aa:2::1' });
    await waitFor(async () => (await stats()).totalListeners === before + 61, 10_000, 100, 'the listener of 2001:db8:aa:2::/64');
    await session({ 'X-Forwarded-For': '2001:db8:aa:1:ffff:ffff:ffff:fffe' });
    await session({ 'X-Forwarded-For': '2001:db8:aa:2::2' });
    await waitFor(async () => (await stats()).totalListeners === before + 62, 10_000, 100, 'a second listener of 2001:db8:aa:2::/64');
    expect((await stats()).totalListeners).toBe(before + 62);
  }, 60_000);
});

describe('progressive listening per address', () => {
  it('counts one /64 as one address (SKYLARK_LISTEN_MAX_CONNECTIONS_PER_IP=1)', async () => {
    const url = `${t.http}/listen/${stream.id}.aac`;
    const open: AbortController[] = [];
    const get = async (xff: string) => {
      const ac = new AbortController();
      open.push(ac);
      const r = await fetch(url, { headers: { 'X-Forwarded-For': xff }, signal: ac.signal });
      if (r.status !== 200) await r.arrayBuffer();
      return r.status;
    };
    try {
      expect(await get('2001:db8:bb:1::1')).toBe(200);
      expect(await get('2001:db8:bb:1::2')).toBe(429); // the same /64
      expect(await get('2001:db8:bb:1:8000::3')).toBe(429);
      expect(await get('2001:db8:bb:2::1')).toBe(200); // another /64
    } finally {
      for (const ac of open) ac.abort();
    }
  }, 30_000);
});
