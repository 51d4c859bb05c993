/**
 * The media caps of docs/behaviour.md §13 end a publish with `stream.error` (issue "The node survives its
 * users" item 7): a real FFmpeg publisher against a real server.
 * - Frames over `SKYLARK_MAX_AUDIO_FRAME_BYTES` (MP3 at 320 kbps / 44.1 kHz: 1,044-byte frames,
 *   cap 1,024): `frame_too_large`, the publisher is cut off, nothing is segmented.
 * - A segment over `SKYLARK_SEGMENT_BYTES_FACTOR` × nominal (factor 2 on a `low` 64 kbps stream fed
 *   256 kbps): `segment_too_large`, the publisher is cut off; no retained segment is over the cap.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

interface StreamError {
  type: string;
  data: { object: { id: string }; error: { code: string; message: string } };
}

async function streamErrors(t: TestServer, streamId: string): Promise<StreamError[]> {
  const list = (await api(t.http, t.secretKey, 'GET', '/v2/events?type=stream.error&limit=100')).json.data as StreamError[];
  return list.filter((e) => e.data.object.id === streamId);
}

describe('media caps end the publish', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startInProcess({ SKYLARK_MAX_AUDIO_FRAME_BYTES: '1024', SKYLARK_SEGMENT_BYTES_FACTOR: '2', SKYLARK_ABR_LADDER: '0' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('frames over the frame cap: stream.error frame_too_large and the publisher is cut off', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Big frames', codec: 'mp3', quality: 'high' })).json;
    const p = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 20, codecArgs: ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '320k'] });
    const errors = await waitFor(async () => {
      const e = await streamErrors(t, s.id);
      return e.length > 0 ? e : null;
    }, 15_000, 100, 'frame_too_large');
    expect(errors.map((e) => e.data.error.code)).toEqual(['frame_too_large']);
    expect(await exited(p)).not.toBe(0); // cut off long before its 20 s
    expect((await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.status).toBe('idle');
    expect(t.server.limits.count('audio_frame_bytes')).toBeGreaterThan(0);
  });

  it('a segment over the byte cap: stream.error segment_too_large, the publisher is cut off, no segment over the cap', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Fat segments', codec: 'mp3', quality: 'low', reconnectWindow: 0 })).json;
    // 256 kbps at 44.1 kHz: 836-byte frames (under the frame cap), 4 × the low quality's 64 kbps.
    const p = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 20, codecArgs: ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '256k'] });
    const errors = await waitFor(async () => {
      const e = await streamErrors(t, s.id);
      return e.length > 0 ? e : null;
    }, 15_000, 100, 'segment_too_large');
    expect(errors.map((e) => e.data.error.code)).toEqual(['segment_too_large']);
    expect(await exited(p)).not.toBe(0);
    // Cap: 2 × 64 kbps × 2 s = 32,000 bytes of frames per segment (plus TS overhead).
    const seg = await fetch(`${t.http}/hls/${s.id}/a64/index.m3u8`);
    if (seg.status === 200) {
      const uris = (await seg.text()).split('\n').filter((l) => l.endsWith('.ts'));
      for (const u of uris) {
        const body = new Uint8Array(await (await fetch(`${t.http}/hls/${s.id}/a64/${u.split('?')[0]}`)).arrayBuffer());
        expect(body.byteLength).toBeLessThan(32_000 * 1.2);
      }
    }
    expect(t.server.limits.count('segment_bytes')).toBeGreaterThan(0);
  });
});
