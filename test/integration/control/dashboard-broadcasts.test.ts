/**
 * The dashboard's stream page and broadcasts (docs/streams.md), over real HTTP after a dashboard
 * login: the page has a Broadcasts card (none yet), a CSRF-checked form sets `recording` (a form
 * without the CSRF token is refused and changes nothing), and after an FFmpeg RTMP broadcast the
 * card lists it with its listeners and a link to the draft episode its recording became. The
 * Fallback card's form (CSRF-checked too) sets the stream's fallback episodes (docs/streams.md
 * "Fallback"): the stream goes on air with them and the card says so; an empty form clears it.
 * With catch-up on, the player plays the stream's rewind playlist (docs/behaviour.md §17).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ffmpegPath } from '../../helpers/ffmpeg.js';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { Browser, formFields } from '../../helpers/platform.js';

const OWNER = { email: 'dj@example.com', password: 'a long enough owner password' };
let t: TestServer;
let key: string;
beforeAll(async () => {
  t = await startInProcess();
  key = (await t.server.accounts.create({ name: 'Radio', plan: 'paid', region: 'eu-west-1', email: OWNER.email, password: OWNER.password })).secretKey;
});
afterAll(async () => {
  await t?.close();
});

describe('dashboard: broadcasts', () => {
  it('sets recording with a CSRF-checked form and lists the broadcasts with their listeners and episodes', async () => {
    const v2 = (method: string, p: string, body?: unknown) => api(t.http, key, method, `/v2${p}`, body);
    const pod = (await v2('POST', '/podcasts', { title: 'The weekly' })).json;
    const s = (await v2('POST', '/streams', { title: 'Weekly', reconnectWindow: 0 })).json;

    const b = new Browser();
    const login = formFields((await b.request(`${t.http}/dashboard/login`)).text, 'name="password"');
    expect((await b.request(`${t.http}${login.action}`, { form: { ...login.hidden, ...OWNER } })).status).toBe(303);
    const pageUrl = `${t.http}/dashboard/streams/${s.id}`;
    let html = (await b.request(pageUrl)).text;
    expect(html).toContain('<h2 id="broadcasts-title">Broadcasts</h2>');
    expect(html).toContain('No broadcast yet');

    // Without the CSRF token: refused, nothing changes.
    const action = `/dashboard/streams/${s.id}/recording`;
    const refused = await b.request(`${t.http}${action}`, { form: { podcastId: pod.id } });
    expect(refused.status).toBe(403);
    expect((await v2('GET', `/streams/${s.id}`)).json.recording).toBeNull();

    const form = formFields(html, `action="${action}"`);
    const saved = await b.request(`${t.http}${form.action}`, { form: { ...form.hidden, podcastId: pod.id } });
    expect(saved.status).toBe(303);
    expect((await v2('GET', `/streams/${s.id}`)).json.recording).toEqual({ podcastId: pod.id });

    // One broadcast with one progressive listener.
    const p = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 5 });
    await waitFor(async () => (await v2('GET', `/streams/${s.id}`)).json.status === 'live', 20_000, 100, 'live');
    const res = await waitFor(async () => {
      const r = await fetch(s.listenUrl);
      if (r.status === 200) return r;
      await r.body?.cancel();
      return null;
    }, 15_000, 100, 'listenable');
    const drained = res.body!.pipeTo(new WritableStream());
    expect(await exited(p)).toBe(0);
    await drained.catch(() => {});
    const broadcast = await waitFor(async () => {
      const l = (await v2('GET', `/streams/${s.id}/broadcasts`)).json.data;
      return l.length === 1 && l[0].episodeId ? l[0] : null;
    }, 30_000, 200, 'the broadcast and its episode');
    expect(broadcast.totalListeners).toBe(1);

    html = (await b.request(pageUrl)).text;
    expect(html).not.toContain('No broadcast yet');
    expect(html).toContain(`href="/dashboard/podcasts/${pod.id}/episodes/${broadcast.episodeId}"`);
    expect(html).toMatch(/<td class="num">1<\/td><td class="num">1<\/td>/); // peak and total listeners
    expect(html).toContain(`value="${pod.id}"`);

    // Catch-up on (docs/behaviour.md §17): the player plays the rewind playlist, and the broadcast
    // has its catch-up playlist, playable in the page's player.
    expect(html).toContain(`data-hls-url="${s.hlsUrl}"`);
    expect((await v2('PATCH', `/streams/${s.id}`, { catchUp: { hours: 2 } })).status).toBe(200);
    html = (await b.request(pageUrl)).text;
    expect(html).toContain(`data-hls-url="${s.hlsUrl.replace('index.m3u8', 'rewind.m3u8')}"`);
    expect(html).toContain('the last 2 h');
    // Catch-up was turned on after the broadcast: nothing of it is kept, so no link.
    expect(html).not.toContain('data-catch-up-url=');

    // Recording off again.
    html = (await b.request(pageUrl)).text;
    const off = formFields(html, `action="${action}"`);
    expect((await b.request(`${t.http}${off.action}`, { form: { ...off.hidden, podcastId: '' } })).status).toBe(303);
    expect((await v2('GET', `/streams/${s.id}`)).json.recording).toBeNull();
  }, 90_000);

  it('sets and clears the fallback with a CSRF-checked form; the card shows what is on air', async () => {
    const v2 = (method: string, p: string, body?: unknown) => api(t.http, key, method, `/v2${p}`, body);
    const pod = (await v2('POST', '/podcasts', { title: 'Reruns' })).json;
    const ep = (await v2('POST', `/podcasts/${pod.id}/episodes`, { title: 'Best of' })).json;
    const mp3 = path.join(t.dataDir, 'rerun.mp3');
    execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=330:duration=20', '-c:a', 'libmp3lame', '-b:a', '64k', mp3], { timeout: 30_000 });
    const put = await fetch(`${t.http}/v2/podcasts/${pod.id}/episodes/${ep.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body: readFileSync(mp3) });
    expect(put.status).toBe(200);
    const s = (await v2('POST', '/streams', { title: 'Station', codec: 'mp3' })).json;

    const b = new Browser();
    const login = formFields((await b.request(`${t.http}/dashboard/login`)).text, 'name="password"');
    expect((await b.request(`${t.http}${login.action}`, { form: { ...login.hidden, ...OWNER } })).status).toBe(303);
    const pageUrl = `${t.http}/dashboard/streams/${s.id}`;
    let html = (await b.request(pageUrl)).text;
    expect(html).toContain('<h2 id="fallback-title">Fallback</h2>');
    expect(html).toContain('nothing (off air)');

    const action = `/dashboard/streams/${s.id}/fallback`;
    expect((await b.request(`${t.http}${action}`, { form: { episodeIds: ep.id, order: 'sequential', silenceSeconds: '' } })).status).toBe(403);
    expect((await v2('GET', `/streams/${s.id}`)).json.fallback).toBeNull();

    const form = formFields(html, `action="${action}"`);
    const saved = await b.request(`${t.http}${form.action}`, { form: { ...form.hidden, episodeIds: ` ${ep.id} `, order: 'shuffle', silenceSeconds: '10' } });
    expect(saved.status).toBe(303);
    expect((await v2('GET', `/streams/${s.id}`)).json.fallback).toEqual({ episodeIds: [ep.id], order: 'shuffle', silenceSeconds: 10 });
    await waitFor(async () => (await v2('GET', `/streams/${s.id}`)).json.source === 'fallback', 20_000, 200, 'on air with the fallback');
    html = (await b.request(pageUrl)).text;
    expect(html).toContain('the fallback episodes');
    expect(html).toContain(`value="${ep.id}"`);
    const live = await b.request(`${pageUrl}/live.json`);
    expect(JSON.parse(live.text).source).toBe('fallback');

    // A bad value goes back to the page with the API's message, and changes nothing.
    const bad = formFields(html, `action="${action}"`);
    expect((await b.request(`${t.http}${bad.action}`, { form: { ...bad.hidden, episodeIds: ep.id, order: 'sequential', silenceSeconds: '2' } })).status).toBe(303);
    expect((await b.request(pageUrl)).text).toContain('silenceSeconds');
    expect((await v2('GET', `/streams/${s.id}`)).json.fallback.silenceSeconds).toBe(10);

    const off = formFields(html, `action="${action}"`);
    expect((await b.request(`${t.http}${off.action}`, { form: { ...off.hidden, episodeIds: '', order: 'sequential', silenceSeconds: '' } })).status).toBe(303);
    expect((await v2('GET', `/streams/${s.id}`)).json.fallback).toBeNull();
    await waitFor(async () => (await v2('GET', `/streams/${s.id}`)).json.source === null, 20_000, 200, 'off air again');
  }, 90_000);
});
