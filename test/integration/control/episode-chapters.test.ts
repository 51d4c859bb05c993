/**
 * Chapters and show notes for every episode (docs/podcasts.md "Chapters", "Show notes"):
 * - `PUT …/episodes/{eid}/chapters` takes a Podcasting 2.0 JSON chapters document
 *   (`application/json+chapters`) for an uploaded episode; it is served at `chaptersUrl` with its
 *   type once the episode is published and listed in the feed as `podcast:chapters`, which
 *   podcast-partytime reads; a broken document is refused with 400 naming the field (and its
 *   line), another type with 415; `DELETE` removes them;
 * - a description in HTML goes into the feed's `content:encoded`, sanitised (no script, no event
 *   handler, no `javascript:` link) and its plain text into `description` and `itunes:summary`;
 *   a plain description gets no `content:encoded`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseFeed } from 'podcast-partytime';
import { XMLParser } from 'fast-xml-parser';
import { api, startInProcess, type TestServer } from '../../helpers/server.js';
import { episodeWithAudio, toneMp3 } from '../../helpers/episodes.js';

let s: TestServer;
let key: string;
let pid: string;
let eid: string;

const CHAPTERS = {
  version: '1.2.0',
  chapters: [
    { startTime: 0, title: 'Welcome', img: 'https://example.com/a.jpg' },
    { startTime: 1.5, title: 'The interview', url: 'https://example.com/guest', toc: true },
    { startTime: 2.25, endTime: 3, title: 'Goodbye', toc: false },
  ],
};
const HTML = '<p>Show notes with <b>bold</b> &amp; <a href="https://example.com/x" onclick="steal()">a link</a>.</p><script>alert(1)</script><p>Bye <a href="javascript:alert(2)">now</a><img src=x onerror=alert(3)></p>';

const put = (body: string, type = 'application/json+chapters', id = eid) =>
  fetch(`${s.http}/v2/podcasts/${pid}/episodes/${id}/chapters`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': type }, body });
const feedXml = async () => (await fetch(`${s.http}/feed/${pid}.xml`)).text();

beforeAll(async () => {
  s = await startInProcess();
  key = s.secretKey;
  pid = (await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Chaptered', category: 'Technology', loudnessTarget: null })).json.id;
  eid = await episodeWithAudio(s.http, key, pid, 'Uploaded one', toneMp3(s.dataDir, 'a.mp3', 3, 440));
});
afterAll(async () => {
  await s?.close();
});

describe('episode chapters', () => {
  it('takes a JSON chapters document for an uploaded episode, public once published, in the feed for partytime', async () => {
    const r = await put(JSON.stringify(CHAPTERS, null, 2));
    const body = (await r.json()) as any;
    expect(r.status, JSON.stringify(body)).toBe(200);
    expect(body.chaptersUrl).toBe(`${s.http}/media/${pid}/${eid}.chapters.json`);
    expect((await fetch(body.chaptersUrl)).status).toBe(404); // a draft's chapters are not public
    const pub = await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: eid });
    expect(pub.status, pub.text).toBe(200);
    expect(pub.json.status).toBe('published');
    const c = await fetch(body.chaptersUrl);
    expect(c.status).toBe(200);
    expect(c.headers.get('content-type')).toMatch(/^application\/json\+chapters/);
    expect(await c.json()).toEqual(CHAPTERS);
    const item = parseFeed(await feedXml())!.items[0]!;
    expect(item.podcastChapters).toEqual({ url: body.chaptersUrl, type: 'application/json+chapters' });
  });

  it('refuses a broken document with 400 naming the field and its line; another type with 415; keeps what it had', async () => {
    const bad = JSON.stringify({ version: '1.2.0', chapters: [{ startTime: 0, title: 'A' }, { startTime: 'soon', title: 'B' }] }, null, 2);
    const r = await put(bad);
    const e = ((await r.json()) as any).error;
    expect(r.status).toBe(400);
    expect(e).toMatchObject({ code: 'parameter_invalid', param: 'chapters.1.startTime' });
    expect(e.message).toMatch(/line 9\b/); // the line of "soon"
    const noTitle = await put(JSON.stringify({ version: '1.2.0', chapters: [{ startTime: 0 }] }));
    expect(((await noTitle.json()) as any).error).toMatchObject({ param: 'chapters.0.title' });
    const order = await put(JSON.stringify({ version: '1.2.0', chapters: [{ startTime: 5, title: 'B' }, { startTime: 1, title: 'A' }] }));
    expect(((await order.json()) as any).error).toMatchObject({ code: 'parameter_invalid', param: 'chapters.1.startTime' });
    const img = await put(JSON.stringify({ version: '1.2.0', chapters: [{ startTime: 0, title: 'A', img: 'javascript:alert(1)' }] }));
    expect(((await img.json()) as any).error).toMatchObject({ param: 'chapters.0.img' });
    const syntax = await put('{"version": "1.2.0",\n "chapters": [}');
    expect(syntax.status).toBe(400);
    expect(((await syntax.json()) as any).error.message).toMatch(/line 2/);
    const type = await put(JSON.stringify(CHAPTERS), 'text/plain');
    expect(type.status).toBe(415);
    const now = (await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes/${eid}`)).json;
    expect(await (await fetch(now.chaptersUrl)).json()).toEqual(CHAPTERS);
    expect((await put(JSON.stringify(CHAPTERS), 'application/json+chapters', 'ep_doesnotexist1')).status).toBe(404);
  });

  it('DELETE removes them: URL 404, no podcast:chapters in the feed', async () => {
    const url = `${s.http}/media/${pid}/${eid}.chapters.json`;
    const r = await api(s.http, key, 'DELETE', `/v2/podcasts/${pid}/episodes/${eid}/chapters`);
    expect(r.status, r.text).toBe(200);
    expect(r.json.chaptersUrl).toBeNull();
    expect((await fetch(url)).status).toBe(404);
    expect(parseFeed(await feedXml())!.items[0]!.podcastChapters).toBeUndefined();
  });
});

describe('show notes in HTML', () => {
  it('go sanitised into content:encoded, their plain text into description and itunes:summary', async () => {
    const p = await api(s.http, key, 'PATCH', `/v2/podcasts/${pid}/episodes/${eid}`, { description: HTML });
    expect(p.status, p.text).toBe(200);
    const xml = await feedXml();
    const item = new XMLParser({ ignoreAttributes: false }).parse(xml).rss.channel.item;
    // In CDATA: the sanitised HTML, nothing else.
    const sanitised = '<p>Show notes with <b>bold</b> &amp; <a href="https://example.com/x" rel="nofollow noopener">a link</a>.</p><p>Bye <a>now</a></p>';
    expect(xml).toContain(`<content:encoded><![CDATA[${sanitised}]]></content:encoded>`);
    expect(item.description).toBe('Show notes with bold & a link.\n\nBye now');
    expect(item['itunes:summary']).toBe(item.description);
    const f = parseFeed(xml)!;
    expect(f.items[0]!.content).toContain('<b>bold</b>');
    expect(xml).not.toMatch(/<script|alert|onclick|onerror|javascript:/);
  });

  it('a plain description stays as it is, with no content:encoded', async () => {
    await api(s.http, key, 'PATCH', `/v2/podcasts/${pid}/episodes/${eid}`, { description: 'Just words, 3 < 4.' });
    const item = new XMLParser({ ignoreAttributes: false }).parse(await feedXml()).rss.channel.item;
    expect(item.description).toBe('Just words, 3 < 4.');
    expect(item['content:encoded']).toBeUndefined();
  });
});
