/**
 * Feed-update notifications (docs/podcasts.md "Feed-update notifications") through the whole
 * server on an injected clock, with local receivers that refuse the first attempt:
 * - `SKYLARK_WEBSUB_HUB`: the feed carries `<atom:link rel="hub">` and `rel="self"`; every feed
 *   change POSTs `hub.mode=publish&hub.url=<feed>` (form body) to the hub;
 * - `SKYLARK_FEED_NOTIFY_URLS` (`<url>|<token>`): on publish `GET <url>&url=<feed>&reason=update`
 *   with `Authorization: Bearer <token>`, not on other changes; `live` and `liveEnd` when a public
 *   stream recording into the podcast starts and ends (the lifecycle's `stream.started` /
 *   `stream.ended` events, recorded here through the server's outbox as the lifecycle records them);
 * - both through the webhooks' durable retry queue: the failed first attempt is retried when the
 *   clock reaches +1 min, also after a restart of the server in between.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { loadConfig } from '../../../src/base/config.js';
import { createLogger } from '../../../src/base/logger.js';
import { startServer, type RunningServer } from '../../../src/main.js';
import { api, tempDir, waitFor } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

interface Hit {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
  status: number;
}

const tmp = tempDir('skylark-feed-notify-');
const clock = { t: Date.UTC(2026, 4, 1, 9, 0, 0) };
let server: RunningServer | null = null;
let base: string;
let key: string;
let accountId: string;
let pid: string;
let feedUrl: string;
const receivers: http.Server[] = [];

/** A receiver answering `failStatus` to the first request of each distinct (method, URL, body) and `okStatus` to its repeats. */
async function receiver(failStatus: number, okStatus: number): Promise<{ url: string; hits: Hit[] }> {
  const hits: Hit[] = [];
  const seen = new Set<string>();
  const srv = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const k = `${req.method} ${req.url} ${body}`;
      const status = seen.has(k) ? okStatus : failStatus;
      seen.add(k);
      hits.push({ method: req.method!, url: req.url!, headers: req.headers, body, at: clock.t, status });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  receivers.push(srv);
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, hits };
}

let hub: { url: string; hits: Hit[] };
let notifier: { url: string; hits: Hit[] };
let config: ReturnType<typeof loadConfig>;

async function start(): Promise<void> {
  server = await startServer(config, createLogger('error'), () => clock.t);
  base = `http://127.0.0.1:${server.httpPort}`;
}

beforeAll(async () => {
  hub = await receiver(503, 204);
  notifier = await receiver(500, 200);
  config = loadConfig({
    SKYLARK_HTTP_PORT: '0',
    SKYLARK_RTMP_PORT: '0',
    SKYLARK_ICECAST_PORT: '0',
    SKYLARK_DATA_DIR: tmp.dir,
    SKYLARK_LOG_LEVEL: 'error',
    SKYLARK_WEBHOOKS_ALLOW_PRIVATE: '1',
    SKYLARK_WEBSUB_HUB: `${hub.url}/hub`,
    SKYLARK_FEED_NOTIFY_URLS: `${notifier.url}/ping?medium=podcast|tok-123.abc`,
  });
  await start();
  const created = await server!.accounts.create({ name: 'Notify', plan: 'paid', region: 'eu-west-1' });
  key = created.secretKey;
  accountId = created.account.id;
  const p = await api(base, key, 'POST', '/v2/podcasts', { title: 'Pinged', category: 'Technology' });
  pid = p.json.id;
  feedUrl = p.json.feedUrl;
});
afterAll(async () => {
  await server?.close();
  for (const r of receivers) {
    r.closeAllConnections();
    await new Promise<void>((done) => r.close(() => done()));
  }
  tmp.cleanup();
});

const formBody = (u: string) => `hub.mode=publish&hub.url=${encodeURIComponent(u)}`;
const notifyPath = (reason: string) => `/ping?medium=podcast&url=${encodeURIComponent(feedUrl)}&reason=${reason}`;

describe('feed-update notifications', () => {
  let epId: string;

  it('pings hub and notifier on publish; the failed first attempts are retried at +1 min, after a restart', async () => {
    const mp3 = path.join(tmp.dir, 'a.mp3');
    execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=2', '-c:a', 'libmp3lame', '-b:a', '64k', mp3], { timeout: 30_000 });
    const e = await api(base, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'First' });
    epId = e.json.id;
    const a = await fetch(`${base}/v2/podcasts/${pid}/episodes/${epId}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body: readFileSync(mp3) });
    expect(a.status).toBe(200);
    expect(hub.hits).toHaveLength(0); // a draft podcast's feed is not served: nothing to announce
    const pub = await api(base, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: epId });
    expect(pub.status, pub.text).toBe(200);
    const t0 = clock.t;
    await waitFor(() => hub.hits.length === 1 && notifier.hits.length === 1, 20_000, 20, 'first attempts');
    expect(hub.hits[0]).toMatchObject({ method: 'POST', url: '/hub', body: formBody(feedUrl), status: 503 });
    expect(hub.hits[0]!.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(notifier.hits[0]).toMatchObject({ method: 'GET', url: notifyPath('update'), status: 500 });
    expect(notifier.hits[0]!.headers.authorization).toBe('Bearer tok-123.abc');

    // Restart while both wait for their retry: the schedule is in SQLite.
    await server!.close();
    server = null;
    await start();
    clock.t = t0 + 60_000;
    await waitFor(() => hub.hits.length === 2 && notifier.hits.length === 2, 20_000, 20, 'retries');
    expect(hub.hits[1]).toMatchObject({ body: formBody(feedUrl), status: 204, at: t0 + 60_000 });
    expect(notifier.hits[1]).toMatchObject({ url: notifyPath('update'), status: 200, at: t0 + 60_000 });
    expect(notifier.hits[1]!.headers.authorization).toBe('Bearer tok-123.abc');
    // the restarted server listens on another port: its feed URL from now on
    feedUrl = (await api(base, key, 'GET', `/v2/podcasts/${pid}`)).json.feedUrl;
  });

  it('names the hub and itself in the feed', async () => {
    const xml = await (await fetch(feedUrl)).text();
    expect(xml).toContain(`<atom:link href="${feedUrl}" rel="self" type="application/rss+xml"/>`);
    expect(xml).toContain(`<atom:link href="${hub.url}/hub" rel="hub"/>`);
  });

  it('pings the hub (not the notifier) on other feed changes', async () => {
    const before = { hub: hub.hits.length, notify: notifier.hits.length };
    const r = await api(base, key, 'PATCH', `/v2/podcasts/${pid}/episodes/${epId}`, { title: 'First, renamed' });
    expect(r.status).toBe(200);
    await waitFor(() => hub.hits.length === before.hub + 1, 20_000, 20, 'hub ping');
    expect(hub.hits.at(-1)).toMatchObject({ method: 'POST', body: formBody(feedUrl) });
    // an unpublished episode's change is not a feed change
    await api(base, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Draft' });
    // a later publication reaches the notifier again: nothing is queued for it meanwhile
    expect(notifier.hits.length).toBe(before.notify);
  });

  it('calls the notifier with reason=live and reason=liveEnd for a public stream recording into the podcast', async () => {
    const st = await api(base, key, 'POST', '/v2/streams', { title: 'Show', recording: { podcastId: pid } });
    expect(st.status, st.text).toBe(201);
    const other = await api(base, key, 'POST', '/v2/streams', { title: 'Elsewhere' });
    const stream = st.json;
    const record = (type: 'stream.started' | 'stream.ended', object: unknown) => {
      server!.outbox.record(accountId, type, { object });
      server!.outbox.flush();
    };
    const n = notifier.hits.length;
    record('stream.started', other.json); // not recorded into a podcast: no ping
    record('stream.started', { ...stream, status: 'live' });
    await waitFor(() => notifier.hits.some((h) => h.url === notifyPath('live')), 20_000, 20, 'live ping');
    record('stream.ended', { ...stream, status: 'ended' });
    await waitFor(() => notifier.hits.some((h) => h.url === notifyPath('liveEnd')), 20_000, 20, 'liveEnd ping');
    // each failed once (a new URL for this receiver) and is retried at +1 min
    expect(notifier.hits.slice(n).map((h) => [h.url, h.status])).toEqual([
      [notifyPath('live'), 500],
      [notifyPath('liveEnd'), 500],
    ]);
    clock.t += 60_000;
    await waitFor(() => notifier.hits.filter((h) => h.status === 200 && /reason=live/.test(h.url)).length === 2, 20_000, 20, 'retried live pings');
  });
});
