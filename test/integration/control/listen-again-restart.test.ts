/**
 * A publication that waits for its audio survives a restart (docs/podcasts.md "Publishing while
 * the audio is processed"): an upload published while its loudness normalisation runs is
 * `processing`; the server stops before the normalisation ends; the next start on the same data
 * dir resumes the normalisation and then publishes the episode with its normalised audio, with
 * `podcast.published`, and the feed (parsed by podcast-partytime) lists that audio.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { parseFeed } from 'podcast-partytime';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { toneMp3 } from '../../helpers/episodes.js';

const tmp = tempDir('skylark-publish-restart-');
let server: TestServer | undefined;
afterAll(async () => {
  await server?.close();
  tmp.cleanup();
});

describe('a publication waiting for its audio, across a restart', () => {
  it('is published by the next start once the audio is normalised', async () => {
    const env = { SKYLARK_DATA_DIR: tmp.dir, SKYLARK_PUBLISH_WAIT_MS: '0' };
    server = await startInProcess(env);
    const key = server.secretKey;
    const pid = (await api(server.http, key, 'POST', '/v2/podcasts', { title: 'Interrupted', category: 'Technology' })).json.id;
    const ep = (await api(server.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Long one' })).json;
    const up = await fetch(`${server.http}/v2/podcasts/${pid}/episodes/${ep.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body: toneMp3(tmp.dir, 'long.mp3', 60, 997) });
    const uploaded = (await up.json()) as any;
    expect(up.status).toBe(200);
    const pub = await api(server.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id });
    expect(pub.json.status).toBe('processing');
    await server.close(); // the normalisation is cut off
    server = undefined;

    server = await startInProcess(env);
    const base = server.http;
    const done = await waitFor(async () => {
      const e = (await api(base, key, 'GET', `/v2/podcasts/${pid}/episodes/${ep.id}`)).json;
      return e.status === 'published' ? e : null;
    }, 120_000, 200, 'the publication after the restart');
    expect(done.loudness).toMatchObject({ normalized: true, originalAudioUrl: uploaded.audioUrl.replace(/^http:\/\/[^/]+/, base) });
    const item = parseFeed(await (await fetch(`${base}/feed/${pid}.xml`)).text())!.items[0]!;
    expect(item.enclosure.url).toBe(done.audioUrl);
    const ev = (await api(base, key, 'GET', '/v2/events?type=podcast.published')).json.data.filter((e: any) => e.data.object.id === ep.id);
    expect(ev).toHaveLength(1);
  });
});
