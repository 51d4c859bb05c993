/**
 * The request body reader (src/base/http/body.ts) on a real uWS server on port 0: the cap is exact, a
 * refused body is drained and then answered on a connection kept alive, a streamed body honours
 * the sink's backpressure and its refusal, a `Content-Length` past the drain allowance is
 * answered at once without reading, and a throwing sink answers 500 instead of ending the process.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import { HttpServer } from '../../../src/base/http/server.js';
import { DRAIN_MAX_BYTES, DRAIN_MIN_BYTES, RequestBody, drainAllowance } from '../../../src/base/http/body.js';
import { ApiError } from '../../../src/base/errors/errors.js';
import { createLogger } from '../../../src/base/logger.js';
import { Limits } from '../../../src/base/limits/limits.js';

const CAP = 1000;
let server: HttpServer;
let base: string;
const limits = new Limits(createLogger('error'));
/** What the server saw of the last request to the streaming test routes. */
const seen: { chunks: number[]; ended?: number; received?: number; close?: boolean } = { chunks: [] };

function request(method: string, path: string, body: Buffer | null, headers: Record<string, string | number> = {}, agent: http.Agent | false = false) {
  return new Promise<{ status: number; text: string; reused: boolean; error?: string }>((resolve) => {
    const u = new URL(base);
    const req = http.request({ host: u.hostname, port: u.port, method, path, headers, agent });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, text, reused: req.reusedSocket }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ status: 0, text: '', reused: false, error: e.code }));
    if (body) req.end(body);
    else req.end();
  });
}

beforeAll(async () => {
  server = new HttpServer({ maxJsonBodyBytes: CAP, log: createLogger('error'), limits });
  // A JSON route under the 1000-byte cap: echoes how many keys it got.
  server.api('post', '/v2/echo', (req) => ({ status: 200, body: { keys: Object.keys(req.body as object).length } }));
  // Streams into a sink that pauses on every other chunk and resumes on a timer.
  server.stream('put', '/slow-sink', (res, req) => {
    seen.chunks = [];
    seen.ended = undefined;
    const body = new RequestBody(res, req, { maxBytes: 10 * 1024 * 1024 });
    let n = 0;
    body.stream(
      {
        write: (c) => {
          seen.chunks.push(c.length);
          if (n++ % 2) return true;
          setTimeout(() => body.resume(), 5);
          return false;
        },
        end: (size) => {
          seen.ended = size;
          res.cork(() => res.end(String(size)));
        },
        cancel: () => {},
      },
      () => res.cork(() => res.writeStatus('500 Internal Server Error').end()),
    );
  });
  // Refuses the body from inside the sink after 64 KiB.
  server.stream('put', '/refusing-sink', (res, req) => {
    seen.chunks = [];
    const body = new RequestBody(res, req, { maxBytes: 10 * 1024 * 1024 });
    let total = 0;
    body.stream(
      {
        write: (c) => {
          seen.chunks.push(c.length);
          total += c.length;
          if (total >= 64 * 1024) {
            body.refuse((close) => {
              seen.close = close;
              seen.received = body.received;
              res.cork(() => res.writeStatus('507 Insufficient Storage').end('full', close));
            });
          }
          return true;
        },
        end: () => res.cork(() => res.end('stored')),
        cancel: () => {},
      },
      () => {},
    );
  });
  // Refuses at once, whatever the body.
  server.stream('put', '/refuse-now', (res, req) => {
    const body = new RequestBody(res, req, { maxBytes: 0 });
    body.refuse((close) => {
      seen.close = close;
      seen.received = body.received;
      res.cork(() => res.writeStatus('403 Forbidden').end('no', close));
    });
  });
  // A sink that throws.
  server.stream('put', '/throwing-sink', (res, req) => {
    const body = new RequestBody(res, req, { maxBytes: 1024 * 1024 });
    body.stream(
      {
        write: () => {
          throw new Error('sink bug');
        },
        end: () => res.cork(() => res.end('stored')),
        cancel: () => {},
      },
      (e, close) => server.replies.error(res, { aborted: false }, e, 'req_test', {}, close),
    );
  });
  server.finish();
  base = `http://127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
});

afterAll(() => server?.close());

describe('drainAllowance', () => {
  it('is 8 × the cap within [DRAIN_MIN_BYTES, DRAIN_MAX_BYTES]', () => {
    expect(drainAllowance(0)).toBe(DRAIN_MIN_BYTES);
    expect(drainAllowance(2 * 1024 * 1024)).toBe(16 * 1024 * 1024);
    expect(drainAllowance(500_000_000)).toBe(DRAIN_MAX_BYTES);
  });
});

describe('RequestBody', () => {
  it('reads a body of exactly the cap; one byte more is a drained 413 on a connection kept alive, counted once', async () => {
    const exact = Buffer.from(JSON.stringify({ a: 'x'.repeat(CAP - 10) }).padEnd(CAP, ' '));
    expect(exact.length).toBe(CAP);
    const ok = await request('POST', '/v2/echo', exact, { 'Content-Type': 'application/json' });
    expect(ok.status, ok.text).toBe(200);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const before = limits.count('http_body_bytes');
      for (const headers of [{}, { 'Transfer-Encoding': 'chunked' }] as Record<string, string>[]) {
        const big = await request('POST', '/v2/echo', Buffer.concat([exact, Buffer.from(' ')]), { 'Content-Type': 'application/json', ...headers }, agent);
        expect(big.status, big.text).toBe(413);
        expect(JSON.parse(big.text).error.code).toBe('body_too_large');
      }
      expect(limits.count('http_body_bytes')).toBe(before + 2);
      const next = await request('POST', '/v2/echo', Buffer.from('{"a":1,"b":2}'), { 'Content-Type': 'application/json' }, agent);
      expect(next.reused).toBe(true);
      expect(JSON.parse(next.text)).toEqual({ keys: 2 });
    } finally {
      agent.destroy();
    }
  });

  it('streams into a sink that pauses the socket: every byte arrives, in order, once', async () => {
    const body = Buffer.alloc(3 * 1024 * 1024);
    for (let i = 0; i < body.length; i++) body[i] = i % 251;
    const r = await request('PUT', '/slow-sink', body, { 'Transfer-Encoding': 'chunked' });
    expect(r.text).toBe(String(body.length));
    expect(seen.ended).toBe(body.length);
    expect(seen.chunks.reduce((a, b) => a + b, 0)).toBe(body.length);
  });

  it('a sink that refuses gets nothing more; the rest is drained and the answer kept alive', async () => {
    const body = Buffer.alloc(1024 * 1024, 1);
    const r = await request('PUT', '/refusing-sink', body);
    expect(r.status).toBe(507);
    expect(r.text).toBe('full');
    expect(seen.close).toBe(false);
    expect(seen.received).toBe(body.length); // drained to the end
    expect(seen.chunks.reduce((a, b) => a + b, 0)).toBeLessThan(body.length); // not written past the refusal
  });

  it('a Content-Length past the drain allowance is answered at once, reading nothing, and closes', async () => {
    const r = await new Promise<{ status?: number; error?: string }>((resolve) => {
      const u = new URL(base);
      const req = http.request({ host: u.hostname, port: u.port, method: 'PUT', path: '/refuse-now', headers: { 'Content-Length': DRAIN_MIN_BYTES + 1 }, agent: false });
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode }));
      });
      req.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code }));
      req.write(Buffer.alloc(1024)); // and then nothing: the server must not wait for the rest
    });
    expect(r.status ?? r.error).toBeDefined();
    expect(seen.close).toBe(true);
    expect(seen.received).toBe(0);
  });

  it('a small unwanted body is drained, then answered on a connection kept alive', async () => {
    const r = await request('PUT', '/refuse-now', Buffer.alloc(200_000, 2));
    expect(r.status).toBe(403);
    expect(seen.close).toBe(false);
    expect(seen.received).toBe(200_000);
  });

  it('a throwing sink answers 500 and the server keeps serving', async () => {
    const r = await request('PUT', '/throwing-sink', Buffer.alloc(10_000, 3));
    expect(r.status).toBe(500);
    expect(JSON.parse(r.text).error.code).toBe('internal_error');
    const ok = await request('POST', '/v2/echo', Buffer.from('{}'), { 'Content-Type': 'application/json' });
    expect(ok.status).toBe(200);
  });

  it('an unknown route with a body gets its 404 after the drain', async () => {
    const r = await request('POST', '/nowhere', Buffer.alloc(2 * 1024 * 1024, 0x20));
    expect(r.status).toBe(404);
    expect(JSON.parse(r.text).error.code).toBe('route_not_found');
  });
});

it('maps 507 to the error type api_error (the node, not the request, is at fault)', () => {
  expect(new ApiError('insufficient_storage', 'full').type).toBe('api_error');
  expect(new ApiError('body_too_large', 'big').type).toBe('invalid_request_error');
});
