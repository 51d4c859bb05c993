/**
 * `Idempotency-Key` on POST (docs/behaviour.md §7): replays answer the stored response with
 * `Idempotent-Replayed: true` for 24 h, the same key with another body → 400
 * `idempotency_key_reused`, a request still in flight → 409, per account, kept in SQLite
 * (encrypted), 5xx not kept. Injected clock for the 24 h expiry.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, tempDir } from '../../helpers/server.js';
import { OpenApiChecker } from '../../helpers/platform.js';
import { loadConfig } from '../../../src/base/config.js';
import { createLogger } from '../../../src/base/logger.js';
import { startServer, type RunningServer } from '../../../src/main.js';
import { ApiError } from '../../../src/base/errors/errors.js';
import { OAuthClients } from '../../../src/control/oauth/clients.js';
import { OAuthRepo } from '../../../src/base/db/oauth-repo.js';

let clock = Date.now();
const tmp = tempDir('skylark-idem-');
let srv: RunningServer;
let base: string;
let key: string;
let checker: OpenApiChecker;
let release: (() => void) | null = null;
let slowRuns = 0;

beforeAll(async () => {
  srv = await startServer(loadConfig({ SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: tmp.dir, SKYLARK_LOG_LEVEL: 'error' }), createLogger('error'), () => clock);
  base = `http://127.0.0.1:${srv.httpPort}`;
  key = (await srv.accounts.create({ name: 'Idem', plan: 'paid', region: 'eu-west-1' })).secretKey;
  // A test-only POST whose handler waits until released (a request "in flight"), or fails with 500 on demand.
  const { http, guard } = srv;
  http.api(
    'post',
    '/v2/test_slow',
    async (req) => {
      slowRuns++;
      if ((req.body as { fail?: boolean }).fail) throw new ApiError('internal_error', 'boom');
      await new Promise<void>((r) => (release = r));
      return { status: 201, body: { object: 'slow', run: slowRuns } };
    },
    guard.scope('streams:write'),
  );
  checker = new OpenApiChecker((await api(base, null, 'GET', '/v2/openapi.json')).json);
  checker.observe(srv);
});
afterAll(async () => {
  expect(checker.problems.filter((p) => !p.includes('test_slow'))).toEqual([]);
  await srv?.close();
  tmp.cleanup();
});

const post = (body: unknown, idem?: string, k = key, path = '/v2/streams') => api(base, k, 'POST', path, body, idem ? { 'Idempotency-Key': idem } : {});
const countStreams = async () => (await api(base, key, 'GET', '/v2/streams?limit=100')).json.data.length as number;

describe('Idempotency-Key', () => {
  it('a replay answers the stored response (same object, same status) with Idempotent-Replayed: true', async () => {
    const before = await countStreams();
    const first = await post({ title: 'Once', metadata: { a: '1' } }, 'k-create-1');
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await post({ title: 'Once', metadata: { a: '1' } }, 'k-create-1');
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.json).toEqual(first.json);
    expect(again.headers.get('x-request-id')).not.toBe(first.headers.get('x-request-id'));
    expect(again.headers.get('ratelimit')).toBeTruthy(); // a replay is still a request
    expect(await countStreams()).toBe(before + 1);
  });

  it('formatting and key order do not matter; another body, path or method → 400 idempotency_key_reused', async () => {
    const first = await post({ title: 'Fmt', quality: 'low' }, 'k-fmt');
    const reordered = await post('{ "quality" : "low",\n "title":"Fmt" }', 'k-fmt');
    expect(reordered.headers.get('idempotent-replayed')).toBe('true');
    expect(reordered.json.id).toBe(first.json.id);
    const other = await post({ title: 'Fmt', quality: 'high' }, 'k-fmt');
    expect(other.status).toBe(400);
    expect(other.json.error.type).toBe('invalid_request_error');
    expect(other.json.error.code).toBe('idempotency_key_reused');
    const otherPath = await post({}, 'k-fmt', key, `/v2/streams/${first.json.id}/reset_stream_key`);
    expect(otherPath.json.error.code).toBe('idempotency_key_reused');
  });

  it('keys are per account', async () => {
    const other = await srv.accounts.create({ name: 'Other', plan: 'paid', region: 'eu-west-1' });
    const a = await post({ title: 'A' }, 'k-shared');
    const b = await post({ title: 'B' }, 'k-shared', other.secretKey);
    expect(b.status).toBe(201);
    expect(b.headers.get('idempotent-replayed')).toBeNull();
    expect(b.json.id).not.toBe(a.json.id);
  });

  it('a validation 400 is not kept (a corrected retry with the key runs); other client errors are (Stripe-like)', async () => {
    const bad = await post({ title: '' }, 'k-bad');
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('parameter_invalid');
    const again = await post({ title: '' }, 'k-bad');
    expect(again.status).toBe(400);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(srv.db.prepare("SELECT count(*) AS n FROM idempotency_keys WHERE key = 'k-bad'").get()).toEqual({ n: 0 });
    const fixed = await post({ title: 'Fixed' }, 'k-bad-2');
    expect(fixed.status).toBe(201);
    const missing = await post({}, 'k-404', key, '/v2/streams/str_doesnotexist/reset_stream_key');
    expect(missing.status).toBe(404);
    const missingAgain = await post({}, 'k-404', key, '/v2/streams/str_doesnotexist/reset_stream_key');
    expect(missingAgain.status).toBe(404);
    expect(missingAgain.headers.get('idempotent-replayed')).toBe('true');
  });

  it('keys are scoped to the credential: an OAuth token repeating the owner\'s key and body never gets the owner\'s answer', async () => {
    const acct = (await api(base, key, 'GET', '/v2/account')).json.id as string;
    const repo = new OAuthRepo(srv.db);
    const client = new OAuthClients(repo).create({ name: 'Scheduler', redirectUris: ['https://app.example/cb'], public: false });
    const grantId = `grant_idem${Date.now()}`;
    repo.insertGrant({ id: grantId, client_id: client.clientId, account_id: acct, scope: 'streams:read streams:write', created_at: clock });
    await srv.guard.tokens!.ensureKey();
    const sign = async () => (await srv.guard.tokens!.sign({ accountId: acct, clientId: client.clientId, scope: 'streams:read streams:write', grantId })).token;
    const owner = await post({ title: 'Mine' }, 'k-principal');
    expect(owner.status).toBe(201);
    const app = await post({ title: 'Mine' }, 'k-principal', await sign());
    expect(app.status).toBe(201);
    expect(app.headers.get('idempotent-replayed')).toBeNull();
    expect(app.json.id).not.toBe(owner.json.id);
    expect(app.json.streamKey).not.toBe(owner.json.streamKey);
    // Another access token of the same grant (after a refresh) is the same principal: it replays its own answer.
    const refreshed = await post({ title: 'Mine' }, 'k-principal', await sign());
    expect(refreshed.headers.get('idempotent-replayed')).toBe('true');
    expect(refreshed.json.id).toBe(app.json.id);
    const ownerAgain = await post({ title: 'Mine' }, 'k-principal');
    expect(ownerAgain.json.id).toBe(owner.json.id);
  });

  it('a too-long key → 400 idempotency_key_invalid', async () => {
    const long = await post({ title: 'x' }, 'k'.repeat(256));
    expect(long.status).toBe(400);
    expect(long.json.error.code).toBe('idempotency_key_invalid');
  });

  it('keys live 24 h', async () => {
    const first = await post({ title: 'Day' }, 'k-day');
    clock += 24 * 3600 * 1000 - 1;
    expect((await post({ title: 'Day' }, 'k-day')).json.id).toBe(first.json.id);
    clock += 2;
    const later = await post({ title: 'Day' }, 'k-day');
    expect(later.status).toBe(201);
    expect(later.headers.get('idempotent-replayed')).toBeNull();
    expect(later.json.id).not.toBe(first.json.id);
  });

  it('the same key while the first request is in flight → 409; afterwards a replay', async () => {
    const firstP = post({}, 'k-slow', key, '/v2/test_slow');
    // Wait until the handler runs.
    for (let i = 0; i < 200 && !release; i++) await new Promise((r) => setTimeout(r, 10));
    expect(release).not.toBeNull();
    const during = await post({}, 'k-slow', key, '/v2/test_slow');
    expect(during.status).toBe(409);
    expect(during.json.error.type).toBe('conflict_error');
    expect(during.json.error.code).toBe('idempotency_key_in_use');
    release!();
    const first = await firstP;
    expect(first.status).toBe(201);
    const replay = await post({}, 'k-slow', key, '/v2/test_slow');
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.json).toEqual(first.json);
  });

  it('a 5xx is not kept: the retry runs again', async () => {
    const runs = slowRuns;
    expect((await post({ fail: true }, 'k-500', key, '/v2/test_slow')).status).toBe(500);
    expect((await post({ fail: true }, 'k-500', key, '/v2/test_slow')).status).toBe(500);
    expect(slowRuns).toBe(runs + 2);
  });

  it('stored responses are encrypted at rest (they may hold stream keys)', async () => {
    const r = await post({ title: 'Secret' }, 'k-enc');
    const row = srv.db.prepare("SELECT response_enc FROM idempotency_keys WHERE key = 'k-enc'").get() as { response_enc: Buffer };
    expect(row.response_enc.includes(Buffer.from(r.json.streamKey))).toBe(false);
    expect(row.response_enc.includes(Buffer.from(r.json.id))).toBe(false);
  });

  it('without the header nothing is kept', async () => {
    const a = await post({ title: 'no key' });
    const b = await post({ title: 'no key' });
    expect(a.json.id).not.toBe(b.json.id);
  });
});
