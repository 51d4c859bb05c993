/**
 * One write per response (docs/http.md "One write per response"): a response larger than the HTTP
 * library's cork buffer (a 2 s HLS segment, ~33 KB) leaves in one `sendmsg` with its headers, and
 * every byte arrives in order: over keep-alive one after another, 200 pipelined requests read only
 * after the server's socket buffer filled (the kernel takes part of a gathered write, the rest
 * goes out when the socket drains), and a HEAD (headers alone, nothing held back).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import type { ChildProcess } from 'node:child_process';
import { startInProcess, type TestServer } from '../../helpers/server.js';
import { exited } from '../../helpers/publish.js';
import { liveHls } from '../../helpers/live-hls.js';
import { parseResponses } from '../../helpers/http-responses.js';
import { httpFrontCounts } from '../../../src/native/http-front.js';

let t: TestServer;
let pub: ChildProcess;
let segmentPath = '';
let reference: Buffer;
let port = 0;

beforeAll(async () => {
  t = await startInProcess({});
  port = Number(new URL(t.http).port);
  const live = await liveHls(t, { title: 'Writes' }, 60);
  pub = live.pub;
  const uri = (await (await fetch(live.mediaUrl)).text()).split('\n').find((l) => /^\d+\.(m4s|ts)$/.test(l))!;
  const u = new URL(uri, live.mediaUrl);
  segmentPath = u.pathname + u.search;
  reference = Buffer.from(await (await fetch(u)).arrayBuffer());
}, 60_000);

afterAll(async () => {
  pub?.kill('SIGKILL');
  if (pub) await exited(pub);
  await t?.close();
});

/** Sends `request` on a new connection, waits `pauseMs` before reading anything, then reads until `enough(bytes)`. */
function exchange(request: string, enough: (b: Buffer) => boolean, pauseMs = 0): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const s = net.connect(port, '127.0.0.1', () => {
      s.write(request);
      if (pauseMs > 0) {
        s.pause();
        setTimeout(() => s.resume(), pauseMs);
      }
    });
    s.on('data', (d: Buffer) => {
      chunks.push(d);
      size += d.length;
      const all = Buffer.concat(chunks, size);
      if (enough(all)) {
        s.destroy();
        resolve(all);
      }
    });
    s.on('error', reject);
    s.on('close', () => reject(new Error(`closed after ${size} bytes`)));
    s.setTimeout(20_000, () => s.destroy(new Error('timed out')));
  });
}
const get = (n: number) => `GET ${segmentPath} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`.repeat(n);
const countOf = (b: Buffer) => b.toString('latin1').split('HTTP/1.1 200').length - 1;

describe('one write per response', () => {
  it('sends a segment larger than the cork buffer in one gathered write, bytes intact, one after another on keep-alive', async () => {
    expect(reference.length).toBeGreaterThan(16 * 1024);
    const before = httpFrontCounts().coalesced;
    for (let i = 0; i < 5; i++) {
      const r = await fetch(`${t.http}${segmentPath}`);
      expect(r.status).toBe(200);
      expect(Buffer.from(await r.arrayBuffer()).equals(reference)).toBe(true);
    }
    expect(httpFrontCounts().coalesced).toBeGreaterThanOrEqual(before + 5);
  });

  it('200 pipelined requests (6.6 MB, more than the kernel buffers of both ends hold) read only after the socket buffer filled: every response whole and in order', async () => {
    const n = 200;
    const total = n * reference.length;
    const data = await exchange(get(n), (b) => b.length >= total && countOf(b) === n && parseResponses(b).reduce((a, r) => a + r.body.length, 0) === total, 1500);
    const responses = parseResponses(data);
    expect(responses).toHaveLength(n);
    for (const r of responses) {
      expect(r.status).toBe(200);
      expect(Number(r.headers.get('content-length'))).toBe(reference.length);
      expect(r.body.equals(reference)).toBe(true);
    }
  });

  it('answers a HEAD at once: headers only, nothing held back', async () => {
    const data = await exchange(`HEAD ${segmentPath} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`, (b) => b.includes('\r\n\r\n'));
    const [r] = parseResponses(data, true);
    expect(r!.status).toBe(200);
    expect(Number(r!.headers.get('content-length'))).toBe(reference.length);
  });
});
