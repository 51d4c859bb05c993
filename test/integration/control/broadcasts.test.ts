/**
 * Streams that go live again and again, and their broadcasts (docs/streams.md), with real FFmpeg
 * publishers against an in-process server:
 * - one stream, one key, RTMP live three times (1 s reconnect window, recording into a podcast):
 *   `idle → live → idle` each time with `stream.started`/`stream.ended` carrying `broadcastId`, the
 *   URLs and key unchanged, three broadcasts newest first (paged like every list), each its own
 *   draft episode (the one with a track has chapters), `/tracks?broadcast=`, `/stats` of the last
 *   broadcast while idle, a `/listen` listener counted in its broadcast and let go when it ends;
 * - one HLS timeline across broadcasts: media sequence rising, the next broadcast's first segment
 *   after an `EXT-X-DISCONTINUITY` with the discontinuity sequence increased, 404 while idle, and
 *   FFmpeg decodes the second broadcast from the same URL;
 * - the same with an Icecast source (FFmpeg `icecast://`) going live twice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

let t: TestServer;
beforeAll(async () => {
  t = await startInProcess();
});
afterAll(async () => {
  await t?.close();
});

const v2 = (method: string, p: string, body?: unknown) => api(t.http, t.secretKey, method, `/v2${p}`, body);
const getStream = async (id: string) => (await v2('GET', `/streams/${id}`)).json;
const eventsOf = (id: string) =>
  (t.server.db.prepare('SELECT type, data FROM events ORDER BY seq').all() as Array<{ type: string; data: string }>)
    .map((e) => ({ type: e.type, data: JSON.parse(e.data) }))
    .filter((e) => e.data.object?.id === id && (e.type === 'stream.started' || e.type === 'stream.ended'));

interface Seg {
  seq: number;
  /** Discontinuity sequence number of the segment. */
  dseq: number;
  afterDiscontinuity: boolean;
}

/** The segments of a media playlist with their discontinuity sequence numbers (RFC 8216 §6.2.2). */
function segmentsOf(text: string): Seg[] {
  let seq = Number(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(text)![1]);
  let dseq = Number(/#EXT-X-DISCONTINUITY-SEQUENCE:(\d+)/.exec(text)![1]);
  let disc = false;
  const out: Seg[] = [];
  for (const line of text.split('\n')) {
    if (line === '#EXT-X-DISCONTINUITY') {
      disc = true;
      dseq++;
    } else if (line && !line.startsWith('#')) {
      out.push({ seq: seq++, dseq, afterDiscontinuity: disc });
      disc = false;
    }
  }
  return out;
}

const media = async (hlsUrl: string, layer: string) => {
  const r = await fetch(hlsUrl.replace('index.m3u8', `${layer}/index.m3u8`));
  return { status: r.status, text: await r.text() };
};

/** Decodes 2 s of the HLS at `hlsUrl` with FFmpeg; resolves to its exit code and errors. */
async function decodeHls(hlsUrl: string): Promise<{ code: number | string | null; errors: string }> {
  const p = spawn(ffmpegPath(), ['-nostdin', '-hide_banner', '-loglevel', 'error', '-i', hlsUrl, '-t', '2', '-f', 'null', '-'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let errors = '';
  p.stderr!.on('data', (d) => (errors += d));
  return { code: await exited(p), errors };
}

/** Waits for the stream's current broadcast to be on air with a whole segment in `layer`; returns that layer's segments. */
async function onAir(s: { id: string; hlsUrl: string }, layer: string): Promise<Seg[]> {
  await waitFor(async () => (await getStream(s.id)).status === 'live', 20_000, 100, 'live');
  const text = await waitFor(async () => {
    const m = await media(s.hlsUrl, layer);
    return m.status === 200 && m.text.includes('#EXTINF') ? m.text : null;
  }, 20_000, 100, 'a segment');
  return segmentsOf(text);
}

/** Waits for the broadcast to end (the stream idle again, `n` `stream.ended` events), then checks the playlists answer 404. */
async function idleAgain(s: { id: string; hlsUrl: string }, n: number, layer: string): Promise<void> {
  await waitFor(async () => (await getStream(s.id)).status === 'idle' && eventsOf(s.id).filter((e) => e.type === 'stream.ended').length === n, 20_000, 100, 'idle');
  await waitFor(async () => (await media(s.hlsUrl, layer)).status === 404, 10_000, 100, 'media playlist 404 while idle');
}

/** The broadcast's segments as its playlist lists them now (the publisher has left; the window may have run out already: then `seen`). */
async function lastSegments(hlsUrl: string, seen: Seg[]): Promise<Seg[]> {
  const m = await media(hlsUrl, 'a128');
  return m.status === 200 && m.text.includes('#EXTINF') ? segmentsOf(m.text) : seen;
}

/** Checks that `next` (the first segments of a broadcast) continues the timeline that ended with `prev`'s last segment. */
function continues(prev: Seg[], next: Seg[]): void {
  const last = prev[prev.length - 1]!;
  const first = next[0]!;
  expect(first.seq).toBeGreaterThan(last.seq);
  expect(first.afterDiscontinuity).toBe(true);
  expect(first.dseq).toBeGreaterThan(last.dseq);
}

describe('broadcasts', () => {
  it('RTMP: one stream and one key live three times — three broadcasts, one HLS timeline, an episode each', async () => {
    const pod = (await v2('POST', '/podcasts', { title: 'Weekly show' })).json;
    const created = await v2('POST', '/streams', { title: 'Weekly', reconnectWindow: 1, recording: { podcastId: pod.id } });
    expect(created.status).toBe(201);
    const s = created.json;
    const url = `${s.rtmpUrl}/${s.streamKey}`;
    const urls = (o: Record<string, unknown>) => ({ rtmpUrl: o.rtmpUrl, icecastUrl: o.icecastUrl, hlsUrl: o.hlsUrl, listenUrl: o.listenUrl, streamKey: o.streamKey });

    // Before the first broadcast: no broadcast, /stats of none.
    expect((await v2('GET', `/streams/${s.id}/broadcasts`)).json).toMatchObject({ object: 'list', data: [], hasMore: false, nextCursor: null });
    expect((await v2('GET', `/streams/${s.id}/stats`)).json.broadcastId).toBeNull();

    const timelines: Seg[][] = [];
    let listenEnded: Promise<void> | null = null;
    for (let i = 0; i < 3; i++) {
      const p = publish(url, { seconds: 6 });
      const first = await onAir(s, 'a128');
      if (i > 0) {
        continues(timelines[i - 1]!, first);
        // The multivariant playlist keeps its variants.
        const mv = await (await fetch(s.hlsUrl)).text();
        expect(mv).toMatch(/a128\/index\.m3u8/);
        expect(mv).toMatch(/a64\/index\.m3u8/);
      }
      if (i === 1) {
        // A player loading the same URL plays the second broadcast.
        expect(await decodeHls(s.hlsUrl)).toEqual({ code: 0, errors: '' });
        // A track in this broadcast only.
        expect((await v2('POST', `/streams/${s.id}/now_playing`, { title: 'Second show song', artist: 'Band' })).status).toBe(200);
      }
      if (i === 2) {
        // A progressive listener of the third broadcast: counted in it, let go when it ends.
        const res = await fetch(s.listenUrl);
        expect(res.status).toBe(200);
        const reader = res.body!.getReader();
        listenEnded = (async () => {
          for (;;) if ((await reader.read()).done) return;
        })();
        await waitFor(async () => (await v2('GET', `/streams/${s.id}/stats`)).json.listenerCount === 1, 10_000, 100, 'listener counted');
      }
      expect(await exited(p)).toBe(0);
      timelines.push(await lastSegments(s.hlsUrl, first));
      await idleAgain(s, i + 1, 'a128');
      const after = await getStream(s.id);
      expect(urls(after)).toEqual(urls(s));
      expect(after.endedAt).not.toBeNull();
    }
    await listenEnded; // the /listen response ended with its broadcast

    // Events: started/ended per broadcast, each pair with one broadcastId.
    const events = eventsOf(s.id);
    expect(events.map((e) => e.type)).toEqual(['stream.started', 'stream.ended', 'stream.started', 'stream.ended', 'stream.started', 'stream.ended']);
    const ids = events.map((e) => e.data.broadcastId as string);
    for (let i = 0; i < 6; i += 2) {
      expect(ids[i]).toMatch(/^brd_/);
      expect(ids[i + 1]).toBe(ids[i]);
    }
    expect(events.filter((e) => e.type === 'stream.ended').map((e) => e.data.object.status)).toEqual(['idle', 'idle', 'idle']);

    // The broadcasts, newest first, with the list envelope and cursors of every list.
    const list = (await v2('GET', `/streams/${s.id}/broadcasts`)).json;
    expect(list).toMatchObject({ object: 'list', url: `/v2/streams/${s.id}/broadcasts`, hasMore: false, nextCursor: null });
    expect(list.data.map((b: { id: string }) => b.id)).toEqual([ids[4], ids[2], ids[0]]);
    for (const b of list.data) {
      expect(b).toMatchObject({ object: 'broadcast', streamId: s.id });
      expect(b.endedAt).not.toBeNull();
      expect(Date.parse(b.endedAt)).toBeGreaterThanOrEqual(Date.parse(b.startedAt));
      expect(b.durationSeconds).toBeGreaterThan(0);
    }
    const [third, second, first] = list.data;
    expect(Date.parse(second.startedAt)).toBeGreaterThan(Date.parse(first.endedAt) - 1);
    expect([first.trackCount, second.trackCount, third.trackCount]).toEqual([0, 1, 0]);
    expect(third).toMatchObject({ peakListeners: 1, totalListeners: 1 });
    expect(third.listenerSeconds).toBeGreaterThan(0);
    expect(third.countries).toEqual([{ country: null, listeners: 1 }]);
    expect(first).toMatchObject({ peakListeners: 0, totalListeners: 0, listenerSeconds: 0 });
    expect((await v2('GET', `/streams/${s.id}/broadcasts/${second.id}`)).json).toMatchObject({ id: second.id, trackCount: 1, startedAt: second.startedAt });
    expect((await v2('GET', `/streams/${s.id}/broadcasts/brd_doesnotexist`)).status).toBe(404);

    const page1 = (await v2('GET', `/streams/${s.id}/broadcasts?limit=2`)).json;
    expect(page1.data.map((b: { id: string }) => b.id)).toEqual([third.id, second.id]);
    expect(page1).toMatchObject({ hasMore: true, nextCursor: second.id });
    const page2 = (await v2('GET', `/streams/${s.id}/broadcasts?limit=2&starting_after=${second.id}`)).json;
    expect(page2).toMatchObject({ hasMore: false, nextCursor: null });
    expect(page2.data.map((b: { id: string }) => b.id)).toEqual([first.id]);
    const back = (await v2('GET', `/streams/${s.id}/broadcasts?limit=1&ending_before=${first.id}`)).json;
    expect(back.data.map((b: { id: string }) => b.id)).toEqual([second.id]);
    expect(back).toMatchObject({ hasMore: true, nextCursor: second.id });
    expect((await v2('GET', `/streams/${s.id}/broadcasts?after=${first.id}&before=${third.id}`)).status).toBe(400);
    expect((await v2('GET', `/streams/${s.id}/broadcasts?after=brd_unknown`)).json.error).toMatchObject({ param: 'after' });
    expect((await v2('GET', `/streams/${s.id}/broadcasts?since=1`)).json.error).toMatchObject({ code: 'parameter_unknown', param: 'since' });

    // /tracks?broadcast=: only that broadcast's tracks.
    expect((await v2('GET', `/streams/${s.id}/tracks?broadcast=${second.id}`)).json.data.map((x: { title: string }) => x.title)).toEqual(['Second show song']);
    expect((await v2('GET', `/streams/${s.id}/tracks?broadcast=${first.id}`)).json.data).toEqual([]);
    expect((await v2('GET', `/streams/${s.id}/tracks?broadcast=brd_unknown`)).status).toBe(404);

    // /stats while idle: the last broadcast.
    const stats = (await v2('GET', `/streams/${s.id}/stats`)).json;
    expect(stats).toMatchObject({ broadcastId: third.id, listenerCount: 0, peakListenerCount: 1, totalListeners: 1 });

    // Each broadcast became its own draft episode; the one with a track has its chapters.
    const withEpisodes = await waitFor(async () => {
      const l = (await v2('GET', `/streams/${s.id}/broadcasts`)).json.data as Array<{ id: string; episodeId: string | null }>;
      return l.every((b) => b.episodeId !== null) ? l : null;
    }, 30_000, 200, 'an episode per broadcast');
    const episodeIds = withEpisodes.map((b) => b.episodeId!);
    expect(new Set(episodeIds).size).toBe(3);
    const episodes = await Promise.all(episodeIds.map(async (id) => (await v2('GET', `/podcasts/${pod.id}/episodes/${id}`)).json));
    for (const e of episodes) expect(e).toMatchObject({ status: 'draft' });
    expect(episodes.map((e) => e.chaptersUrl !== null)).toEqual([false, true, false]);

    // The podcast's feed (served once an episode is published) shows the stream's last broadcast as an ended live item.
    expect((await v2('POST', `/podcasts/${pod.id}/publish`, { episodeId: episodeIds[0] })).status).toBe(200);
    const feed = await (await fetch(`${t.http}/feed/${pod.id}.xml`)).text();
    const liveItem = /<podcast:liveItem[^>]*>/.exec(feed)?.[0] ?? '';
    expect(liveItem).toMatch(/status="ended"/);
    expect(liveItem).toMatch(/end="[^"]+"/);

    // DELETE of a live stream ends its broadcast, then deletes it.
    const p = publish(url, { seconds: 20 });
    await onAir(s, 'a128');
    expect((await v2('DELETE', `/streams/${s.id}`)).json).toEqual({ id: s.id, object: 'stream', deleted: true });
    expect(eventsOf(s.id).filter((e) => e.type === 'stream.ended')).toHaveLength(4);
    await exited(p);
  }, 180_000);

  it('Icecast: an FFmpeg icecast:// source live twice on one stream continues the timeline', async () => {
    const s = (await v2('POST', '/streams', { title: 'Station', codec: 'mp3', reconnectWindow: 1 })).json;
    const port = t.server.icecastPort;
    const source = (): ChildProcess =>
      spawn(
        ffmpegPath(),
        ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=44100', '-t', '6', '-ac', '2', '-c:a', 'libmp3lame', '-b:a', '128k', '-content_type', 'audio/mpeg', '-f', 'mp3', `icecast://source:${s.streamKey}@127.0.0.1:${port}/live/${s.id}`],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
    const timelines: Seg[][] = [];
    for (let i = 0; i < 2; i++) {
      const src = source();
      const first = await onAir(s, 'a128');
      if (i > 0) {
        continues(timelines[0]!, first);
        expect(await decodeHls(s.hlsUrl)).toEqual({ code: 0, errors: '' });
      }
      expect(await exited(src)).toBe(0);
      timelines.push(await lastSegments(s.hlsUrl, first));
      await idleAgain(s, i + 1, 'a128');
    }
    const list = (await v2('GET', `/streams/${s.id}/broadcasts`)).json;
    expect(list.data).toHaveLength(2);
    expect(eventsOf(s.id).map((e) => e.data.broadcastId)).toEqual([list.data[1].id, list.data[1].id, list.data[0].id, list.data[0].id]);
  }, 120_000);
});
