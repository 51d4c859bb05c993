/**
 * Podcasts and episodes over real HTTP against a real in-process server (uWS on port 0, a real
 * SQLite file, real audio made by FFmpeg): spec "Podcasts", "Pagination"; docs/behaviour.md §5, §9
 * ("Podcasts", "Create and delete", "Lists", "Events").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

let s: TestServer;
let key: string;
let mp3: Buffer;

/** Audio made by FFmpeg: `seconds` of a sine tone, encoded with `args` into `file` under the data dir. */
function makeAudio(dir: string, file: string, seconds: number, args: string[]): Buffer {
  const out = path.join(dir, file);
  execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', `sine=frequency=440:duration=${seconds}`, ...args, out], { timeout: 30_000 });
  return readFileSync(out);
}

function expectError(r: Awaited<ReturnType<typeof api>>, status: number, type: string, code?: string, param?: string) {
  expect(r.status, r.text).toBe(status);
  expect(r.json?.error?.type, r.text).toBe(type);
  if (code !== undefined) expect(r.json.error.code).toBe(code);
  if (param !== undefined) expect(r.json.error.param).toBe(param);
  expect(r.json.error.requestId).toMatch(/^req_/);
}

const createPodcast = (body: unknown, k = key) => api(s.http, k, 'POST', '/v2/podcasts', body);
/** PUT the audio body (fetch, raw bytes). */
async function putAudio(pid: string, eid: string, body: Buffer | string, contentType = 'audio/mpeg', k = key) {
  const r = await fetch(`${s.http}/v2/podcasts/${pid}/episodes/${eid}/audio`, {
    method: 'PUT',
    headers: { Authorization: `Bearer ${k}`, 'Content-Type': contentType },
    body,
  });
  const text = await r.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: r.status, json, text, headers: r.headers };
}

function eventsOf(type: string): Array<{ id: string; data: any }> {
  return (s.server.db.prepare('SELECT id, data FROM events WHERE type = ? ORDER BY seq').all(type) as Array<{ id: string; data: string }>).map((e) => ({
    id: e.id,
    data: JSON.parse(e.data),
  }));
}

beforeAll(async () => {
  s = await startInProcess({ SKYLARK_MAX_UPLOAD_BYTES: String(2 * 1024 * 1024) });
  key = s.secretKey;
  mp3 = makeAudio(s.dataDir, 'tone.mp3', 3, ['-c:a', 'libmp3lame', '-b:a', '64k']);
});
afterAll(async () => {
  await s?.close();
});

describe('podcasts', () => {
  it('creates a draft podcast with the spec fields and docs/behaviour.md additions (201)', async () => {
    const r = await createPodcast({
      title: 'Night Shift',
      description: 'Talk after dark',
      author: 'Skylark FM',
      language: 'en-US',
      category: 'Society & Culture > Documentary',
      explicit: false,
      imageUrl: 'https://example.com/cover.jpg',
      ownerEmail: 'owner@example.com',
      metadata: { show: 'ns' },
    });
    expect(r.status, r.text).toBe(201);
    const p = r.json;
    expect(p.id).toMatch(/^pod_[A-Za-z0-9]+$/);
    expect(p).toMatchObject({
      object: 'podcast',
      title: 'Night Shift',
      status: 'draft',
      episodeCount: 0,
      category: 'Society & Culture > Documentary',
      ownerEmail: 'owner@example.com',
      metadata: { show: 'ns' },
    });
    expect(p.feedUrl).toBe(`${s.http}/feed/${p.id}.xml`);
    expect(Number.isNaN(Date.parse(p.createdAt))).toBe(false);
    // podcast:guid = UUIDv5(podcast namespace, feed URL without scheme and trailing slash), checked with Python's uuid.
    const expected = execFileSync('python3', ['-c', 'import sys,uuid;print(uuid.uuid5(uuid.UUID("ead4c236-bf58-58c6-a2c6-a6b28d128cb6"), sys.argv[1]))', p.feedUrl.replace(/^https?:\/\//, '')], {
      encoding: 'utf8',
    }).trim();
    expect(p.podcastGuid).toBe(expected);
    const g = await api(s.http, key, 'GET', `/v2/podcasts/${p.id}`);
    expect(g.json).toEqual(p);
    // publishable keys read, but do not write
    expect((await api(s.http, s.publishableKey, 'GET', `/v2/podcasts/${p.id}`)).status).toBe(200);
    expectError(await createPodcast({ title: 'x' }, s.publishableKey), 403, 'permission_error', 'insufficient_scope');
  });

  it('validates the body: title required, Apple categories, unknown fields', async () => {
    expectError(await createPodcast({}), 400, 'invalid_request_error', 'param_required', 'title');
    expectError(await createPodcast({ title: 'x', category: 'Cooking' }), 400, 'invalid_request_error', 'parameter_invalid', 'category');
    expectError(await createPodcast({ title: 'x', category: 'Technology > Documentary' }), 400, 'invalid_request_error', 'parameter_invalid', 'category');
    expectError(await createPodcast({ title: 'x', colour: 'red' }), 400, 'invalid_request_error', 'parameter_unknown', 'colour');
    expectError(await createPodcast({ title: 'x', ownerEmail: 'nope' }), 400, 'invalid_request_error', 'parameter_invalid', 'ownerEmail');
    expect((await createPodcast({ title: 'x', category: 'Technology' })).status).toBe(201);
    expectError(await api(s.http, key, 'GET', '/v2/podcasts/pod_doesnotexist'), 404, 'not_found_error', 'resource_missing');
  });

  it('state rules: archive from draft, 409 for the state it is in, unarchive to what the episodes make it', async () => {
    const p = (await createPodcast({ title: 'States' })).json;
    expectError(await api(s.http, key, 'PATCH', `/v2/podcasts/${p.id}`, { status: 'draft' }), 409, 'conflict_error');
    expectError(await api(s.http, key, 'PATCH', `/v2/podcasts/${p.id}`, { status: 'published' }), 409, 'conflict_error');
    const a = await api(s.http, key, 'PATCH', `/v2/podcasts/${p.id}`, { status: 'archived', title: 'States (done)' });
    expect(a.status, a.text).toBe(200);
    expect(a.json).toMatchObject({ status: 'archived', title: 'States (done)' });
    expectError(await api(s.http, key, 'PATCH', `/v2/podcasts/${p.id}`, { status: 'archived' }), 409, 'conflict_error');
    // an archived podcast takes no new episode
    expectError(await api(s.http, key, 'POST', `/v2/podcasts/${p.id}/episodes`, { title: 'late' }), 409, 'conflict_error');
    expectError(await api(s.http, key, 'PATCH', `/v2/podcasts/${p.id}`, { status: 'published' }), 409, 'conflict_error');
    const back = await api(s.http, key, 'PATCH', `/v2/podcasts/${p.id}`, { status: 'draft' });
    expect(back.json.status).toBe('draft');
  });

  it('status filter with limit=1 yields a correct cursor, both ways (docs/behaviour.md §9 "Lists")', async () => {
    // A fresh account so that other tests' podcasts do not interfere.
    const acct = await s.server.accounts.create({ name: 'Lists', plan: 'paid', region: 'eu-west-1' });
    const k = acct.secretKey;
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await createPodcast({ title: `P${i}` }, k)).json.id);
    const archived = [ids[1]!, ids[2]!, ids[4]!, ids[6]!];
    for (const id of archived) expect((await api(s.http, k, 'PATCH', `/v2/podcasts/${id}`, { status: 'archived' })).status).toBe(200);
    const newestFirst = [...archived].reverse();

    // forward with after
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let guard = 0; guard < 10; guard++) {
      const r = await api(s.http, k, 'GET', `/v2/podcasts?status=archived&limit=1${cursor ? `&after=${cursor}` : ''}`);
      expect(r.status, r.text).toBe(200);
      expect(r.json.object).toBe('list');
      expect(r.json.data).toHaveLength(1);
      expect(r.json.data[0].status).toBe('archived');
      seen.push(r.json.data[0].id);
      if (!r.json.hasMore) {
        expect(r.json.nextCursor).toBeNull();
        break;
      }
      expect(r.json.nextCursor).toBe(r.json.data[0].id);
      cursor = r.json.nextCursor;
    }
    expect(seen).toEqual(newestFirst);

    // backward with before, from the oldest archived one
    const back: string[] = [];
    cursor = newestFirst[newestFirst.length - 1]!;
    for (let guard = 0; guard < 10; guard++) {
      const r = await api(s.http, k, 'GET', `/v2/podcasts?status=archived&limit=1&before=${cursor}`);
      expect(r.status, r.text).toBe(200);
      if (r.json.data.length === 0) break;
      back.push(r.json.data[0].id);
      if (!r.json.hasMore) {
        expect(r.json.nextCursor).toBeNull();
        break;
      }
      expect(r.json.nextCursor).toBe(r.json.data[0].id);
      cursor = r.json.nextCursor;
    }
    expect(back).toEqual(newestFirst.slice(0, -1).reverse());

    const drafts = await api(s.http, k, 'GET', '/v2/podcasts?status=draft&limit=2');
    expect(drafts.json.data.map((p: any) => p.id)).toEqual([ids[5], ids[3]]);
    expect(drafts.json.hasMore).toBe(true);
    const all = await api(s.http, k, 'GET', '/v2/podcasts');
    expect(all.json.data.map((p: any) => p.id)).toEqual([...ids].reverse());
    expect(all.json.hasMore).toBe(false);
    expect(all.json.nextCursor).toBeNull();

    expectError(await api(s.http, k, 'GET', `/v2/podcasts?after=${ids[0]}&before=${ids[1]}`), 400, 'invalid_request_error');
    expectError(await api(s.http, k, 'GET', '/v2/podcasts?after=pod_nope'), 400, 'invalid_request_error', 'parameter_invalid', 'after');
    expectError(await api(s.http, k, 'GET', '/v2/podcasts?status=live'), 400, 'invalid_request_error', 'parameter_invalid', 'status');
    expectError(await api(s.http, k, 'GET', '/v2/podcasts?limit=101'), 400, 'invalid_request_error', 'parameter_invalid', 'limit');
    // another account's podcast is no cursor here
    expectError(await api(s.http, key, 'GET', `/v2/podcasts?after=${ids[0]}`), 400, 'invalid_request_error', 'parameter_invalid', 'after');
  });
});

describe('episodes, audio and publishing', () => {
  let pid: string;
  beforeAll(async () => {
    pid = (await createPodcast({ title: 'Episodes show', ownerEmail: 'o@example.com' })).json.id;
  });

  it('creates, reads, lists, updates and deletes episodes; episodeCount follows', async () => {
    const c = await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'One', season: 1, episodeNumber: 1, episodeType: 'trailer' });
    expect(c.status, c.text).toBe(201);
    expect(c.json).toMatchObject({
      object: 'episode',
      podcastId: pid,
      title: 'One',
      status: 'draft',
      audioUrl: null,
      audio: null,
      guid: null,
      season: 1,
      episodeNumber: 1,
      episodeType: 'trailer',
      explicit: false,
      publishAt: null,
      publishedAt: null,
      sourceStreamId: null,
    });
    expect(c.json.id).toMatch(/^ep_/);
    const two = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Two' })).json;
    expect((await api(s.http, key, 'GET', `/v2/podcasts/${pid}`)).json.episodeCount).toBe(2);
    const list = await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes?limit=1`);
    expect(list.json.data.map((e: any) => e.id)).toEqual([two.id]);
    expect(list.json.hasMore).toBe(true);
    expect(list.json.nextCursor).toBe(two.id);
    const next = await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes?limit=1&after=${two.id}`);
    expect(next.json.data.map((e: any) => e.id)).toEqual([c.json.id]);
    expect(next.json.hasMore).toBe(false);
    const u = await api(s.http, key, 'PATCH', `/v2/podcasts/${pid}/episodes/${c.json.id}`, { title: 'One!', season: null });
    expect(u.json).toMatchObject({ title: 'One!', season: null, episodeNumber: 1 });
    expectError(await api(s.http, key, 'PATCH', `/v2/podcasts/${pid}/episodes/${c.json.id}`, { status: 'draft' }), 409, 'conflict_error');
    expectError(await api(s.http, key, 'PATCH', `/v2/podcasts/${pid}/episodes/${c.json.id}`, { guid: 'x' }), 400, 'invalid_request_error', 'parameter_unknown', 'guid');
    const d = await api(s.http, key, 'DELETE', `/v2/podcasts/${pid}/episodes/${two.id}`);
    expect(d.status).toBe(200);
    expect(d.json).toEqual({ id: two.id, object: 'episode', deleted: true });
    expectError(await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes/${two.id}`), 404, 'not_found_error');
    expect((await api(s.http, key, 'GET', `/v2/podcasts/${pid}`)).json.episodeCount).toBe(1);
    // drafts are not events
    expect(eventsOf('podcast.deleted').some((e) => e.data.object.id === two.id)).toBe(false);
  });

  it('uploads audio: streamed to disk, type and duration probed; 415 for non-audio; 413 over the limit', async () => {
    const ep = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Audio' })).json;
    const r = await putAudio(pid, ep.id, mp3);
    expect(r.status, r.text).toBe(200);
    expect(r.json.audio.mimeType).toBe('audio/mpeg');
    expect(r.json.audio.sizeBytes).toBe(mp3.length);
    expect(r.json.audio.durationSeconds).toBeGreaterThan(2.5);
    expect(r.json.audio.durationSeconds).toBeLessThan(3.5);
    expect(r.json.audioUrl).toMatch(new RegExp(`^${s.http}/media/${pid}/${ep.id}-[A-Za-z0-9]{8}\\.mp3$`));
    const m4a = makeAudio(s.dataDir, 'tone.m4a', 2, ['-c:a', 'aac', '-b:a', '64k']);
    const r2 = await putAudio(pid, ep.id, m4a, 'application/octet-stream');
    expect(r2.status, r2.text).toBe(200);
    expect(r2.json.audio.mimeType).toBe('audio/x-m4a');
    expect(r2.json.audioUrl).not.toBe(r.json.audioUrl); // a new file name per upload

    const bad = await putAudio(pid, ep.id, '{"not":"audio"}', 'application/json');
    expect(bad.status, bad.text).toBe(415);
    expect(bad.json.error.code).toBe('unsupported_media_type');
    const garbage = await putAudio(pid, ep.id, Buffer.alloc(64 * 1024, 7), 'application/octet-stream');
    expect(garbage.status, garbage.text).toBe(415);
    expect(garbage.json.error.code).toBe('unsupported_media_type');
    const big = await putAudio(pid, ep.id, Buffer.alloc(3 * 1024 * 1024, 1), 'audio/mpeg');
    expect(big.status, big.text).toBe(413);
    expect(big.json.error.type).toBe('invalid_request_error');
    const unauth = await putAudio(pid, ep.id, mp3, 'audio/mpeg', s.publishableKey);
    expect(unauth.status).toBe(403);
    expect((await putAudio(pid, 'ep_nope', mp3)).status).toBe(404);
    // the episode still has the last good audio
    expect((await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes/${ep.id}`)).json.audio.mimeType).toBe('audio/x-m4a');
  });

  it('publishes now: guid fixed, podcast published, podcast.published carries the episode; 409 again; delete → podcast.deleted', async () => {
    const ep = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Pub' })).json;
    expectError(await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id }), 400, 'invalid_request_error', 'episode_audio_missing');
    expect((await putAudio(pid, ep.id, mp3)).status).toBe(200);
    expectError(await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, {}), 400, 'invalid_request_error', 'param_required', 'episodeId');
    expectError(await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: 'ep_nope' }), 404, 'not_found_error');
    const r = await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id });
    expect(r.status, r.text).toBe(200);
    expect(r.json.status).toBe('published');
    expect(r.json.guid).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.json.publishedAt).not.toBeNull();
    expect((await api(s.http, key, 'GET', `/v2/podcasts/${pid}`)).json.status).toBe('published');
    const ev = eventsOf('podcast.published').filter((e) => e.data.object.id === ep.id);
    expect(ev).toHaveLength(1);
    expect(ev[0]!.data.object).toMatchObject({ object: 'episode', id: ep.id, podcastId: pid, status: 'published', guid: r.json.guid });
    expectError(await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id }), 409, 'conflict_error');
    // new audio keeps the guid
    const again = await putAudio(pid, ep.id, mp3);
    expect(again.json.guid).toBe(r.json.guid);
    const del = await api(s.http, key, 'DELETE', `/v2/podcasts/${pid}/episodes/${ep.id}`);
    expect(del.status).toBe(200);
    const dev = eventsOf('podcast.deleted').filter((e) => e.data.object.id === ep.id);
    expect(dev).toHaveLength(1);
    expect(dev[0]!.data.object).toMatchObject({ id: ep.id, podcastId: pid, deleted: true });
  });

  it('schedules: past publishAt → 400, future → scheduled, published by the scheduler at or after the time, never early', async () => {
    const ep = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Later' })).json;
    expect((await putAudio(pid, ep.id, mp3)).status).toBe(200);
    const past = new Date(Date.now() - 60_000).toISOString();
    expectError(await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id, publishAt: past }), 400, 'invalid_request_error', 'parameter_invalid', 'publishAt');
    expectError(await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id, publishAt: 'tomorrow' }), 400, 'invalid_request_error', 'parameter_invalid', 'publishAt');
    const at = Date.now() + 1500;
    const r = await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id, publishAt: new Date(at).toISOString() });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ status: 'scheduled', publishAt: new Date(at).toISOString(), publishedAt: null, guid: null });
    // Never early: a feed answered before `at` must not list it.
    const feed = await fetch(`${s.http}/feed/${pid}.xml`).then((x) => x.text());
    if (feed.includes(ep.id) || feed.includes('Later')) expect(Date.now()).toBeGreaterThanOrEqual(at);
    const done = await waitFor(
      async () => {
        const g = await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes/${ep.id}`);
        return g.json.status === 'published' ? g.json : null;
      },
      15_000,
      100,
      'scheduled publication',
    );
    expect(Date.parse(done.publishedAt)).toBeGreaterThanOrEqual(at);
    expect(done.guid).toMatch(/^[0-9a-f-]{36}$/);
    expect(eventsOf('podcast.published').filter((e) => e.data.object.id === ep.id)).toHaveLength(1);
  });

  it('PATCH status draft cancels a schedule; archiving unschedules and refuses publication (409)', async () => {
    const ep = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Cancel me' })).json;
    expect((await putAudio(pid, ep.id, mp3)).status).toBe(200);
    const at = new Date(Date.now() + 3600_000).toISOString();
    expect((await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id, publishAt: at })).json.status).toBe('scheduled');
    const c = await api(s.http, key, 'PATCH', `/v2/podcasts/${pid}/episodes/${ep.id}`, { status: 'draft' });
    expect(c.json).toMatchObject({ status: 'draft', publishAt: null });
    expect((await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id, publishAt: at })).json.status).toBe('scheduled');
    const p2 = (await createPodcast({ title: 'Archive me' })).json;
    const e2 = (await api(s.http, key, 'POST', `/v2/podcasts/${p2.id}/episodes`, { title: 'x' })).json;
    expect((await putAudio(p2.id, e2.id, mp3)).status).toBe(200);
    expect((await api(s.http, key, 'POST', `/v2/podcasts/${p2.id}/publish`, { episodeId: e2.id, publishAt: at })).json.status).toBe('scheduled');
    expect((await api(s.http, key, 'PATCH', `/v2/podcasts/${p2.id}`, { status: 'archived' })).status).toBe(200);
    expect((await api(s.http, key, 'GET', `/v2/podcasts/${p2.id}/episodes/${e2.id}`)).json.status).toBe('draft');
    expectError(await api(s.http, key, 'POST', `/v2/podcasts/${p2.id}/publish`, { episodeId: e2.id }), 409, 'conflict_error');
  });
});
