/** A stream made live by a real FFmpeg publisher, for tests that fetch its HLS. */
import type { ChildProcess } from 'node:child_process';
import { api, waitFor, type TestServer } from './server.js';
import { publish } from './publish.js';

export interface LiveHls {
  /** The stream object as `POST /v2/streams` answered it. */
  stream: { id: string; hlsUrl: string; rtmpUrl: string; streamKey: string };
  pub: ChildProcess;
  /** The top layer's media playlist URL (`a128/…`), once it lists a segment. */
  mediaUrl: URL;
}

/**
 * Creates a stream with `body` (title, latencyMode, …), publishes a sine tone for `seconds`, and
 * waits until its multivariant playlist answers and the 128 kbps layer lists a segment.
 * @throws Error when that does not happen within 20 s each
 */
export async function liveHls(t: TestServer, body: Record<string, unknown>, seconds: number): Promise<LiveHls> {
  const stream = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { reconnectWindow: 60, ...body })).json as LiveHls['stream'];
  const pub = publish(`${stream.rtmpUrl}/${stream.streamKey}`, { seconds });
  const master = await waitFor(async () => {
    const r = await fetch(stream.hlsUrl);
    return r.status === 200 ? r.text() : null;
  }, 20_000, 200, 'multivariant playlist');
  const mediaUrl = new URL(master.split('\n').find((l) => l.startsWith('a128/'))!, stream.hlsUrl);
  await waitFor(async () => ((await (await fetch(mediaUrl)).text()).match(/#EXTINF/g) ?? []).length >= 1, 20_000, 200, 'a segment');
  return { stream, pub, mediaUrl };
}
