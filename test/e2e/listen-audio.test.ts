/**
 * Progressive listening in a real browser (docs/behaviour.md §10): an `<audio>` element in headless
 * Chromium plays `/listen/<id>.mp3` and `/listen/<id>.aac` (ADTS) straight from Skylark while a
 * real FFmpeg publishes: `currentTime` advances and the element reports no error.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../helpers/server.js';
import { exited, publish } from '../helpers/publish.js';
import { openPlayer, type TestBrowser } from '../helpers/browser.js';

// Browser globals inside page.evaluate callbacks (the project's lib has no DOM).
declare const window: any;
declare const Audio: any;

let t: TestServer;
let b: TestBrowser;
const publishers: ChildProcess[] = [];

beforeAll(async () => {
  [t, b] = await Promise.all([startInProcess(), openPlayer()]);
});
afterAll(async () => {
  for (const p of publishers) {
    p.kill('SIGKILL');
    await exited(p);
  }
  await b?.close();
  await t?.close();
});

describe('<audio> plays the listening URL', () => {
  for (const codec of ['mp3', 'aac'] as const) {
    it(`${codec}: currentTime advances, no media error`, async () => {
      const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: `Browser ${codec}`, codec, quality: 'low', reconnectWindow: 1 })).json;
      const args = codec === 'mp3' ? ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '64k'] : ['-ac', '2', '-c:a', 'aac', '-b:a', '64k'];
      publishers.push(publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60, codecArgs: args }));
      const url = `${t.http}/listen/${s.id}.${codec}`;
      await waitFor(async () => (await fetch(url, { method: 'HEAD' })).status === 200, 30_000, 200, 'live');
      await b.page.evaluate((src) => {
        const a = new Audio();
        window.listenAudio = a;
        window.listenError = null;
        a.onerror = () => (window.listenError = a.error ? `${a.error.code} ${a.error.message}` : 'error');
        a.src = src;
        a.play().catch((e: unknown) => (window.listenError = String(e)));
      }, url);
      const state = () => b.page.evaluate((): { t: number; error: string | null } => ({ t: window.listenAudio.currentTime, error: window.listenError }));
      const playing = await waitFor(async () => {
        const st = await state();
        if (st.error) throw new Error(`audio error: ${st.error}`);
        return st.t > 1 ? st : null;
      }, 20_000, 250, 'playback');
      await new Promise((r) => setTimeout(r, 2000));
      const later = await state();
      expect(later.error).toBeNull();
      expect(later.t).toBeGreaterThan(playing.t + 1);
      await b.page.evaluate(() => {
        const a = window.listenAudio;
        a.pause();
        a.removeAttribute('src');
        a.load();
      });
    });
  }
});
