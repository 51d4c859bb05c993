/**
 * LL-HLS blocking playlist reloads held in the native HTTP front (docs/http.md "Blocking reloads
 * held in native code"), against a live stream published by FFmpeg, over raw keep-alive sockets:
 * - differential: the same reload (`sid`, `_HLS_msn`, `_HLS_part`, with and without
 *   `_HLS_skip=YES`) sent with the front holding and with it off (then the HLS routes hold it)
 *   gets the same status, headers (but Date, X-Request-ID and the library's banner) and body —
 *   held until the part lands, answered at once when it is listed, refused (400) when too far
 *   ahead, and, once the publisher is gone, the timed-out `no-store` playlist after 3 target
 *   durations;
 * - sessions: a listener whose every reload is answered by the front is counted (`totalListeners`);
 *   while the listeners tracked plus the sessions queued reach the most the node tracks, a reload
 *   with a `sid` is the routes' (they refuse a new session then);
 * - caps: over `SKYLARK_HTTP_MAX_HELD_PER_IP` a reload is not held by the front: the routes
 *   answer it 503 `Retry-After: 1`, and slots come back when the holds end;
 * - a request pipelined behind a held reload closes the connection;
 * - a PATCH to `playback: "token"` withdraws the layer before the API answers: the held reload is
 *   answered as timed out, the next reload is the routes' (401).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited } from '../../helpers/publish.js';
import { liveHls } from '../../helpers/live-hls.js';
import { RawConn, type ParsedResponse } from '../../helpers/http-responses.js';
import { heldReloadCounts, setHeldReloadListeners, setHeldReloads } from '../../../src/native/http-front.js';

const PER_IP = 3;
let t: TestServer;
let pub: ChildProcess;
let mediaUrl: URL;
let streamId = '';
let port = 0;
/** A session id the multivariant playlist handed out. */
let sid = '';

beforeAll(async () => {
  // A live window long enough for delta updates to skip segments (docs/ll-hls.md "Delta updates").
  t = await startInProcess({ SKYLARK_HTTP_MAX_HELD_PER_IP: String(PER_IP), SKYLARK_LIVE_WINDOW_SEGMENTS: '10' });
  port = Number(new URL(t.http).port);
  const live = await liveHls(t, { title: 'Reloads', latencyMode: 'low' }, 120);
  pub = live.pub;
  mediaUrl = live.mediaUrl;
  streamId = live.stream.id;
  sid = new URL(mediaUrl).searchParams.get('sid') ?? '';
  expect(sid).not.toBe('');
  await waitFor(() => heldReloadCounts().layers > 0, 10_000, 100, 'a published layer');
  // The front holds for an address once it has its held-cap cells: its first hold goes to the
  // routes and asks for them (handed over at the next drain).
  const warm = new Conn();
  const { msn, part } = await nextPart();
  warm.send(req(reloadTarget(msn, part)));
  await warm.response();
  warm.end();
  await new Promise((r) => setTimeout(r, 600));
}, 60_000);

afterAll(async () => {
  setHeldReloads(true);
  pub?.kill('SIGKILL');
  if (pub) await exited(pub);
  await t?.close();
});

class Conn extends RawConn {
  constructor() {
    super(port);
  }
}
const req = (target: string) => `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: reload-test\r\nConnection: keep-alive\r\n\r\n`;
const reloadTarget = (msn: number, part: number, skip = false, who = sid) =>
  `${mediaUrl.pathname}?sid=${who}&_HLS_msn=${msn}&_HLS_part=${part}${skip ? '&_HLS_skip=YES' : ''}`;

/** The part the current playlist's preload hint names: the next part. */
async function nextPart(): Promise<{ msn: number; part: number }> {
  const text = await (await fetch(mediaUrl)).text();
  const uri = /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="([^"]+)"/.exec(text)![1]!;
  const [msn, part] = uri.split('/').pop()!.split('.').map(Number) as [number, number];
  return { msn, part };
}

/** What must be equal between the two answers: status, headers but the per-answer ones, body (request ids blanked). */
function comparable(r: ParsedResponse): { status: number; headers: Array<[string, string]>; body: string } {
  // Content-Length is checked against the body (an error body carries its request id, whose length varies).
  expect(Number(r.headers.get('content-length'))).toBe(r.body.length);
  const skip = new Set(['date', 'x-request-id', 'uwebsockets', 'content-length']);
  const headers = [...r.headers.entries()].filter(([k]) => !skip.has(k)).sort(([a], [b]) => a.localeCompare(b));
  return { status: r.status, headers, body: r.body.toString('latin1').replace(/req_[0-9A-Za-z]+/g, 'req_*') };
}

/** Sends `target` once with the front holding and once with it off (the routes), at once; both answers. */
async function both(target: string): Promise<[ParsedResponse, ParsedResponse, number]> {
  const before = heldReloadCounts();
  const a = new Conn();
  const b = new Conn();
  try {
    setHeldReloads(true);
    a.send(req(target));
    // The front decides on the read: wait until it has taken it (or passed it on) before turning it off.
    await new Promise((r) => setTimeout(r, 50));
    setHeldReloads(false);
    b.send(req(target));
    const [ra, rb] = await Promise.all([a.response(), b.response()]);
    const after = heldReloadCounts();
    return [ra, rb, after.hits + after.timeouts - before.hits - before.timeouts];
  } finally {
    setHeldReloads(true);
    a.end();
    b.end();
  }
}

describe('blocking reloads held in the native front', () => {
  it('answers a held reload when the part lands, as the routes do (full and delta)', async () => {
    const deltaUrl = new URL(mediaUrl);
    deltaUrl.searchParams.set('_HLS_skip', 'YES');
    await waitFor(async () => ((await (await fetch(deltaUrl)).text()).includes('#EXT-X-SKIP:') ? true : null), 40_000, 500, 'a delta update that skips');
    for (const skip of [false, true]) {
      const { msn, part } = await nextPart();
      const held = heldReloadCounts().held;
      const [native, routes, byFront] = await both(reloadTarget(msn, part, skip));
      expect(heldReloadCounts().held).toBeGreaterThan(held);
      expect(byFront).toBe(1);
      expect(native.status).toBe(200);
      expect(native.headers.get('cache-control')).toMatch(/^public, max-age=\d+$/);
      expect(native.body.toString()).toContain(`${msn}.${part}.m4s`);
      expect(comparable(native)).toEqual(comparable(routes));
      if (skip) expect(native.body.toString()).toContain('#EXT-X-SKIP:');
    }
  }, 60_000);

  it('answers at once a reload whose part is listed, and leaves a reload too far ahead and odd queries to the routes', async () => {
    // Answered at once both ways: equal unless a part landed between the two (then again).
    let same = false;
    for (let i = 0; i < 5 && !same; i++) {
      const now = await nextPart();
      const listed = now.part > 0 ? { msn: now.msn, part: now.part - 1 } : { msn: now.msn - 1, part: 0 };
      const [a, b, byFront] = await both(reloadTarget(listed.msn, listed.part));
      expect(byFront).toBe(1);
      expect(a.status).toBe(200);
      expect(a.headers.get('cache-control')).toMatch(/^public, max-age=\d+$/);
      same = JSON.stringify(comparable(a)) === JSON.stringify(comparable(b));
    }
    expect(same).toBe(true);
    const { msn, part } = await nextPart();
    const listed = part > 0 ? { msn, part: part - 1 } : { msn: msn - 1, part: 0 };
    for (const target of [
      reloadTarget(msn + 5, 0), // 400: more than two segments past the last one listed
      `${mediaUrl.pathname}?sid=${sid}&_HLS_msn=${msn}&_HLS_part=${part}&_hls_skip=YES`, // 400: spelling
      `${mediaUrl.pathname}?sid=${sid}&_HLS_msn=${msn}&_HLS_msn=${msn}&_HLS_part=${part}`, // 400: twice
      `${mediaUrl.pathname}?sid=${sid}&_HLS_part=${part}`, // 400: part without msn
      `${mediaUrl.pathname}?sid=${sid}&_HLS_msn=${listed.msn}&_HLS_part=${listed.part}&x=1`, // another parameter
    ]) {
      const [na, ra, front] = await both(target);
      expect(front, target).toBe(0);
      expect(comparable(na), target).toEqual(comparable(ra));
    }
  });

  it('counts the session of a listener whose reloads the front answers', async () => {
    const master = await (await fetch(new URL(`/hls/${streamId}/index.m3u8`, t.http))).text();
    const fresh = new URL(master.split('\n').find((l) => l.startsWith('a128/'))!, mediaUrl).searchParams.get('sid')!;
    const count = async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${streamId}/stats`)).json.totalListeners as number;
    const before = await count();
    const hits = heldReloadCounts().hits;
    let { msn, part } = await nextPart();
    for (let i = 0; i < 3; i++) {
      const c = new Conn();
      c.send(req(reloadTarget(msn, part, false, fresh)));
      const r = await c.response();
      c.end();
      expect(r.status).toBe(200);
      const hint = /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="([^"]+)"/.exec(r.body.toString())![1]!;
      [msn, part] = hint.split('/').pop()!.split('.').map(Number) as [number, number];
    }
    expect(heldReloadCounts().hits).toBeGreaterThanOrEqual(hits + 3);
    await waitFor(async () => ((await count()) === before + 1 ? true : null), 5000, 100, 'the session counted');
  });

  it('holds nearly every reload of a player on one keep-alive connection for 24 s, and the library never closes it as idle', async () => {
    // As hls.js in low-latency mode: a blocking reload for the next part, then a GET of that part, on one connection.
    const c = new Conn();
    const before = heldReloadCounts();
    let { msn, part } = await nextPart();
    let reloads = 0;
    try {
      for (const until = Date.now() + 24_000; Date.now() < until; ) {
        c.send(req(reloadTarget(msn, part)));
        const r = await c.response();
        reloads++;
        expect(r.status).toBe(200);
        const body = r.body.toString();
        const uri = new RegExp(`URI="([^"]*\\b${msn}\\.${part}\\.m4s)"`).exec(body)?.[1];
        expect(uri, `part ${msn}.${part} listed`).toBeDefined();
        const asked = new URL(uri!, mediaUrl);
        c.send(req(asked.pathname + asked.search));
        expect((await c.response()).status).toBe(200);
        const hint = /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="([^"]+)"/.exec(body)![1]!;
        [msn, part] = hint.split('/').pop()!.split('.').map(Number) as [number, number];
      }
      expect(c.closed).toBe(false);
    } finally {
      c.end();
    }
    const after = heldReloadCounts();
    // The library still sees one request every 4 s (a reload or a part), so a few reloads are the routes'.
    expect(after.timeouts - before.timeouts).toBe(0);
    expect(reloads).toBeGreaterThan(30);
    expect((after.hits - before.hits) / reloads).toBeGreaterThanOrEqual(0.9);
  }, 40_000);

  it('leaves a reload with a sid to the routes while the listeners tracked plus those queued reach the most the node tracks', async () => {
    // A stand-in for the registry's shared count (the node's MAX_LISTENERS is 200,000).
    const count = new Int32Array(new SharedArrayBuffer(4));
    count[0] = 5;
    expect(setHeldReloadListeners(count, 5)).toBe(true);
    const at = await nextPart();
    const [a, b, full] = await both(reloadTarget(at.msn, at.part));
    expect(full).toBe(0);
    expect(comparable(a)).toEqual(comparable(b));
    count[0] = 4;
    const next = await nextPart();
    const [, , room] = await both(reloadTarget(next.msn, next.part));
    expect(room).toBe(1);
    count[0] = 0;
    setHeldReloadListeners(count, 1_000_000);
  });

  it('holds no more per address than the cap: the routes answer the one over it 503', async () => {
    // The front learns this address's cells from the routes' first hold (then the next drain).
    const warm = new Conn();
    const first = await nextPart();
    setHeldReloads(false);
    warm.send(req(reloadTarget(first.msn, first.part)));
    await warm.response();
    setHeldReloads(true);
    warm.end();
    await new Promise((r) => setTimeout(r, 600));
    const { msn } = await nextPart();
    const target = reloadTarget(msn + 1, 0); // the next segment's first part: held about one segment
    const held = heldReloadCounts().held;
    const conns = Array.from({ length: PER_IP + 1 }, () => new Conn());
    for (const c of conns.slice(0, PER_IP)) c.send(req(target));
    await waitFor(() => (heldReloadCounts().waiting >= PER_IP ? true : null), 5000, 20, 'held in the front');
    expect(heldReloadCounts().held).toBe(held + PER_IP);
    conns[PER_IP]!.send(req(target));
    const over = await conns[PER_IP]!.response();
    expect(over.status).toBe(503);
    expect(over.headers.get('retry-after')).toBe('1');
    const answers = await Promise.all(conns.slice(0, PER_IP).map((c) => c.response()));
    for (const r of answers) expect(r.status).toBe(200);
    expect(heldReloadCounts().waiting).toBe(0);
    for (const c of conns) c.end();
    // The slots came back: the cap admits again.
    const again = await nextPart();
    const d = new Conn();
    d.send(req(reloadTarget(again.msn, again.part)));
    expect((await d.response()).status).toBe(200);
    d.end();
  });

  it('closes a connection that sends a request behind its held reload, and gives its slot back', async () => {
    const { msn } = await nextPart();
    const c = new Conn();
    c.send(req(reloadTarget(msn + 1, 0)));
    await waitFor(() => (heldReloadCounts().waiting >= 1 ? true : null), 5000, 20, 'held');
    c.send(req(mediaUrl.pathname));
    await waitFor(() => (c.closed ? true : null), 5000, 20, 'closed');
    await waitFor(() => (heldReloadCounts().waiting === 0 ? true : null), 5000, 20, 'released');
  });

  it('answers as the routes do once the wait runs out (publisher gone): the playlist, no-store', async () => {
    pub.kill('SIGKILL');
    await exited(pub);
    // The end of the publisher settles the playlist: wait until two reads a second apart agree.
    let last = '';
    await waitFor(async () => {
      const now = await (await fetch(mediaUrl)).text();
      const same = now === last;
      last = now;
      if (!same) await new Promise((r) => setTimeout(r, 1000));
      return same ? now : null;
    }, 20_000, 0, 'a settled playlist');
    const { msn, part } = await nextPart();
    const [a, b, byFront] = await both(reloadTarget(msn, part));
    expect(byFront).toBe(1);
    expect(a.status).toBe(200);
    expect(a.headers.get('cache-control')).toBe('no-store');
    expect(comparable(a)).toEqual(comparable(b));
  }, 40_000);

  it('withdraws the layer synchronously with a PATCH to playback "token": its held reload is answered, the next is the routes\' 401', async () => {
    const { msn, part } = await nextPart();
    const held = heldReloadCounts().held;
    const a = new Conn();
    a.send(req(reloadTarget(msn, part)));
    await waitFor(() => (heldReloadCounts().held > held ? true : null), 5000, 20, 'held in the front');
    const changed = await api(t.http, t.secretKey, 'PATCH', `/v2/streams/${streamId}`, { playback: 'token' });
    expect(changed.status).toBe(200);
    const r = await a.response();
    expect(r.status).toBe(200);
    expect(r.headers.get('cache-control')).toBe('no-store');
    a.end();
    const hits = heldReloadCounts().hits;
    const b = new Conn();
    b.send(req(reloadTarget(msn, part)));
    expect((await b.response()).status).toBe(401);
    b.end();
    expect(heldReloadCounts().hits).toBe(hits);
  });

  it('answers held reloads with the final playlist when the layer ends, as the routes do', async () => {
    const live = await liveHls(t, { title: 'Ends', latencyMode: 'low', reconnectWindow: 1 }, 60);
    await waitFor(() => (heldReloadCounts().layers > 0 ? true : null), 10_000, 100, 'a published layer');
    const url = live.mediaUrl;
    const text = await (await fetch(url)).text();
    const hint = /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="([^"]+)"/.exec(text)![1]!;
    const [msn] = hint.split('.').map(Number) as [number];
    const target = `${url.pathname}?sid=${url.searchParams.get('sid')}&_HLS_msn=${msn + 1}&_HLS_part=0`;
    const held = heldReloadCounts().held;
    const answers = both(target);
    await waitFor(() => (heldReloadCounts().held > held ? true : null), 5000, 20, 'held in the front');
    live.pub.kill('SIGKILL');
    await exited(live.pub);
    const [a, b, byFront] = await answers;
    expect(byFront).toBe(1);
    expect(a.status).toBe(200);
    expect(a.body.toString()).toContain('#EXT-X-ENDLIST');
    expect(a.headers.get('cache-control')).toBe('public, max-age=60');
    expect(comparable(a)).toEqual(comparable(b));
  }, 40_000);
});
