/**
 * `GET /v2/openapi.json` (docs/behaviour.md §7): a valid OpenAPI 3.1 document (checked with
 * @seriousme/openapi-schema-validator) generated from the routes really registered and the valibot
 * schemas that validate requests; every /v2 route in it with its scope and errors; the written scope
 * map (docs/api-platform.md) matching every registered route; and the Streams and Account answers
 * validated against the document with ajv 2020-12.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { api, repoRoot, startInProcess, type TestServer } from '../../helpers/server.js';
import type { OpenApiChecker } from '../../helpers/platform.js';
import { openApiPath } from '../../../src/control/api/openapi/document.js';

/**
 * Routes registered by issues still in progress that have no OpenAPI description yet. A ratchet:
 * a new undocumented route fails the test, and so does a route here that became documented
 * (remove it from the list).
 */
const PENDING_DOCS = new Set<string>([]);

let s: TestServer;
let doc: any;
let checker: OpenApiChecker;

beforeAll(async () => {
  s = await startInProcess();
  const r = await api(s.http, null, 'GET', '/v2/openapi.json');
  expect(r.status).toBe(200);
  doc = r.json;
  // startInProcess already checks every answer against the document (and fails the test on a
  // problem); this suite also asserts what was checked.
  checker = s.checker;
});
afterAll(async () => {
  await s?.close();
});

const apiRoutes = () => s.server.http.routes().filter((r) => r.kind === 'api' && r.pattern.startsWith('/v2/'));

describe('the document', () => {
  it('is valid OpenAPI 3.1', async () => {
    const res = await new Validator().validate(doc);
    expect(res.errors ?? []).toEqual([]);
    expect(res.valid).toBe(true);
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers).toEqual([{ url: s.server.urls.baseUrl }]);
    expect(doc.components.securitySchemes.OAuth2.flows.authorizationCode.tokenUrl).toBe(`${s.server.urls.authUrl}/oauth/token`);
  });

  it('lists every registered /v2 route with its scope, and describes all but the pending ones', () => {
    for (const r of apiRoutes()) {
      const op = doc.paths[openApiPath(r.pattern)]?.[r.method.toLowerCase()];
      expect(op, `${r.method} ${r.pattern}`).toBeDefined();
      if (r.scope) expect(op['x-scope']).toBe(r.scope);
    }
    const undocumented: string[] = doc['x-undocumented-routes'] ?? [];
    expect(undocumented.filter((x) => !PENDING_DOCS.has(x)), 'routes without an OpenAPI description').toEqual([]);
    expect([...PENDING_DOCS].filter((x) => !undocumented.includes(x)), 'documented now: remove from PENDING_DOCS').toEqual([]);
  });

  it('documents the errors of every operation with the error envelope', () => {
    for (const [p, item] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        const statuses = Object.keys(op.responses);
        expect(statuses, `${method} ${p}`).toContain('500');
        if (op.security.length) for (const st of ['401', '403', '429']) expect(statuses, `${method} ${p}`).toContain(st);
        if (p.includes('{')) expect(statuses, `${method} ${p}`).toContain('404');
        if (method === 'post') expect(statuses).toContain('409');
        for (const st of statuses.filter((x) => Number(x) >= 400)) expect(op.responses[st].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
        if (op['x-scope'] && op['x-scope'] !== 'listener_tokens:write') expect(op.security).toContainEqual({ OAuth2: [op['x-scope']] });
      }
    }
  });

  it('request bodies are the validation schemas (POST /streams: title ≤ 200, no unknown fields)', () => {
    const body = doc.paths['/streams'].post.requestBody;
    expect(body.required).toBe(true);
    const schema = body.content['application/json'].schema;
    expect(schema.required).toEqual(['title']);
    expect(schema.additionalProperties).toBe(false);
    expect(schema.properties.title).toMatchObject({ type: 'string', maxLength: 200 });
    expect(schema.properties.quality.enum).toEqual(['low', 'medium', 'high', 'ultra_low']);
    expect(schema.properties.metadata.additionalProperties).toMatchObject({ type: 'string', maxLength: 512 });
  });

  it('the audio upload: a binary body of audio types, and every error it answers', () => {
    const op = doc.paths['/podcasts/{id}/episodes/{eid}/audio'].put;
    expect(op['x-scope']).toBe('podcasts:write');
    expect(op.requestBody.required).toBe(true);
    const types = Object.keys(op.requestBody.content);
    expect(types).toContain('audio/mpeg');
    expect(types).toContain('audio/wav');
    expect(types).not.toContain('application/json');
    expect(Object.keys(op.responses).sort()).toEqual(['200', '400', '401', '403', '404', '413', '415', '429', '500', '507']);
    expect(op.responses['507'].description).toContain('insufficient_storage');
    expect(op.responses['415'].description).toContain('unsupported_media_type');
    expect(op.responses['400'].description).toContain('body_missing');
    expect(op.responses['400'].description).not.toContain('invalid_json');
    expect(op.responses['200'].content['application/json'].schema.properties.object).toMatchObject({ const: 'episode' });
  });

  it('podcasts and episodes: bodies are the validation schemas, answers the objects, 409s listed', () => {
    expect(doc.paths['/podcasts'].post.requestBody.content['application/json'].schema).toMatchObject({ required: ['title'], additionalProperties: false });
    expect(doc.paths['/podcasts/{id}/publish'].post.requestBody.content['application/json'].schema.required).toEqual(['episodeId']);
    expect(doc.paths['/podcasts/{id}'].patch.responses['409'].description).toContain('state_conflict');
    expect(doc.paths['/podcasts/{id}/publish'].post.responses['400'].description).toContain('episode_audio_missing');
    expect(doc.paths['/podcasts/{id}/episodes/{eid}'].delete.responses['200'].content['application/json'].schema.properties.deleted).toMatchObject({ const: true });
  });
});

describe('routes registered with http.stream()', () => {
  it('appear in routes() and answer 405 with Allow for other methods', async () => {
    const routes = s.server.http.routes();
    expect(routes).toContainEqual(expect.objectContaining({ method: 'PUT', pattern: '/v2/podcasts/:id/episodes/:eid/audio', kind: 'api', scope: 'podcasts:write' }));
    expect(routes).toContainEqual(expect.objectContaining({ method: 'GET', pattern: '/feed/:file', kind: 'raw' }));
    expect(routes).toContainEqual(expect.objectContaining({ method: 'HEAD', pattern: '/media/:podcast/:file', kind: 'raw' }));
    const get = await api(s.http, s.secretKey, 'GET', '/v2/podcasts/pod_x/episodes/ep_x/audio');
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('PUT');
    const post = await api(s.http, null, 'POST', '/feed/pod_x.xml', {});
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    const del = await api(s.http, null, 'DELETE', '/media/pod_x/ep_x.mp3');
    expect(del.status).toBe(405);
    expect(del.headers.get('allow')).toBe('GET, HEAD');
  });
});

describe('the scope map (docs/api-platform.md)', () => {
  it('has a row with the same scope for every registered /v2 route', () => {
    const md = readFileSync(path.join(repoRoot, 'docs', 'api-platform.md'), 'utf8');
    const rows = new Map<string, string>();
    for (const m of md.matchAll(/^\| (GET|POST|PATCH|PUT|DELETE) \| (\/v2\/\S+) \| ([^|]+) \|$/gm)) rows.set(`${m[1]} ${m[2]}`, m[3]!.trim());
    expect(rows.size).toBeGreaterThan(10);
    const problems: string[] = [];
    for (const r of apiRoutes()) {
      const row = rows.get(`${r.method} ${r.pattern}`);
      const want = r.scope ?? '(none';
      if (row === undefined) problems.push(`missing: ${r.method} ${r.pattern} (${want})`);
      else if (!(r.scope ? row === r.scope : row.startsWith('(none'))) problems.push(`${r.method} ${r.pattern}: table says ${row}, route requires ${want}`);
    }
    expect(problems).toEqual([]);
  });
});

describe('answers conform to the document (ajv 2020-12)', () => {
  it('streams: every route, success and errors', async () => {
    const k = s.secretKey;
    const created = await api(s.http, k, 'POST', '/v2/streams', { title: 'Doc', metadata: { a: 'b' }, playback: 'token' });
    expect(created.status).toBe(201);
    const id = created.json.id;
    expect((await api(s.http, k, 'POST', '/v2/streams', { title: 'old', quality: 'ultra_low' })).status).toBe(201);
    expect((await api(s.http, k, 'GET', '/v2/streams?limit=2')).status).toBe(200);
    expect((await api(s.http, s.publishableKey, 'GET', '/v2/streams?status=idle')).status).toBe(200);
    expect((await api(s.http, k, 'GET', `/v2/streams/${id}`)).status).toBe(200);
    expect((await api(s.http, s.publishableKey, 'GET', `/v2/streams/${id}`)).status).toBe(200);
    expect((await api(s.http, k, 'PATCH', `/v2/streams/${id}`, { title: 'Doc 2', metadata: { a: null } })).status).toBe(200);
    expect((await api(s.http, k, 'POST', `/v2/streams/${id}/reset_stream_key`)).status).toBe(200);
    // Errors: 400 (missing, unknown, invalid JSON, bad query), 401, 403, 404, idempotency 400.
    expect((await api(s.http, k, 'POST', '/v2/streams', {})).status).toBe(400);
    expect((await api(s.http, k, 'POST', '/v2/streams', { title: 'x', nope: 1 })).status).toBe(400);
    expect((await api(s.http, k, 'POST', '/v2/streams', '{bad')).status).toBe(400);
    expect((await api(s.http, k, 'GET', '/v2/streams?limit=0')).status).toBe(400);
    expect((await api(s.http, null, 'GET', '/v2/streams')).status).toBe(401);
    expect((await api(s.http, 'svc_sk_nope', 'GET', `/v2/streams/${id}`)).status).toBe(401);
    expect((await api(s.http, s.publishableKey, 'DELETE', `/v2/streams/${id}`)).status).toBe(403);
    expect((await api(s.http, k, 'GET', '/v2/streams/stm_missing')).status).toBe(404);
    await api(s.http, k, 'POST', '/v2/streams', { title: 'i' }, { 'Idempotency-Key': 'doc-1' });
    expect((await api(s.http, k, 'POST', '/v2/streams', { title: 'i' }, { 'Idempotency-Key': 'doc-1' })).headers.get('idempotent-replayed')).toBe('true');
    expect((await api(s.http, k, 'POST', '/v2/streams', { title: 'j' }, { 'Idempotency-Key': 'doc-1' })).status).toBe(400);
    expect((await api(s.http, k, 'DELETE', `/v2/streams/${id}`)).status).toBe(200);
    expect(checker.problems).toEqual([]);
    for (const op of ['POST /streams 201', 'GET /streams 200', 'GET /streams/{id} 200', 'PATCH /streams/{id} 200', 'DELETE /streams/{id} 200', 'POST /streams/{id}/reset_stream_key 200', 'POST /streams 400', 'GET /streams 401', 'DELETE /streams/{id} 403', 'GET /streams/{id} 404']) {
      expect(checker.checked).toContain(op);
    }
  });

  it('account and openapi.json', async () => {
    expect((await api(s.http, s.secretKey, 'GET', '/v2/account')).status).toBe(200);
    expect((await api(s.http, s.publishableKey, 'GET', '/v2/account')).status).toBe(403);
    expect((await api(s.http, null, 'GET', '/v2/openapi.json')).status).toBe(200);
    expect(checker.problems).toEqual([]);
    expect(checker.checked).toContain('GET /account 200');
    expect(checker.checked).toContain('GET /account 403');
  });

  it('the checker catches a non-conforming answer', () => {
    expect(checker.check('GET', '/v2/streams/:id', 200, { id: 'stm_x', object: 'stream' }).length).toBeGreaterThan(0);
    expect(checker.check('GET', '/v2/streams/:id', 418, {})).toHaveLength(1);
  });
});
