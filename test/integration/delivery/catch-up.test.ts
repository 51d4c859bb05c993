/**
 * Catch-up radio (docs/behaviour.md "Catch-up radio", docs/http.md "Catch-up"): `skylark serve`
 * runs as a child process; a real FFmpeg publishes a 440 Hz tone in broadcast 1 and an 880 Hz tone
 * in broadcast 2 of one stream with `catchUp: {hours: 1}`. FFmpeg then decodes each catch-up
 * address — `broadcasts/<brd>.m3u8`, `archive/<t>-<s>.m3u8` inside each broadcast and across both,
 * `from/<t>.m3u8` — and the decoded audio's frequency proves which broadcast each one plays. The
 * rewind playlist's delta update (`_HLS_skip=YES`) is smaller than the full one; times outside the
 * window are 404 and malformed ones 400; archive objects are immutable. The node is killed
 * (SIGKILL) and started again on the same data dir: the archive answers at once with the same
 * bytes, and the next broadcast's sequence numbers are above every number served before.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { api, runCli, startCli, tempDir, waitFor, type CliServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';
import { nginxBinary, startEdge } from '../../../bench/lib/nginx-edges.js';

const nginx = nginxBinary();

/** Frequency (Hz) of the tone in mono 8 kHz s16le `pcm` between samples `from` and `to`, by zero crossings. */
function hzOf(pcm: Buffer, from: number, to: number): number {
  let crossings = 0;
  let prev = 0;
  for (let i = from; i < to; i++) {
    const v = pcm.readInt16LE(i * 2);
    const sign = v > 64 ? 1 : v < -64 ? -1 : 0;
    if (sign !== 0 && prev !== 0 && sign !== prev) crossings++;
    if (sign !== 0) prev = sign;
  }
  return crossings / 2 / ((to - from) / 8000);
}

/**
 * Decodes up to `seconds` of `url` with FFmpeg into mono 8 kHz PCM: the tone's frequency (Hz) over
 * the first 3 s and the last 3 s (after 0.2 s of priming), and the seconds decoded.
 */
function tone(url: string, seconds: number): Promise<{ hz: number; lastHz: number; decoded: number }> {
  return new Promise((resolve, reject) => {
    const args = ['-hide_banner', '-loglevel', 'error', '-i', url, '-t', String(seconds), '-vn', '-ac', '1', '-ar', '8000', '-f', 's16le', '-'];
    const p = spawn(ffmpegPath(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let err = '';
    p.stdout.on('data', (d: Buffer) => chunks.push(d));
    p.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => p.kill('SIGKILL'), 60_000);
    p.on('close', (code) => {
      clearTimeout(timer);
      const pcm = Buffer.concat(chunks);
      const n = Math.floor(pcm.length / 2);
      if (n < 8000) return reject(new Error(`ffmpeg decoded ${n} samples of ${url} (exit ${code}): ${err}`));
      resolve({ hz: hzOf(pcm, 1600, Math.min(n, 1600 + 24_000)), lastHz: hzOf(pcm, Math.max(1600, n - 24_000), n), decoded: n / 8000 });
    });
  });
}

const get = async (url: string) => {
  const r = await fetch(url);
  return { status: r.status, text: await r.text(), cache: r.headers.get('cache-control') };
};
const unix = (ms: number) => Math.floor(ms / 1000);

describe('catch-up radio', () => {
  const tmp = tempDir();
  let server: CliServer | undefined;
  afterAll(async () => {
    await server?.stop();
    tmp.cleanup();
  });

  it('keeps each broadcast on disk and plays what aired at the asked time, across a restart', async () => {
    const key = JSON.parse(await runCli(['accounts', 'create', '--name', 'Catch-up', '--plan', 'paid', '--json', '--data-dir', tmp.dir])).secretKey as string;
    // Two HTTP threads: the worker forwards every catch-up address to the main thread.
    server = await startCli(tmp.dir, { SKYLARK_HTTP_THREADS: '2' });
    const h = () => server!.http;

    // catchUp.hours: an integer 0–168, else 400 naming it.
    for (const bad of [169, -1, 1.5, '2', null]) {
      const r = await api(h(), key, 'POST', '/v2/streams', { title: 'Bad', catchUp: { hours: bad } });
      expect(r.status, JSON.stringify(bad)).toBe(400);
      expect(JSON.stringify(r.json), JSON.stringify(bad)).toContain('catchUp.hours');
    }
    const off = (await api(h(), key, 'POST', '/v2/streams', { title: 'No catch-up' })).json;
    expect(off.catchUp).toEqual({ hours: 0 });
    const s = (await api(h(), key, 'POST', '/v2/streams', { title: 'Catch-up', reconnectWindow: 0, catchUp: { hours: 2 } })).json;
    expect(s.catchUp).toEqual({ hours: 2 });
    expect((await api(h(), key, 'PATCH', `/v2/streams/${s.id}`, { catchUp: { hours: 200 } })).status).toBe(400);
    const patched = await api(h(), key, 'PATCH', `/v2/streams/${s.id}`, { catchUp: { hours: 1 } });
    expect(patched.json.catchUp).toEqual({ hours: 1 });
    const tk = (await api(h(), key, 'POST', '/v2/streams', { title: 'Gated', reconnectWindow: 0, playback: 'token', catchUp: { hours: 1 } })).json;

    // Broadcast 1 at 440 Hz, broadcast 2 at 880 Hz, a few seconds apart.
    const spans: Array<{ from: number; to: number }> = [];
    for (const frequency of [440, 880]) {
      const from = Date.now();
      const pub = publish(`${server.rtmp}/live/${s.id}/${s.streamKey}`, { seconds: 14, frequency });
      const gated = frequency === 440 ? publish(`${server.rtmp}/live/${tk.id}/${tk.streamKey}`, { seconds: 8, frequency }) : null;
      await waitFor(async () => (await api(h(), key, 'GET', `/v2/streams/${s.id}`)).json.status === 'live' || null, 20_000, 200, 'live');
      // A title that airs during the broadcast: catch-up playlists list it at its air time.
      await new Promise((r) => setTimeout(r, 4000));
      expect((await api(h(), key, 'POST', `/v2/streams/${s.id}/now_playing`, { title: `Tone ${frequency}` })).status).toBe(200);
      await exited(pub);
      if (gated) await exited(gated);
      await waitFor(async () => (await api(h(), key, 'GET', `/v2/streams/${s.id}`)).json.status === 'idle' || null, 20_000, 200, 'idle');
      spans.push({ from, to: Date.now() });
      await new Promise((r) => setTimeout(r, 3000));
    }
    const brds = (await api(h(), key, 'GET', `/v2/streams/${s.id}/broadcasts`)).json.data as Array<{ id: string; startedAt: string; endedAt: string; catchUpUrl: string | null }>;
    expect(brds.length).toBe(2);
    const [b2, b1] = brds; // newest first
    expect(b1!.catchUpUrl).toBe(`${h()}/hls/${s.id}/broadcasts/${b1!.id}.m3u8`);

    // Each broadcast plays its own tone; its playlist is VOD once ended.
    const base = `${h()}/hls/${s.id}`;
    for (const [b, hz] of [[b1!, 440], [b2!, 880]] as const) {
      const mv = await get(`${base}/broadcasts/${b.id}.m3u8`);
      expect(mv.status).toBe(200);
      const layer = mv.text.split('\n').find((l) => l.includes('.m3u8'))!;
      const media = await get(`${base}/broadcasts/${layer}`);
      expect(media.text).toContain('#EXT-X-PLAYLIST-TYPE:VOD');
      expect(media.text).toContain('#EXT-X-ENDLIST');
      expect(media.text).toContain('#EXT-X-PROGRAM-DATE-TIME:');
      expect(media.text).toMatch(new RegExp(`#EXT-X-DATERANGE:ID="np-trk_[^"]+",CLASS="com.skylark.now-playing",START-DATE="[^"]+",X-TITLE="Tone ${hz}"`));
      const t = await tone(`${base}/broadcasts/${b.id}.m3u8`, 8);
      process.stderr.write(`catch-up: broadcasts/${b.id} → ${t.hz.toFixed(1)} Hz over ${t.decoded.toFixed(1)} s\n`);
      expect(Math.abs(t.hz - hz)).toBeLessThan(15);
    }

    // archive/<t>-<s> inside each broadcast, and one across both (a discontinuity between them).
    const s1 = Date.parse(b1!.startedAt);
    const s2 = Date.parse(b2!.startedAt);
    for (const [at, hz] of [[s1 + 3000, 440], [s2 + 3000, 880]] as const) {
      const url = `${base}/archive/${unix(at)}-6.m3u8`;
      const mv = await get(url);
      expect(mv.status, url).toBe(200);
      expect(mv.cache).toBe('public, max-age=31536000, immutable');
      const t = await tone(url, 4);
      process.stderr.write(`catch-up: archive/${unix(at)}-6 → ${t.hz.toFixed(1)} Hz\n`);
      expect(Math.abs(t.hz - hz)).toBeLessThan(15);
    }
    const across = `${base}/archive/${new Date(s1 + 2000).toISOString().replace(/\.\d+Z$/, 'Z')}-${Math.ceil((Date.parse(b2!.endedAt) - s1 - 4000) / 1000)}`;
    const acrossMv = await get(`${across}.m3u8`);
    expect(acrossMv.status, across).toBe(200);
    const acrossLayer = acrossMv.text.split('\n').find((l) => l.includes('.m3u8'))!;
    const acrossMedia = await get(`${base}/archive/${acrossLayer}`);
    expect(acrossMedia.text).toContain('#EXT-X-DISCONTINUITY\n');
    expect(acrossMedia.text).toContain('#EXT-X-ENDLIST');
    // FFmpeg decodes it whole: broadcast 1's tone first, broadcast 2's last.
    const whole = await tone(`${across}.m3u8`, 120);
    expect(whole.decoded).toBeGreaterThan(15);
    expect(Math.abs(whole.hz - 440)).toBeLessThan(15);
    expect(Math.abs(whole.lastHz - 880)).toBeLessThan(15);
    process.stderr.write(`catch-up: ${across.split('/').pop()} decoded ${whole.decoded.toFixed(1)} s across both broadcasts\n`);
    // An archived segment: immutable, the bytes the playlist names.
    const segUri = acrossMedia.text.split('\n').find((l) => l.endsWith('.m4s'))!;
    const seg = await fetch(new URL(segUri, `${base}/archive/${acrossLayer}`));
    expect(seg.status).toBe(200);
    expect(seg.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');

    // A stock nginx edge from `skylark edge-config` keeps an archived segment: MISS, then HIT.
    if (nginx) {
      const edgeDir = tempDir('skylark-edge-');
      const e = await startEdge({ origin: h(), host: '127.0.0.5', dir: edgeDir.dir });
      try {
        const u = new URL(segUri, `${base}/archive/${acrossLayer}`);
        const first = await fetch(`${e.url}${u.pathname}`);
        const firstBytes = Buffer.from(await first.arrayBuffer());
        const second = await fetch(`${e.url}${u.pathname}`);
        expect(first.headers.get('x-cache-status')).toBe('MISS');
        expect(second.headers.get('x-cache-status')).toBe('HIT');
        expect(Buffer.from(await second.arrayBuffer()).equals(firstBytes)).toBe(true);
        const pl = `${e.url}/hls/${s.id}/archive/${acrossLayer.split('?')[0]}`;
        await fetch(pl);
        expect((await fetch(pl)).headers.get('x-cache-status')).toBe('HIT');
        process.stderr.write('catch-up: through the edge, an archived segment MISS then HIT, its archive playlist HIT\n');
      } finally {
        await e.stop();
        edgeDir.cleanup();
      }
    }

    // A token stream's catch-up needs the listener token, and nothing of it is shareable.
    const tkBase = `${h()}/hls/${tk.id}`;
    expect((await get(`${tkBase}/rewind.m3u8`)).status).toBe(401);
    const token = (await api(h(), key, 'POST', `/v2/streams/${tk.id}/listener_tokens`)).json.token as string;
    const tkMv = await get(`${tkBase}/rewind.m3u8?token=${token}`);
    expect(tkMv.status).toBe(200);
    expect(tkMv.cache).toBe('private, no-store');
    const tkMedia = await get(`${tkBase}/${tkMv.text.split('\n').find((l) => l.includes('.m3u8'))!}`);
    expect(tkMedia.status).toBe(200);
    const tkSeg = tkMedia.text.split('\n').find((l) => l.includes('.m4s'))!;
    expect(tkSeg).toContain(`?token=${token}`);
    const tkSegUrl = new URL(tkSeg, `${tkBase}/rewind/a128.m3u8`);
    expect((await fetch(tkSegUrl)).headers.get('cache-control')).toBe('private, no-store');
    expect((await fetch(tkSegUrl.toString().split('?')[0]!)).status).toBe(401);

    // from/<t>: an EVENT playlist from t on (start over), playing broadcast 2 from its 3rd second.
    const from = `${base}/from/${unix(s2 + 3000)}.m3u8`;
    const fromMv = await get(from);
    expect(fromMv.status).toBe(200);
    const fromMedia = await get(`${base}/from/${fromMv.text.split('\n').find((l) => l.includes('.m3u8'))!}`);
    expect(fromMedia.text).toContain('#EXT-X-PLAYLIST-TYPE:EVENT');
    expect(fromMedia.text).not.toContain('#EXT-X-ENDLIST');
    expect(Math.abs((await tone(from, 3)).hz - 880)).toBeLessThan(15);

    // rewind.m3u8: the whole window, and a delta update smaller than it.
    const rw = await get(`${base}/rewind.m3u8`);
    expect(rw.status).toBe(200);
    const rwLayer = `${base}/${rw.text.split('\n').find((l) => l.includes('.m3u8'))!.split('?')[0]}`;
    const full = await get(rwLayer);
    expect(full.text).toMatch(/CAN-SKIP-UNTIL=/);
    const delta = await get(`${rwLayer}?_HLS_skip=YES`);
    expect(delta.text).toMatch(/#EXT-X-SKIP:SKIPPED-SEGMENTS=\d+/);
    expect(delta.text.length).toBeLessThan(full.text.length);
    expect(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(delta.text)![1]).toBe(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(full.text)![1]);
    expect((await get(`${rwLayer}?_HLS_skip=maybe`)).status).toBe(400);
    // A catch-up listener is counted like a live one, recorded with mode "catch_up".
    const rwVariant = rw.text.split('\n').find((l) => l.includes('.m3u8'))!;
    expect(rwVariant).toMatch(/\?sid=/);
    expect((await get(`${base}/${rwVariant}`)).status).toBe(200);
    const listener = await waitFor(async () => {
      const l = (await api(h(), key, 'GET', `/v2/streams/${s.id}/listeners`)).json.data as Array<{ mode: string; protocol: string }>;
      return l.find((x) => x.mode === 'catch_up') ?? null;
    }, 10_000, 200, 'a catch-up listener');
    expect(listener.protocol).toBe('hls');

    // Outside the window or in the future: 404; malformed: 400; catch-up off: 404.
    const now = Date.now();
    expect((await get(`${base}/from/${unix(now + 600_000)}.m3u8`)).status).toBe(404);
    expect((await get(`${base}/from/${unix(now - 2 * 3_600_000)}.m3u8`)).status).toBe(404);
    expect((await get(`${base}/archive/${unix(now - 5000)}-60.m3u8`)).status).toBe(404);
    expect((await get(`${base}/from/yesterday.m3u8`)).status).toBe(400);
    expect((await get(`${base}/from/2026-13-45T99:00:00Z.m3u8`)).status).toBe(400);
    expect((await get(`${base}/archive/${unix(s1)}.m3u8`)).status).toBe(400);
    expect((await get(`${base}/broadcasts/nope.m3u8`)).status).toBe(400);
    expect((await get(`${h()}/hls/${off.id}/rewind.m3u8`)).status).toBe(404);

    // /stats counts the bytes on disk.
    const stats = (await api(h(), key, 'GET', `/v2/streams/${s.id}/stats`)).json;
    expect(stats.catchUpBytes).toBeGreaterThan(100_000);

    // A restart: the archive answers at once, with the same bytes; numbers never go back.
    const b1Media = await get(`${base}/broadcasts/${b1!.id}/a128.m3u8`);
    expect(b1Media.status).toBe(200);
    const highest = Math.max(...[...full.text.matchAll(/(\d+)\.m4s/g)].map((m) => Number(m[1])));
    server.child.kill('SIGKILL');
    await exited(server.child);
    server = await startCli(tmp.dir);
    const base2 = `${server.http}/hls/${s.id}`;
    const again = await get(`${base2}/broadcasts/${b1!.id}/a128.m3u8`);
    expect(again.status).toBe(200);
    expect(again.text).toBe(b1Media.text);
    expect(Math.abs((await tone(`${base2}/broadcasts/${b1!.id}.m3u8`, 4)).hz - 440)).toBeLessThan(15);
    const pub = publish(`${server.rtmp}/live/${s.id}/${s.streamKey}`, { seconds: 10, frequency: 660 });
    try {
      const live = await waitFor(async () => {
        const r = await get(`${base2}/a128/index.m3u8`);
        return r.status === 200 && r.text.includes('#EXTINF') ? r.text : null;
      }, 30_000, 200, 'a live playlist after the restart');
      const msn = Number(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(live)![1]);
      process.stderr.write(`catch-up: served up to ${highest} before the restart, live EXT-X-MEDIA-SEQUENCE ${msn} after\n`);
      expect(msn).toBeGreaterThan(highest);
      const rw2 = await waitFor(async () => {
        const r = await get(`${base2}/rewind/a128.m3u8`);
        return r.status === 200 && new RegExp(`(\\d+)\\.m4s`).test(r.text) && r.text.includes(`${msn}.m4s`) ? r.text : null;
      }, 30_000, 250, 'the new broadcast in the rewind window');
      expect(Number(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(rw2)![1])).toBeGreaterThanOrEqual(Number(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(full.text)![1]));
    } finally {
      pub.kill('SIGKILL');
      await exited(pub);
    }
  }, 240_000);
});
