/**
 * The Streams resource and the HTTP/API plumbing over real HTTP against a real in-process server
 * (uWebSockets.js on port 0, a real SQLite file): spec "Streams", "Errors", "Authentication",
 * "Pagination"; docs/behaviour.md §2, §7, §9 ("Create and delete", "Lists", "Errors").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import { api, startInProcess, type TestServer } from '../../helpers/server.js';

let s: TestServer;
let key: string;
const MiB = 1024 * 1024;

/** A response that is an error envelope with `status`, `type`, `code` (and `param` when given). */
function expectError(r: Awaited<ReturnType<typeof api>>, status: number, type: string, code: string, param?: string) {
  expect(r.status, r.text).toBe(status);
  expect(r.json?.error, r.text).toBeDefined();
  expect(r.json.error.type).toBe(type);
  expect(r.json.error.code).toBe(code);
  if (param !== undefined) expect(r.json.error.param).toBe(param);
  expect(typeof r.json.error.message).toBe('string');
  expect(r.json.error.requestId).toMatch(/^req_/);
  expect(r.headers.get('x-request-id')).toBe(r.json.error.requestId);
  expect(r.headers.get('content-type')).toMatch(/^application\/json/);
  expectNoStack(r.text);
}

function expectNoStack(text: string) {
  expect(text).not.toMatch(/\n\s+at |\.ts:\d+|\.js:\d+|node_modules|Error:/);
}

const create = (body: unknown, k = key) => api(s.http, k, 'POST', '/v2/streams', body);

/** Raw HTTP/1.1 request through node:http (for chunked bodies and early answers). Tolerates the server closing while we write. */
function rawRequest(
  method: string,
  path: string,
  headers: Record<string, string | number>,
  chunks: Buffer[],
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(s.http);
    const req = http.request({ host: url.hostname, port: url.port, method, path, headers, agent: false });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
      res.on('error', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
    });
    req.on('error', (e) => reject(e));
    (async () => {
      for (const c of chunks) {
        if (req.destroyed) return;
        const ok = req.write(c);
        if (!ok) {
          await new Promise<void>((r) => {
            const done = () => {
              req.off('drain', done);
              req.off('close', done);
              r();
            };
            req.on('drain', done);
            req.on('close', done);
          });
        }
      }
      if (!req.destroyed) req.end();
    })().catch(() => {});
  });
}

/** A JSON object body of exactly `size` bytes: `{"title":"t","pad":"xxxx…"}`. */
function paddedBody(size: number): Buffer {
  const head = '{"title":"t","pad":"';
  const tail = '"}';
  return Buffer.from(head + 'x'.repeat(size - head.length - tail.length) + tail);
}

beforeAll(async () => {
  s = await startInProcess();
  key = s.secretKey;
});
afterAll(async () => {
  await s?.close();
});

describe('POST /v2/streams', () => {
  it('creates an idle stream with every field (201)', async () => {
    const before = Date.now();
    const r = await create({ title: 'Morning show' });
    expect(r.status, r.text).toBe(201);
    expect(r.headers.get('x-request-id')).toMatch(/^req_/);
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    const o = r.json;
    expect(o.id).toMatch(/^stm_[A-Za-z0-9]+$/);
    expect(o.object).toBe('stream');
    expect(o.title).toBe('Morning show');
    expect(o.title_en).toBeNull();
    expect(o.title_ru).toBeNull();
    expect(o.title_de).toBeNull();
    expect(o.title_fr).toBeNull();
    expect(o.status).toBe('idle');
    expect(o.quality).toBe('medium');
    expect(o.codec).toBe('aac');
    expect(o.region).toBe('eu-west-1');
    const urls = s.server.urls;
    expect(o.rtmpUrl).toBe(`rtmp://${urls.ingestUrl}/live/${o.id}`);
    expect(o.rtmpUrl).toMatch(/^rtmp:\/\/127\.0\.0\.1:\d+\/live\/stm_/);
    expect(urls.ingestUrl).toBe(`127.0.0.1:${s.server.rtmpPort}`);
    expect(o.streamKey).toMatch(/^sk_euw1_[A-Za-z0-9]{32,}$/);
    expect(o.hlsUrl).toBe(`${urls.cdnUrl}/hls/${o.id}/index.m3u8`);
    expect(o.hlsUrl).toBe(`${s.http}/hls/${o.id}/index.m3u8`);
    expect(o.listenerCount).toBe(0);
    expect(o.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(o.createdAt)).toBeGreaterThanOrEqual(before - 1000);
    expect(Date.parse(o.createdAt)).toBeLessThanOrEqual(Date.now() + 1000);
    expect(o.startedAt).toBeNull();
    expect(o.metadata).toEqual({});
    expect(o.reconnectWindow).toBe(30);
    expect(o.playback).toBe('public');
    expect(o.recording).toBeNull();
    // No deprecation headers without ultra_low.
    expect(r.headers.get('deprecation')).toBeNull();
    expect(r.headers.get('warning')).toBeNull();
  });

  it('refuses recording into a podcast that does not exist', async () => {
    const r = await create({ title: 'Nowhere', recording: { podcastId: 'pod_doesnotexist1' } });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ code: 'parameter_invalid', param: 'recording.podcastId' });
  });

  it('takes every optional field', async () => {
    const podcast = await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Recordings' });
    expect(podcast.status, podcast.text).toBe(201);
    const r = await create({
      title: 'Full',
      title_en: 'Full',
      title_ru: 'Полный',
      title_de: 'Voll',
      title_fr: 'Plein',
      quality: 'high',
      codec: 'opus',
      region: 'ap-southeast-1',
      metadata: { show: 'x', ep: '1' },
      reconnectWindow: 0,
      recording: { podcastId: podcast.json.id },
      playback: 'token',
    });
    expect(r.status, r.text).toBe(201);
    expect(r.json).toMatchObject({
      title_en: 'Full',
      title_ru: 'Полный',
      title_de: 'Voll',
      title_fr: 'Plein',
      quality: 'high',
      codec: 'opus',
      region: 'ap-southeast-1',
      metadata: { show: 'x', ep: '1' },
      reconnectWindow: 0,
      recording: { podcastId: podcast.json.id },
      playback: 'token',
    });
    expect(r.json.streamKey).toMatch(/^sk_apse1_[A-Za-z0-9]{32,}$/);
  });

  it('defaults region to the account default region', async () => {
    const other = await s.server.accounts.create({ name: 'APAC', plan: 'free', region: 'ap-southeast-1' });
    const r = await create({ title: 'apac' }, other.secretKey);
    expect(r.status, r.text).toBe(201);
    expect(r.json.region).toBe('ap-southeast-1');
    expect(r.json.streamKey).toMatch(/^sk_apse1_[A-Za-z0-9]{32,}$/);
    const eu = await create({ title: 'eu', region: 'eu-west-1' }, other.secretKey);
    expect(eu.json.streamKey).toMatch(/^sk_euw1_/);
  });

  it('gives every response a distinct X-Request-ID', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const r = await api(s.http, key, 'GET', '/v2/streams?limit=1');
      expect(r.headers.get('x-request-id')).toMatch(/^req_[A-Za-z0-9]+$/);
      ids.add(r.headers.get('x-request-id')!);
    }
    expect(ids.size).toBe(5);
  });

  it('accepts ultra_low as low with Deprecation and Warning headers', async () => {
    const r = await create({ title: 'old client', quality: 'ultra_low' });
    expect(r.status, r.text).toBe(201);
    expect(r.json.quality).toBe('low');
    expect(r.headers.get('deprecation')).toBeTruthy();
    expect(r.headers.get('warning')).toMatch(/^299 /);
    expect(r.headers.get('warning')).toMatch(/ultra_low/);
    expect(r.headers.get('warning')).toMatch(/\blow\b/);
    const g = await api(s.http, key, 'GET', `/v2/streams/${r.json.id}`);
    expect(g.json.quality).toBe('low');
    // Stored as low: the raw row holds low, never the alias.
    const row = s.server.db.prepare('SELECT quality FROM streams WHERE id = ?').get(r.json.id) as { quality: string };
    expect(row.quality).toBe('low');
    // PATCH with the alias too.
    const c = await create({ title: 'q' });
    const p = await api(s.http, key, 'PATCH', `/v2/streams/${c.json.id}`, { quality: 'ultra_low' });
    expect(p.status, p.text).toBe(200);
    expect(p.json.quality).toBe('low');
    expect(p.headers.get('deprecation')).toBeTruthy();
    expect(p.headers.get('warning')).toMatch(/\blow\b/);
  });
});

describe('validation', () => {
  it('missing title → 400 param_required title', async () => {
    const r = await create({});
    expectError(r, 400, 'invalid_request_error', 'param_required', 'title');
    const r2 = await create({ quality: 'low' });
    expectError(r2, 400, 'invalid_request_error', 'param_required', 'title');
  });

  it('title: 200 characters ok, 201 → 400, empty or non-string → 400', async () => {
    const ok = await create({ title: 'a'.repeat(200) });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.json.title).toHaveLength(200);
    expectError(await create({ title: 'a'.repeat(201) }), 400, 'invalid_request_error', 'parameter_invalid', 'title');
    expectError(await create({ title: '' }), 400, 'invalid_request_error', 'parameter_invalid', 'title');
    expectError(await create({ title: 42 }), 400, 'invalid_request_error', 'parameter_invalid', 'title');
    expectError(await create({ title: null }), 400, 'invalid_request_error', 'parameter_invalid', 'title');
    // Counted in characters, not bytes: 200 Cyrillic characters are fine.
    const cyr = await create({ title: 'ж'.repeat(200) });
    expect(cyr.status, cyr.text).toBe(201);
    expectError(await create({ title: 't', title_de: 'x'.repeat(201) }), 400, 'invalid_request_error', 'parameter_invalid', 'title_de');
  });

  it.each([
    ['quality', 'ultra'],
    ['quality', 'HIGH'],
    ['codec', 'flac'],
    ['region', 'us-east-1'],
    ['playback', 'private'],
    ['reconnectWindow', 301],
    ['reconnectWindow', -1],
    ['reconnectWindow', 1.5],
    ['reconnectWindow', '30'],
    ['metadata', 'x'],
    ['metadata', ['a']],
    ['recording', { podcastId: 'nope' }],
    ['recording', []],
    ['recording', 'pod_abc'],
  ])('%s = %j → 400 with param', async (param, value) => {
    const r = await create({ title: 't', [param]: value });
    expectError(r, 400, 'invalid_request_error', 'parameter_invalid');
    expect(r.json.error.param === param || r.json.error.param.startsWith(`${param}.`)).toBe(true);
  });

  it('unknown body field → 400 parameter_unknown naming it', async () => {
    expectError(await create({ title: 't', colour: 'red' }), 400, 'invalid_request_error', 'parameter_unknown', 'colour');
    expectError(await create({ title: 't', status: 'live' }), 400, 'invalid_request_error', 'parameter_unknown', 'status');
    expectError(await create({ title: 't', recording: { podcastId: 'pod_1', x: 1 } }), 400, 'invalid_request_error', 'parameter_unknown', 'recording.x');
    const proto = await create('{"title":"t","__proto__":{"admin":true}}');
    expectError(proto, 400, 'invalid_request_error', 'parameter_unknown', '__proto__');
  });

  it('metadata: 16 keys ok, 17 → 400; 512-char value ok, 513 → 400; non-string value → 400', async () => {
    const m16 = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, 'v']));
    const ok = await create({ title: 't', metadata: m16 });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.json.metadata).toEqual(m16);
    const m17 = { ...m16, k16: 'v' };
    expectError(await create({ title: 't', metadata: m17 }), 400, 'invalid_request_error', 'parameter_invalid', 'metadata');
    const v512 = await create({ title: 't', metadata: { a: 'x'.repeat(512) } });
    expect(v512.status, v512.text).toBe(201);
    const v513 = await create({ title: 't', metadata: { a: 'x'.repeat(513) } });
    expectError(v513, 400, 'invalid_request_error', 'parameter_invalid');
    expect(v513.json.error.param).toMatch(/^metadata/);
    for (const bad of [1, true, null, { x: 1 }, ['a']]) {
      const r = await create({ title: 't', metadata: { a: bad } });
      expectError(r, 400, 'invalid_request_error', 'parameter_invalid');
      expect(r.json.error.param).toMatch(/^metadata/);
    }
  });

  it('malformed JSON → 400 invalid_json', async () => {
    for (const body of ['{', '{"title":', 'title=x', '{"title":"x",}', "{'title':'x'}"]) {
      expectError(await create(body), 400, 'invalid_request_error', 'invalid_json');
    }
  });

  it('JSON that is not an object → 400 invalid_json', async () => {
    for (const body of ['[]', '[{"title":"x"}]', '"x"', '42', 'null', 'true']) {
      expectError(await create(body), 400, 'invalid_request_error', 'invalid_json');
    }
  });

  it('an empty body is an empty object (→ title required)', async () => {
    const r = await api(s.http, key, 'POST', '/v2/streams', '');
    expectError(r, 400, 'invalid_request_error', 'param_required', 'title');
  });

  it('body over 1 MiB with Content-Length → 413 body_too_large', async () => {
    const body = paddedBody(MiB + 1);
    const r = await rawRequest('POST', '/v2/streams', { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Content-Length': body.length }, [body]);
    expect(r.status, r.text).toBe(413);
    const j = JSON.parse(r.text);
    expect(j.error).toMatchObject({ type: 'invalid_request_error', code: 'body_too_large' });
    expect(j.error.requestId).toBe(r.headers['x-request-id']);
    expectNoStack(r.text);
  });

  it('body over 1 MiB sent chunked → 413 body_too_large', async () => {
    const body = paddedBody(MiB + 64 * 1024);
    const chunks: Buffer[] = [];
    for (let i = 0; i < body.length; i += 64 * 1024) chunks.push(body.subarray(i, i + 64 * 1024));
    const r = await rawRequest('POST', '/v2/streams', { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' }, chunks);
    expect(r.status, r.text).toBe(413);
    const j = JSON.parse(r.text);
    expect(j.error).toMatchObject({ type: 'invalid_request_error', code: 'body_too_large' });
    expect(j.error.requestId).toBe(r.headers['x-request-id']);
  });

  it('a body of exactly 1 MiB is read and validated (not 413), chunked or not', async () => {
    const body = paddedBody(MiB);
    const r = await rawRequest('POST', '/v2/streams', { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Content-Length': body.length }, [body]);
    expect(r.status, r.text).toBe(400);
    expect(JSON.parse(r.text).error).toMatchObject({ code: 'parameter_unknown', param: 'pad' });
    const chunks: Buffer[] = [];
    for (let i = 0; i < body.length; i += 100_000) chunks.push(body.subarray(i, i + 100_000));
    const c = await rawRequest('POST', '/v2/streams', { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' }, chunks);
    expect(c.status, c.text).toBe(400);
    expect(JSON.parse(c.text).error).toMatchObject({ code: 'parameter_unknown', param: 'pad' });
  });

  it('the server keeps serving after oversized, malformed and odd requests', async () => {
    const r = await api(s.http, key, 'GET', '/v2/streams/%E0%A4%A');
    expect(r.status).toBe(404);
    expect(r.json.error.requestId).toBe(r.headers.get('x-request-id'));
    const ok = await api(s.http, key, 'GET', '/v2/streams?limit=1');
    expect(ok.status).toBe(200);
  });
});

describe('GET /v2/streams/{id}', () => {
  it('returns the stream with its key', async () => {
    const c = await create({ title: 'get me', metadata: { a: 'b' } });
    const r = await api(s.http, key, 'GET', `/v2/streams/${c.json.id}`);
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual(c.json);
  });

  it('404 not_found_error for an unknown id', async () => {
    const r = await api(s.http, key, 'GET', '/v2/streams/stm_doesnotexist');
    expectError(r, 404, 'not_found_error', 'resource_missing');
    expect(r.json.error.message).toContain('stm_doesnotexist');
  });

  it("404 for another account's stream, on every verb", async () => {
    const other = await s.server.accounts.create({ name: 'Other', plan: 'paid', region: 'eu-west-1' });
    const theirs = await create({ title: 'theirs' }, other.secretKey);
    expect(theirs.status).toBe(201);
    const id = theirs.json.id;
    expectError(await api(s.http, key, 'GET', `/v2/streams/${id}`), 404, 'not_found_error', 'resource_missing');
    expectError(await api(s.http, key, 'PATCH', `/v2/streams/${id}`, { title: 'mine' }), 404, 'not_found_error', 'resource_missing');
    expectError(await api(s.http, key, 'DELETE', `/v2/streams/${id}`), 404, 'not_found_error', 'resource_missing');
    expectError(await api(s.http, key, 'POST', `/v2/streams/${id}/reset_stream_key`), 404, 'not_found_error', 'resource_missing');
    // Untouched for its owner.
    const g = await api(s.http, other.secretKey, 'GET', `/v2/streams/${id}`);
    expect(g.status).toBe(200);
    expect(g.json.title).toBe('theirs');
    expect(g.json.streamKey).toBe(theirs.json.streamKey);
    // And not in our list, nor usable as our cursor.
    const list = await api(s.http, key, 'GET', '/v2/streams?limit=100');
    expect(list.json.data.map((x: { id: string }) => x.id)).not.toContain(id);
    expectError(await api(s.http, key, 'GET', `/v2/streams?after=${id}`), 400, 'invalid_request_error', 'parameter_invalid', 'after');
  });
});

describe('PATCH /v2/streams/{id}', () => {
  it('updates title, language titles (null removes), quality and reconnectWindow', async () => {
    const c = await create({ title: 'before', title_en: 'Before', title_fr: 'Avant' });
    const id = c.json.id;
    const r = await api(s.http, key, 'PATCH', `/v2/streams/${id}`, { title: 'after', title_en: null, title_de: 'Nachher', quality: 'high', reconnectWindow: 300 });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ id, title: 'after', title_en: null, title_de: 'Nachher', title_fr: 'Avant', title_ru: null, quality: 'high', reconnectWindow: 300 });
    expect(r.json.streamKey).toBe(c.json.streamKey);
    expect(r.json.codec).toBe('aac');
    expect(r.json.createdAt).toBe(c.json.createdAt);
    const g = await api(s.http, key, 'GET', `/v2/streams/${id}`);
    expect(g.json).toEqual(r.json);
    const zero = await api(s.http, key, 'PATCH', `/v2/streams/${id}`, { reconnectWindow: 0 });
    expect(zero.json.reconnectWindow).toBe(0);
    expectError(await api(s.http, key, 'PATCH', `/v2/streams/${id}`, { reconnectWindow: 301 }), 400, 'invalid_request_error', 'parameter_invalid', 'reconnectWindow');
    expectError(await api(s.http, key, 'PATCH', `/v2/streams/${id}`, { title: 'x'.repeat(201) }), 400, 'invalid_request_error', 'parameter_invalid', 'title');
    expectError(await api(s.http, key, 'PATCH', `/v2/streams/${id}`, { title: null }), 400, 'invalid_request_error', 'parameter_invalid', 'title');
    const unchanged = await api(s.http, key, 'PATCH', `/v2/streams/${id}`, {});
    expect(unchanged.status).toBe(200);
    expect(unchanged.json.title).toBe('after');
  });

  it('merges metadata: null removes, others set; 16 keys after the merge', async () => {
    const m = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, `v${i}`]));
    const c = await create({ title: 'meta', metadata: m });
    const id = c.json.id;
    const r = await api(s.http, key, 'PATCH', `/v2/streams/${id}`, { metadata: { k0: null, k1: 'changed', new1: 'n', absent: null } });
    expect(r.status, r.text).toBe(200);
    const want: Record<string, string> = { ...m, k1: 'changed', new1: 'n' };
    delete want.k0;
    expect(r.json.metadata).toEqual(want);
    expect(Object.keys(r.json.metadata)).toHaveLength(15);
    const r16 = await api(s.http, key, 'PATCH', `/v2/streams/${id}`, { metadata: { new2: 'x' } });
    expect(r16.status, r16.text).toBe(200);
    expect(Object.keys(r16.json.metadata)).toHaveLength(16);
    const r17 = await api(s.http, key, 'PATCH', `/v2/streams/${id}`, { metadata: { new3: 'x' } });
    expectError(r17, 400, 'invalid_request_error', 'parameter_invalid', 'metadata');
    // A removal and an addition in one request stays at 16.
    const swap = await api(s.http, key, 'PATCH', `/v2/streams/${id}`, { metadata: { new2: null, new3: 'x' } });
    expect(swap.status, swap.text).toBe(200);
    expect(Object.keys(swap.json.metadata)).toHaveLength(16);
    expect(swap.json.metadata.new3).toBe('x');
    expect(swap.json.metadata.new2).toBeUndefined();
    // The failed 17-key PATCH changed nothing.
    const g = await api(s.http, key, 'GET', `/v2/streams/${id}`);
    expect(g.json.metadata).toEqual(swap.json.metadata);
    const long = await api(s.http, key, 'PATCH', `/v2/streams/${id}`, { metadata: { k2: 'x'.repeat(513) } });
    expectError(long, 400, 'invalid_request_error', 'parameter_invalid');
    expect(long.json.error.param).toMatch(/^metadata/);
    const num = await api(s.http, key, 'PATCH', `/v2/streams/${id}`, { metadata: { k2: 5 } });
    expectError(num, 400, 'invalid_request_error', 'parameter_invalid');
  });

  it('codec, region and read-only fields are not patchable', async () => {
    const c = await create({ title: 'fixed' });
    const id = c.json.id;
    for (const [param, value] of [
      ['codec', 'opus'],
      ['region', 'ap-southeast-1'],
      ['status', 'live'],
      ['streamKey', 'sk_euw1_x'],
      ['id', 'stm_x'],
      ['listenerCount', 5],
    ] as const) {
      const r = await api(s.http, key, 'PATCH', `/v2/streams/${id}`, { [param]: value });
      expectError(r, 400, 'invalid_request_error', 'parameter_unknown', param);
    }
    const g = await api(s.http, key, 'GET', `/v2/streams/${id}`);
    expect(g.json).toEqual(c.json);
  });

  it('PATCH with malformed JSON → 400 invalid_json; unknown id → 404', async () => {
    const c = await create({ title: 'x' });
    expectError(await api(s.http, key, 'PATCH', `/v2/streams/${c.json.id}`, '{nope'), 400, 'invalid_request_error', 'invalid_json');
    expectError(await api(s.http, key, 'PATCH', '/v2/streams/stm_nope', { title: 'x' }), 404, 'not_found_error', 'resource_missing');
  });
});

describe('DELETE and reset_stream_key', () => {
  it('DELETE → 200 {id, object, deleted}; then GET → 404, DELETE again → 404', async () => {
    const c = await create({ title: 'bye' });
    const id = c.json.id;
    const d = await api(s.http, key, 'DELETE', `/v2/streams/${id}`);
    expect(d.status, d.text).toBe(200);
    expect(d.json).toEqual({ id, object: 'stream', deleted: true });
    expect(d.headers.get('x-request-id')).toMatch(/^req_/);
    expectError(await api(s.http, key, 'GET', `/v2/streams/${id}`), 404, 'not_found_error', 'resource_missing');
    expectError(await api(s.http, key, 'DELETE', `/v2/streams/${id}`), 404, 'not_found_error', 'resource_missing');
    const list = await api(s.http, key, 'GET', '/v2/streams?limit=100');
    expect(list.json.data.map((x: { id: string }) => x.id)).not.toContain(id);
  });

  it('reset_stream_key gives a new key of the same region; GET shows the new one', async () => {
    for (const region of ['eu-west-1', 'ap-southeast-1']) {
      const c = await create({ title: 'reset', region });
      const r = await api(s.http, key, 'POST', `/v2/streams/${c.json.id}/reset_stream_key`);
      expect(r.status, r.text).toBe(200);
      expect(r.json.object).toBe('stream');
      expect(r.json.id).toBe(c.json.id);
      expect(r.json.streamKey).toMatch(region === 'eu-west-1' ? /^sk_euw1_[A-Za-z0-9]{32,}$/ : /^sk_apse1_[A-Za-z0-9]{32,}$/);
      expect(r.json.streamKey).not.toBe(c.json.streamKey);
      const g = await api(s.http, key, 'GET', `/v2/streams/${c.json.id}`);
      expect(g.json.streamKey).toBe(r.json.streamKey);
    }
  });

  it('reset_stream_key accepts an empty JSON body but refuses unexpected fields? (body ignored)', async () => {
    const c = await create({ title: 'reset2' });
    const r = await api(s.http, key, 'POST', `/v2/streams/${c.json.id}/reset_stream_key`, {});
    expect(r.status, r.text).toBe(200);
  });
});

describe('lists', () => {
  let k: string;
  let ids: string[] = []; // newest first

  beforeAll(async () => {
    const acct = await s.server.accounts.create({ name: 'Lists', plan: 'paid', region: 'eu-west-1' });
    k = acct.secretKey;
    const created: string[] = [];
    for (let i = 0; i < 25; i++) {
      const r = await create({ title: `s${i}` }, k);
      expect(r.status).toBe(201);
      created.push(r.json.id);
    }
    ids = created.reverse();
  });

  const list = (q: string, kk = k) => api(s.http, kk, 'GET', `/v2/streams${q}`);
  const idsOf = (r: { json: { data: { id: string }[] } }) => r.json.data.map((x) => x.id);

  it('default page: newest first, 20 items, hasMore, nextCursor = last id', async () => {
    const r = await list('');
    expect(r.status, r.text).toBe(200);
    expect(r.json.object).toBe('list');
    expect(r.json.data).toHaveLength(20);
    expect(idsOf(r)).toEqual(ids.slice(0, 20));
    expect(r.json.hasMore).toBe(true);
    expect(r.json.nextCursor).toBe(ids[19]);
    for (const item of r.json.data) {
      expect(item.object).toBe('stream');
      expect(item.streamKey).toMatch(/^sk_euw1_/);
    }
  });

  it('limit 1..100; anything else → 400 param limit', async () => {
    expect((await list('?limit=1')).json.data).toHaveLength(1);
    const all = await list('?limit=100');
    expect(all.json.data).toHaveLength(25);
    expect(all.json.hasMore).toBe(false);
    expect(all.json.nextCursor).toBeNull();
    const exact = await list('?limit=25');
    expect(exact.json.hasMore).toBe(false);
    expect(exact.json.nextCursor).toBeNull();
    for (const bad of ['0', '101', '-1', '1.5', 'abc', '', '1e2', ' 5']) {
      expectError(await list(`?limit=${encodeURIComponent(bad)}`), 400, 'invalid_request_error', 'parameter_invalid', 'limit');
    }
  });

  it('after=X gives older items, before=X newer items, still newest first', async () => {
    const a = await list(`?after=${ids[5]}&limit=3`);
    expect(idsOf(a)).toEqual(ids.slice(6, 9));
    expect(a.json.hasMore).toBe(true);
    expect(a.json.nextCursor).toBe(ids[8]);
    const b = await list(`?before=${ids[10]}&limit=3`);
    expect(idsOf(b)).toEqual(ids.slice(7, 10));
    expect(b.json.hasMore).toBe(true);
    expect(b.json.nextCursor).toBe(ids[7]);
    // Near the ends.
    const b2 = await list(`?before=${ids[2]}&limit=3`);
    expect(idsOf(b2)).toEqual(ids.slice(0, 2));
    expect(b2.json.hasMore).toBe(false);
    expect(b2.json.nextCursor).toBeNull();
    const newest = await list(`?before=${ids[0]}`);
    expect(newest.json.data).toEqual([]);
    expect(newest.json.hasMore).toBe(false);
    expect(newest.json.nextCursor).toBeNull();
    const oldest = await list(`?after=${ids[24]}`);
    expect(oldest.json.data).toEqual([]);
    expect(oldest.json.hasMore).toBe(false);
    const exact = await list(`?before=${ids[3]}&limit=3`);
    expect(idsOf(exact)).toEqual(ids.slice(0, 3));
    expect(exact.json.hasMore).toBe(false);
    expect(exact.json.nextCursor).toBeNull();
  });

  it.each([1, 2, 3, 7, 20, 24, 25, 100])('walks every page forward with after and backward with before (limit %i)', async (limit) => {
    // Forward.
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    for (;;) {
      const r = await list(`?limit=${limit}${cursor ? `&after=${cursor}` : ''}`);
      expect(r.status, r.text).toBe(200);
      expect(r.json.data.length).toBeLessThanOrEqual(limit);
      seen.push(...idsOf(r));
      pages++;
      if (!r.json.hasMore) {
        expect(r.json.nextCursor).toBeNull();
        break;
      }
      expect(r.json.nextCursor).toBe(r.json.data[r.json.data.length - 1].id);
      cursor = r.json.nextCursor;
      expect(pages).toBeLessThan(100);
    }
    expect(seen).toEqual(ids);
    // Backward from the oldest item.
    const back: string[][] = [];
    cursor = ids[ids.length - 1]!;
    for (;;) {
      const r = await list(`?limit=${limit}&before=${cursor}`);
      expect(r.status, r.text).toBe(200);
      back.push(idsOf(r));
      if (!r.json.hasMore) {
        expect(r.json.nextCursor).toBeNull();
        break;
      }
      expect(r.json.nextCursor).toBe(r.json.data[0].id);
      cursor = r.json.nextCursor;
    }
    const backward = back.reverse().flat();
    expect(backward).toEqual(ids.slice(0, ids.length - 1));
  });

  it('after with before → 400; unknown or empty cursor → 400 naming it', async () => {
    const both = await list(`?after=${ids[3]}&before=${ids[1]}`);
    expectError(both, 400, 'invalid_request_error', 'parameter_invalid');
    expect(['after', 'before']).toContain(both.json.error.param);
    expectError(await list('?after=stm_unknown'), 400, 'invalid_request_error', 'parameter_invalid', 'after');
    expectError(await list('?before=stm_unknown'), 400, 'invalid_request_error', 'parameter_invalid', 'before');
    expectError(await list('?after='), 400, 'invalid_request_error', 'parameter_invalid', 'after');
    expectError(await list('?before='), 400, 'invalid_request_error', 'parameter_invalid', 'before');
    // A deleted stream is no longer a cursor.
    const tmp = await create({ title: 'gone' }, k);
    await api(s.http, k, 'DELETE', `/v2/streams/${tmp.json.id}`);
    expectError(await list(`?after=${tmp.json.id}`), 400, 'invalid_request_error', 'parameter_invalid', 'after');
  });

  it('?status= filters; bad status → 400 param status; status + limit=1 gives a correct cursor chain', async () => {
    const acct = await s.server.accounts.create({ name: 'Status', plan: 'paid', region: 'eu-west-1' });
    const kk = acct.secretKey;
    const created: string[] = [];
    for (let i = 0; i < 7; i++) created.push((await create({ title: `st${i}` }, kk)).json.id);
    const newestFirst = [...created].reverse();
    const nonIdle = new Set([newestFirst[0]!, newestFirst[2]!, newestFirst[6]!]);
    const setStatus = s.server.db.prepare('UPDATE streams SET status = ?, started_at = ? WHERE id = ?');
    for (const id of nonIdle) setStatus.run('live', Date.now(), id);
    const wantIdle = newestFirst.filter((id) => !nonIdle.has(id));
    const wantLive = newestFirst.filter((id) => nonIdle.has(id));
    // A stream has no terminal state (docs/streams.md): `ended` is not a status to filter by.
    expectError(await list('?status=ended', kk), 400, 'invalid_request_error', 'parameter_invalid', 'status');

    for (const [status, want] of [
      ['idle', wantIdle],
      ['live', wantLive],
    ] as const) {
      const all = await list(`?status=${status}`, kk);
      expect(idsOf(all)).toEqual(want);
      for (const item of all.json.data) expect(item.status).toBe(status);
      // Forward, one at a time.
      const seen: string[] = [];
      let cursor: string | null = null;
      for (let i = 0; i < 20; i++) {
        const r = await list(`?status=${status}&limit=1${cursor ? `&after=${cursor}` : ''}`, kk);
        expect(r.status, r.text).toBe(200);
        seen.push(...idsOf(r));
        if (!r.json.hasMore) {
          expect(r.json.nextCursor).toBeNull();
          break;
        }
        cursor = r.json.nextCursor;
      }
      expect(seen).toEqual(want);
      // Backward, one at a time from the oldest match.
      const back: string[] = [];
      cursor = want[want.length - 1]!;
      for (let i = 0; i < 20; i++) {
        const r = await list(`?status=${status}&limit=1&before=${cursor}`, kk);
        expect(r.status, r.text).toBe(200);
        back.unshift(...idsOf(r));
        if (!r.json.hasMore) {
          expect(r.json.nextCursor).toBeNull();
          break;
        }
        cursor = r.json.nextCursor;
      }
      expect(back).toEqual(want.slice(0, -1));
    }
    // The status of a live stream is shown as live, with startedAt.
    const live = await api(s.http, kk, 'GET', `/v2/streams/${newestFirst[0]}`);
    expect(live.json.status).toBe('live');
    expect(live.json.startedAt).toMatch(/Z$/);
    expectError(await list('?status=bogus', kk), 400, 'invalid_request_error', 'parameter_invalid', 'status');
  });
});

describe('authentication and scopes', () => {
  it('no Authorization header → 401 missing_token with WWW-Authenticate', async () => {
    for (const [m, p] of [
      ['GET', '/v2/streams'],
      ['POST', '/v2/streams'],
      ['GET', '/v2/streams/stm_x'],
      ['PATCH', '/v2/streams/stm_x'],
      ['DELETE', '/v2/streams/stm_x'],
      ['POST', '/v2/streams/stm_x/reset_stream_key'],
    ] as const) {
      const r = await api(s.http, null, m, p, m === 'POST' || m === 'PATCH' ? { title: 'x' } : undefined);
      expectError(r, 401, 'authentication_error', 'missing_token');
      expect(r.headers.get('www-authenticate')).toMatch(/^Bearer/);
    }
  });

  it('authentication comes before body parsing', async () => {
    expectError(await api(s.http, null, 'POST', '/v2/streams', '{bad json'), 401, 'authentication_error', 'missing_token');
    expectError(await api(s.http, s.publishableKey, 'POST', '/v2/streams', '{bad json'), 403, 'permission_error', 'insufficient_scope');
    const body = paddedBody(MiB + 1);
    const r = await rawRequest('POST', '/v2/streams', { 'Content-Type': 'application/json', 'Content-Length': body.length }, [body]);
    expect(r.status, r.text).toBe(401);
  });

  it('garbage tokens → 401 invalid_token', async () => {
    for (const header of ['Bearer garbage', 'Bearer svc_sk_notarealkey000000000000000000000', 'Bearer svc_pk_nope', 'Basic dXNlcjpwYXNz', 'Bearer', `Token ${key}`]) {
      const r = await api(s.http, null, 'GET', '/v2/streams', undefined, { Authorization: header });
      expectError(r, 401, 'authentication_error', 'invalid_token');
      expect(r.headers.get('www-authenticate')).toMatch(/^Bearer/);
      expect(r.headers.get('www-authenticate')).toContain('invalid_token');
    }
    // Case-insensitive scheme is fine.
    const ok = await api(s.http, null, 'GET', '/v2/streams', undefined, { Authorization: `bearer ${key}` });
    expect(ok.status).toBe(200);
  });

  it("a legacy 'svc_pub_' key → 401 invalid_token saying it was retired at the end of 2025", async () => {
    const r = await api(s.http, 'svc_pub_abcdefghijklmnopqrstuvwxyz012345', 'GET', '/v2/streams');
    expectError(r, 401, 'authentication_error', 'invalid_token');
    expect(r.json.error.message).toContain('svc_pub_');
    expect(r.json.error.message).toMatch(/retired/);
    expect(r.json.error.message).toMatch(/2025/);
    expect(r.headers.get('www-authenticate')).toMatch(/^Bearer/);
  });

  it('a rolled key → 401 key_revoked; the new key works', async () => {
    const acct = await s.server.accounts.create({ name: 'Roll', plan: 'paid', region: 'eu-west-1' });
    const c = await create({ title: 'roll' }, acct.secretKey);
    expect(c.status).toBe(201);
    const rolled = s.server.accounts.rollKey(acct.secretKey);
    expect(rolled.key).toMatch(/^svc_sk_/);
    const old = await api(s.http, acct.secretKey, 'GET', '/v2/streams');
    expectError(old, 401, 'authentication_error', 'key_revoked');
    expect(old.headers.get('www-authenticate')).toMatch(/^Bearer/);
    const fresh = await api(s.http, rolled.key, 'GET', `/v2/streams/${c.json.id}`);
    expect(fresh.status, fresh.text).toBe(200);
    expect(fresh.json.streamKey).toBe(c.json.streamKey);
    // Revoked publishable keys too.
    s.server.accounts.revokeKey(acct.publishableKey);
    expectError(await api(s.http, acct.publishableKey, 'GET', '/v2/streams'), 401, 'authentication_error', 'key_revoked');
  });

  it('publishable key: reads work without streamKey; writes → 403 insufficient_scope', async () => {
    const pk = s.publishableKey;
    const c = await create({ title: 'public' });
    const id = c.json.id;
    const l = await api(s.http, pk, 'GET', '/v2/streams?limit=100');
    expect(l.status, l.text).toBe(200);
    expect(l.json.data.length).toBeGreaterThan(0);
    for (const item of l.json.data) expect(item).not.toHaveProperty('streamKey');
    expect(l.text).not.toContain('sk_euw1_');
    expect(l.text).not.toContain('sk_apse1_');
    const g = await api(s.http, pk, 'GET', `/v2/streams/${id}`);
    expect(g.status, g.text).toBe(200);
    expect(g.json).not.toHaveProperty('streamKey');
    const { streamKey: _k, ...rest } = c.json;
    expect(g.json).toEqual(rest);
    const paged = await api(s.http, pk, 'GET', `/v2/streams?limit=1&after=${id}`);
    expect(paged.status).toBe(200);
    for (const [m, p, body] of [
      ['POST', '/v2/streams', { title: 'nope' }],
      ['PATCH', `/v2/streams/${id}`, { title: 'nope' }],
      ['DELETE', `/v2/streams/${id}`, undefined],
      ['POST', `/v2/streams/${id}/reset_stream_key`, undefined],
    ] as const) {
      const r = await api(s.http, pk, m, p, body);
      expectError(r, 403, 'permission_error', 'insufficient_scope');
      expect(r.headers.get('www-authenticate')).toMatch(/^Bearer error="insufficient_scope"/);
    }
    const after = await api(s.http, key, 'GET', `/v2/streams/${id}`);
    expect(after.json).toEqual(c.json);
  });
});

describe('internal errors', () => {
  it('an unexpected failure → 500 api_error with the request id and no details', async () => {
    const acct = await s.server.accounts.create({ name: 'Broken', plan: 'paid', region: 'eu-west-1' });
    const c = await create({ title: 'broken' }, acct.secretKey);
    s.server.db.prepare("UPDATE streams SET titles = 'not json' WHERE id = ?").run(c.json.id);
    const r = await api(s.http, acct.secretKey, 'GET', `/v2/streams/${c.json.id}`);
    expectError(r, 500, 'api_error', 'internal_error');
    expect(r.text).not.toContain('JSON');
    const l = await api(s.http, acct.secretKey, 'GET', '/v2/streams');
    expectError(l, 500, 'api_error', 'internal_error');
    // Still serving.
    expect((await api(s.http, key, 'GET', '/v2/streams?limit=1')).status).toBe(200);
  });
});

describe('routing', () => {
  it('unknown route → 404 JSON envelope with request id', async () => {
    for (const [m, p] of [
      ['GET', '/v2/nothing'],
      ['GET', '/'],
      ['POST', '/v2/streamz'],
      ['GET', '/v2/streams/stm_x/nothing'],
      ['DELETE', '/v3/streams'],
    ] as const) {
      const r = await api(s.http, key, m, p, m === 'POST' ? { title: 'x' } : undefined);
      expectError(r, 404, 'not_found_error', 'route_not_found');
    }
  });

  it('wrong method on a known route → 405 envelope with Allow', async () => {
    const cases = [
      ['PUT', '/v2/streams', 'GET, HEAD, POST'],
      ['DELETE', '/v2/streams', 'GET, HEAD, POST'],
      ['PUT', '/v2/streams/stm_x', 'GET, HEAD, PATCH, DELETE'],
      ['POST', '/v2/streams/stm_x', 'GET, HEAD, PATCH, DELETE'],
      ['GET', '/v2/streams/stm_x/reset_stream_key', 'POST'],
    ] as const;
    for (const [m, p, allow] of cases) {
      const r = await api(s.http, key, m, p, m === 'PUT' || m === 'POST' ? { title: 'x' } : undefined);
      expectError(r, 405, 'invalid_request_error', 'method_not_allowed');
      expect(r.headers.get('allow')).toBe(allow);
    }
  });

  it('HEAD and GET on raw (HLS) routes answer without taking the server down', async () => {
    const head = await fetch(`${s.http}/hls/stm_nothing/index.m3u8`, { method: 'HEAD' });
    expect(head.status).toBe(404);
    expect(head.headers.get('x-request-id')).toMatch(/^req_/);
    const get = await fetch(`${s.http}/hls/stm_nothing/index.m3u8`);
    expect(get.status).toBe(404);
    const body = await get.text();
    expect(head.headers.get('content-length')).toBe(String(Buffer.byteLength(body)));
    const seg = await fetch(`${s.http}/hls/stm_nothing/128k/1.ts`, { method: 'HEAD' });
    expect(seg.status).toBe(404);
    const post = await api(s.http, key, 'POST', '/hls/stm_nothing/index.m3u8');
    expectError(post, 405, 'invalid_request_error', 'method_not_allowed');
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    expect((await api(s.http, key, 'GET', '/v2/streams?limit=1')).status).toBe(200);
  });

  it('a connection keeps working across errors (keep-alive)', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const url = new URL(s.http);
    const get = (path: string, headers: Record<string, string> = {}) =>
      new Promise<number>((resolve, reject) => {
        http
          .get({ host: url.hostname, port: url.port, path, agent, headers }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode!));
          })
          .on('error', reject);
      });
    expect(await get('/v2/streams')).toBe(401);
    expect(await get('/v2/nothing')).toBe(404);
    expect(await get('/v2/streams', { Authorization: `Bearer ${key}` })).toBe(200);
    agent.destroy();
  });
});
