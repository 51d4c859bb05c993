/**
 * Live loudness (docs/streams.md "Live loudness"), with real parts: FFmpeg publishes a 1 kHz tone
 * at a known level over RTMP to a `medium` stream (a ladder with a codec process) in real time;
 * while it is live the dashboard's `live.json` (after a dashboard login) shows its short-term
 * loudness, and once the broadcast has ended its `integratedLufs` is within 1 LU of what FFmpeg's
 * own `ebur128` measures on the same source audio for the same time. A `low` stream (one layer, no
 * codec process) publishing at the same time measures nothing: `loudness: null`, `integratedLufs: null`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { ffmpegPath } from '../../helpers/ffmpeg.js';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited } from '../../helpers/publish.js';
import { Browser, formFields } from '../../helpers/platform.js';

const OWNER = { email: 'loud@example.com', password: 'a long enough owner password' };
/** The tone: the sine source's amplitude (1/8) lowered by 20 dB, in stereo. */
const SOURCE = 'sine=frequency=1000:sample_rate=48000,volume=-20dB,aformat=channel_layouts=stereo';
const SECONDS = 12;

let t: TestServer;
let key: string;
beforeAll(async () => {
  t = await startInProcess();
  key = (await t.server.accounts.create({ name: 'Loud', plan: 'paid', region: 'eu-west-1', email: OWNER.email, password: OWNER.password })).secretKey;
});
afterAll(async () => {
  await t?.close();
});

/** Publishes `SOURCE` for `seconds` in real time as AAC 128 kbps over RTMP. */
function publishTone(url: string, seconds: number) {
  return spawn(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', SOURCE, '-t', String(seconds), '-c:a', 'aac', '-b:a', '128k', '-f', 'flv', url], { stdio: 'ignore' });
}

/** FFmpeg's own integrated loudness (LUFS) of `SOURCE` over `seconds`: the `I:` of its ebur128 summary. */
function referenceLufs(seconds: number): number {
  const r = spawnSync(ffmpegPath(), ['-hide_banner', '-nostats', '-loglevel', 'info', '-f', 'lavfi', '-i', SOURCE, '-t', String(seconds), '-af', 'ebur128', '-f', 'null', '-'], { encoding: 'utf8', timeout: 60_000 });
  const summary = r.stderr.slice(r.stderr.lastIndexOf('Summary:'));
  const m = /I:\s*(-?[\d.]+) LUFS/.exec(summary);
  if (r.status !== 0 || !m) throw new Error(`no ebur128 summary from ffmpeg (${r.status}): ${r.stderr.slice(-500)}`);
  return Number(m[1]);
}

describe('live loudness', () => {
  it('shows the short-term loudness while live and stores the broadcast integrated loudness; a stream without a codec process has none', async () => {
    const v2 = (method: string, p: string, body?: unknown) => api(t.http, key, method, `/v2${p}`, body);
    const medium = (await v2('POST', '/streams', { title: 'Tone', quality: 'medium', reconnectWindow: 0 })).json;
    const low = (await v2('POST', '/streams', { title: 'Low tone', quality: 'low', reconnectWindow: 0 })).json;
    expect(medium.status).toBe('idle');

    const b = new Browser();
    const login = formFields((await b.request(`${t.http}/dashboard/login`)).text, 'name="password"');
    expect((await b.request(`${t.http}${login.action}`, { form: { ...login.hidden, ...OWNER } })).status).toBe(303);
    const liveJson = async (id: string) => JSON.parse((await b.request(`${t.http}/dashboard/streams/${id}/live.json`)).text) as { status: string; loudness: { shortTermLufs: number; momentaryLufs: number; integratedLufs: number | null } | null };

    const pm = publishTone(`${medium.rtmpUrl}/${medium.streamKey}`, SECONDS);
    const pl = publishTone(`${low.rtmpUrl}/${low.streamKey}`, 6);
    let during: { shortTermLufs: number; momentaryLufs: number };
    try {
      // While live: a short-term value (above the meter's floor once 3 s were heard).
      during = await waitFor(async () => {
        const l = await liveJson(medium.id);
        return l.status === 'live' && l.loudness && l.loudness.shortTermLufs > -60 ? l.loudness : null;
      }, 20_000, 250, 'a short-term loudness in live.json');
      expect(during.shortTermLufs).toBeLessThan(0);
      expect(during.momentaryLufs).toBeGreaterThan(-60);
      // The low stream is live as long (it started with the medium one), yet measured nothing.
      expect((await liveJson(low.id)).status).toBe('live');
      expect((await liveJson(low.id)).loudness).toBeNull();
    } finally {
      expect(await exited(pm)).toBe(0);
      expect(await exited(pl)).toBe(0);
    }

    // After the broadcast: its integrated loudness, as FFmpeg measures the source itself.
    const reference = referenceLufs(SECONDS);
    const ended = async (id: string) =>
      waitFor(async () => {
        const l = (await v2('GET', `/streams/${id}/broadcasts`)).json.data;
        return l.length === 1 && l[0].endedAt !== null ? l[0] : null;
      }, 20_000, 200, 'the broadcast ended');
    const broadcast = await ended(medium.id);
    expect(typeof broadcast.integratedLufs).toBe('number');
    expect(Math.abs(broadcast.integratedLufs - reference)).toBeLessThanOrEqual(1);
    expect(Math.abs(during.shortTermLufs - reference)).toBeLessThanOrEqual(2);
    expect((await v2('GET', `/streams/${medium.id}/broadcasts/${broadcast.id}`)).json.integratedLufs).toBe(broadcast.integratedLufs);
    expect((await ended(low.id)).integratedLufs).toBeNull();
    // The stream page has the Loudness card with its meter.
    const html = (await b.request(`${t.http}/dashboard/streams/${medium.id}`)).text;
    expect(html).toContain('<h2 id="loudness-title">Loudness</h2>');
    expect(html).toContain('role="meter"');
  }, 90_000);
});
