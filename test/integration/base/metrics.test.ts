/**
 * Operating the node (docs/behaviour.md "Operating the node", docs/metrics.md): a real server with
 * two streams published by real FFmpeg RTMP publishers and real listeners on them.
 * - `GET /metrics` shows a `/listen` listener (Node's HTTP client reading the stream), an HLS
 *   listener (FFmpeg playing the HLS URL: `ll_hls`, the stream has LL-HLS parts) and a listener on
 *   the Icecast port (a raw HTTP/1.0 socket) and a WHEP peer (werift) by stream and protocol; bytes sent by protocol; ingest
 *   live and bitrate per stream; requests by route class and status, those answered by the HTTP
 *   worker thread included; webhook deliveries by outcome.
 * - The label cap (SKYLARK_METRICS_MAX_STREAMS=1): the busier stream keeps its label, the other
 *   is summed as `stream="other"`.
 * - Prometheus's own linter (`promtool check metrics`) accepts the scrape (required when CI=true).
 * - Every metric a query of the Grafana dashboard (docs/grafana/skylark.json) names is in the scrape.
 * - Off loopback (a client behind the trusted proxy): 401 without a token, 403 with a wrong one,
 *   200 with `SKYLARK_METRICS_TOKEN`; a claimed `X-Forwarded-For` from an untrusted peer is ignored.
 * - `/healthz` 200; `/readyz` 200 naming every check, and 503 naming `disk` when the free-space
 *   floor is above the volume's free space.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { api, repoRoot, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';
import { RTCPeerConnection } from 'werift';

const TOKEN = 'metrics-token-0123456789abcdef';
let t: TestServer;
const children: ChildProcess[] = [];
const closers: Array<() => void> = [];
let busy = '';
let quiet = '';

/** One sample of a scrape. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
/** The samples of a Prometheus text exposition. */
function parse(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}
/** The value of `name` with exactly these labels (among others), or undefined. */
const value = (s: Sample[], name: string, labels: Record<string, string> = {}) => s.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v))?.value;
const sum = (s: Sample[], name: string, labels: Record<string, string> = {}) =>
  s.filter((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v)).reduce((a, x) => a + x.value, 0);

async function scrape(base = t.http, headers: Record<string, string> = {}): Promise<{ status: number; text: string; type: string | null }> {
  const r = await fetch(`${base}/metrics`, { headers });
  return { status: r.status, text: await r.text(), type: r.headers.get('content-type') };
}

/** A `/listen` listener: Node's HTTP client reading the stream; resolves once bytes arrived. */
function listen(url: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`listen answered ${res.statusCode}`));
      res.once('data', () => resolve());
      res.on('data', () => {});
    });
    req.on('error', () => {});
    closers.push(() => req.destroy());
  });
}

/** A listener on the Icecast port: a raw HTTP/1.0 GET; resolves once the body started. */
function icecastListen(port: number, id: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1', () => sock.write(`GET /live/${id} HTTP/1.0\r\n\r\n`));
    let head = '';
    sock.on('data', (d: Buffer) => {
      if (head.includes('\r\n\r\n')) return;
      head += d.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      if (/^HTTP\/1\.0 200/.test(head)) resolve();
      else reject(new Error(head.split('\r\n')[0]));
    });
    sock.on('error', () => {});
    closers.push(() => sock.destroy());
  });
}

/** A WHEP listener: a werift peer (recvonly audio), connected. */
async function whep(streamId: string): Promise<void> {
  const pc = new RTCPeerConnection({ iceUseIpv6: false, iceAdditionalHostAddresses: ['127.0.0.1'] });
  closers.push(() => void pc.close());
  pc.addTransceiver('audio', { direction: 'recvonly' });
  await pc.setLocalDescription(await pc.createOffer());
  await waitFor(() => pc.iceGatheringState === 'complete', 5000, 20, 'client gathering');
  const r = await fetch(`${t.http}/whep/${streamId}`, { method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: pc.localDescription!.sdp });
  const answer = await r.text();
  if (r.status !== 201) throw new Error(`WHEP answered ${r.status}: ${answer}`);
  await pc.setRemoteDescription({ type: 'answer', sdp: answer });
  await waitFor(() => pc.connectionState === 'connected', 15_000, 50, 'WHEP connected');
}

/** A stream published by FFmpeg for `seconds`; resolves once `/listen` serves it. */
async function liveStream(title: string, latencyMode: 'low' | 'standard', seconds: number): Promise<{ id: string; hlsUrl: string }> {
  const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title, latencyMode, reconnectWindow: 5 })).json as { id: string; hlsUrl: string; rtmpUrl: string; streamKey: string };
  children.push(publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds }));
  await waitFor(async () => (await fetch(`${t.http}/listen/${s.id}.aac`, { method: 'HEAD' })).status === 200, 30_000, 200, `${title} listening`);
  return s;
}

beforeAll(async () => {
  t = await startInProcess({
    SKYLARK_METRICS_TOKEN: TOKEN,
    SKYLARK_METRICS_MAX_STREAMS: '1',
    SKYLARK_TRUSTED_PROXIES: '127.0.0.1/32',
    SKYLARK_HTTP_THREADS: '2',
    SKYLARK_WEBHOOKS_ALLOW_PRIVATE: '1',
  });
  // A webhook endpoint that takes every event: the streams' events are delivered to it.
  const hooks = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200).end());
  });
  await new Promise<void>((resolve) => hooks.listen(0, '127.0.0.1', resolve));
  closers.push(() => hooks.close());
  const hook = await api(t.http, t.secretKey, 'POST', '/v2/webhooks', { url: `http://127.0.0.1:${(hooks.address() as net.AddressInfo).port}/hook`, events: ['*'] });
  expect(hook.status).toBe(201);
  const a = await liveStream('Busy', 'low', 120);
  const b = await liveStream('Quiet', 'standard', 120);
  busy = a.id;
  quiet = b.id;
  await listen(`${t.http}/listen/${busy}.aac`);
  await icecastListen(t.server.icecastPort, busy);
  await listen(`${t.http}/listen/${quiet}.aac`);
  await whep(busy);
  // FFmpeg plays the HLS stream: an HLS session of the busy stream.
  const hls = spawn(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-i', a.hlsUrl, '-t', '100', '-f', 'null', '-'], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(hls);
}, 90_000);

afterAll(async () => {
  for (const c of closers) c();
  for (const c of children) c.kill('SIGKILL');
  await Promise.all(children.map(exited));
  await t?.close();
});

describe('GET /metrics', () => {
  let samples: Sample[] = [];
  let text = '';

  beforeAll(async () => {
    // Every listener counted: the HLS session joins on FFmpeg's first media request.
    text = await waitFor(async () => {
      const r = await scrape();
      const s = parse(r.text);
      // …and has fetched a segment (it joins on its first media request, the init section).
      return value(s, 'skylark_listeners', { stream: busy, protocol: 'll_hls' }) === 1 && (value(s, 'skylark_bytes_sent_total', { protocol: 'hls' }) ?? 0) > 10_000 ? r.text : null;
    }, 30_000, 250, 'the HLS listener in /metrics');
    samples = parse(text);
  }, 40_000);

  it('answers the Prometheus text format', async () => {
    const r = await scrape();
    expect(r.status).toBe(200);
    expect(r.type).toBe('text/plain; version=0.0.4; charset=utf-8');
  });

  it('shows each listener by stream and protocol, the other stream past the cap as stream="other"', () => {
    expect(value(samples, 'skylark_listeners', { stream: busy, protocol: 'listen' })).toBe(1);
    expect(value(samples, 'skylark_listeners', { stream: busy, protocol: 'icecast' })).toBe(1);
    expect(value(samples, 'skylark_listeners', { stream: busy, protocol: 'll_hls' })).toBe(1);
    expect(value(samples, 'skylark_listeners', { stream: busy, protocol: 'webrtc' })).toBe(1);
    expect(value(samples, 'skylark_listeners', { stream: 'other', protocol: 'listen' })).toBe(1);
    expect(samples.some((s) => s.labels.stream === quiet)).toBe(false);
  });

  it('shows ingest state and bitrate per stream, capped the same way', async () => {
    expect(value(samples, 'skylark_ingest_live', { stream: busy })).toBe(1);
    expect(value(samples, 'skylark_ingest_live', { stream: 'other' })).toBe(1);
    // 128 kbps AAC from FFmpeg, once the 5 s window of the bitrate watch is full of it.
    const kbps = await waitFor(async () => {
      const s = parse((await scrape()).text);
      const k = [value(s, 'skylark_ingest_bitrate_kbps', { stream: busy }) ?? 0, value(s, 'skylark_ingest_bitrate_kbps', { stream: 'other' }) ?? 0];
      return k[0]! > 110 && k[1]! > 110 ? k : null;
    }, 15_000, 500, 'full bitrate windows');
    expect(Math.max(...kbps)).toBeLessThan(160);
  });

  it('counts bytes sent by protocol', () => {
    expect(value(samples, 'skylark_bytes_sent_total', { protocol: 'listen' })).toBeGreaterThan(10_000);
    expect(value(samples, 'skylark_bytes_sent_total', { protocol: 'icecast' })).toBeGreaterThan(10_000);
    expect(value(samples, 'skylark_bytes_sent_total', { protocol: 'hls' })).toBeGreaterThan(10_000);
  });

  it('counts the audio sent to WebRTC peers', async () => {
    // Opus at ~64 kb/s from the WebRTC transcoder: a few KB a second once the peer is connected.
    await waitFor(async () => (value(parse((await scrape()).text), 'skylark_bytes_sent_total', { protocol: 'webrtc' }) ?? 0) > 2_000, 15_000, 250, 'WebRTC bytes');
  });

  it('counts requests by route class and status, on every HTTP thread', async () => {
    // Playlist GETs on fresh connections: the kernel spreads them over both threads.
    const n = 30;
    const before = parse((await scrape()).text);
    const agent = new http.Agent({ keepAlive: false });
    for (let i = 0; i < n; i++) {
      await new Promise<void>((resolve, reject) => {
        http.get(`${t.http}/hls/${busy}/index.m3u8`, { agent }, (res) => {
          res.resume();
          res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(String(res.statusCode)))));
        }).on('error', reject);
      });
    }
    const threads = await t.server.threadCounts();
    expect([...threads.keys()].filter((i) => i > 0).some((i) => threads.get(i)!.hls > 0)).toBe(true);
    const after = parse((await scrape()).text);
    const playlists = (s: Sample[]) => value(s, 'skylark_http_requests_total', { route: 'hls_playlist', status: '200' }) ?? 0;
    expect(playlists(after) - playlists(before)).toBeGreaterThanOrEqual(n);
    expect(value(after, 'skylark_http_requests_total', { route: 'api', status: '201' })).toBeGreaterThanOrEqual(2);
    expect(sum(after, 'skylark_http_requests_total', { route: 'listen' })).toBeGreaterThanOrEqual(2);
  });

  it('counts the answers of the file routes (feeds, episode audio)', async () => {
    const p = await api(t.http, t.secretKey, 'POST', '/v2/podcasts', {
      title: 'Metrics', description: 'A podcast for the metrics test.', author: 'Skylark', ownerName: 'Owner', ownerEmail: 'owner@example.com',
      language: 'en-us', category: 'Technology', explicit: false, imageUrl: 'https://example.com/cover-3000.jpg', link: 'https://example.com/show',
    });
    expect(p.status, p.text).toBe(201);
    const notFound = async () => value(parse((await scrape()).text), 'skylark_http_requests_total', { route: 'other', status: '404' }) ?? 0;
    const before = await notFound();
    // A podcast with no published episode has no feed yet: 404 from the feed route itself.
    for (let i = 0; i < 3; i++) expect((await fetch(`${t.http}/feed/${p.json.id}.xml`)).status).toBe(404);
    expect((await notFound()) - before).toBe(3);
  });

  it('counts webhook deliveries by outcome', async () => {
    await waitFor(async () => (value(parse((await scrape()).text), 'skylark_webhook_deliveries_total', { outcome: 'delivered' }) ?? 0) >= 2, 20_000, 250, 'delivered webhooks');
    expect(value(parse((await scrape()).text), 'skylark_webhook_deliveries_total', { outcome: 'undelivered' })).toBe(0);
  });

  it('exposes every metric of docs/metrics.md and the default process metrics', () => {
    for (const name of [
      'skylark_listeners', 'skylark_bytes_sent_total', 'skylark_ingest_live', 'skylark_ingest_bitrate_kbps', 'skylark_http_requests_total', 'skylark_hls_held_reloads',
      'skylark_refusals_total', 'skylark_webhook_deliveries_total', 'skylark_webhook_queue_depth', 'skylark_downloads_counted_total', 'skylark_ffmpeg_processes',
      'nodejs_eventloop_lag_seconds', 'nodejs_gc_duration_seconds', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes',
    ]) expect(text, name).toMatch(new RegExp(`^# TYPE ${name} `, 'm'));
    // The ladder's codec process (the busy stream has encoded layers).
    expect(value(samples, 'skylark_ffmpeg_processes')).toBeGreaterThanOrEqual(1);
  });

  it('passes promtool check metrics', () => {
    const promtool = spawnSync('promtool', ['--version']);
    if (promtool.error) {
      if (process.env.CI === 'true') throw new Error('promtool is missing (apt-get install prometheus)');
      return;
    }
    const r = spawnSync('promtool', ['check', 'metrics'], { input: text });
    expect(`${r.stdout}${r.stderr}`).toBe('');
    expect(r.status).toBe(0);
  });

  it('names only exposed metrics in the Grafana dashboard', () => {
    const dashboard = JSON.parse(readFileSync(path.join(repoRoot, 'docs', 'grafana', 'skylark.json'), 'utf8')) as { panels: Array<{ targets?: Array<{ expr: string }> }> };
    const exposed = new Set([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].flatMap((m) => (m[2] === 'histogram' ? [m[1]!, `${m[1]}_bucket`, `${m[1]}_sum`, `${m[1]}_count`] : [m[1]!])));
    const named = new Set<string>();
    for (const p of dashboard.panels) for (const target of p.targets ?? []) for (const m of target.expr.matchAll(/\b(skylark_\w+|nodejs_\w+|process_\w+)\b/g)) named.add(m[1]!);
    expect(named.size).toBeGreaterThanOrEqual(10);
    expect([...named].filter((n) => !exposed.has(n))).toEqual([]);
  });
});

describe('who may scrape', () => {
  // The socket peer (127.0.0.1) is the trusted proxy: the client is the address it forwards.
  const outside = { 'X-Forwarded-For': '203.0.113.7' };

  it('answers a loopback client without a token', async () => {
    expect((await scrape()).status).toBe(200);
  });

  it('answers 403 off loopback when the node has no token', async () => {
    const open = await startInProcess({ SKYLARK_TRUSTED_PROXIES: '127.0.0.1/32' });
    try {
      const r = await scrape(open.http, { ...outside, Authorization: `Bearer ${TOKEN}` });
      expect(r.status).toBe(403);
      expect(JSON.parse(r.text).error.code).toBe('insufficient_scope');
      expect((await scrape(open.http)).status).toBe(200);
    } finally {
      await open.close();
    }
  });

  it('answers 401 to a client off loopback without a token, 403 with a wrong one, 200 with the token', async () => {
    const none = await fetch(`${t.http}/metrics`, { headers: outside });
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(((await none.json()) as { error: { code: string } }).error.code).toBe('missing_token');
    const wrong = await scrape(t.http, { ...outside, Authorization: 'Bearer wrong-token-0123456789' });
    expect(wrong.status).toBe(403);
    expect(JSON.parse(wrong.text).error.code).toBe('invalid_token');
    expect((await scrape(t.http, { ...outside, Authorization: 'Basic bWV0cmljczp4' })).status).toBe(403);
    const ok = await scrape(t.http, { ...outside, Authorization: `Bearer ${TOKEN}` });
    expect(ok.status).toBe(200);
    expect(ok.text).toContain('skylark_listeners');
  });
});

describe('health', () => {
  it('answers /healthz and /readyz, naming every check', async () => {
    const h = await fetch(`${t.http}/healthz`);
    expect(h.status).toBe(200);
    const r = await fetch(`${t.http}/readyz`);
    const body = (await r.json()) as { ready: boolean; checks: Array<{ name: string; ok: boolean; gating: boolean }>; failed: string[] };
    expect(r.status).toBe(200);
    expect(body.ready).toBe(true);
    expect(body.checks.map((c) => c.name)).toEqual(['database', 'disk', 'ffmpeg', 'http', 'rtmp', 'icecast', 'http_front']);
    expect(body.checks.find((c) => c.name === 'http_front')).toMatchObject({ ok: true, gating: false });
  });

  it('answers 503 naming `disk` when the free-space floor is above the free space', async () => {
    const low = await startInProcess({ SKYLARK_MIN_FREE_DISK_BYTES: '999999999999999' });
    try {
      expect((await fetch(`${low.http}/healthz`)).status).toBe(200);
      const r = await fetch(`${low.http}/readyz`);
      expect(r.status).toBe(503);
      const body = (await r.json()) as { ready: boolean; failed: string[]; checks: Array<{ name: string; ok: boolean; reason?: string }> };
      expect(body.ready).toBe(false);
      expect(body.failed).toEqual(['disk']);
      expect(body.checks.find((c) => c.name === 'disk')!.reason).toMatch(/SKYLARK_MIN_FREE_DISK_BYTES/);
    } finally {
      await low.close();
    }
  });
});
