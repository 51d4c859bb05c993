/**
 * Query parameters of `/v2` (docs/api-platform.md "Query parameters"): Stripe's
 * `starting_after`/`ending_before` page like `after`/`before` (a Stripe-style pager walks every
 * page), an alias with its original is refused like `after` with `before`, an unknown cursor names
 * the parameter as sent, and an unknown query parameter on any endpoint is 400 `parameter_unknown`
 * naming it. Documented filters still work; the dashboard and OAuth (not under /v2) are untouched.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startInProcess, type TestServer } from '../../helpers/server.js';

let s: TestServer;
const ids: string[] = [];
const v2 = (method: string, p: string, body?: unknown) => api(s.http, s.secretKey, method, `/v2${p}`, body);

beforeAll(async () => {
  s = await startInProcess();
  for (let i = 0; i < 7; i++) ids.unshift((await v2('POST', '/streams', { title: `Q${i}` })).json.id); // newest first
});
afterAll(async () => {
  await s?.close();
});

function expectError(r: Awaited<ReturnType<typeof v2>>, code: string, param: string) {
  expect(r.status, r.text).toBe(400);
  expect(r.json.error.code).toBe(code);
  expect(r.json.error.param).toBe(param);
}

describe('list query parameters', () => {
  it('a Stripe-style pager (starting_after = the last id) walks every page, newest first', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 10; pages++) {
      const r = await v2('GET', `/streams?limit=2${cursor ? `&starting_after=${cursor}` : ''}`);
      expect(r.status, r.text).toBe(200);
      const data = r.json.data as Array<{ id: string }>;
      seen.push(...data.map((d) => d.id));
      if (!r.json.hasMore) break;
      cursor = data[data.length - 1]!.id;
    }
    expect(seen).toEqual(ids);
  });

  it('ending_before pages back like before', async () => {
    const r = await v2('GET', `/streams?limit=2&ending_before=${ids[4]}`);
    expect(r.status).toBe(200);
    expect(r.json.data.map((d: { id: string }) => d.id)).toEqual([ids[2], ids[3]]);
    const same = await v2('GET', `/streams?limit=2&before=${ids[4]}`);
    expect(same.json.data).toEqual(r.json.data);
  });

  it('an alias with its original, or after with ending_before, is 400 as after with before is', async () => {
    expectError(await v2('GET', `/streams?after=${ids[0]}&starting_after=${ids[1]}`), 'parameter_invalid', 'starting_after');
    expectError(await v2('GET', `/streams?before=${ids[3]}&ending_before=${ids[1]}`), 'parameter_invalid', 'ending_before');
    expectError(await v2('GET', `/streams?starting_after=${ids[0]}&ending_before=${ids[3]}`), 'parameter_invalid', 'ending_before');
    expectError(await v2('GET', `/streams?after=${ids[0]}&before=${ids[3]}`), 'parameter_invalid', 'before');
  });

  it('an unknown cursor names the parameter as sent', async () => {
    expectError(await v2('GET', '/streams?starting_after=stm_nope'), 'parameter_invalid', 'starting_after');
    expectError(await v2('GET', '/streams?after=stm_nope'), 'parameter_invalid', 'after');
    expectError(await v2('GET', `/streams/${ids[0]}/tracks?ending_before=trk_nope`), 'parameter_invalid', 'ending_before');
  });
});

describe('unknown query parameters', () => {
  it('are refused on every kind of endpoint with 400 parameter_unknown naming them', async () => {
    expectError(await v2('GET', '/streams?limit=2&expand=data'), 'parameter_unknown', 'expand');
    expectError(await v2('GET', `/streams/${ids[0]}?foo=1`), 'parameter_unknown', 'foo');
    expectError(await v2('GET', `/streams/${ids[0]}/tracks?broadcast_id=brd_1`), 'parameter_unknown', 'broadcast_id');
    expectError(await v2('GET', `/streams/${ids[0]}/broadcasts?since=1`), 'parameter_unknown', 'since');
    expectError(await v2('POST', '/streams?title=x', { title: 'y' }), 'parameter_unknown', 'title');
    expectError(await v2('PATCH', `/streams/${ids[0]}?dry_run=1`, { title: 'z' }), 'parameter_unknown', 'dry_run');
    expectError(await v2('DELETE', `/streams/${ids[1]}?force=true`), 'parameter_unknown', 'force');
    expectError(await v2('GET', '/account?x='), 'parameter_unknown', 'x');
    expectError(await v2('GET', '/events?type=stream.started&Type=x'), 'parameter_unknown', 'Type');
    expectError(await api(s.http, null, 'GET', '/v2/openapi.json?v=3'), 'parameter_unknown', 'v');
    // Nothing was changed by the refused writes.
    expect((await v2('GET', `/streams/${ids[1]}`)).status).toBe(200);
    expect((await v2('GET', `/streams/${ids[0]}`)).json.title).not.toBe('z');
  });

  it('refuses them on the audio upload too, before reading the body', async () => {
    const podcast = (await v2('POST', '/podcasts', { title: 'Q cast' })).json;
    const episode = (await v2('POST', `/podcasts/${podcast.id}/episodes`, { title: 'Q1' })).json;
    const r = await api(s.http, s.secretKey, 'PUT', `/v2/podcasts/${podcast.id}/episodes/${episode.id}/audio?name=a.mp3`, 'ID3', { 'Content-Type': 'audio/mpeg' });
    expectError(r, 'parameter_unknown', 'name');
    expect(r.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('documented parameters still work', async () => {
    expect((await v2('GET', '/streams?status=idle&limit=100')).json.data.length).toBe(7);
    expect((await v2('GET', '/events?type=stream.started&limit=5')).status).toBe(200);
    expect((await v2('GET', '/podcasts?status=draft')).status).toBe(200);
    expect((await v2('GET', '/webhooks?status=active')).status).toBe(200);
    expect((await v2('GET', `/streams/${ids[0]}/listeners?limit=5`)).status).toBe(200);
    expect((await v2('GET', `/streams/${ids[0]}/tracks?limit=1`)).status).toBe(200);
  });

  it('pages outside /v2 (dashboard, OAuth) are not affected', async () => {
    const login = await fetch(`${s.http}/dashboard/login?next=%2Fdashboard&utm_source=x`);
    expect(login.status).toBe(200);
    const meta = await fetch(`${s.http}/.well-known/oauth-authorization-server?x=1`);
    expect(meta.status).toBe(200);
  });
});
