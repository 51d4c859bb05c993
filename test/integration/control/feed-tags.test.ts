/**
 * Feed completeness (docs/podcasts.md "Feed completeness"): the Podcasting 2.0 tags set through the
 * API (`persons`, `soundbites`, `txt`, `podroll`, `season`/`episodeNumber`) come back unchanged
 * when podcast-partytime parses the feed, next to `podcast:transcript`, `podcast:liveItem` and its
 * `podcast:alternateEnclosure` (the HLS); invalid values are refused with 400 naming the field;
 * and the feed passes an Apple podcast RSS checklist: `itunes:image` pointing at a square image of
 * at least 1400 px (served here by a local HTTP server and measured with FFmpeg), a known
 * `itunes:category`, `itunes:explicit`, enclosures with `length` and `type`, a `guid` per item.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { parseFeed } from 'podcast-partytime';
import { api, startInProcess, type TestServer } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';
import { isAppleCategory } from '../../../src/control/feed/categories.js';

let s: TestServer;
let key: string;
let pid: string;
let ep: any;
let stream: any;
let art: http.Server;
let artUrl: string;

const persons = [
  { name: 'Ana Host', role: 'host', group: 'cast', href: 'https://example.com/ana', img: 'https://example.com/ana.jpg' },
  { name: 'Bo Producer', role: 'producer', group: 'audio post-production' },
];
const txt = [{ purpose: 'verify', value: 'S6lpp-7ZCn8-dZfGc-OoyVG' }, { value: 'Plain note' }];
const podroll = [{ feedGuid: '917393e3-1b1e-5cef-ace4-edaa54e1f810', feedUrl: 'https://feeds.example.com/other.xml' }, { feedGuid: 'c3b6b3a3-5dc1-5b0b-8c63-2ae25d7c9a6f' }];
const epPersons = [{ name: 'Cy Guest', role: 'guest', group: 'cast', href: 'https://example.com/cy' }];
const soundbites = [{ startTime: 1.5, duration: 2, title: 'The best bit' }, { startTime: 0.25, duration: 1 }]; // (partytime drops a soundbite at startTime 0)

beforeAll(async () => {
  s = await startInProcess();
  key = s.secretKey;
  // The artwork: a 1400 × 1400 PNG on a local server.
  const png = path.join(s.dataDir, 'art.png');
  execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'color=c=navy:s=1400x1400', '-frames:v', '1', png], { timeout: 30_000 });
  const artBytes = readFileSync(png);
  art = http.createServer((_req, res) => res.writeHead(200, { 'Content-Type': 'image/png', 'Content-Length': artBytes.length }).end(artBytes));
  await new Promise<void>((r) => art.listen(0, '127.0.0.1', r));
  artUrl = `http://127.0.0.1:${(art.address() as AddressInfo).port}/art.png`;

  const p = await api(s.http, key, 'POST', '/v2/podcasts', {
    title: 'Complete Show',
    description: 'Every tag apps read.',
    author: 'Skylark Radio',
    ownerEmail: 'owner@example.com',
    category: 'Technology',
    explicit: false,
    imageUrl: artUrl,
    persons,
    txt,
    podroll,
  });
  expect(p.status, p.text).toBe(201);
  expect(p.json.persons).toEqual(persons);
  expect(p.json.txt).toEqual(txt);
  expect(p.json.podroll).toEqual(podroll);
  pid = p.json.id;
  const e = await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Ep', season: 2, episodeNumber: 7, persons: epPersons, soundbites });
  expect(e.status, e.text).toBe(201);
  expect(e.json.soundbites).toEqual(soundbites);
  const mp3 = path.join(s.dataDir, 'a.mp3');
  execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=4', '-c:a', 'libmp3lame', '-b:a', '64k', mp3], { timeout: 30_000 });
  const a = await fetch(`${s.http}/v2/podcasts/${pid}/episodes/${e.json.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body: readFileSync(mp3) });
  expect(a.status).toBe(200);
  const t = await fetch(`${s.http}/v2/podcasts/${pid}/episodes/${e.json.id}/transcript`, {
    method: 'PUT',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'text/vtt' },
    body: 'WEBVTT\n\n00:00:00.000 --> 00:00:02.000\nHello.\n',
  });
  expect(t.status).toBe(200);
  ep = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: e.json.id })).json;
  stream = (await api(s.http, key, 'POST', '/v2/streams', { title: 'Live show', recording: { podcastId: pid } })).json;
});
afterAll(async () => {
  await s?.close();
  art?.close();
});

const feedXml = async () => (await fetch(`${s.http}/feed/${pid}.xml`)).text();

describe('feed completeness', () => {
  it('round-trips every Podcasting 2.0 value through podcast-partytime', async () => {
    const f = parseFeed(await feedXml())!;
    const person = (p: any) => ({ name: p.name, role: p.role ?? 'host', group: p.group ?? 'cast', ...(p.href ? { href: p.href } : {}), ...(p.img ? { img: p.img } : {}) });
    const lower = (p: any) => ({ ...p, role: p.role.toLowerCase(), group: p.group.toLowerCase() });
    expect(f.podcastPeople?.map(lower)).toEqual(persons.map(person));
    expect(f.podcastTxt).toEqual(txt.map((t) => ({ value: t.value, ...(t.purpose ? { purpose: t.purpose } : {}) })));
    expect(f.podroll).toEqual(podroll.map((r) => ({ feedGuid: r.feedGuid, ...(r.feedUrl ? { feedUrl: r.feedUrl } : {}) })));
    const item = f.items[0]!;
    expect(item.podcastPeople?.map(lower)).toEqual(epPersons.map(person));
    expect(item.podcastSoundbites).toMatchObject(soundbites.map((b) => ({ startTime: b.startTime, duration: b.duration, ...(b.title ? { title: b.title } : {}) })));
    expect(item.podcastSeason).toEqual({ number: 2 });
    expect(item.podcastEpisode).toEqual({ number: 7 });
    expect(item.itunesSeason).toBe(2);
    expect(item.itunesEpisode).toBe(7);
    expect(item.podcastTranscripts?.[0]).toMatchObject({ url: ep.transcriptUrl, type: 'text/vtt', rel: 'captions' });
    // the stream recording into the podcast: liveItem with the HLS as alternate enclosure
    const li = f.podcastLiveItems![0]!;
    expect(li.guid).toBe(stream.id);
    expect(li.enclosure.url).toBe(stream.listenUrl);
    expect(li.alternativeEnclosures?.[0]?.type).toBe('application/x-mpegURL');
    expect(li.alternativeEnclosures?.[0]?.source[0]?.uri).toBe(stream.hlsUrl);
  });

  it('passes the Apple podcast RSS checklist', async () => {
    const xml = await feedXml();
    const f = parseFeed(xml)!;
    // itunes:image: present, and a square image of at least 1400 px (Apple: 1400-3000 px)
    expect(f.itunesImage).toBe(artUrl);
    // Asynchronously: the image server runs in this process. `ffmpeg -i` alone describes the input, then exits 1.
    const info = await promisify(execFile)(ffmpegPath(), ['-hide_banner', '-i', f.itunesImage!], { timeout: 30_000 }).then(
      (r) => r.stderr,
      (e: { stderr: string }) => e.stderr,
    );
    const m = /, (\d+)x(\d+)[,\s]/.exec(info);
    expect(m, info).not.toBeNull();
    const [w, h] = [Number(m![1]), Number(m![2])];
    expect(w).toBe(h);
    expect(w).toBeGreaterThanOrEqual(1400);
    // itunes:category (an Apple category), itunes:explicit (true/false), language, title, description
    expect(f.itunesCategory?.length).toBeGreaterThan(0);
    for (const c of f.itunesCategory!) expect(isAppleCategory(c)).toBe(true);
    expect(xml).toMatch(/<itunes:explicit>(true|false)<\/itunes:explicit>/);
    expect(f.language).toBe('en');
    expect(f.title).toBe('Complete Show');
    expect(f.description).toBe('Every tag apps read.');
    expect(f.author).toBe('Skylark Radio');
    expect(f.owner?.email).toBe('owner@example.com');
    // every item: title, guid, enclosure with url, length > 0 and an audio type
    for (const item of f.items) {
      expect(item.title).toBeTruthy();
      expect(item.guid).toBe(ep.guid);
      expect(item.enclosure.url).toBe(ep.audioUrl);
      expect(item.enclosure.length).toBe(ep.audio.sizeBytes);
      expect(item.enclosure.length).toBeGreaterThan(0);
      expect(item.enclosure.type).toMatch(/^audio\//);
    }
    expect(xml.match(/<enclosure [^>]*>/g)!.filter((e) => !e.includes('length="') || !e.includes('type="'))).toEqual([]);
  });

  it('PATCH replaces and clears the lists; the feed follows', async () => {
    const p = await api(s.http, key, 'PATCH', `/v2/podcasts/${pid}`, { persons: [{ name: 'Solo' }], podroll: [] });
    expect(p.status, p.text).toBe(200);
    expect(p.json.persons).toEqual([{ name: 'Solo' }]);
    expect(p.json.txt).toEqual(txt); // untouched
    expect(p.json.podroll).toEqual([]);
    const e = await api(s.http, key, 'PATCH', `/v2/podcasts/${pid}/episodes/${ep.id}`, { soundbites: [] });
    expect(e.status, e.text).toBe(200);
    expect(e.json.soundbites).toEqual([]);
    expect(e.json.persons).toEqual(epPersons);
    const f = parseFeed(await feedXml())!;
    expect(f.podcastPeople).toEqual([{ name: 'Solo', role: 'Host', group: 'Cast' }]);
    expect(f.podroll).toBeUndefined();
    expect(f.items[0]!.podcastSoundbites).toBeUndefined();
    expect(f.items[0]!.podcastPeople).toHaveLength(1);
  });

  it('refuses invalid values with 400 naming the field', async () => {
    const cases: Array<[string, unknown, string]> = [
      ['persons', Array.from({ length: 51 }, (_, i) => ({ name: `P${i}` })), 'persons'],
      ['persons', [{ name: '' }], 'persons.0.name'],
      ['persons', [{ name: 'X', href: 'ftp://x' }], 'persons.0.href'],
      ['podroll', [{ feedGuid: 'not-a-guid' }], 'podroll.0.feedGuid'],
      ['txt', [{ value: 'x'.repeat(4001) }], 'txt.0.value'],
    ];
    for (const [field, value, param] of cases) {
      const r = await api(s.http, key, 'PATCH', `/v2/podcasts/${pid}`, { [field]: value });
      expect(r.status, `${field}: ${r.text}`).toBe(400);
      expect(r.json.error.param).toBe(param);
    }
    const sb = await api(s.http, key, 'PATCH', `/v2/podcasts/${pid}/episodes/${ep.id}`, { soundbites: [{ startTime: 1, duration: 0 }] });
    expect(sb.status).toBe(400);
    expect(sb.json.error.param).toBe('soundbites.0.duration');
  });

  it('describes the fields and the transcript route in the OpenAPI document', async () => {
    const doc = (await (await fetch(`${s.http}/v2/openapi.json`)).json()) as any;
    const json = JSON.stringify(doc.paths['/podcasts'].post);
    for (const f of ['persons', 'txt', 'podroll']) expect(json).toContain(`"${f}"`);
    expect(JSON.stringify(doc.paths['/podcasts/{id}/episodes'].post)).toContain('"soundbites"');
    const t = doc.paths['/podcasts/{id}/episodes/{eid}/transcript'];
    expect(Object.keys(t.put.requestBody.content).sort()).toEqual(['application/json', 'application/x-subrip', 'text/vtt']);
    expect(t.delete).toBeDefined();
  });
});
