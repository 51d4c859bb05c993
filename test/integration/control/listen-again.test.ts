/**
 * Publishing while the audio is processed, and listen again (docs/podcasts.md "Publishing while
 * the audio is processed", docs/streams.md "Listen again"), with real HTTP, real FFmpeg publishers
 * over RTMP and the feed parsed by podcast-partytime:
 * - an upload published at once, while its loudness normalisation still runs (the publish request
 *   does not wait for it here: `SKYLARK_PUBLISH_WAIT_MS=0`), is `processing`, the feed does not
 *   list it, and it is published with the normalised audio (the upload as the alternate
 *   enclosure); `PATCH {status:"draft"}` cancels a waiting publication; with the default wait, a
 *   short upload published at once answers `published` with its normalised audio;
 * - a recorded broadcast's episode published the moment it appears (its audio still being stored
 *   or normalised) is accepted as `processing`, never `episode_audio_missing`, and published once
 *   the audio is final;
 * - `recording: {podcastId, publish: "auto"}` with `timeZone`: each broadcast's episode is
 *   published on its own when the broadcast ends, normalised, titled `<stream title> — <date of
 *   the broadcast in the stream's zone>`, with the broadcast's chapters; `podcast.published` is
 *   sent and the feed notifier is called with `reason=update`; `timeZone` is validated.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseFeed } from 'podcast-partytime';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited } from '../../helpers/publish.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';
import { toneMp3 } from '../../helpers/episodes.js';

const ffmpeg = ffmpegPath();
let s: TestServer;
let key: string;
let notifier: http.Server;
const pings: string[] = [];

const feedOf = async (pid: string) => {
  const r = await fetch(`${s.http}/feed/${pid}.xml`);
  return r.status === 200 ? parseFeed(await r.text()) : null;
};
const episodes = async (pid: string) => (await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes`)).json.data as any[];

/** Publishes `seconds` of a quiet tone (about −30 LUFS: the podcast's −16 target normalises it) over RTMP to stream `st`. */
async function broadcast(st: { rtmpUrl: string; streamKey: string }, seconds: number): Promise<void> {
  const pub = spawn(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', `sine=frequency=523:sample_rate=48000,volume=-14dB`, '-t', String(seconds), '-ac', '2', '-c:a', 'aac', '-b:a', '128k', '-f', 'flv', `${st.rtmpUrl}/${st.streamKey}`], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  expect(await exited(pub)).toBe(0);
}

beforeAll(async () => {
  notifier = http.createServer((req, res) => {
    pings.push(req.url!);
    res.writeHead(200).end();
  });
  await new Promise<void>((r) => notifier.listen(0, '127.0.0.1', r));
  s = await startInProcess({
    SKYLARK_PUBLISH_WAIT_MS: '0',
    SKYLARK_WEBHOOKS_ALLOW_PRIVATE: '1',
    SKYLARK_FEED_NOTIFY_URLS: `http://127.0.0.1:${(notifier.address() as AddressInfo).port}/ping`,
  });
  key = s.secretKey;
});
afterAll(async () => {
  await s?.close();
  notifier?.closeAllConnections();
  await new Promise<void>((r) => notifier?.close(() => r()));
});

describe('publishing while the audio is processed', () => {
  it('an upload published at once is processing, kept out of the feed, then published with its normalised audio', async () => {
    const pid = (await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Levelled', category: 'Technology' })).json.id;
    const ep = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Loud one' })).json;
    // 60 s of tone at full scale: far over −16 LUFS, and long enough that normalising it takes a while.
    const audio = toneMp3(s.dataDir, 'loud.mp3', 60, 997);
    const up = await fetch(`${s.http}/v2/podcasts/${pid}/episodes/${ep.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body: audio });
    const uploaded = (await up.json()) as any;
    expect(up.status).toBe(200);
    const pub = await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id });
    expect(pub.status, pub.text).toBe(200);
    expect(pub.json.status).toBe('processing');
    expect(pub.json.publishedAt).toBeNull();
    expect((await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes?status=processing`)).json.data.map((e: any) => e.id)).toEqual([ep.id]);
    expect(await feedOf(pid)).toBeNull(); // nothing published yet: the podcast is still a draft
    // publishing again while it waits is a conflict
    expect((await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id })).status).toBe(409);

    const done = await waitFor(async () => {
      const e = (await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes/${ep.id}`)).json;
      return e.status === 'published' ? e : null;
    }, 120_000, 100, 'the publication once normalised');
    expect(done.loudness).toMatchObject({ normalized: true, target: -16 });
    expect(done.audioUrl).not.toBe(uploaded.audioUrl);
    expect(done.loudness.originalAudioUrl).toBe(uploaded.audioUrl);
    const item = (await feedOf(pid))!.items[0]!;
    expect(item.enclosure.url).toBe(done.audioUrl);
    const ev = (await api(s.http, key, 'GET', '/v2/events?type=podcast.published')).json.data.filter((e: any) => e.data.object.id === ep.id);
    expect(ev).toHaveLength(1);
    expect(ev[0].data.object.audioUrl).toBe(done.audioUrl);
  });

  it('PATCH status draft cancels a publication that waits', async () => {
    const pid = (await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Cancelled', category: 'Technology' })).json.id;
    const ep = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Changed my mind' })).json;
    const up = await fetch(`${s.http}/v2/podcasts/${pid}/episodes/${ep.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body: toneMp3(s.dataDir, 'loud2.mp3', 60, 880) });
    expect(up.status).toBe(200);
    expect((await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id })).json.status).toBe('processing');
    const d = await api(s.http, key, 'PATCH', `/v2/podcasts/${pid}/episodes/${ep.id}`, { status: 'draft' });
    expect(d.status, d.text).toBe(200);
    expect(d.json.status).toBe('draft');
    const measured = await waitFor(async () => {
      const e = (await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes/${ep.id}`)).json;
      return e.loudness ? e : null;
    }, 120_000, 200, 'the normalisation');
    expect(measured.status).toBe('draft');
    expect(await feedOf(pid)).toBeNull();
  });

  it("a recorded broadcast's episode published the moment it appears is accepted and published once its audio is final", async () => {
    const pid = (await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Recorded', category: 'Technology' })).json.id;
    const st = (await api(s.http, key, 'POST', '/v2/streams', { title: 'Drive time', recording: { podcastId: pid }, reconnectWindow: 0 })).json;
    await broadcast(st, 8);
    const first = await waitFor(async () => (await episodes(pid))[0] ?? null, 60_000, 10, 'the recording episode');
    const pub = await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: first.id });
    expect(pub.status, pub.text).toBe(200);
    expect(pub.json.status).toBe('processing');
    const done = await waitFor(async () => {
      const e = (await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes/${first.id}`)).json;
      return e.status === 'published' ? e : null;
    }, 60_000, 100, 'the publication');
    expect(done.loudness).toMatchObject({ normalized: true });
    expect((await feedOf(pid))!.items[0]!.enclosure.url).toBe(done.audioUrl);
  });
});

describe('publishing right after the upload, with the default wait', () => {
  it('answers published, with the normalised audio in the answer and the feed', async () => {
    const d = await startInProcess();
    try {
      const pid = (await api(d.http, d.secretKey, 'POST', '/v2/podcasts', { title: 'Quick', category: 'Technology' })).json.id;
      const ep = (await api(d.http, d.secretKey, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Short' })).json;
      const up = await fetch(`${d.http}/v2/podcasts/${pid}/episodes/${ep.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${d.secretKey}`, 'Content-Type': 'audio/mpeg' }, body: toneMp3(d.dataDir, 'short.mp3', 5, 997) });
      const uploaded = (await up.json()) as any;
      expect(uploaded.loudness).toBeNull(); // the upload's answer does not wait
      const pub = await api(d.http, d.secretKey, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id });
      expect(pub.status, pub.text).toBe(200);
      expect(pub.json.status).toBe('published');
      expect(pub.json.loudness).toMatchObject({ normalized: true, originalAudioUrl: uploaded.audioUrl });
      const item = parseFeed(await (await fetch(`${d.http}/feed/${pid}.xml`)).text())!.items[0]!;
      expect(item.enclosure.url).toBe(pub.json.audioUrl);
    } finally {
      await d.close();
    }
  });
});

describe('listen again', () => {
  it('validates timeZone and echoes recording.publish', async () => {
    const pid = (await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Zones' })).json.id;
    const bad = await api(s.http, key, 'POST', '/v2/streams', { title: 'Nowhere', timeZone: 'Mars/Olympus_Mons' });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ code: 'parameter_invalid', param: 'timeZone' });
    const bad2 = await api(s.http, key, 'POST', '/v2/streams', { title: 'Nowhere', recording: { podcastId: pid, publish: 'sometimes' } });
    expect(bad2.json.error).toMatchObject({ param: 'recording.publish' });
    const ok = await api(s.http, key, 'POST', '/v2/streams', { title: 'Paris', timeZone: 'europe/paris', recording: { podcastId: pid, publish: 'auto' } });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.json.timeZone).toBe('Europe/Paris');
    expect(ok.json.recording).toEqual({ podcastId: pid, publish: 'auto' });
    const plain = await api(s.http, key, 'POST', '/v2/streams', { title: 'Plain' });
    expect(plain.json.timeZone).toBe('UTC');
    const p = await api(s.http, key, 'PATCH', `/v2/streams/${plain.json.id}`, { timeZone: 'Asia/Tokyo' });
    expect(p.json.timeZone).toBe('Asia/Tokyo');
  });

  it('publishes each broadcast as its own normalised episode, titled with its date in the stream zone, with chapters, podcast.published and a feed ping', async () => {
    const pid = (await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Catch-up', category: 'Technology' })).json.id;
    const zone = 'Pacific/Kiritimati'; // UTC+14: its date differs from UTC's for most of the day
    const st = (await api(s.http, key, 'POST', '/v2/streams', { title: 'Morning show', timeZone: zone, recording: { podcastId: pid, publish: 'auto' }, reconnectWindow: 0 })).json;
    const started = Date.now();
    const pub = spawn(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'sine=frequency=523:sample_rate=48000,volume=-14dB', '-t', '8', '-ac', '2', '-c:a', 'aac', '-b:a', '128k', '-f', 'flv', `${st.rtmpUrl}/${st.streamKey}`], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    await waitFor(async () => (await api(s.http, key, 'GET', `/v2/streams/${st.id}`)).json.status === 'live' || null, 20_000, 100, 'live');
    expect((await api(s.http, key, 'POST', `/v2/streams/${st.id}/now_playing`, { title: 'Opening theme' })).status).toBe(200);
    expect(await exited(pub)).toBe(0);

    const ep = await waitFor(async () => {
      const e = (await episodes(pid))[0];
      return e?.status === 'published' ? e : null;
    }, 90_000, 100, 'the broadcast published');
    const date = new Intl.DateTimeFormat('en-CA', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(started);
    expect(ep.title).toBe(`Morning show — ${date}`);
    expect(ep.sourceStreamId).toBe(st.id);
    expect(ep.loudness).toMatchObject({ normalized: true, target: -16 });
    const chapters = (await (await fetch(ep.chaptersUrl)).json()) as any;
    expect(chapters.chapters.map((c: any) => c.title)).toContain('Opening theme');

    const f = (await feedOf(pid))!;
    expect(f.items).toHaveLength(1);
    expect(f.items[0]!.title).toBe(ep.title);
    expect(f.items[0]!.enclosure.url).toBe(ep.audioUrl);
    expect(f.items[0]!.podcastChapters?.url).toBe(ep.chaptersUrl);
    const ev = (await api(s.http, key, 'GET', '/v2/events?type=podcast.published')).json.data.filter((e: any) => e.data.object.id === ep.id);
    expect(ev).toHaveLength(1);
    const feedUrl = (await api(s.http, key, 'GET', `/v2/podcasts/${pid}`)).json.feedUrl;
    await waitFor(async () => pings.some((u) => u.includes(encodeURIComponent(feedUrl)) && u.includes('reason=update')) || null, 30_000, 100, 'the feed ping');
    const b = (await api(s.http, key, 'GET', `/v2/streams/${st.id}/broadcasts`)).json.data[0];
    expect(b.episodeId).toBe(ep.id);
  });
});
