/**
 * LL-HLS parts answered by the native HTTP front (docs/http.md "Media objects answered in native
 * code"): a plain GET of a public stream's part never reaches JavaScript, and gets the very answer
 * the HLS routes give (status, headers, bytes); everything else — HEAD, a query, a range, a token
 * stream, a part no longer kept, pipelined requests, a request sent while a held reload of the same
 * connection waits, bytes that are another request's body, a head llhttp refuses — reaches the
 * routes as before, and keep-alive connections that mix both stay in order.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { liveHls } from '../../helpers/live-hls.js';
import { RawConn } from '../../helpers/http-responses.js';
import { httpFrontCounts } from '../../../src/native/http-front.js';

let t: TestServer;
let pub: ChildProcess;
let tokenPub: ChildProcess | null = null;
const morePubs: ChildProcess[] = [];
let mediaUrl: URL;
let port = 0;

beforeAll(async () => {
  t = await startInProcess({});
  port = Number(new URL(t.http).port);
  const live = await liveHls(t, { title: 'Parts', latencyMode: 'low' }, 90);
  pub = live.pub;
  mediaUrl = live.mediaUrl;
  await waitFor(() => httpFrontCounts().objects > 0, 10_000, 100, 'stored parts');
}, 60_000);

afterAll(async () => {
  for (const p of [pub, tokenPub, ...morePubs]) {
    p?.kill('SIGKILL');
    if (p) await exited(p);
  }
  await t?.close();
});

class Conn extends RawConn {
  constructor() {
    super(port);
  }
}
const req = (path: string, extra = '') => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n${extra}\r\n`;

/** The media playlist's parts (URI path, in order) and the next part its preload hint names. */
async function listedParts(url = mediaUrl): Promise<{ parts: string[]; hint: string; text: string }> {
  const text = await (await fetch(url)).text();
  const parts = [...text.matchAll(/#EXT-X-PART:[^\n]*URI="([^"]+)"/g)].map((m) => new URL(m[1]!, url).pathname);
  const hint = new URL(text.match(/#EXT-X-PRELOAD-HINT:[^\n]*URI="([^"]+)"/)![1]!, url).pathname;
  return { parts, hint, text };
}

describe('LL-HLS parts answered in native code', () => {
  it('answers a public part with the headers and bytes the HLS routes give, without them', async () => {
    const { parts, text } = await listedParts();
    // The parts of a finished segment, joined, are that segment (answered by the routes).
    const seg = text.split('\n').find((l) => /^\d+\.m4s$/.test(l))!;
    const seq = seg.split('.')[0]!;
    const ofSeg = parts.filter((p) => p.endsWith(`/${seq}.0.m4s`) || new RegExp(`/${seq}\\.\\d+\\.m4s$`).test(p));
    expect(ofSeg.length).toBeGreaterThan(0);
    const before = httpFrontCounts().objectHits;
    const c = new Conn();
    const bodies: Buffer[] = [];
    for (const p of ofSeg) {
      c.send(req(p));
      const [r] = await c.responses(1);
      expect(r!.status).toBe(200);
      expect(r!.headers.get('content-type')).toBe('video/iso.segment');
      expect(r!.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(r!.headers.get('access-control-allow-origin')).toBe('*');
      expect(r!.headers.get('x-request-id')).toMatch(/^req_[0-9A-Za-z]{8}N[0-9a-z]+$/);
      expect(Date.parse(r!.headers.get('date')!)).toBeGreaterThan(Date.now() - 60_000);
      expect(Number(r!.headers.get('content-length'))).toBe(r!.body.length);
      bodies.push(r!.body);
    }
    c.end();
    expect(httpFrontCounts().objectHits).toBe(before + ofSeg.length);
    const segment = Buffer.from(await (await fetch(new URL(seg, mediaUrl))).arrayBuffer());
    expect(Buffer.concat(bodies).equals(segment)).toBe(true);
    // The routes' answer to the same part (a HEAD reaches them) has the same length and headers but the id.
    const head = await fetch(new URL(ofSeg[0]!, t.http), { method: 'HEAD' });
    expect(head.headers.get('content-length')).toBe(String(bodies[0]!.length));
    expect(head.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(head.headers.get('x-request-id')).toMatch(/^req_[0-9A-Za-z]{8}[0-9a-z]+$/);
  });

  it('leaves HEAD, a query, a range, unusual headers and unknown parts to the routes', async () => {
    const { parts } = await listedParts();
    const p = parts[parts.length - 1]!;
    const before = httpFrontCounts().objectHits;
    const c = new Conn();
    c.send(`HEAD ${p} HTTP/1.1\r\nHost: a\r\n\r\n`);
    expect((await c.responses(1, true))[0]!.status).toBe(200);
    c.send(req(`${p}?x=1`));
    expect((await c.responses(1))[0]!.status).toBe(200);
    c.send(req(p, 'Range: bytes=0-9\r\n'));
    expect((await c.responses(1))[0]!.status).toBe(200);
    c.send(req(p.replace(/\d+\.m4s$/, '999.m4s')));
    expect((await c.responses(1))[0]!.status).toBe(404);
    c.end();
    expect(httpFrontCounts().objectHits).toBe(before);
    // A connection asking to close: the routes answer and close it.
    const d = new Conn();
    d.send(`GET ${p} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n`);
    expect((await d.responses(1))[0]!.status).toBe(200);
    await waitFor(() => d.closed, 5000, 50, 'close');
    expect(httpFrontCounts().objectHits).toBe(before);
  });

  it('answers a new connection\'s request line split across reads like a whole one; later heads in pieces go to the routes', async () => {
    const { parts } = await listedParts();
    const p = parts[parts.length - 1]!;
    const whole = req(p);
    // The first request line of a new connection is kept until whole (docs/http.md "Framing").
    const c = new Conn();
    for (const piece of ['G', 'E', whole.slice(2, 20), whole.slice(20)]) {
      c.send(piece);
      await new Promise((r) => setTimeout(r, 30)); // separate reads (not a timing assertion)
    }
    const [first] = await c.responses(1);
    expect(first!.status).toBe(200);
    expect(first!.headers.get('content-type')).toBe('video/iso.segment');
    // A later head in pieces: the connection is the HTTP server's from then on, in order.
    const before = httpFrontCounts().objectHits;
    for (const piece of [whole.slice(0, 7), whole.slice(7)]) {
      c.send(piece);
      await new Promise((r) => setTimeout(r, 30));
    }
    const [second] = await c.responses(1);
    expect(second!.status).toBe(200);
    expect(second!.body.equals(first!.body)).toBe(true);
    c.send(whole);
    expect((await c.responses(1))[0]!.body.equals(first!.body)).toBe(true);
    c.end();
    expect(httpFrontCounts().objectHits).toBe(before);
  });

  it('keeps order on a keep-alive connection that mixes blocking reloads (routes) and parts (native)', async () => {
    const c = new Conn();
    const before = httpFrontCounts().objectHits;
    let { hint } = await listedParts();
    for (let i = 0; i < 4; i++) {
      // hint = /hls/<id>/a128/<msn>.<part>.m4s: reload until that part is listed, then fetch it.
      const [msn, part] = hint.split('/').pop()!.split('.').map(Number) as [number, number];
      c.send(req(`${mediaUrl.pathname}?_HLS_msn=${msn}&_HLS_part=${part}`));
      const [pl] = await c.responses(1);
      expect(pl!.status).toBe(200);
      const text = pl!.body.toString();
      expect(text).toContain(`URI="${hint.split('/').pop()}"`);
      c.send(req(hint));
      const [r] = await c.responses(1);
      expect(r!.status).toBe(200);
      expect(r!.body.length).toBeGreaterThan(0);
      hint = new URL(text.match(/#EXT-X-PRELOAD-HINT:[^\n]*URI="([^"]+)"/)![1]!, mediaUrl).pathname;
    }
    c.end();
    // The connection did mix the two. Not every part need be native: a part request that arrives
    // before the front has seen the routes' answer to the reload fully written goes to the routes
    // (docs/http.md "When"), which answer it the same, and a loaded box makes that more likely.
    expect(httpFrontCounts().objectHits).toBeGreaterThan(before);
  });

  it('never answers beside a request the routes still hold, nor pipelined requests', async () => {
    const { parts, hint } = await listedParts();
    const p = parts[parts.length - 1]!;
    const before = httpFrontCounts().objectHits;
    // Two requests in one write: both answered by the routes, in order.
    const c = new Conn();
    c.send(req(p) + req(parts[parts.length - 2]!));
    const two = await c.responses(2);
    expect(two.map((r) => r.status)).toEqual([200, 200]);
    c.end();
    // A part request while a held one (the preload hint's part) waits on the same connection: the
    // HTTP library refuses such pipelining by closing; nothing is answered out of order.
    const d = new Conn();
    d.send(req(hint));
    await new Promise((r) => setTimeout(r, 50)); // two reads, the first one held (sequencing, not a timing assertion)
    d.send(req(p));
    const got = await d.responses(1).catch(() => []);
    if (got.length > 0) expect(got[0]!.headers.get('content-length')).toBe(String(got[0]!.body.length));
    d.end();
    expect(httpFrontCounts().objectHits).toBe(before);
  });

  it('never answers bytes that were another request\'s body, and the request after them is answered (docs/http.md "Framing")', async () => {
    const { parts } = await listedParts();
    const p = parts[parts.length - 1]!;
    const missing = p.replace(/\d+\.\d+\.m4s$/, '999999.0.m4s');
    const before = httpFrontCounts().objectHits;
    const c = new Conn();
    // A GET with a body: the HTTP server answers it (404) and reads the body; the body looks like a
    // request for a stored part and arrives in a read of its own.
    const body = req(p);
    c.send(`GET ${missing} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${body.length}\r\n\r\n`);
    expect((await c.responses(1))[0]!.status).toBe(404);
    c.send(body);
    await new Promise((r) => setTimeout(r, 50)); // a read of its own (not a timing assertion)
    c.send(req(mediaUrl.pathname));
    const [next] = await c.responses(1);
    expect(next!.status).toBe(200);
    expect(next!.headers.get('content-type')).toMatch(/mpegurl/i);
    c.end();
    expect(httpFrontCounts().objectHits).toBe(before);
  });

  it('leaves a head llhttp refuses (space before the colon, RFC 9112 §5.1) to the HTTP server', async () => {
    const { parts } = await listedParts();
    const p = parts[parts.length - 1]!;
    const before = httpFrontCounts().objectHits;
    for (const [field, body] of [['Content-Length : 5', 'hello'], ['Transfer-Encoding\t: chunked', '0\r\n\r\n']] as const) {
      const c = new Conn();
      const refusedBefore = httpFrontCounts().refused;
      c.send(`GET ${p} HTTP/1.1\r\nHost: 127.0.0.1\r\n${field}\r\n\r\n${body}`);
      // RFC 9112 §5.1: 400 and closed; the stored part never answers it.
      const got = await c.responses(1, false, 5000);
      expect(got.map((r) => r.status), field).toEqual([400]);
      expect(got[0]!.headers.get('connection')).toBe('close');
      await waitFor(() => c.closed, 5000, 50, 'the server closes the connection');
      c.end();
      expect(httpFrontCounts().objectHits, field).toBe(before);
      expect(httpFrontCounts().refused, field).toBe(refusedBefore + 1);
    }
  });

  it('stores nothing of a token stream: its parts need the token, as before', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Members', playback: 'token', reconnectWindow: 60, latencyMode: 'low' })).json as { id: string; rtmpUrl: string; streamKey: string; hlsUrl: string };
    tokenPub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 30 });
    await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 15_000, 100, 'live');
    const token = (await api(t.http, t.secretKey, 'POST', `/v2/streams/${s.id}/listener_tokens`)).json.token as string;
    // A part the layer really holds (listed to a listener with the token).
    const media = new URL(`a128/index.m3u8?token=${token}`, s.hlsUrl);
    const part = await waitFor(async () => {
      const text = await (await fetch(media)).text();
      const uri = [...text.matchAll(/#EXT-X-PART:[^\n]*URI="([^"]+)"/g)].map((m) => m[1]!).pop();
      return uri ? new URL(uri, media) : null;
    }, 20_000, 200, 'a listed part');
    expect((await fetch(part)).status).toBe(200); // with the token (the URI carries it): the routes answer
    const hits = httpFrontCounts().objectHits;
    // Without the token: refused by the routes. A stored part would have been answered 200 natively.
    const bare = await fetch(new URL(part.pathname, t.http));
    expect(bare.status).toBe(401);
    expect(httpFrontCounts().objectHits).toBe(hits);
  });

  it('drops a part the layer no longer keeps: its request reaches the routes (404)', async () => {
    const { parts } = await listedParts();
    const oldest = parts[0]!;
    await waitFor(async () => !(await listedParts()).text.includes(`URI="${oldest.split('/').pop()}"`), 20_000, 250, 'the part to leave the playlist');
    // Parts are kept a while past their listing: wait for the layer to drop it.
    await waitFor(async () => (await fetch(new URL(oldest, t.http))).status === 404, 20_000, 500, 'the part to be dropped');
    const hits = httpFrontCounts().objectHits;
    expect((await fetch(new URL(oldest, t.http))).status).toBe(404);
    expect(httpFrontCounts().objectHits).toBe(hits);
  }, 45_000);

  // A stored answer must be forgotten with the change that makes it wrong, not at the next sweep.
  for (const change of ['token', 'delete'] as const) {
    it(`forgets a stream's stored parts synchronously with ${change === 'token' ? 'a PATCH to playback "token"' : 'its DELETE'}`, async () => {
      const live = await liveHls(t, { title: `Then ${change}`, latencyMode: 'low' }, 60);
      morePubs.push(live.pub);
      // A part of this stream answered natively.
      const c = new Conn();
      const part = await waitFor(async () => {
        const { parts } = await listedParts(live.mediaUrl);
        const p = parts[parts.length - 1];
        if (!p) return null;
        const hits = httpFrontCounts().objectHits;
        c.send(req(p));
        const [r] = await c.responses(1);
        return r!.status === 200 && httpFrontCounts().objectHits === hits + 1 ? p : null;
      }, 20_000, 200, 'a part answered natively');
      c.end();
      const id = live.stream.id;
      const changed = change === 'token' ? await api(t.http, t.secretKey, 'PATCH', `/v2/streams/${id}`, { playback: 'token' }) : await api(t.http, t.secretKey, 'DELETE', `/v2/streams/${id}`);
      expect(changed.status).toBe(200);
      // At once after the answer: the routes refuse it (no token / no stream), nothing native answers.
      const hits = httpFrontCounts().objectHits;
      const d = new Conn();
      d.send(req(part));
      const [r] = await d.responses(1);
      d.end();
      expect(r!.status).toBe(change === 'token' ? 401 : 404);
      expect(httpFrontCounts().objectHits).toBe(hits);
    }, 45_000);
  }
});
