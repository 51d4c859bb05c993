/**
 * Podcast download counting over real HTTP (docs/podcasts.md "Download counting"): a real server
 * on a real data dir with a controllable clock, episode audio fetched with curl (`-A` user agents,
 * `-r` ranges), the stats API in JSON (checked against the OpenAPI document) and CSV. Proves: a
 * full download counts once per client and day; `bytes=0-1` probes count nothing; ranges count
 * once their sum passes the first minute; apps, devices and countries are named; bots (curl,
 * Googlebot, Skylark's own User-Agent) are bot requests; IPv6 clients are grouped by /64; a
 * restart the same day neither double counts nor forgets bytes; a new UTC day counts anew and
 * drops the closed day's secret; no address or User-Agent reaches the database file; and the
 * `skylark` process killed with SIGKILL comes back knowing the day's clients (what was written
 * before the kill: a stats read writes the pending batch); one address rotating more than 10
 * User-Agents on an episode in a day is one client.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../../../src/base/config.js';
import { startServer, type RunningServer } from '../../../src/main.js';
import { api, startCli, tempDir, testHttpThreads, testLogger, waitFor, type CliServer } from '../../helpers/server.js';
import { Browser, OpenApiChecker, formFields } from '../../helpers/platform.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

const run = promisify(execFile);

const UA = {
  apple: 'AppleCoreMedia/1.0.0.21E236 (iPhone; U; CPU OS 17_4 like Mac OS X; en_us)',
  spotify: 'Spotify/8.9.0 iOS/17.4 (iPhone15,2)',
  overcast: 'Overcast/3.0 (+http://overcast.fm/; iOS podcast app)',
  chrome: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36',
  pocket: 'Pocket Casts/7.60 (iOS 17.4; iPhone)',
  v6: 'PodcastAddict/v5 (Linux; U; Android 14) ExoPlayerLib/2.19.1',
  curl: 'curl/8.5.0',
  google: 'Googlebot/2.1 (+http://www.google.com/bot.html)',
  own: 'Skylark-Webhooks/1.0',
};

const OWNER = { email: 'owner@example.com', password: 'a long enough owner password' };
const DAY1 = Date.parse('2026-03-10T10:00:00Z');
let clock = DAY1;
const { dir, cleanup } = tempDir('skylark-downloads-');
let server: RunningServer;
let base: string;
let key: string;
let podcastId: string;
let episodeId: string;
let audioUrl: string;
let size: number;
let closeLogs: () => void = () => {};
const checker: { c: OpenApiChecker | null } = { c: null };

async function start(): Promise<void> {
  const config = loadConfig({
    SKYLARK_HTTP_PORT: '0',
    SKYLARK_RTMP_PORT: '0',
    SKYLARK_ICECAST_PORT: '0',
    SKYLARK_DATA_DIR: dir,
    SKYLARK_LOG_LEVEL: 'error',
    SKYLARK_HTTP_THREADS: testHttpThreads,
    // Requests come from 127.0.0.1: trusting it lets X-Forwarded-For name other clients (IPv6, public).
    SKYLARK_TRUSTED_PROXIES: '127.0.0.1',
  });
  const logs = testLogger();
  closeLogs = logs.close;
  server = await startServer(config, logs.log, () => clock);
  base = `http://127.0.0.1:${server.httpPort}`;
  const doc = await (await fetch(`${base}/v2/openapi.json`)).json();
  checker.c = new OpenApiChecker(doc as ConstructorParameters<typeof OpenApiChecker>[0]);
  checker.c.attach(server, base);
  // The episode's audio URL names the server's port: follow it across restarts.
  if (audioUrl) audioUrl = `${base}${new URL(audioUrl).pathname}`;
}

async function stop(): Promise<void> {
  checker.c?.detach();
  await server.close();
  closeLogs();
}

/** curl the audio as `ua` (optionally a range, extra headers); the body length. */
async function get(ua: string, opts: { range?: string; head?: boolean; headers?: string[] } = {}): Promise<number> {
  const args = ['-s', '-o', '-', '-A', ua, '--max-time', '20'];
  if (opts.range) args.push('-r', opts.range);
  if (opts.head) args.push('-I');
  for (const h of opts.headers ?? []) args.push('-H', h);
  const { stdout } = await run('curl', [...args, audioUrl], { encoding: 'buffer', maxBuffer: 64 << 20 });
  return stdout.length;
}

async function stats(q = '', episode = false): Promise<any> {
  const p = episode ? `/v2/podcasts/${podcastId}/episodes/${episodeId}/stats${q}` : `/v2/podcasts/${podcastId}/stats${q}`;
  const r = await api(base, key, 'GET', p);
  expect(r.status, JSON.stringify(r.json)).toBe(200);
  return r.json;
}

/** 180 s of 64 kb/s MP3 with an ID3v2 tag at `file`; its bytes. */
function makeMp3(file: string): Buffer {
  execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=180', '-ac', '1', '-c:a', 'libmp3lame', '-b:a', '64k', '-id3v2_version', '3', '-metadata', 'title=Downloads', file], { timeout: 60_000 });
  return readFileSync(file);
}

const appCount = (s: any, app: string | null) => s.byApp.find((x: any) => x.app === app)?.downloads ?? 0;

beforeAll(async () => {
  await start();
  const created = await server.accounts.create({ name: 'Downloads', plan: 'paid', region: 'eu-west-1', email: OWNER.email, password: OWNER.password });
  key = created.secretKey;
  // 180 s of 64 kb/s MP3 with an ID3v2 tag: the first minute is a third of the audio plus the tag.
  const file = path.join(dir, 'episode.mp3');
  const audio = makeMp3(file);
  size = audio.length;
  // Loudness normalisation off here (a background FFmpeg job); the normalised case has its own test.
  podcastId = (await api(base, key, 'POST', '/v2/podcasts', { title: 'Counted show', loudnessTarget: null })).json.id;
  episodeId = (await api(base, key, 'POST', `/v2/podcasts/${podcastId}/episodes`, { title: 'Counted' })).json.id;
  const up = await fetch(`${base}/v2/podcasts/${podcastId}/episodes/${episodeId}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body: audio });
  expect(up.status).toBe(200);
  audioUrl = ((await up.json()) as any).audioUrl;
  expect((await api(base, key, 'POST', `/v2/podcasts/${podcastId}/publish`, { episodeId })).status).toBe(200);
}, 120_000);

afterAll(async () => {
  await stop();
  cleanup();
});

describe('download counting', () => {
  it('stores the first minute at upload: the ID3v2 tag plus 60 s at the file’s bitrate', () => {
    const row = server.db.prepare('SELECT audio_minute_bytes FROM episodes WHERE id = ?').get(episodeId) as { audio_minute_bytes: number };
    // 64 kb/s → 8,000 bytes/s → 480,000 bytes a minute, plus a tag of a few dozen bytes.
    expect(row.audio_minute_bytes).toBeGreaterThan(480_000);
    expect(row.audio_minute_bytes).toBeLessThan(size / 3 + 2_000);
  });

  it('counts a full download once per client and day', async () => {
    expect(await get(UA.apple)).toBe(size);
    let s = await stats();
    expect(s).toMatchObject({ object: 'podcast_stats', podcastId, downloads: 1, to: '2026-03-10', from: '2026-02-09' });
    expect(s.byApp).toEqual([{ app: 'AppleCoreMedia', downloads: 1 }]);
    expect(s.byDevice).toEqual([{ device: 'Apple iPhone', downloads: 1 }]);
    expect(s.byCountry).toEqual([{ country: null, downloads: 1 }]); // loopback counts; it has no country
    expect(s.byEpisode).toEqual([{ episodeId, downloads: 1 }]);
    expect(s.byDay).toHaveLength(30);
    expect(s.byDay.at(-1)).toEqual({ date: '2026-03-10', downloads: 1 });
    expect(await get(UA.apple)).toBe(size);
    expect(await get(UA.apple, { range: '1000-' })).toBe(size - 1000);
    s = await stats();
    expect(s.downloads).toBe(1);
  });

  it('counts nothing for bytes=0-1 probes, and ranges once their sum passes the first minute', async () => {
    for (let i = 0; i < 5; i++) expect(await get(UA.spotify, { range: '0-1' })).toBe(2);
    expect(appCount(await stats(), 'Spotify')).toBe(0);
    const fifth = Math.floor(size / 5);
    expect(await get(UA.spotify, { range: `0-${fifth - 1}` })).toBe(fifth);
    expect(appCount(await stats(), 'Spotify')).toBe(0); // a fifth of three minutes < one minute
    expect(await get(UA.spotify, { range: `${fifth}-${2 * fifth - 1}` })).toBe(fifth);
    expect(appCount(await stats(), 'Spotify')).toBe(1); // two fifths > one minute plus the tag
    expect(await get(UA.spotify, { range: `${2 * fifth}-` })).toBe(size - 2 * fifth);
    expect(appCount(await stats(), 'Spotify')).toBe(1);
  });

  it('names apps by User-Agent from the OPAWG list (an app is no bot even with a URL in it)', async () => {
    await get(UA.overcast);
    await get(UA.chrome);
    const s = await stats();
    expect(appCount(s, 'Overcast')).toBe(1);
    expect(appCount(s, 'Chrome')).toBe(1);
    expect(s.byDevice).toContainEqual({ device: 'Windows Computer', downloads: 1 });
    expect(s.downloads).toBe(4);
    expect(s.botRequests).toBe(0);
  });

  it('counts bots and Skylark itself as bot requests, never as downloads', async () => {
    await get(UA.curl);
    await get(UA.google);
    await get(UA.google, { head: true });
    await get(UA.own);
    const s = await stats();
    expect(s.botRequests).toBe(4);
    expect(s.downloads).toBe(4);
  });

  it('groups IPv6 clients by /64 and maps IPv4-mapped addresses to IPv4; names countries', async () => {
    await get(UA.v6, { headers: ['X-Forwarded-For: 2001:db8:1:2::1'] });
    await get(UA.v6, { headers: ['X-Forwarded-For: 2001:db8:1:2:aaaa:bbbb:cccc:dddd'] });
    await get(UA.v6, { headers: ['X-Forwarded-For: 2001:db8:1:3::1'] });
    await get(UA.v6, { headers: ['X-Forwarded-For: 8.8.8.8'] });
    await get(UA.v6, { headers: ['X-Forwarded-For: ::ffff:8.8.8.8'] });
    const s = await stats();
    expect(s.downloads).toBe(7); // two /64s and one IPv4 client
    expect(s.byCountry).toContainEqual({ country: 'US', downloads: 1 });
  });

  it('answers CSV for Accept: text/csv', async () => {
    const r = await fetch(`${base}/v2/podcasts/${podcastId}/stats`, { headers: { Authorization: `Bearer ${key}`, Accept: 'text/csv' } });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const lines = (await r.text()).trimEnd().split('\r\n');
    expect(lines[0]).toBe('date,episodeId,app,country,device,downloads');
    expect(lines).toContain(`2026-03-10,${episodeId},AppleCoreMedia,,Apple iPhone,1`);
    expect(lines).toContain(`2026-03-10,${episodeId},Overcast,,Apple iPhone,1`);
    const sum = lines.slice(1).reduce((n, l) => n + Number(l.split(',').at(-1)), 0);
    expect(sum).toBe(7);
  });

  it('shows downloads per day (an SVG chart), top episodes, apps and countries on the dashboard’s podcast page', async () => {
    const b = new Browser();
    const form = formFields((await b.request(`${base}/dashboard/login`)).text, 'name="password"');
    await b.request(`${base}${form.action}`, { form: { ...form.hidden, ...OWNER } });
    const page = await b.request(`${base}/dashboard/podcasts/${podcastId}`);
    expect(page.status).toBe(200);
    const html = page.text;
    expect(html).toContain('<h2 id="downloads">Downloads</h2>');
    expect(html).toMatch(/<svg class="downloads-chart"[^>]*role="img"/);
    expect(html).toContain('<title>2026-03-10: 7 downloads</title>');
    expect((html.match(/<rect class="bar"/g) ?? []).length).toBe(30);
    expect(html).toMatch(/<span class="bar-label" title="Counted">Counted<\/span><meter min="0" max="7" value="7"/);
    expect(html).toContain('title="AppleCoreMedia"');
    expect(html).toContain('title="US"');
  });

  it('keeps the day’s clients and bytes across a restart on the same data dir', async () => {
    const fifth = Math.floor(size / 5);
    await get(UA.pocket, { range: `0-${fifth - 1}` });
    expect(appCount(await stats(), 'Pocket Casts')).toBe(0);
    await stop();
    await start();
    await get(UA.apple); // counted before the restart: not again
    expect((await stats()).downloads).toBe(7);
    await get(UA.pocket, { range: `${fifth}-${2 * fifth - 1}` }); // bytes before the restart still count
    const s = await stats();
    expect(appCount(s, 'Pocket Casts')).toBe(1);
    expect(s.downloads).toBe(8);
  });

  it('counts anew on a new UTC day and forgets the closed day’s secret and clients', async () => {
    const before = server.db.prepare('SELECT secret FROM download_secrets').all() as Array<{ secret: Buffer }>;
    expect(before).toHaveLength(1);
    clock = Date.parse('2026-03-11T00:00:30Z');
    await get(UA.apple);
    const s = await stats('?from=2026-03-10&to=2026-03-11');
    expect(s.byDay).toEqual([
      { date: '2026-03-10', downloads: 8 },
      { date: '2026-03-11', downloads: 1 },
    ]);
    expect(appCount(s, 'AppleCoreMedia')).toBe(2);
    const after = server.db.prepare('SELECT day, secret FROM download_secrets').all() as Array<{ day: string; secret: Buffer }>;
    expect(after.map((r) => r.day)).toEqual(['2026-03-11']);
    expect(after[0]!.secret.equals(before[0]!.secret)).toBe(false);
    expect(server.db.prepare(`SELECT COUNT(*) FROM download_clients WHERE day <> '2026-03-11'`).pluck().get()).toBe(0);
  });

  it('answers an episode’s statistics, and 400 for a bad range', async () => {
    const s = await stats('?from=2026-03-10&to=2026-03-11', true);
    expect(s).toMatchObject({ episodeId, downloads: 9, byEpisode: [{ episodeId, downloads: 9 }] });
    for (const q of ['?from=2026-03-12&to=2026-03-11', '?from=2025-01-01&to=2026-03-11', '?from=2026-02-30', '?to=yesterday']) {
      const r = await api(base, key, 'GET', `/v2/podcasts/${podcastId}/stats${q}`);
      expect(r.status, q).toBe(400);
      expect(r.json.error.code).toBe('parameter_invalid');
    }
    expect((await api(base, key, 'GET', `/v2/podcasts/pod_missing/stats`)).status).toBe(404);
    expect((await api(base, key, 'GET', `/v2/podcasts/${podcastId}/episodes/ep_missing/stats`)).status).toBe(404);
  });

  it('counts a loudness-normalised episode: its copy and the original upload (the alternate enclosure) are one episode', async () => {
    const pid = (await api(base, key, 'POST', '/v2/podcasts', { title: 'Normalised show' })).json.id; // loudnessTarget −16 by default
    const eid = (await api(base, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Normalised' })).json.id;
    const up = await fetch(`${base}/v2/podcasts/${pid}/episodes/${eid}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body: readFileSync(path.join(dir, 'episode.mp3')) });
    expect(up.status).toBe(200);
    const ep = await waitFor(async () => {
      const e = (await api(base, key, 'GET', `/v2/podcasts/${pid}/episodes/${eid}`)).json;
      return e.loudness?.normalized ? e : null;
    }, 90_000, 250, 'the normalised copy');
    expect((await api(base, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: eid })).status).toBe(200);
    const copy = `${base}${new URL(ep.audioUrl).pathname}`;
    const original = `${base}${new URL(ep.loudness.originalAudioUrl).pathname}`;
    const pull = async (url: string, ua: string) => (await run('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code} %{size_download}', '-A', ua, url], { encoding: 'utf8' })).stdout;
    expect(await pull(original, UA.apple)).toMatch(/^200 \d+$/);
    expect(await pull(copy, UA.apple)).toMatch(/^200 \d+$/); // the same client, the same episode: no second download
    expect(await pull(copy, UA.spotify)).toMatch(/^200 \d+$/); // the copy's own first minute is measured
    const s = (await api(base, key, 'GET', `/v2/podcasts/${pid}/stats`)).json;
    expect(s.downloads).toBe(2);
    expect(s.byEpisode).toEqual([{ episodeId: eid, downloads: 2 }]);
  }, 120_000);

  it('counts one address rotating more than 10 User-Agents on one episode in a day as one client', async () => {
    const today = async () => (await stats('?from=2026-03-11&to=2026-03-11', true)).downloads as number;
    const before = await today();
    const ua = (i: number) => `Overcast/${i}.0 (+http://overcast.fm/; iOS podcast app)`;
    const from = (ip: string) => [`X-Forwarded-For: ${ip}`];
    for (let i = 0; i < 6; i++) expect(await get(ua(i), { headers: from('198.51.100.6') })).toBe(size);
    expect(await today()).toBe(before + 6); // a household's six apps are six clients
    for (let i = 0; i < 12; i++) expect(await get(ua(i), { headers: from('198.51.100.77') })).toBe(size);
    expect(await today()).toBe(before + 6 + 1);
    for (let i = 12; i < 20; i++) await get(ua(i), { headers: from('198.51.100.77') });
    expect(await today()).toBe(before + 6 + 1);
  });

  it('writes no address and no User-Agent to the database', async () => {
    server.db.pragma('wal_checkpoint(TRUNCATE)');
    const files = ['skylark.db', 'skylark.db-wal'].map((f) => path.join(dir, f)).filter(existsSync);
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) {
      const bytes = readFileSync(f).toString('latin1');
      for (const needle of ['8.8.8.8', '2001:db8', UA.apple, UA.spotify, UA.v6]) expect(bytes.includes(needle), `${needle} in ${f}`).toBe(false);
    }
  });
});

describe('download counting across kill -9 (the CLI, dist/)', () => {
  const t = tempDir('skylark-downloads-kill-');
  let cli: CliServer | null = null;
  afterAll(async () => {
    await cli?.stop();
    t.cleanup();
  });

  it('neither double counts a client nor forgets its bytes after SIGKILL the same day', async () => {
    cli = await startCli(t.dir);
    const sk = /^secretKey: (\S+)/m.exec(cli.stderr())?.[1];
    expect(sk, cli.stderr()).toBeTruthy();
    const audio = makeMp3(path.join(t.dir, 'episode.mp3'));
    const pid = (await api(cli.http, sk!, 'POST', '/v2/podcasts', { title: 'Killed show' })).json.id;
    const eid = (await api(cli.http, sk!, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Killed' })).json.id;
    const up = await fetch(`${cli.http}/v2/podcasts/${pid}/episodes/${eid}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${sk}`, 'Content-Type': 'audio/mpeg' }, body: audio });
    expect(up.status).toBe(200);
    const path0 = new URL(((await up.json()) as any).audioUrl).pathname;
    expect((await api(cli.http, sk!, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: eid })).status).toBe(200);
    const fifth = Math.floor(audio.length / 5);
    // Each pull must be whole (status and bytes): a pull cut short would count nothing, rightly.
    const curl = async (ua: string, range?: string) =>
      (await run('curl', ['-sS', '-o', '/dev/null', '-w', '%{http_code} %{size_download}', '-A', ua, ...(range ? ['-r', range] : []), `${cli!.http}${path0}`], { encoding: 'utf8' })).stdout;
    const read = async () => (await api(cli!.http, sk!, 'GET', `/v2/podcasts/${pid}/stats`)).json;

    expect(await curl(UA.apple)).toBe(`200 ${audio.length}`);
    expect(await curl(UA.pocket, `0-${fifth - 1}`)).toBe(`206 ${fifth}`);
    let s = await read(); // writes the batch
    expect(s.downloads, JSON.stringify(s)).toBe(1);
    cli.child.kill('SIGKILL');
    await new Promise((r) => (cli!.child.exitCode !== null || cli!.child.signalCode !== null ? r(null) : cli!.child.once('exit', r)));

    cli = await startCli(t.dir);
    expect(await curl(UA.apple)).toBe(`200 ${audio.length}`);
    expect(await curl(UA.pocket, `${fifth}-${2 * fifth - 1}`)).toBe(`206 ${fifth}`);
    s = await read();
    expect(s.downloads).toBe(2);
    expect(s.byApp).toEqual(expect.arrayContaining([{ app: 'AppleCoreMedia', downloads: 1 }, { app: 'Pocket Casts', downloads: 1 }]));
  }, 120_000);
});
