/**
 * The HLS timeline never goes back, also across a restart of the node (docs/behaviour.md §3
 * "HLS", docs/streams.md "One timeline"; RFC 8216 §6.2.1). `skylark serve` runs as a child process
 * on one data dir; a real FFmpeg publishes a low-latency AAC stream (the passthrough layer and an
 * encoded one); every media playlist's sequence numbers and every segment, part and init URI it
 * lists are read with their bytes. The node is killed (SIGKILL) or stopped (SIGTERM), started again
 * on the same data dir, and the same stream is published again with other audio: every playlist's
 * `EXT-X-MEDIA-SEQUENCE` is above every media sequence number listed before, its
 * `EXT-X-DISCONTINUITY-SEQUENCE` is not lower, and every URI seen before answers 404 or the very
 * bytes it answered before — never other audio under an old name. Then the same through a stock
 * nginx edge from `skylark edge-config` (docs/behaviour.md §12), which caches every media object as
 * immutable: after a restart of the origin, every object the new playlist lists answers, through the
 * edge, the bytes the origin answers for it (never a cached object of the previous run).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { api, freePort, runCli, startCli, tempDir, waitFor, type CliServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { nginxBinary, startEdge } from '../../../bench/lib/nginx-edges.js';

const nginx = nginxBinary();


/** What one media playlist showed: its numbers and the objects it listed (absolute URL → bytes). */
interface Seen {
  mediaSequence: number;
  discontinuitySequence: number;
  /** The highest media sequence number it named (a segment, or a part of the segment in progress). */
  highest: number;
  /** URL path (the node's port changes with each run) → bytes. */
  objects: Map<string, Buffer>;
}

/** The media playlist URLs of a stream (its multivariant playlist's variants, without queries). */
async function mediaPlaylists(hlsUrl: string): Promise<string[]> {
  const text = await waitFor(async () => {
    const r = await fetch(hlsUrl);
    const t = await r.text();
    return r.status === 200 && (t.match(/#EXT-X-STREAM-INF/g) ?? []).length >= 2 ? t : null;
  }, 30_000, 200, 'a multivariant playlist with two variants');
  return text.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => new URL(l.split('?')[0]!, hlsUrl).toString());
}

/** Reads a media playlist once it lists `segments` segments, then fetches every object it lists. */
async function read(url: string, segments: number): Promise<Seen> {
  const text = await waitFor(async () => {
    const r = await fetch(url);
    const t = await r.text();
    return r.status === 200 && (t.match(/#EXTINF/g) ?? []).length >= segments ? t : null;
  }, 40_000, 250, `${segments} segments in ${url}`);
  const num = (tag: string) => Number(new RegExp(`^#${tag}:(\\d+)$`, 'm').exec(text)![1]);
  const uris = [...text.matchAll(/#EXT-X-(?:MAP|PART):[^\n]*URI="([^"]+)"/g)].map((m) => m[1]!);
  uris.push(...text.split('\n').filter((l) => l && !l.startsWith('#')));
  const objects = new Map<string, Buffer>();
  let highest = -1;
  for (const u of uris) {
    const abs = new URL(u, url);
    const seq = /^(\d+)\./.exec(u);
    if (seq) highest = Math.max(highest, Number(seq[1]));
    const r = await fetch(abs);
    if (r.status === 200) objects.set(abs.pathname, Buffer.from(await r.arrayBuffer()));
  }
  return { mediaSequence: num('EXT-X-MEDIA-SEQUENCE'), discontinuitySequence: num('EXT-X-DISCONTINUITY-SEQUENCE'), highest, objects };
}

describe('the HLS timeline across restarts of the node', () => {
  const tmp = tempDir();
  let server: CliServer | undefined;
  afterAll(async () => {
    await server?.stop();
    tmp.cleanup();
  });

  it('never lowers a playlist sequence number nor names other audio with an old URI (SIGKILL, then SIGTERM)', async () => {
    const key = JSON.parse(await runCli(['accounts', 'create', '--name', 'Timeline', '--plan', 'paid', '--json', '--data-dir', tmp.dir])).secretKey as string;
    server = await startCli(tmp.dir);
    const s = (await api(server.http, key, 'POST', '/v2/streams', { title: 'Never back', reconnectWindow: 30, latencyMode: 'low' })).json;
    /** Everything seen so far, per layer playlist path. */
    const before = new Map<string, Seen>();
    let frequency = 440;

    for (const stop of ['first run', 'SIGKILL', 'SIGTERM'] as const) {
      if (stop !== 'first run') {
        if (stop === 'SIGKILL') server.child.kill('SIGKILL');
        else await server.stop();
        await exited(server.child);
        server = await startCli(tmp.dir);
      }
      frequency += 220;
      const pub = publish(`${server.rtmp}/live/${s.id}/${s.streamKey}`, { seconds: 60, frequency });
      try {
        const hlsUrl = `${server.http}/hls/${s.id}/index.m3u8`;
        for (const url of await mediaPlaylists(hlsUrl)) {
          const layer = new URL(url).pathname;
          const now = await read(url, 3);
          const old = before.get(layer);
          if (old) {
            // No name seen before answers other bytes (an edge or a player may hold the old ones).
            for (const [uri, bytes] of old.objects) {
              const r = await fetch(`${server.http}${uri}`);
              const body = Buffer.from(await r.arrayBuffer());
              if (r.status === 404) continue;
              expect(r.status, uri).toBe(200);
              expect(body.equals(bytes), `${stop}: ${uri} answers other bytes than before the restart`).toBe(true);
            }
            expect(now.mediaSequence, `${stop}: ${layer} EXT-X-MEDIA-SEQUENCE`).toBeGreaterThan(old.highest);
            expect(now.discontinuitySequence, `${stop}: ${layer} EXT-X-DISCONTINUITY-SEQUENCE`).toBeGreaterThanOrEqual(old.discontinuitySequence);
            process.stderr.write(`hls-timeline-restart: ${stop} ${layer.split('/')[3]}: listed up to msn ${old.highest} (discontinuity sequence ${old.discontinuitySequence}), then EXT-X-MEDIA-SEQUENCE ${now.mediaSequence} (${now.discontinuitySequence}); ${old.objects.size} old URIs re-read\n`);
          }
          const objects = new Map([...(old?.objects ?? []), ...now.objects]);
          before.set(layer, { ...now, highest: Math.max(now.highest, old?.highest ?? -1), objects });
        }
      } finally {
        pub.kill('SIGKILL');
        await exited(pub);
      }
    }
  }, 240_000);

  it.skipIf(!nginx)('a stock nginx edge never serves a previous run\'s object under a name the new run lists', async () => {
    const dir = tempDir();
    const edgeDir = tempDir('skylark-edge-');
    const port = await freePort();
    const env = { SKYLARK_HTTP_HOST: '127.0.0.1', SKYLARK_HTTP_PORT: String(port) };
    let origin: CliServer | undefined;
    const edge = { stop: async () => {} };
    try {
      const key = JSON.parse(await runCli(['accounts', 'create', '--name', 'Edge', '--plan', 'paid', '--json', '--data-dir', dir.dir])).secretKey as string;
      origin = await startCli(dir.dir, env);
      const s = (await api(origin.http, key, 'POST', '/v2/streams', { title: 'Behind an edge', reconnectWindow: 30, latencyMode: 'low' })).json;
      const e = await startEdge({ origin: origin.http, host: '127.0.0.4', dir: edgeDir.dir });
      edge.stop = () => e.stop();
      let seen = new Map<string, Buffer>();
      for (const [run, frequency] of [[1, 440], [2, 880]] as const) {
        if (run === 2) {
          origin.child.kill('SIGKILL');
          await exited(origin.child);
          origin = await startCli(dir.dir, env);
        }
        const pub = publish(`${origin.rtmp}/live/${s.id}/${s.streamKey}`, { seconds: 60, frequency });
        try {
          for (const url of await mediaPlaylists(`${e.url}/hls/${s.id}/index.m3u8`)) {
            const now = await read(url, 3);
            for (const [uri, bytes] of now.objects) {
              // Through the edge (a HIT for anything it cached in the run before) = from the origin now.
              const direct = await fetch(`${origin.http}${uri}`);
              if (direct.status !== 200) continue; // left the origin's window meanwhile
              expect(Buffer.from(await direct.arrayBuffer()).equals(bytes), `run ${run}: the edge answered ${uri} with other bytes than the origin`).toBe(true);
              const before = seen.get(uri);
              if (before) expect(before.equals(bytes), `run ${run}: ${uri} names other bytes than in the run before`).toBe(true);
            }
            seen = new Map([...seen, ...now.objects]);
          }
        } finally {
          pub.kill('SIGKILL');
          await exited(pub);
        }
      }
    } finally {
      await edge.stop();
      await origin?.stop();
      edgeDir.cleanup();
      dir.cleanup();
    }
  }, 180_000);
});
