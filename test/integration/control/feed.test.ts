/**
 * The podcast feed at `/feed/<podcast_id>.xml` checked by independent verifiers: podcast-partytime
 * parses it and finds every Apple-required and Podcasting 2.0 field; Debian `xmllint` finds it
 * well-formed; FFmpeg reads the enclosure. Plus ETag/Last-Modified/304, drafts → 404,
 * `itunes:complete` once archived (docs/behaviour.md §5, §9 "Podcasts").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseFeed } from 'podcast-partytime';
import { api, startInProcess, type TestServer } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

let s: TestServer;
let key: string;
let pid: string;
const published: any[] = [];
let draftEp: any;
let scheduledEp: any;
let stream: any;

function makeAudio(dir: string, file: string, seconds: number, args: string[]): Buffer {
  const out = path.join(dir, file);
  execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', `sine=frequency=440:duration=${seconds}`, ...args, out], { timeout: 30_000 });
  return readFileSync(out);
}

async function putAudio(p: string, e: string, body: Buffer) {
  const r = await fetch(`${s.http}/v2/podcasts/${p}/episodes/${e}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body });
  expect(r.status, await r.clone().text()).toBe(200);
  return r.json() as Promise<any>;
}

const feedUrl = () => `${s.http}/feed/${pid}.xml`;

beforeAll(async () => {
  s = await startInProcess();
  key = s.secretKey;
  const mp3 = makeAudio(s.dataDir, 'a.mp3', 4, ['-c:a', 'libmp3lame', '-b:a', '64k']);
  const p = await api(s.http, key, 'POST', '/v2/podcasts', {
    title: 'Skylark Sample <Show> & Friends',
    description: 'A sample podcast for the feed test.',
    author: 'Skylark Radio',
    ownerName: 'Sam Owner',
    ownerEmail: 'owner@example.com',
    language: 'en-us',
    category: 'Society & Culture > Documentary',
    explicit: true,
    imageUrl: 'https://example.com/art/cover-3000.jpg',
    link: 'https://example.com/show',
  });
  expect(p.status, p.text).toBe(201);
  pid = p.json.id;
  // drafts → 404 before the first publication
  expect((await fetch(feedUrl())).status).toBe(404);
  for (const [i, t] of [
    ['Trailer', { episodeType: 'trailer', season: 1, episodeNumber: 0 }],
    ['Pilot', { episodeType: 'full', season: 1, episodeNumber: 1, explicit: true }],
    ['Bonus', { episodeType: 'bonus', season: 1, episodeNumber: 2, description: 'Extra & more' }],
  ].entries()) {
    const body: any = { title: t[0], ...(t[1] as object) };
    if (body.episodeNumber === 0) delete body.episodeNumber;
    const e = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, body)).json;
    await putAudio(pid, e.id, mp3);
    const r = await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: e.id });
    expect(r.status, r.text).toBe(200);
    published.push(r.json);
    void i;
  }
  draftEp = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Secret draft' })).json;
  scheduledEp = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Future one' })).json;
  await putAudio(pid, scheduledEp.id, mp3);
  const sch = await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: scheduledEp.id, publishAt: new Date(Date.now() + 3600_000).toISOString() });
  expect(sch.json.status).toBe('scheduled');
  const st = await api(s.http, key, 'POST', '/v2/streams', { title: 'Live tonight', recording: { podcastId: pid } });
  expect(st.status, st.text).toBe(201);
  stream = st.json;
});
afterAll(async () => {
  await s?.close();
});

describe('feed', () => {
  it('is RSS 2.0 that podcast-partytime parses with every required field', async () => {
    const r = await fetch(feedUrl());
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^application\/rss\+xml/);
    const xml = await r.text();
    const feed = parseFeed(xml, { allowMissingGuid: false } as never);
    expect(feed).not.toBeNull();
    const f = feed!;
    expect(f.title).toBe('Skylark Sample <Show> & Friends');
    expect(f.description).toBe('A sample podcast for the feed test.');
    expect(f.language).toBe('en-us');
    expect(f.link).toBe('https://example.com/show');
    expect(f.itunesImage).toBe('https://example.com/art/cover-3000.jpg');
    expect(f.itunesCategory?.map((c) => c.toLowerCase())).toEqual(['society & culture > documentary']);
    expect(f.explicit).toBe(true);
    expect(f.author).toBe('Skylark Radio');
    expect(f.owner).toEqual({ name: 'Sam Owner', email: 'owner@example.com' });
    expect(f.itunesComplete).toBe(false);
    expect(f.guid).toBe((await api(s.http, key, 'GET', `/v2/podcasts/${pid}`)).json.podcastGuid);
    expect(f.locked).toBe(false);
    expect(f.podcastOwner).toBe('owner@example.com');
    // podcast:liveItem for the stream recording into this podcast (idle → pending)
    expect(f.podcastLiveItems).toHaveLength(1);
    const li = f.podcastLiveItems![0]!;
    expect(li.status).toBe('pending');
    expect(li.title).toBe('Live tonight');
    expect(li.guid).toBe(stream.id);
    // docs/behaviour.md §10: the listening URL is the enclosure, the HLS the alternate enclosure.
    expect(li.enclosure.url).toBe(stream.listenUrl);
    expect(li.enclosure.type).toBe('audio/aac');
    expect(li.alternativeEnclosures?.[0]?.source[0]?.uri).toBe(stream.hlsUrl);
    expect(li.start).toBeInstanceOf(Date);
    // items: the published episodes only, newest first
    expect(f.items.map((i) => i.title)).toEqual(['Bonus', 'Pilot', 'Trailer']);
    for (const item of f.items) {
      const ep = published.find((e) => e.title === item.title)!;
      expect(item.guid).toBe(ep.guid);
      expect(item.enclosure).toEqual({ url: ep.audioUrl, length: ep.audio.sizeBytes, type: 'audio/mpeg' });
      expect(item.pubDate?.getTime()).toBe(Math.floor(Date.parse(ep.publishedAt) / 1000) * 1000);
      expect(item.duration).toBe(Math.round(ep.audio.durationSeconds));
      expect(item.itunesEpisodeType).toBe(ep.episodeType);
      expect(item.itunesSeason).toBe(1);
      if (ep.episodeNumber !== null) expect(item.itunesEpisode).toBe(ep.episodeNumber);
      expect(item.explicit).toBe(ep.explicit);
      expect(item.description).toBe(ep.description || ep.title);
    }
    expect(xml).not.toContain('Secret draft');
    expect(xml).not.toContain('Future one');
    expect(xml).not.toContain(draftEp.id);
  });

  it('is well-formed for Debian xmllint', async () => {
    const xml = await (await fetch(feedUrl())).text();
    const file = path.join(s.dataDir, 'feed.xml');
    writeFileSync(file, xml);
    const r = spawnSync('xmllint', ['--noout', file], { encoding: 'utf8', timeout: 20_000 });
    expect(r.error, 'xmllint is missing: apt-get install -y libxml2-utils').toBeUndefined();
    expect(r.status, r.stderr).toBe(0);
  });

  it("has enclosures FFmpeg reads (type and duration as the episode says)", async () => {
    const ep = published[0];
    // Asynchronously: the server runs in this process and must keep answering.
    const run = promisify(execFile);
    const ffprobe = spawnSync('ffprobe', ['-version']).status === 0;
    if (ffprobe) {
      const { stdout } = await run('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_format', ep.audioUrl], { encoding: 'utf8', timeout: 20_000 });
      const j = JSON.parse(stdout);
      expect(j.format.format_name).toBe('mp3');
      expect(Math.abs(Number(j.format.duration) - ep.audio.durationSeconds)).toBeLessThan(0.5);
    } else {
      const { stderr } = await run(ffmpegPath(), ['-hide_banner', '-i', ep.audioUrl, '-f', 'null', '-'], { encoding: 'utf8', timeout: 20_000 });
      expect(stderr).toMatch(/Audio: mp3/);
    }
  });

  it('answers ETag and Last-Modified, and 304 to conditional requests; changes move the ETag', async () => {
    const r = await fetch(feedUrl());
    const etag = r.headers.get('etag')!;
    const lm = r.headers.get('last-modified')!;
    expect(etag).toMatch(/^"[^"]+"$/);
    expect(Number.isNaN(Date.parse(lm))).toBe(false);
    const a = await fetch(feedUrl(), { headers: { 'If-None-Match': etag } });
    expect(a.status).toBe(304);
    expect(await a.text()).toBe('');
    expect(a.headers.get('etag')).toBe(etag);
    const b = await fetch(feedUrl(), { headers: { 'If-Modified-Since': lm } });
    expect(b.status).toBe(304);
    const c = await fetch(feedUrl(), { headers: { 'If-None-Match': '"other"' } });
    expect(c.status).toBe(200);
    const h = await fetch(feedUrl(), { method: 'HEAD' });
    expect(h.status).toBe(200);
    expect(h.headers.get('etag')).toBe(etag);
    await api(s.http, key, 'PATCH', `/v2/podcasts/${pid}`, { description: 'Changed.' });
    const d = await fetch(feedUrl(), { headers: { 'If-None-Match': etag } });
    expect(d.status).toBe(200);
    expect(d.headers.get('etag')).not.toBe(etag);
    expect(await d.text()).toContain('Changed.');
  });

  it('adds itunes:complete once archived and keeps serving; unknown podcasts → 404', async () => {
    expect((await api(s.http, key, 'PATCH', `/v2/podcasts/${pid}`, { status: 'archived' })).status).toBe(200);
    const xml = await (await fetch(feedUrl())).text();
    const f = parseFeed(xml)!;
    expect(f.itunesComplete).toBe(true);
    expect(f.items).toHaveLength(3);
    expect((await fetch(`${s.http}/feed/pod_unknown.xml`)).status).toBe(404);
    expect((await fetch(`${s.http}/feed/${pid}.json`)).status).toBe(404);
  });
});
