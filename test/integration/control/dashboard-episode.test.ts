/**
 * The dashboard's episode page (docs/dashboard.md "Episodes"), over real HTTP after a dashboard
 * login: it shows the loudness of the served audio, and CSRF-checked forms edit the title and the
 * description (show notes), the chapters (a JSON chapters document, checked like the API's: a
 * broken one is refused with the field named and changes nothing) and the transcript; the API
 * then answers what the forms set.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { Browser, formFields } from '../../helpers/platform.js';
import { episodeWithAudio, toneMp3 } from '../../helpers/episodes.js';

const OWNER = { email: 'host@example.com', password: 'a long enough owner password' };
let t: TestServer;
let key: string;
beforeAll(async () => {
  t = await startInProcess();
  key = (await t.server.accounts.create({ name: 'Pod', plan: 'paid', region: 'eu-west-1', email: OWNER.email, password: OWNER.password })).secretKey;
});
afterAll(async () => {
  await t?.close();
});

describe('dashboard: episode page', () => {
  it('shows the loudness and edits title, show notes, chapters and transcript', async () => {
    const v2 = (method: string, p: string, body?: unknown) => api(t.http, key, method, `/v2${p}`, body);
    const pid = (await v2('POST', '/podcasts', { title: 'Edited', category: 'Technology' })).json.id;
    const eid = await episodeWithAudio(t.http, key, pid, 'Before', toneMp3(t.dataDir, 'e.mp3', 4, 440));
    await waitFor(async () => (await v2('GET', `/podcasts/${pid}/episodes/${eid}`)).json.loudness, 60_000, 200, 'measured');
    const ep = (await v2('GET', `/podcasts/${pid}/episodes/${eid}`)).json;

    const b = new Browser();
    const login = formFields((await b.request(`${t.http}/dashboard/login`)).text, 'name="password"');
    expect((await b.request(`${t.http}${login.action}`, { form: { ...login.hidden, ...OWNER } })).status).toBe(303);
    const pageUrl = `${t.http}/dashboard/podcasts/${pid}/episodes/${eid}`;
    let html = (await b.request(pageUrl)).text;
    expect(html).toContain('<h2 id="loudness">Loudness</h2>');
    expect(html).toContain(`${ep.loudness.integratedLufs.toFixed(1)} LUFS`);
    expect(html).toContain('normalised to -16 LUFS');

    // Without the CSRF token: refused, nothing changes.
    const edit = formFields(html, 'id="edit-form"');
    expect((await b.request(`${t.http}${edit.action}`, { form: { title: 'Hijacked' } })).status).toBe(403);
    expect((await v2('GET', `/podcasts/${pid}/episodes/${eid}`)).json.title).toBe('Before');

    const saved = await b.request(`${t.http}${edit.action}`, { form: { ...edit.hidden, title: 'After', description: '<p>Notes with <b>bold</b></p>' } });
    expect(saved.status).toBe(303);
    const after = (await v2('GET', `/podcasts/${pid}/episodes/${eid}`)).json;
    expect(after).toMatchObject({ title: 'After', description: '<p>Notes with <b>bold</b></p>' });

    html = (await b.request(pageUrl)).text;
    const ch = formFields(html, 'id="chapters-form"');
    const bad = await b.request(`${t.http}${ch.action}`, { form: { ...ch.hidden, chapters: '{"version":"1.2.0","chapters":[{"startTime":-1,"title":"A"}]}' } });
    expect(bad.status).toBe(303);
    expect((await b.request(pageUrl)).text).toContain('chapters.0.startTime');
    expect((await v2('GET', `/podcasts/${pid}/episodes/${eid}`)).json.chaptersUrl).toBeNull();
    const doc = '{"version":"1.2.0","chapters":[{"startTime":0,"title":"Intro"},{"startTime":2,"title":"Main"}]}';
    expect((await b.request(`${t.http}${ch.action}`, { form: { ...ch.hidden, chapters: doc } })).status).toBe(303);
    expect((await v2('GET', `/podcasts/${pid}/episodes/${eid}`)).json.chaptersUrl).toMatch(/\.chapters\.json$/);
    html = (await b.request(pageUrl)).text;
    expect(html).toContain('&quot;Intro&quot;'); // the form shows the stored document

    const tr = formFields(html, 'id="transcript-form"');
    const vtt = 'WEBVTT\n\n00:00:00.000 --> 00:00:02.000\nHello.\n';
    expect((await b.request(`${t.http}${tr.action}`, { form: { ...tr.hidden, type: 'text/vtt', transcript: vtt } })).status).toBe(303);
    const withTranscript = (await v2('GET', `/podcasts/${pid}/episodes/${eid}`)).json;
    expect(withTranscript.transcriptType).toBe('text/vtt');
    // Empty forms remove them.
    html = (await b.request(pageUrl)).text;
    expect((await b.request(`${t.http}${tr.action}`, { form: { ...formFields(html, 'id="transcript-form"').hidden, type: 'text/vtt', transcript: '' } })).status).toBe(303);
    expect((await b.request(`${t.http}${ch.action}`, { form: { ...formFields(html, 'id="chapters-form"').hidden, chapters: '' } })).status).toBe(303);
    const cleared = (await v2('GET', `/podcasts/${pid}/episodes/${eid}`)).json;
    expect(cleared.transcriptUrl).toBeNull();
    expect(cleared.chaptersUrl).toBeNull();
  });
});
