// The progressive route kind (src/base/http/routes/progressive.ts) on a real HttpServer on port 0 and
// real HTTP clients: raw replies, a streamed body written at once and later (corked), the client's
// going away reported once, `end`, `close`, HEAD without a body or Content-Length, 405 for other
// methods, and a throwing handler answered 500; a stream whose connection is its own sink and client
// (`streamedResponse`, `ProgressiveStream.sink`).
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpServer, streamedResponse, type ProgressiveSink } from '../../../src/base/http/server.js';
import { createLogger } from '../../../src/base/logger.js';
import { waitFor } from '../../helpers/wait.js';

let server: HttpServer;
let base: string;
const events: string[] = [];
let sinks: ProgressiveSink[] = [];
let opened = 0;

/** A connection that is its own sink and client: one object per response. */
class OwnConnection extends streamedResponse(Object) {
  constructor(readonly name: string) {
    super();
  }
  gone(): void {
    events.push(`own gone ${this.name}`);
  }
  writable(): void {}
}
const owned: OwnConnection[] = [];

beforeAll(async () => {
  server = new HttpServer({ maxJsonBodyBytes: 1024, log: createLogger('error', 'skylark', () => {}) });
  server.progressive('/p/:name', (req) => {
    const name = req.params[0]!;
    if (name === 'boom') throw new Error('handler failed');
    if (name === 'missing') return { status: '404 Not Found', headers: [['Content-Type', 'text/plain']], body: Buffer.from('nope') };
    const agent = req.header('user-agent');
    return {
      stream: {
        headers: [['Content-Type', 'audio/mpeg'], ['X-Agent', agent]],
        open: (sink) => {
          opened++;
          sinks.push(sink);
          expect(sink.write(Buffer.from('first;'))).toBe(true);
          return { gone: () => events.push(`gone ${name}`), writable: () => {} };
        },
      },
    };
  });
  server.progressive('/own/:name', (req) => {
    const name = req.params[0]!;
    return {
      stream: {
        headers: [['Content-Type', 'audio/mpeg']],
        sink: () => {
          const made = new OwnConnection(name);
          owned.push(made);
          return made;
        },
        open: (sink) => {
          expect(sink).toBe(owned.at(-1));
          expect(sink.write(Buffer.from('own;'))).toBe(true);
          return sink as OwnConnection;
        },
      },
    };
  });
  server.finish();
  base = `http://127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
});
afterAll(() => server.close());

function request(path: string, method = 'GET'): Promise<{ res: http.IncomingMessage; body: () => string; ended: Promise<void>; destroy: () => void }> {
  return new Promise((resolve, reject) => {
    const req = http.request(base + path, { method, agent: false, headers: { 'User-Agent': 'test-agent' } }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      const ended = new Promise<void>((r) => {
        res.on('end', () => r());
        res.on('close', () => r());
        res.on('error', () => r());
      });
      resolve({ res, body: () => text, ended, destroy: () => req.destroy() });
    });
    req.on('error', reject);
    req.end();
  });
}

describe('HttpServer.progressive', () => {
  it('streams: headers and the first write at once, later corked writes, then end', async () => {
    sinks = [];
    const r = await request('/p/a');
    expect(r.res.statusCode).toBe(200);
    expect(r.res.headers['content-type']).toBe('audio/mpeg');
    expect(r.res.headers['x-agent']).toBe('test-agent');
    expect(r.res.headers['x-request-id']).toMatch(/^req_/);
    expect(r.res.headers['transfer-encoding']).toBe('chunked');
    const sink = sinks[0]!;
    await waitFor(() => r.body() === 'first;', 5_000, 5, 'the first write'); // the corked ones come later
    sink.cork(() => {
      sink.write(Buffer.from('second;'));
      sink.write(Buffer.from('third;'));
    });
    sink.end();
    await r.ended;
    expect(r.body()).toBe('first;second;third;');
    expect(sink.done).toBe(true);
    expect(sink.write(Buffer.from('late'))).toBe(false);
    expect(events).not.toContain('gone a');
  });

  it('reports a client that goes away once; close() cuts the connection and reports it too', async () => {
    sinks = [];
    const r = await request('/p/b');
    await waitFor(() => r.body() === 'first;', 5_000, 5, 'the first write of b');
    r.destroy();
    await waitFor(() => events.includes('gone b'), 5_000, 5, 'b reported gone');
    expect(events.filter((e) => e === 'gone b')).toHaveLength(1);
    expect(sinks[0]!.done).toBe(true);
    const c = await request('/p/c');
    await waitFor(() => c.body() === 'first;', 5_000, 5, 'the first write of c');
    sinks[1]!.close();
    await c.ended;
    await waitFor(() => events.includes('gone c'), 5_000, 5, 'c reported gone');
    expect(events.filter((e) => e === 'gone c')).toHaveLength(1);
    expect(c.res.complete).toBe(false);
  });

  it('HEAD answers the headers only: no body, no Content-Length, open never runs', async () => {
    const before = opened;
    const r = await request('/p/d', 'HEAD');
    await r.ended;
    expect(r.res.statusCode).toBe(200);
    expect(r.res.headers['content-type']).toBe('audio/mpeg');
    expect(r.res.headers['content-length']).toBeUndefined();
    expect(r.body()).toBe('');
    expect(opened).toBe(before);
  });

  it('answers raw replies, 500 for a throwing handler, 405 with Allow for other methods', async () => {
    const missing = await request('/p/missing');
    await missing.ended;
    expect([missing.res.statusCode, missing.body()]).toEqual([404, 'nope']);
    const boom = await request('/p/boom');
    await boom.ended;
    expect(boom.res.statusCode).toBe(500);
    expect(JSON.parse(boom.body()).error.code).toBe('internal_error');
    const post = await request('/p/x', 'POST');
    await post.ended;
    expect(post.res.statusCode).toBe(405);
    expect(post.res.headers.allow).toBe('GET, HEAD');
    expect(server.routes().filter((r) => r.pattern === '/p/:name').map((r) => [r.method, r.kind])).toEqual([['GET', 'raw'], ['HEAD', 'raw']]);
  });

  it('a stream that makes its own sink gets it in open, streams through it, and is told once it is gone', async () => {
    const a = await request('/own/a');
    await waitFor(() => a.body() === 'own;', 5_000, 5, 'the first write of own a');
    expect(owned).toHaveLength(1);
    const sink = owned[0]!;
    sink.cork(() => sink.write(Buffer.from('more;')));
    sink.end();
    await a.ended;
    expect(a.body()).toBe('own;more;');
    expect([sink.done, sink.write(Buffer.from('late'))]).toEqual([true, false]);
    const b = await request('/own/b');
    await waitFor(() => b.body() === 'own;', 5_000, 5, 'the first write of own b');
    b.destroy();
    await waitFor(() => events.includes('own gone b'), 5_000, 5, 'own b reported gone');
    const c = await request('/own/c');
    await waitFor(() => c.body() === 'own;', 5_000, 5, 'the first write of own c');
    owned[2]!.close();
    await c.ended;
    await waitFor(() => events.includes('own gone c'), 5_000, 5, 'own c reported gone');
    expect(events.filter((e) => e.startsWith('own gone'))).toEqual(['own gone b', 'own gone c']);
  });
});
