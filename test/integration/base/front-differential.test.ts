/**
 * The native HTTP front frames requests exactly as the HTTP server does (docs/http.md "Framing",
 * docs/behaviour.md §13): seeded random sequences of raw requests — pipelined, split at random
 * offsets, with and without bodies, odd header spellings, HTTP/1.0 and 1.1, LL-HLS parts the
 * front answers from its store, playlists, blocking reloads of listed parts (which the front
 * answers too), `/listen` (only its head is read), API routes — are sent over raw sockets to one
 * node twice: with the object store and held reloads answering and with both turned off (every
 * request then reaches the HTTP server). Both must get the same answers (status, headers but
 * Date, X-Request-ID and the library's banner, bodies with request and HLS session ids blanked) in
 * the same order, and the same close — or, where the library closed one run early (it closes a
 * connection that pipelines a request behind one it answers asynchronously), the same answers up
 * to that close.
 *
 * The stream is published until its playlist lists parts, then its publisher stops: the stream
 * stays live for its reconnect window, its parts stay stored, and every answer stays the same
 * between the two runs. `npm test` runs SKYLARK_FRONT_DIFF_COUNT (default 40) sequences from
 * SKYLARK_FRONT_DIFF_SEED (default 1); `npm run fuzz:front` runs a longer campaign.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import type { ChildProcess } from 'node:child_process';
import { startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited } from '../../helpers/publish.js';
import { liveHls } from '../../helpers/live-hls.js';
import { heldReloadCounts, httpFrontCounts, setHeldReloads, setHttpObjectsAnswering } from '../../../src/native/http-front.js';

const SEED = Number(process.env.SKYLARK_FRONT_DIFF_SEED ?? 1);
const COUNT = Number(process.env.SKYLARK_FRONT_DIFF_COUNT ?? 40);

let t: TestServer;
let pub: ChildProcess;
let port = 0;
let parts: string[] = [];
let media = '';
/** The media playlist's session id (the query of blocking reloads). */
let sid = '';
let master = '';
let streamId = '';

beforeAll(async () => {
  t = await startInProcess({});
  port = Number(new URL(t.http).port);
  const live = await liveHls(t, { title: 'Differential', latencyMode: 'low' }, 60);
  pub = live.pub;
  streamId = live.stream.id;
  media = live.mediaUrl.pathname;
  sid = live.mediaUrl.searchParams.get('sid') ?? '';
  master = new URL(live.stream.hlsUrl).pathname;
  await waitFor(async () => ((await (await fetch(live.mediaUrl)).text()).match(/#EXT-X-PART:/g) ?? []).length >= 6, 20_000, 200, 'six parts');
  pub.kill('SIGKILL');
  await exited(pub);
  // The publisher's end settles the playlist: wait until two reads a second apart agree.
  let last = '';
  const text = await waitFor(async () => {
    const now = await (await fetch(live.mediaUrl)).text();
    const same = now === last;
    last = now;
    if (!same) await new Promise((r) => setTimeout(r, 1000));
    return same ? now : null;
  }, 20_000, 0, 'a settled playlist');
  parts = [...text.matchAll(/#EXT-X-PART:[^\n]*URI="([^"]+)"/g)].map((m) => new URL(m[1]!, live.mediaUrl).pathname);
  await waitFor(() => httpFrontCounts().objects >= parts.length, 10_000, 100, 'stored parts');
}, 90_000);

afterAll(async () => {
  setHttpObjectsAnswering(true);
  setHeldReloads(true);
  pub?.kill('SIGKILL');
  if (pub) await exited(pub);
  await t?.close();
});

/** mulberry32: a small seeded PRNG, so that a failing sequence can be replayed from its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), a | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

interface Req {
  bytes: string;
  method: string;
  /** Where its body begins (paced: sent after the server answered the head, as it may). */
  bodyAt?: number;
  /** A streamed answer: read its head only, and send nothing after it. */
  streams?: boolean;
}

/** Builds one connection's requests from `rnd`. */
function sequence(rnd: () => number): Req[] {
  const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const hostLines = ['Host: 127.0.0.1\r\n', 'host:127.0.0.1\r\n', 'HOST:   127.0.0.1  \r\n', 'Host:\t127.0.0.1\t\r\n'];
  const extras = ['', 'User-Agent: hls.js\r\n', 'Accept: */*\r\nAccept-Encoding: gzip\r\n', 'Connection: keep-alive\r\n', 'connection: Keep-Alive\r\n',
    'Sec-Fetch-Mode: cors\r\nOrigin: http://a\r\n', 'X-Unknown: 1\r\n', 'Range: bytes=0-9\r\n', 'If-None-Match: "x"\r\n', 'Cache-Control: no-cache\r\n'];
  const head = (method: string, target: string, more = '') => `${method} ${target} HTTP/1.1\r\n${pick(hostLines)}${pick(extras)}${more}\r\n`;
  const part = () => pick(parts);
  // A blocking reload of a listed part (answered at once: the playlist no longer changes), its delta
  // update, or one too far ahead (400), in the query form the front holds (docs/http.md "Blocking
  // reloads held in native code").
  const reload = () => {
    const [msn, index] = part().split('/').pop()!.split('.').map(Number) as [number, number];
    return pick([`${media}?sid=${sid}&_HLS_msn=${msn}&_HLS_part=${index}`, `${media}?_HLS_msn=${msn}&_HLS_part=${index}&_HLS_skip=YES&sid=${sid}`, `${media}?sid=${sid}&_HLS_msn=${msn + 9}&_HLS_part=0`]);
  };
  const missing = () => part().replace(/\d+\.\d+\.m4s$/, '99999.0.m4s');
  const http10 = rnd() < 0.12;
  if (http10) {
    const n = 1 + Math.floor(rnd() * 3);
    const targets = [part, () => media, () => '/v2/nope', missing];
    return Array.from({ length: n }, (_, i) => ({ method: 'GET', bytes: `GET ${pick(targets)()} HTTP/1.0\r\n${i < n - 1 ? 'Connection: keep-alive\r\n' : ''}\r\n` }));
  }
  const kinds: Array<() => Req> = [
    () => ({ method: 'GET', bytes: head('GET', part()) }),
    () => ({ method: 'GET', bytes: head('GET', part()) }),
    () => ({ method: 'GET', bytes: head('GET', part()) }),
    () => ({ method: 'HEAD', bytes: head('HEAD', part()) }),
    () => ({ method: 'GET', bytes: head('GET', missing()) }),
    () => ({ method: 'GET', bytes: head('GET', pick([media, master, `${media}?x=1`])) }),
    () => ({ method: 'GET', bytes: head('GET', reload()) }),
    () => ({ method: 'GET', bytes: head('GET', pick(['/v2/nope', `/v2/streams/${streamId}`, '/no/such/path'])) }),
    () => {
      // A body that looks like a request for a stored part (docs/http.md "Framing").
      const body = `GET ${part()} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;
      const h = head('GET', pick([missing(), part(), '/v2/nope']), `Content-Length: ${body.length}\r\n`);
      return { method: 'GET', bytes: h + body, bodyAt: h.length };
    },
    () => {
      const body = `GET ${part()} HTTP/1.1\r\n\r\n`;
      const h = head('GET', pick([missing(), part()]), 'Transfer-Encoding: chunked\r\n');
      return { method: 'GET', bytes: h + `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`, bodyAt: h.length + body.length.toString(16).length + 2 };
    },
    () => {
      const body = JSON.stringify({ title: 'x' });
      return { method: 'POST', bytes: head('POST', '/v2/streams', `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n`) + body };
    },
  ];
  const n = 1 + Math.floor(rnd() * 5);
  const out = Array.from({ length: n }, () => pick(kinds)());
  if (rnd() < 0.15) out.push({ method: 'GET', bytes: head('GET', `/listen/${streamId}.aac`), streams: true });
  // The last request asks to close: the server answers it and closes, so the reader knows it has all.
  else out.push({ method: 'GET', bytes: `GET ${pick([part(), media])} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n` });
  return out;
}

/** What one connection got back, normalized for comparison. */
interface Got {
  answers: string[];
  rest: string;
  closed: boolean;
}

/** Blanks request ids and HLS session ids (new for every answer). */
const blank = (text: string) => text.replace(/req_[A-Za-z0-9]+/g, 'req_').replace(/sid=[A-Za-z0-9_-]+/g, 'sid=');

/** One response at `at` of `buf` for a request of `method`: its normalized text and end, or null while cut short (`streamed`: a head without a length). */
function takeResponse(buf: Buffer, at: number, method: string): { text: string; end: number; streamed: boolean } | null {
  const end = buf.indexOf('\r\n\r\n', at);
  if (end < 0) return null;
  const lines = buf.subarray(at, end).toString('latin1').split('\r\n');
  const status = Number(lines[0]!.split(' ')[1]);
  const headers = lines.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as const);
  const length = headers.find(([n]) => n === 'content-length')?.[1];
  const noBody = method === 'HEAD' || status === 304 || status === 204 || (status >= 100 && status < 200);
  const ignored = ['date', 'x-request-id', 'uwebsockets'];
  const top = () => `${lines[0]}\n${headers.filter(([n]) => !ignored.includes(n)).map(([n, v]) => `${n}: ${v}`).sort().join('\n')}`;
  if (!noBody && length === undefined) return { text: `${top()}\n(streamed)`, end: buf.length, streamed: true };
  const bodyLength = noBody ? 0 : Number(length);
  if (end + 4 + bodyLength > buf.length) return null;
  const raw = buf.subarray(end + 4, end + 4 + bodyLength).toString('latin1');
  const body = blank(raw);
  if (body !== raw) ignored.push('content-length'); // the ids' lengths vary; the body is compared
  return { text: `${top()}\n\n${body}`, end: end + 4 + bodyLength, streamed: false };
}

/** Sends `reqs` over one connection in pieces cut at `cuts` (`paced`: also between requests, each after the answers before it), reads until the server closes (or a streamed head), normalizes. */
async function exchange(reqs: Req[], cuts: number[], paced: boolean): Promise<Got> {
  const bytes = Buffer.from(reqs.map((r) => r.bytes).join(''), 'latin1');
  const s = net.connect(port, '127.0.0.1');
  s.on('error', () => {});
  await new Promise((r) => s.once('connect', r));
  let buf = Buffer.alloc(0);
  let closed = false;
  const answers: string[] = [];
  let at = 0;
  let streamed = false;
  const wake: Array<() => void> = [];
  const parse = () => {
    while (!streamed && answers.length < reqs.length) {
      const r = takeResponse(buf, at, reqs[answers.length]!.method);
      if (!r) break;
      answers.push(r.text);
      at = r.end;
      streamed = r.streamed;
    }
  };
  s.on('data', (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    parse();
    for (const w of wake.splice(0)) w();
  });
  s.on('close', () => {
    closed = true;
    for (const w of wake.splice(0)) w();
  });
  // Paced: each request after the answer to the one before (as players send), so the store may answer.
  const ends = reqs.map((_, i) => Buffer.byteLength(reqs.slice(0, i + 1).map((r) => r.bytes).join(''), 'latin1'));
  const bodies = reqs.map((r, i) => (r.bodyAt === undefined ? -1 : (i > 0 ? ends[i - 1]! : 0) + r.bodyAt));
  const waitAnswers = async (n: number, ms: number) => {
    const until = Date.now() + ms;
    while (!closed && answers.length < n && Date.now() < until) await new Promise<void>((r) => (wake.push(r), setTimeout(r, 50)));
  };
  let from = 0;
  for (const cut of [...new Set([...cuts, ...(paced ? [...ends, ...bodies.filter((b) => b > 0)] : []), bytes.length])].sort((a, b) => a - b)) {
    if (paced && from > 0 && ends.includes(from)) await waitAnswers(ends.indexOf(from) + 1, 3000);
    if (paced && from > 0 && bodies.includes(from)) await waitAnswers(bodies.indexOf(from) + 1, 300); // answered before its body, or not

    s.write(bytes.subarray(from, cut));
    from = cut;
    await new Promise((r) => setTimeout(r, 15)); // separate reads on the server (not a timing assertion)
  }
  const deadline = Date.now() + 12_000;
  while (!closed && !streamed && Date.now() < deadline) await new Promise<void>((r) => (wake.push(r), setTimeout(r, 250)));
  s.destroy();
  return { answers, rest: streamed ? '' : blank(buf.subarray(at).toString('latin1')), closed: closed || streamed };
}

describe('the native front answers as the HTTP server does (docs/http.md "Framing")', () => {
  it(`gets the same answers with and without the object store: ${COUNT} sequences from seed ${SEED}`, async () => {
    const hits = httpFrontCounts().objectHits;
    const reloads = heldReloadCounts().hits;
    let early = 0;
    for (let i = 0; i < COUNT; i++) {
      const rnd = prng(SEED * 1_000_003 + i);
      const reqs = sequence(rnd);
      const total = reqs.reduce((n, r) => n + r.bytes.length, 0);
      const cuts = [...new Set(Array.from({ length: Math.floor(rnd() * 4) }, () => 1 + Math.floor(rnd() * (total - 1))))].sort((a, b) => a - b);
      const paced = rnd() < 0.5;
      setHttpObjectsAnswering(true);
      setHeldReloads(true);
      const on = await exchange(reqs, cuts, paced);
      setHttpObjectsAnswering(false);
      setHeldReloads(false);
      const off = await exchange(reqs, cuts, paced);
      setHttpObjectsAnswering(true);
      setHeldReloads(true);
      const what = `sequence ${i} of seed ${SEED} (SKYLARK_FRONT_DIFF_SEED=${SEED}), ${paced ? 'paced, ' : ''}cuts ${JSON.stringify(cuts)}:\n${reqs.map((r) => JSON.stringify(r.bytes)).join('\n')}`;
      const ends = `\non: ${on.answers.length} answers, closed ${on.closed}, rest ${JSON.stringify(on.rest.slice(0, 200))}; off: ${off.answers.length} answers, closed ${off.closed}, rest ${JSON.stringify(off.rest.slice(0, 200))}`;
      // The HTTP library closes a connection that pipelines a request behind one it answers
      // asynchronously (a route forwarded to the main thread with more than one HTTP thread), so
      // timing may close either run early: then the shorter run is the other's beginning.
      const k = Math.min(on.answers.length, off.answers.length);
      expect(on.answers.slice(0, k), what + ends).toEqual(off.answers.slice(0, k));
      if (on.answers.length !== off.answers.length) {
        expect((on.answers.length < off.answers.length ? on : off).closed, what + ends).toBe(true);
        early++;
        continue;
      }
      expect(on.rest, what + ends).toBe(off.rest);
      expect(on.closed, what + ends).toBe(off.closed);
    }
    // The store did answer some of them (else this compared the HTTP server with itself), and most
    // sequences ran whole both ways.
    expect(httpFrontCounts().objectHits).toBeGreaterThan(hits);
    expect(heldReloadCounts().hits).toBeGreaterThan(reloads);
    expect(early).toBeLessThan(COUNT / 2);
  }, 600_000);
});
