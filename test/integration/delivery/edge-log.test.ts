/**
 * The edge log receiver (docs/behaviour.md §12) over real UDP, against a live stream published by FFmpeg:
 * lines framed as nginx sends them (`access_log syslog:…,tag=skylark,nohostname` with the
 * `skylark_edge` format of `skylark edge-config`) from a trusted edge address
 * (SKYLARK_TRUSTED_PROXIES=127.0.0.2/32; the test's socket is bound to 127.0.0.2):
 * - a media playlist line with a sid this node minted joins that listener with the country of the
 *   line's client address and the line's user agent; more lines and direct requests of the same
 *   sid are the same listener (counted once); it leaves 3 target durations after its last line;
 * - lines from an address outside the trusted proxies are dropped and counted as the
 *   `edge_log_untrusted` limit; lines from a trusted address without a valid MAC under the node's
 *   edge-log secret (derived from the data dir's node secret) count nobody (`edge_log_unsigned`),
 *   nor does a line altered after it was made (one field changed), one older than 60 s, one sent
 *   again (a captured datagram replayed), or the old format with the secret in clear; forged sids,
 *   refused requests (4xx), objects, token streams and malformed or oversized datagrams count nobody;
 * - `skylark serve` adds the receiver's address to its listening line.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import dgram from 'node:dgram';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { api, repoRoot, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { loadNodeSecret } from '../../../src/base/auth/secrets.js';
import { createHmac, randomBytes } from 'node:crypto';
import { edgeLogSecretOf } from '../../../src/delivery/listeners/edge-log.js';

let t: TestServer;
let pub: ChildProcess;
let stream: any;
let edge: dgram.Socket;
let stranger: dgram.Socket;
/** The node's edge-log secret, as `skylark edge-config --data-dir` derives it. */
let secret: string;

/**
 * One datagram as nginx 1.22 sends it (RFC 3164, no hostname, tag `skylark`) with the
 * `skylark_edge` format of edge-config: the MAC made here with node:crypto as the edge's perl
 * makes it (HMAC-SHA-256 of the fields joined by newlines), under `k` (null: no MAC); `at` the
 * line's time (ms); `alter` changes fields after the MAC was made.
 */
function line(fields: { a: string; u: string; sid: string; ua?: string; s?: number; k?: string | null; at?: number; alter?: Record<string, unknown> }): Buffer {
  const k = fields.k === undefined ? secret : fields.k;
  const f = { t: ((fields.at ?? Date.now()) / 1000).toFixed(3), n: randomBytes(16).toString('hex'), s: fields.s ?? 200, a: fields.a, u: fields.u, sid: fields.sid, ua: fields.ua ?? 'EdgePlayer/1.0', c: 'HIT' };
  const m = k === null ? '' : createHmac('sha256', k).update(['skylark-edge-v2', f.t, f.n, f.s, f.a, f.u, f.sid, f.ua, f.c].join('\n')).digest('hex');
  const body = { v: 2, t: 0, n: f.n, s: f.s, a: f.a, u: f.u, sid: f.sid, ua: f.ua, c: f.c, m, ...fields.alter };
  // nginx writes $msec as is (e.g. 1795460112.611): spliced in as text.
  const json = JSON.stringify(body).replace('"t":0', `"t":${f.t}`);
  const d = new Date();
  const mon = d.toLocaleString('en-US', { month: 'short' });
  const stamp = `${mon} ${String(d.getDate()).padStart(2, ' ')} ${d.toTimeString().slice(0, 8)}`;
  return Buffer.from(`<190>${stamp} skylark: ${json}`);
}

const port = () => t.server.edgeLogPort!;
const send = (sock: dgram.Socket, msg: Buffer) => new Promise<void>((resolve, reject) => sock.send(msg, port(), '127.0.0.1', (e) => (e ? reject(e) : resolve())));
const stats = async (id: string) => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${id}/stats`)).json;
const listeners = async (id: string) => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${id}/listeners?limit=100`)).json.data as any[];
const counts = () => t.server.edgeLog!.stats();

/** A fresh session id minted by the multivariant playlist, and the media playlist path. */
async function mint(hlsUrl: string): Promise<{ sid: string; path: string }> {
  const body = await (await fetch(hlsUrl)).text();
  const uri = body.split('\n').find((l) => l && !l.startsWith('#'))!;
  const u = new URL(uri, hlsUrl);
  return { sid: u.searchParams.get('sid')!, path: u.pathname };
}

const bound = (address: string) =>
  new Promise<dgram.Socket>((resolve) => {
    const s = dgram.createSocket('udp4');
    s.bind(0, address, () => resolve(s));
  });

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_TRUSTED_PROXIES: '127.0.0.2/32', SKYLARK_EDGE_LOG_HOST: '127.0.0.1', SKYLARK_EDGE_LOG_PORT: '0' });
  secret = edgeLogSecretOf(loadNodeSecret(t.dataDir));
  stream = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Behind edges', reconnectWindow: 1, latencyMode: 'low' })).json;
  pub = publish(`${stream.rtmpUrl}/${stream.streamKey}`, { seconds: 60 });
  await waitFor(async () => (await fetch(stream.hlsUrl)).status === 200, 20_000, 200, 'HLS');
  edge = await bound('127.0.0.2');
  stranger = await bound('127.0.0.1');
}, 60_000);
afterAll(async () => {
  edge?.close();
  stranger?.close();
  pub?.kill('SIGKILL');
  if (pub) await exited(pub);
  await t?.close();
});

describe('edge log receiver', () => {
  it('is off unless configured, and binds the address asked for', () => {
    expect(port()).toBeGreaterThan(0);
  });

  it('counts a listener from its edge log lines once, with its own country and user agent, alongside direct requests', async () => {
    const a = await mint(stream.hlsUrl);
    for (let i = 0; i < 3; i++) await send(edge, line({ a: '8.8.8.8', u: a.path, sid: a.sid, ua: 'EdgePlayer/1.0 (US)' }));
    await waitFor(async () => (await stats(stream.id)).listenerCount === 1, 5000, 50, 'one listener');
    // The same session straight to the origin (a player that left the edge): still one listener.
    expect((await fetch(`${new URL(a.path, t.http)}?sid=${a.sid}`)).status).toBe(200);
    const b = await mint(stream.hlsUrl);
    await send(edge, line({ a: '81.2.69.160', u: b.path, sid: b.sid, ua: 'EdgePlayer/1.0 (GB)' }));
    await waitFor(async () => (await stats(stream.id)).listenerCount === 2, 5000, 50, 'two listeners');
    const s = await stats(stream.id);
    expect(s.countries).toEqual(expect.arrayContaining([{ country: 'US', listeners: 1 }, { country: 'GB', listeners: 1 }]));
    const list = await listeners(stream.id);
    expect(list.map((l) => [l.country, l.userAgent, l.protocol]).sort()).toEqual([
      ['GB', 'EdgePlayer/1.0 (GB)', 'hls'],
      ['US', 'EdgePlayer/1.0 (US)', 'hls'],
    ]);
    // Without lines (or requests), both leave after 3 target durations (2 s segments: 6 s).
    await waitFor(async () => (await stats(stream.id)).listenerCount === 0, 15_000, 250, 'both to leave');
    expect((await stats(stream.id)).totalListeners).toBe(2);
  }, 30_000);

  it('drops lines from untrusted senders, forged sids, refusals, objects, token streams and garbage', async () => {
    const before = t.server.limits.count('edge_log_untrusted');
    const c0 = counts();
    const total0 = (await stats(stream.id)).totalListeners;
    const c = await mint(stream.hlsUrl);
    await send(stranger, line({ a: '8.8.8.8', u: c.path, sid: c.sid })); // not a trusted proxy
    await send(edge, line({ a: '8.8.8.8', u: c.path, sid: 'AAAAAAAAAAAAAAAAAAAAAAAA' })); // not minted here
    await send(edge, line({ a: '8.8.8.8', u: c.path, sid: c.sid, s: 404 })); // refused by the origin
    await send(edge, line({ a: '8.8.8.8', u: c.path.replace('index.m3u8', '3.m4s'), sid: c.sid })); // a media object
    await send(edge, line({ a: '8.8.8.8', u: c.path.replace(stream.id, 'stm_nosuchstream0000000'), sid: c.sid }));
    await send(edge, Buffer.from('<190>Nov 23 18:55:12 skylark: not json'));
    await send(edge, Buffer.from('hello'));
    await send(edge, Buffer.concat([line({ a: '8.8.8.8', u: c.path, sid: c.sid }).subarray(0, 60), Buffer.alloc(5000, 0x20)]));
    const tok = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'tok', playback: 'token', latencyMode: 'low' })).json;
    await send(edge, line({ a: '8.8.8.8', u: `/hls/${tok.id}/a128/index.m3u8`, sid: c.sid }));
    // A marker line after them: once it counts, the lines before it were read.
    const m = await mint(stream.hlsUrl);
    await send(edge, line({ a: '5.9.0.1', u: m.path, sid: m.sid }));
    await waitFor(async () => (await stats(stream.id)).totalListeners === total0 + 1, 5000, 50, 'the marker listener');
    expect(t.server.limits.count('edge_log_untrusted')).toBe(before + 1);
    const c1 = counts();
    expect(c1.untrusted - c0.untrusted).toBe(1);
    expect(c1.malformed - c0.malformed).toBe(3);
    expect(c1.ignored - c0.ignored).toBe(5);
    expect(c1.joined - c0.joined).toBe(1);
    expect((await listeners(stream.id)).map((l) => l.country)).toEqual(['DE']);
  });

  it('counts nobody from a trusted address without the edge-log secret; the right secret counts', async () => {
    const before = t.server.limits.count('edge_log_unsigned');
    const c0 = counts();
    const total0 = (await stats(stream.id)).totalListeners;
    const spoofed = await mint(stream.hlsUrl);
    const other = edgeLogSecretOf(Buffer.alloc(32, 7)); // another node's secret
    await send(edge, line({ a: '8.8.8.8', u: spoofed.path, sid: spoofed.sid, k: null })); // no secret
    await send(edge, line({ a: '8.8.8.8', u: spoofed.path, sid: spoofed.sid, k: other })); // the wrong one, same length
    await send(edge, line({ a: '8.8.8.8', u: spoofed.path, sid: spoofed.sid, k: secret.slice(0, -1) })); // a prefix of it
    await send(edge, line({ a: '8.8.8.8', u: spoofed.path, sid: spoofed.sid, k: '' }));
    // A marker with the right secret: once it counts, the lines before it were read.
    const m = await mint(stream.hlsUrl);
    await send(edge, line({ a: '5.9.0.1', u: m.path, sid: m.sid }));
    await waitFor(async () => (await stats(stream.id)).totalListeners === total0 + 1, 5000, 50, 'the marker listener');
    const c1 = counts();
    expect(c1.unsigned - c0.unsigned).toBe(4);
    expect(c1.joined - c0.joined).toBe(1);
    expect(t.server.limits.count('edge_log_unsigned')).toBe(before + 4);
    // The spoofed session was never counted: only the marker joined.
    expect((await stats(stream.id)).totalListeners).toBe(total0 + 1);
  });

  it('authenticates each line on its own: an altered, stale or replayed line, or the secret in clear, counts nobody', async () => {
    const c0 = counts();
    const total0 = (await stats(stream.id)).totalListeners;
    const victim = await mint(stream.hlsUrl);
    const forged = await mint(stream.hlsUrl);
    // A captured line of a real listener, its session id swapped for another after the MAC was made.
    await send(edge, line({ a: '8.8.8.8', u: victim.path, sid: victim.sid, alter: { sid: forged.sid } }));
    await send(edge, line({ a: '8.8.8.8', u: forged.path, sid: forged.sid, alter: { a: '81.2.69.160' } }));
    await send(edge, line({ a: '8.8.8.8', u: forged.path, sid: forged.sid, at: Date.now() - 61_000 })); // older than 60 s
    // The format before lines carried a MAC: the secret in clear.
    const clear = JSON.stringify({ v: 1, k: secret, t: Date.now() / 1000, s: 200, a: '8.8.8.8', u: forged.path, sid: forged.sid, ua: 'x', c: 'HIT' });
    await send(edge, Buffer.from(`<190>Nov 23 18:55:12 skylark: ${clear}`));
    // A valid line, then the very same datagram again (a replay).
    const real = line({ a: '8.8.8.8', u: victim.path, sid: victim.sid });
    await send(edge, real);
    await waitFor(async () => (await stats(stream.id)).totalListeners === total0 + 1, 5000, 50, 'the real listener');
    await send(edge, real);
    const m = await mint(stream.hlsUrl);
    await send(edge, line({ a: '5.9.0.1', u: m.path, sid: m.sid })); // a marker: once it counts, the replay was read
    await waitFor(async () => (await stats(stream.id)).totalListeners === total0 + 2, 5000, 50, 'the marker listener');
    // The receiver's own counts, not only the listener totals (a minted session can count before its line is read).
    await waitFor(() => counts().joined - c0.joined >= 2 && counts().replayed - c0.replayed >= 1, 5000, 50, 'the replay and the marker read');
    const c1 = counts();
    expect(c1.unsigned - c0.unsigned).toBe(3);
    expect(c1.stale - c0.stale).toBe(1);
    expect(c1.replayed - c0.replayed).toBe(1);
    expect(c1.joined - c0.joined).toBe(2);
    expect((await listeners(stream.id)).some((l) => l.country === 'GB')).toBe(false);
  });

  it('skylark serve prints the receiver address in its listening line', async () => {
    const { dir, cleanup } = tempDir();
    const child = spawn(process.execPath, [path.join(repoRoot, 'bin', 'skylark.js'), 'serve'], {
      env: { ...process.env, SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: dir, SKYLARK_EDGE_LOG_PORT: '0', SKYLARK_LOG_LEVEL: 'error' },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    try {
      const first = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout! }).once('line', resolve);
        child.once('exit', (code) => reject(new Error(`serve exited with ${code}`)));
      });
      const listening = JSON.parse(first);
      expect(listening.edgeLog).toMatch(/^127\.0\.0\.1:\d+$/);
      // It answers: a datagram to it from an untrusted sender is read and dropped (no crash).
      const s = await bound('127.0.0.1');
      await new Promise<void>((r) => s.send(line({ a: '8.8.8.8', u: '/hls/x/a128/index.m3u8', sid: 'x' }), Number(listening.edgeLog.split(':')[1]), '127.0.0.1', () => r()));
      s.close();
      expect(child.exitCode).toBeNull();
    } finally {
      child.kill('SIGTERM');
      await exited(child);
      cleanup();
    }
  });
});
