/**
 * Episode transcripts (docs/podcasts.md "Transcripts"): `PUT …/transcript` takes WebVTT, SubRip and
 * the Podcasting 2.0 transcript JSON, refuses broken ones with 400 naming the line of the first
 * error (and, for JSON, the path as `param`), other types with 415 and bodies over 2 MB with 413;
 * the transcript is served at `transcriptUrl` with its type once the episode is published, listed
 * in the feed as `podcast:transcript` (podcast-partytime reads it), and `DELETE` removes it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseFeed } from 'podcast-partytime';
import { api, startInProcess, type TestServer } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

let s: TestServer;
let key: string;
let pid: string;
let ep: any;

const VTT = 'WEBVTT\n\n00:00:00.000 --> 00:00:01.500\n<v Ana>Welcome to the show.\n\n00:00:01.500 --> 00:00:03.000\n<v Bo>Glad to be here.\n';
const SRT = '1\n00:00:00,000 --> 00:00:01,500\nWelcome to the show.\n\n2\n00:00:01,500 --> 00:00:03,000\nGlad to be here.\n';
const JSON_DOC = JSON.stringify(
  { version: '1.0.0', segments: [{ speaker: 'Ana', startTime: 0, endTime: 1.5, body: 'Welcome to the show.' }, { speaker: 'Bo', startTime: 1.5, endTime: 3, body: 'Glad to be here.' }] },
  null,
  2,
);

const put = (body: string | Buffer, type: string, eid = ep.id) =>
  fetch(`${s.http}/v2/podcasts/${pid}/episodes/${eid}/transcript`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': type }, body });
const feed = async () => parseFeed(await (await fetch(`${s.http}/feed/${pid}.xml`)).text())!;

beforeAll(async () => {
  s = await startInProcess();
  key = s.secretKey;
  const out = path.join(s.dataDir, 'a.mp3');
  execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=3', '-c:a', 'libmp3lame', '-b:a', '64k', out], { timeout: 30_000 });
  pid = (await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Transcribed', category: 'Technology' })).json.id;
  ep = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'One' })).json;
  const a = await fetch(`${s.http}/v2/podcasts/${pid}/episodes/${ep.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body: readFileSync(out) });
  expect(a.status).toBe(200);
});
afterAll(async () => {
  await s?.close();
});

describe('transcripts', () => {
  it('takes WebVTT, private while the episode is a draft, public with text/vtt once published, in the feed with rel=captions', async () => {
    expect(ep.transcriptUrl).toBeNull();
    const r = await put(VTT, 'text/vtt; charset=utf-8');
    const body = (await r.json()) as any;
    expect(r.status, JSON.stringify(body)).toBe(200);
    expect(body.transcriptType).toBe('text/vtt');
    expect(body.transcriptUrl).toBe(`${s.http}/media/${pid}/${ep.id}.transcript.vtt`);
    expect((await fetch(body.transcriptUrl)).status).toBe(404); // draft: not public yet
    expect((await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id })).status).toBe(200);
    const t = await fetch(body.transcriptUrl);
    expect(t.status).toBe(200);
    expect(t.headers.get('content-type')).toBe('text/vtt; charset=utf-8');
    expect(t.headers.get('access-control-allow-origin')).toBe('*');
    expect(await t.text()).toBe(VTT);
    const item = (await feed()).items[0]!;
    expect(item.podcastTranscripts).toEqual([{ url: body.transcriptUrl, type: 'text/vtt', rel: 'captions', language: 'en' }]); // language: the channel's
  });

  it('takes SubRip (rel=captions) and the Podcasting 2.0 JSON (no rel), each replacing the last', async () => {
    const srt = (await (await put(SRT, 'application/x-subrip')).json()) as any;
    expect(srt.transcriptType).toBe('application/x-subrip');
    expect(srt.transcriptUrl).toMatch(/\.transcript\.srt$/);
    const t = await fetch(srt.transcriptUrl);
    expect(t.headers.get('content-type')).toBe('application/x-subrip; charset=utf-8');
    expect(await t.text()).toBe(SRT);
    // the old URL is gone: one transcript per episode
    expect((await fetch(`${s.http}/media/${pid}/${ep.id}.transcript.vtt`)).status).toBe(404);
    // partytime reads application/x-subrip as its SRT type
    expect((await feed()).items[0]!.podcastTranscripts).toEqual([{ url: srt.transcriptUrl, type: 'application/srt', rel: 'captions', language: 'en' }]);

    const json = (await (await put(JSON_DOC, 'application/json')).json()) as any;
    expect(json.transcriptType).toBe('application/json');
    const j = await fetch(json.transcriptUrl);
    expect(j.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(JSON.parse(await j.text())).toEqual(JSON.parse(JSON_DOC));
    expect((await feed()).items[0]!.podcastTranscripts).toEqual([{ url: json.transcriptUrl, type: 'application/json', language: 'en' }]);
  });

  it('refuses a broken WebVTT with 400 naming the line of the first error', async () => {
    const r = await put('WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nfine\n\n00:00:02.000 --> 00:00:0x.000\nbroken\n', 'text/vtt');
    const b = (await r.json()) as any;
    expect(r.status).toBe(400);
    expect(b.error.code).toBe('parameter_invalid');
    expect(b.error.param).toBe('body');
    expect(b.error.message).toMatch(/line 6\b/);
    expect((await put('no signature\n', 'text/vtt')).status).toBe(400);
  });

  it('refuses a broken SubRip with 400 naming the line of the first error', async () => {
    const r = await put('1\n00:00:00,000 --> 00:00:01,000\nfine\n\n2\n00:00:02,000 -> 00:00:03,000\nbroken\n', 'application/x-subrip');
    const b = (await r.json()) as any;
    expect(r.status).toBe(400);
    expect(b.error.message).toMatch(/line 6\b/);
  });

  it('refuses broken JSON with the line of the syntax error, and a bad segment with its line and param', async () => {
    const syntax = await put('{\n  "version": "1.0.0",\n  "segments": [\n    {"startTime": 0, "endTime": 1, "body": "a",}\n  ]\n}\n', 'application/json');
    const s1 = (await syntax.json()) as any;
    expect(syntax.status).toBe(400);
    expect(s1.error.message).toMatch(/line 4\b/);
    const doc = JSON.parse(JSON_DOC);
    doc.segments[1].endTime = 'late';
    const bad = await put(JSON.stringify(doc, null, 2), 'application/json');
    const b = (await bad.json()) as any;
    expect(bad.status).toBe(400);
    expect(b.error.param).toBe('segments.1.endTime');
    const line = JSON.stringify(doc, null, 2).split('\n').findIndex((l) => l.includes('"late"')) + 1;
    expect(b.error.message).toMatch(new RegExp(`line ${line}\\b`));
    doc.segments[1].endTime = 1; // before its start
    const order = (await (await put(JSON.stringify(doc, null, 2), 'application/json')).json()) as any;
    expect(order.error.param).toBe('segments.1.endTime');
  });

  it('refuses other types (415) and bodies over 2 MB (413); the stored transcript stays', async () => {
    expect((await put('hello', 'text/plain')).status).toBe(415);
    const big = await put(Buffer.alloc(2_000_001, 0x41), 'text/vtt');
    expect(big.status).toBe(413);
    expect(((await big.json()) as any).error.code).toBe('body_too_large');
    const now = (await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes/${ep.id}`)).json;
    expect(now.transcriptType).toBe('application/json');
  });

  it('DELETE removes it: URL 404, no podcast:transcript in the feed', async () => {
    const before = (await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes/${ep.id}`)).json;
    const r = await api(s.http, key, 'DELETE', `/v2/podcasts/${pid}/episodes/${ep.id}/transcript`);
    expect(r.status, r.text).toBe(200);
    expect(r.json.transcriptUrl).toBeNull();
    expect(r.json.transcriptType).toBeNull();
    expect((await fetch(before.transcriptUrl)).status).toBe(404);
    expect((await feed()).items[0]!.podcastTranscripts).toBeUndefined();
    expect((await api(s.http, key, 'DELETE', `/v2/podcasts/${pid}/episodes/ep_nope/transcript`)).status).toBe(404);
  });
});
