/**
 * A recorded broadcast's draft episode is measured like an upload (docs/podcasts.md "Loudness"): a
 * stream recording into a podcast with the default −16 LUFS target is published over RTMP by FFmpeg
 * at about −28 LUFS; its draft episode gets `loudness` (normalised, the recording kept as the
 * original), and once published the served `audioUrl` measures −16 ± 1 LUFS with true peak ≤ −1
 * dBTP (± 0.5) on FFmpeg's own `ebur128` meter.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited } from '../../helpers/publish.js';
import { ffmpegPath, run } from '../../helpers/ffmpeg.js';

const ffmpeg = ffmpegPath();
let t: TestServer;

/** FFmpeg's BS.1770-4 meter on `file`: integrated LUFS and true peak dBTP. */
async function meter(file: string): Promise<{ i: number; tp: number }> {
  const r = await run(ffmpeg, ['-hide_banner', '-nostats', '-i', file, '-af', 'ebur128=peak=true:framelog=verbose', '-f', 'null', '-'], 60_000);
  expect(r.code, r.stderr.slice(-500)).toBe(0);
  const summary = r.stderr.slice(r.stderr.lastIndexOf('Summary:'));
  return { i: Number(/I:\s+(-?[\d.]+) LUFS/.exec(summary)![1]), tp: Number(/True peak:\s*\n\s*Peak:\s+(-?[\d.]+)/.exec(summary)![1]) };
}

beforeAll(async () => {
  t = await startInProcess();
});
afterAll(async () => {
  await t?.close();
});

describe('recorded broadcast', () => {
  it('its draft episode is measured and normalised like an upload', async () => {
    const pod = await api(t.http, t.secretKey, 'POST', '/v2/podcasts', { title: 'Recorded and levelled' });
    expect(pod.json.loudnessTarget).toBe(-16);
    const created = await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Quiet live show', recording: { podcastId: pod.json.id }, reconnectWindow: 1 });
    expect(created.status, created.text).toBe(201);
    const s = created.json;
    // ~6 s of speech-like audio (pink noise with level changes), quiet: around −28 LUFS.
    const source = "anoisesrc=color=pink:sample_rate=48000:amplitude=0.05:seed=3,volume='if(lt(mod(t,1.3),0.8),1,0.15)':eval=frame";
    const pub = spawn(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', source, '-t', '6', '-ac', '2', '-c:a', 'aac', '-b:a', '128k', '-f', 'flv', `${s.rtmpUrl}/${s.streamKey}`], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    expect(await exited(pub)).toBe(0);
    const ep = await waitFor(async () => {
      const r = await api(t.http, t.secretKey, 'GET', `/v2/podcasts/${pod.json.id}/episodes`);
      return r.json.data[0]?.loudness ? r.json.data[0] : null;
    }, 60_000, 200, 'the recording measured');
    expect(ep.sourceStreamId).toBe(s.id);
    expect(ep.loudness).toMatchObject({ normalized: true, target: -16 });
    expect(ep.loudness.original.integratedLufs).toBeLessThan(-22);
    expect(Math.abs(ep.loudness.integratedLufs - -16)).toBeLessThanOrEqual(1);

    const p = await api(t.http, t.secretKey, 'POST', `/v2/podcasts/${pod.json.id}/publish`, { episodeId: ep.id });
    expect(p.status, p.text).toBe(200);
    const r = await fetch(ep.audioUrl);
    expect(r.status).toBe(200);
    const file = path.join(t.dataDir, `served${path.extname(new URL(ep.audioUrl).pathname)}`);
    writeFileSync(file, Buffer.from(await r.arrayBuffer()));
    const m = await meter(file);
    expect(Math.abs(m.i - -16), `integrated ${m.i} LUFS`).toBeLessThanOrEqual(1);
    expect(m.tp, `true peak ${m.tp} dBTP`).toBeLessThanOrEqual(-0.5);
    expect(Math.abs(ep.loudness.integratedLufs - m.i)).toBeLessThanOrEqual(0.2);
    // The recording as it was stays served beside it.
    expect((await fetch(ep.loudness.originalAudioUrl)).status).toBe(200);
  });
});
