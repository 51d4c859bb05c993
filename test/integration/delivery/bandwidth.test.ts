/**
 * `BANDWIDTH` that tells the truth (rfc8216bis §4.4.6.2; docs/decisions.md "HLS"): a 256 kbps AAC
 * stream (ladder 256 passthrough + 128 and 64 encoded) whose publisher drops and reconnects twice
 * within the window (once after 1.5 s), then is taken over by a newer publisher, with real FFmpeg
 * publishers. While the
 * discontinuities are in the window, every variant's `BANDWIDTH` stays near its nominal bit rate
 * (the short flushed segment before a discontinuity is not its peak), `AVERAGE-BANDWIDTH` ≤
 * `BANDWIDTH`, and the variants stay in the ladder's order, 256 above 128 above 64.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

let t: TestServer;
beforeAll(async () => {
  t = await startInProcess();
});
afterAll(async () => {
  await t?.close();
});

interface Variant {
  uri: string;
  bandwidth: number;
  average: number;
}

function variantsOf(text: string): Variant[] {
  return [...text.matchAll(/^#EXT-X-STREAM-INF:(.*)\n(\S+)$/gm)].map((m) => ({
    uri: m[2]!.split('/')[0]!,
    bandwidth: Number(/(?:^|,)BANDWIDTH=(\d+)/.exec(m[1]!)![1]),
    average: Number(/AVERAGE-BANDWIDTH=(\d+)/.exec(m[1]!)![1]),
  }));
}

describe('BANDWIDTH across a reconnect and a takeover', () => {
  it('stays near each layer’s bit rate, never below AVERAGE-BANDWIDTH, in the ladder’s order', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Bandwidth', codec: 'aac', quality: 'high', reconnectWindow: 30 })).json;
    const url = `${s.rtmpUrl}/${s.streamKey}`;
    const media = async (layer: string) => (await fetch(s.hlsUrl.replace('index.m3u8', `${layer}/index.m3u8`))).text();
    const segments = (text: string) => (text.match(/#EXTINF/g) ?? []).length;

    const at256 = ['-ac', '2', '-c:a', 'aac', '-b:a', '256k'];
    // The first publisher, a short one, then the encoder back within the window (reconnects).
    expect(await exited(publish(url, { seconds: 7, codecArgs: at256 }))).toBe(0);
    expect(await exited(publish(url, { seconds: 1.5, codecArgs: at256, frequency: 550 }))).toBe(0);
    const back = publish(url, { seconds: 30, frequency: 660, codecArgs: at256 });
    await waitFor(async () => (await media('a128')).includes('#EXT-X-DISCONTINUITY\n'), 20_000, 200, 'the reconnect in the playlist');
    await waitFor(async () => segments((await media('a128')).split('#EXT-X-DISCONTINUITY\n').at(-1)!) >= 2, 20_000, 200, 'two segments after the reconnect');
    // A newer publisher takes over at once.
    const takeover = publish(url, { seconds: 8, frequency: 880, codecArgs: at256 });
    expect(await exited(back)).not.toBe('timeout'); // replaced
    await waitFor(async () => ((await media('a128')).match(/#EXT-X-DISCONTINUITY\n/g) ?? []).length >= 2, 20_000, 200, 'the takeover in the playlist');
    await waitFor(async () => segments((await media('a128')).split('#EXT-X-DISCONTINUITY\n').at(-1)!) >= 2, 20_000, 200, 'two segments after the takeover');
    await waitFor(async () => segments((await media('a64')).split('#EXT-X-DISCONTINUITY\n').at(-1)!) >= 2, 20_000, 200, 'the 64 kbps layer after the takeover');

    const nominal: Record<string, number> = { a256: 256_000, a128: 128_000, a64: 64_000 };
    for (let i = 0; i < 3; i++) {
      const variants = variantsOf(await (await fetch(s.hlsUrl)).text());
      expect(variants.map((v) => v.uri)).toEqual(['a256', 'a128', 'a64']);
      for (const v of variants) {
        expect(v.average, v.uri).toBeGreaterThan(nominal[v.uri]! * 0.6);
        expect(v.average, v.uri).toBeLessThanOrEqual(v.bandwidth);
        expect(v.bandwidth, v.uri).toBeLessThan(nominal[v.uri]! * 1.3);
      }
      expect(variants[0]!.bandwidth).toBeGreaterThan(variants[1]!.bandwidth);
      expect(variants[1]!.bandwidth).toBeGreaterThan(variants[2]!.bandwidth);
      await new Promise((r) => setTimeout(r, 1000));
    }
    expect(await exited(takeover)).toBe(0);
  }, 120_000);
});
