/**
 * Webhooks and Events over real HTTP against a real in-process server and real loopback receivers
 * (spec "Webhooks", "Events", "Signature verification", "Errors"; docs/behaviour.md §6, §9):
 * the endpoints and their errors, `webhook.test` received and verified with stripe-node, events of
 * other features flowing through the Outbox, real `stream.started`/`stream.ended` from an RTMP
 * publish, redelivery, secret rolling, private destinations refused at create.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

let s: TestServer;
let key: string;
let rx: { url: string; got: Received[]; status: number; close: () => Promise<void> };

async function receiver() {
  const got: Received[] = [];
  const state = { status: 200 };
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      got.push({ path: req.url ?? '', headers: req.headers, body });
      res.writeHead(state.status, { 'Content-Type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    got,
    get status() {
      return state.status;
    },
    set status(v: number) {
      state.status = v;
    },
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}

const wh = (method: string, p: string, body?: unknown, k: string | null = key) => api(s.http, k, method, `/v2${p}`, body);
const at = (path: string) => rx.got.filter((g) => g.path === path);

function expectError(r: Awaited<ReturnType<typeof api>>, status: number, code: string, param?: string) {
  expect(r.status, r.text).toBe(status);
  expect(r.json.error.code, r.text).toBe(code);
  if (param !== undefined) expect(r.json.error.param).toBe(param);
  expect(r.json.error.requestId).toMatch(/^req_/);
}

beforeAll(async () => {
  s = await startInProcess({ SKYLARK_WEBHOOKS_ALLOW_PRIVATE: '1' });
  key = s.secretKey;
  rx = await receiver();
});
afterAll(async () => {
  await s?.close();
  await rx?.close();
});

describe('webhooks API', () => {
  it('creates (201, secret once), gets, lists with cursors, updates, deletes', async () => {
    const c = await wh('POST', '/webhooks', { url: `${rx.url}/crud`, events: ['stream.started', 'stream.ended', 'stream.started'], description: 'CRUD' });
    expect(c.status, c.text).toBe(201);
    expect(c.json).toMatchObject({ object: 'webhook', url: `${rx.url}/crud`, events: ['stream.started', 'stream.ended'], description: 'CRUD', status: 'active' });
    expect(c.json.id).toMatch(/^wh_[A-Za-z0-9]+$/);
    expect(c.json.signingSecret).toMatch(/^whsec_[A-Za-z0-9]{32}$/);
    expect(new Date(c.json.createdAt).toISOString()).toBe(c.json.createdAt);
    const g = await wh('GET', `/webhooks/${c.json.id}`);
    expect(g.status).toBe(200);
    expect(g.json.signingSecret).toBeUndefined();
    const { signingSecret: _secret, ...withoutSecret } = c.json;
    expect(g.json).toEqual(withoutSecret);

    const all = await wh('POST', '/webhooks', { url: `${rx.url}/crud2`, events: ['*', 'stream.error'] });
    expect(all.json.events).toEqual(['*']);
    expect(all.json.description).toBeNull();
    const page1 = await wh('GET', '/webhooks?limit=1');
    expect(page1.json).toMatchObject({ object: 'list', hasMore: true, nextCursor: all.json.id });
    expect(page1.json.data.map((w: { id: string }) => w.id)).toEqual([all.json.id]);
    const page2 = await wh('GET', `/webhooks?limit=1&after=${all.json.id}`);
    expect(page2.json.data[0].id).toBe(c.json.id);
    const back = await wh('GET', `/webhooks?limit=1&before=${c.json.id}`);
    expect(back.json.data[0].id).toBe(all.json.id);
    expectError(await wh('GET', '/webhooks?after=wh_nope'), 400, 'parameter_invalid', 'after');

    const p = await wh('PATCH', `/webhooks/${c.json.id}`, { events: ['podcast.published'], description: null, status: 'disabled' });
    expect(p.status, p.text).toBe(200);
    expect(p.json).toMatchObject({ events: ['podcast.published'], description: null, status: 'disabled' });
    expect((await wh('GET', '/webhooks?status=disabled')).json.data.map((w: { id: string }) => w.id)).toEqual([c.json.id]);
    expectError(await wh('POST', `/webhooks/${c.json.id}/test`), 409, 'webhook_disabled');

    const d = await wh('DELETE', `/webhooks/${c.json.id}`);
    expect(d.status).toBe(200);
    expect(d.json).toEqual({ id: c.json.id, object: 'webhook', deleted: true });
    expectError(await wh('GET', `/webhooks/${c.json.id}`), 404, 'resource_missing');
    expectError(await wh('DELETE', `/webhooks/${c.json.id}`), 404, 'resource_missing');
    await wh('DELETE', `/webhooks/${all.json.id}`);
  });

  it('validates: required, unknown event types, unknown fields, bad URLs, auth and scopes', async () => {
    expectError(await wh('POST', '/webhooks', { events: ['*'] }), 400, 'param_required', 'url');
    expectError(await wh('POST', '/webhooks', { url: `${rx.url}/x` }), 400, 'param_required', 'events');
    const unknown = await wh('POST', '/webhooks', { url: `${rx.url}/x`, events: ['stream.started', 'stream.exploded'] });
    expectError(unknown, 400, 'parameter_invalid', 'events');
    expect(unknown.json.error.message).toContain('stream.exploded');
    expectError(await wh('POST', '/webhooks', { url: `${rx.url}/x`, events: [] }), 400, 'parameter_invalid', 'events');
    expectError(await wh('POST', '/webhooks', { url: `${rx.url}/x`, events: ['*'], secret: 'mine' }), 400, 'parameter_unknown', 'secret');
    expectError(await wh('POST', '/webhooks', { url: 'ftp://example.com/', events: ['*'] }), 400, 'parameter_invalid', 'url');
    expectError(await wh('POST', '/webhooks', { url: 'http://u:p@example.com/', events: ['*'] }), 400, 'parameter_invalid', 'url');
    expectError(await wh('PATCH', '/webhooks/wh_nope', { status: 'disabled' }), 404, 'resource_missing');
    expectError(await wh('PATCH', '/webhooks/wh_nope', { status: 'paused' }), 400, 'parameter_invalid', 'status');
    expectError(await wh('GET', '/webhooks', undefined, null), 401, 'missing_token');
    expectError(await wh('GET', '/webhooks', undefined, s.publishableKey), 403, 'insufficient_scope');
    expectError(await wh('POST', '/webhooks', { url: `${rx.url}/x`, events: ['*'] }, s.publishableKey), 403, 'insufficient_scope');
    expectError(await wh('GET', '/events', undefined, s.publishableKey), 403, 'insufficient_scope');
    expectError(await wh('GET', '/events?type=stream.exploded'), 400, 'parameter_invalid', 'type');
    expectError(await wh('GET', '/events/evt_nope'), 404, 'resource_missing');
    expectError(await wh('POST', '/events/evt_nope/redeliver'), 404, 'resource_missing');
  });

  it('webhook.test: received, signed (stripe-node verifies), listed, with its delivery history; redeliver repeats it', async () => {
    const c = await wh('POST', '/webhooks', { url: `${rx.url}/test`, events: ['stream.ended'] });
    const secret = c.json.signingSecret as string;
    const t = await wh('POST', `/webhooks/${c.json.id}/test`);
    expect(t.status, t.text).toBe(200);
    expect(t.json).toMatchObject({ object: 'event', type: 'webhook.test', livemode: false, data: { object: { id: c.json.id, object: 'webhook', url: `${rx.url}/test` } } });
    expect(t.json.id).toMatch(/^evt_/);
    expect(Number.isInteger(t.json.created)).toBe(true);
    expect(t.json.data.object.signingSecret).toBeUndefined();
    const got = await waitFor(() => at('/test')[0], 10_000, 20, 'webhook.test');
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['service-event']).toBe('webhook.test');
    expect(got.headers['idempotency-key']).toBe(t.json.id);
    expect(got.headers['service-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    const evt = Stripe.webhooks.constructEvent(got.body, String(got.headers['service-signature']), secret) as unknown as Record<string, unknown>;
    expect(evt).toEqual({ id: t.json.id, object: 'event', type: 'webhook.test', created: t.json.created, livemode: false, data: t.json.data });

    const listed = await wh('GET', '/events?type=webhook.test&limit=100');
    expect(listed.json.data.map((e: { id: string }) => e.id)).toContain(t.json.id);
    expect(listed.json.data.every((e: { type: string }) => e.type === 'webhook.test')).toBe(true);
    const one = await waitFor(async () => {
      const r = await wh('GET', `/events/${t.json.id}`);
      return r.json.deliveries?.[0]?.status === 'delivered' ? r : null;
    }, 10_000, 50, 'delivered');
    expect(one.json.deliveries).toHaveLength(1);
    const [d] = one.json.deliveries;
    expect(d).toMatchObject({ webhookId: c.json.id, status: 'delivered', nextAttemptAt: null });
    expect(d.attempts).toHaveLength(1);
    expect(d.attempts[0]).toMatchObject({ responseStatus: 200, error: null, responseBody: 'ok' });
    expect(typeof d.attempts[0].durationMs).toBe('number');
    expect(new Date(d.attempts[0].attemptedAt).toISOString()).toBe(d.attempts[0].attemptedAt);

    const rd = await wh('POST', `/events/${t.json.id}/redeliver`);
    expect(rd.status, rd.text).toBe(200);
    expect(rd.json.deliveries[0]).toMatchObject({ webhookId: c.json.id, status: 'pending' });
    await waitFor(() => at('/test').length === 2, 10_000, 20, 'redelivery');
    expect(at('/test')[1]!.headers['idempotency-key']).toBe(t.json.id);
    expect(at('/test')[1]!.body).toBe(got.body);
    const after = await waitFor(async () => {
      const r = await wh('GET', `/events/${t.json.id}`);
      return r.json.deliveries[0].attempts.length === 2 && r.json.deliveries[0].status === 'delivered' ? r : null;
    }, 10_000, 50, 'second attempt recorded');
    expect(after.json.deliveries[0].attempts).toHaveLength(2);

    // Roll: the old secret no longer verifies, the new one does.
    const rolled = await wh('POST', `/webhooks/${c.json.id}/roll_secret`);
    expect(rolled.status).toBe(200);
    expect(rolled.json.signingSecret).toMatch(/^whsec_/);
    expect(rolled.json.signingSecret).not.toBe(secret);
    await wh('POST', `/webhooks/${c.json.id}/test`);
    const third = await waitFor(() => at('/test')[2], 10_000, 20, 'test after roll');
    expect(() => Stripe.webhooks.constructEvent(third.body, String(third.headers['service-signature']), secret)).toThrow();
    Stripe.webhooks.constructEvent(third.body, String(third.headers['service-signature']), rolled.json.signingSecret);
    await wh('DELETE', `/webhooks/${c.json.id}`);
  });

  it('events of other features flow through the Outbox to subscribed endpoints only', async () => {
    const podcasts = await wh('POST', '/webhooks', { url: `${rx.url}/podcasts`, events: ['podcast.published', 'podcast.deleted'] });
    const everything = await wh('POST', '/webhooks', { url: `${rx.url}/all`, events: ['*'] });
    const { db, outbox } = s.server;
    const ids: Record<string, string> = {};
    db.transaction(() => {
      ids.joined = outbox.record(s.accountId, 'listener.joined', { object: { id: 'lst_1', object: 'listener', streamId: 'stm_1' } }).id;
      ids.published = outbox.record(s.accountId, 'podcast.published', { object: { id: 'ep_1', object: 'episode', podcastId: 'pod_1' } }).id;
      ids.deleted = outbox.record(s.accountId, 'podcast.deleted', { object: { id: 'ep_1', object: 'episode', podcastId: 'pod_1' } }).id;
    })();
    outbox.flush();
    await waitFor(() => at('/podcasts').length === 2 && at('/all').length === 3, 10_000, 20, 'fan-out');
    expect(at('/podcasts').map((g) => g.headers['service-event']).sort()).toEqual(['podcast.deleted', 'podcast.published']);
    expect(at('/all').map((g) => g.headers['idempotency-key']).sort()).toEqual([ids.joined, ids.published, ids.deleted].sort());
    const ev = await wh('GET', `/events/${ids.published}`);
    expect(ev.json).toMatchObject({ type: 'podcast.published', livemode: true, data: { object: { id: 'ep_1', podcastId: 'pod_1' } } });
    // A rolled-back transaction produces nothing.
    try {
      db.transaction(() => {
        outbox.record(s.accountId, 'listener.left', { object: { id: 'lst_1' } });
        throw new Error('rollback');
      })();
    } catch {
      outbox.discard();
    }
    await wh('DELETE', `/webhooks/${podcasts.json.id}`);
    await wh('DELETE', `/webhooks/${everything.json.id}`);
    expect(at('/all').some((g) => g.headers['service-event'] === 'listener.left')).toBe(false);
  });

  it('stream.started and stream.ended come from a real RTMP publish', async () => {
    const hook = await wh('POST', '/webhooks', { url: `${rx.url}/streams`, events: ['stream.started', 'stream.ended'] });
    const st = await api(s.http, key, 'POST', '/v2/streams', { title: 'Hooked', reconnectWindow: 0 });
    const p = publish(`${st.json.rtmpUrl}/${st.json.streamKey}`, { seconds: 2 });
    await exited(p);
    const got = await waitFor(() => (at('/streams').length >= 2 ? at('/streams') : null), 30_000, 50, 'stream events');
    const started = got.find((g) => g.headers['service-event'] === 'stream.started')!;
    const body = Stripe.webhooks.constructEvent(started.body, String(started.headers['service-signature']), hook.json.signingSecret) as unknown as {
      data: { object: Record<string, unknown> };
      livemode: boolean;
    };
    expect(body.livemode).toBe(true);
    expect(body.data.object).toMatchObject({ id: st.json.id, title: 'Hooked', status: 'live', listenerCount: 0 });
    expect(typeof body.data.object.startedAt).toBe('string');
    expect(body.data.object.streamKey).toBeUndefined();
    expect(got.map((g) => g.headers['service-event'])).toContain('stream.ended');
    await wh('DELETE', `/webhooks/${hook.json.id}`);
  });

  it('refuses private and loopback destinations at create unless the operator allows them', async () => {
    const strict = await startInProcess();
    try {
      for (const url of ['http://127.0.0.1:8080/hook', 'http://localhost/hook', 'http://[::1]/hook', 'http://10.1.2.3/hook', 'http://169.254.169.254/latest', 'http://192.168.0.10/']) {
        const r = await api(strict.http, strict.secretKey, 'POST', '/v2/webhooks', { url, events: ['*'] });
        expectError(r, 400, 'url_not_allowed', 'url');
      }
      const ok = await api(strict.http, strict.secretKey, 'POST', '/v2/webhooks', { url: 'https://hooks.example.com/skylark', events: ['*'] });
      expect(ok.status, ok.text).toBe(201);
      const patch = await api(strict.http, strict.secretKey, 'PATCH', `/v2/webhooks/${ok.json.id}`, { url: 'http://127.0.0.1/x' });
      expectError(patch, 400, 'url_not_allowed', 'url');
    } finally {
      await strict.close();
    }
  });
});
