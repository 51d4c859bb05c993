/**
 * A radio source whose connection drops and comes back (docs/streams.md "States", docs/behaviour.md
 * §2, §10 "Ingest"): Liquidsoap's `output.icecast` publishes MP3 through a TCP relay that the test
 * cuts mid-stream, as a DJ's flaky uplink would. Liquidsoap itself keeps running and reconnects on
 * its own. Within the reconnect window the stream stays one broadcast, its HLS timeline goes on
 * (media sequence rising, an `EXT-X-DISCONTINUITY` at the gap, and it still decodes), a `/listen`
 * connection opened before the cut stays open and carries audio again after it, and no
 * `stream.ended` is recorded; a second cut after the window has passed ends the broadcast, and the
 * reconnect that follows starts a new one on the same key and URLs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { exited } from '../../helpers/publish.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

/** A TCP relay in front of the Icecast port whose live connections the test can cut. */
class Relay {
  readonly server: net.Server;
  readonly pairs = new Set<[net.Socket, net.Socket]>();
  accepted = 0;
  constructor(target: number) {
    this.server = net.createServer((client) => {
      this.accepted++;
      const upstream = net.connect(target, '127.0.0.1');
      const pair: [net.Socket, net.Socket] = [client, upstream];
      this.pairs.add(pair);
      client.pipe(upstream);
      upstream.pipe(client);
      const end = () => {
        this.pairs.delete(pair);
        client.destroy();
        upstream.destroy();
      };
      client.on('close', end).on('error', end);
      upstream.on('close', end).on('error', end);
    });
  }
  listen(): Promise<number> {
    return new Promise((resolve) => this.server.listen(0, '127.0.0.1', () => resolve((this.server.address() as net.AddressInfo).port)));
  }
  /** Cuts every relayed connection at once (both sides reset), as a dropped uplink does. */
  cut(): number {
    const n = this.pairs.size;
    for (const [a, b] of this.pairs) {
      a.resetAndDestroy();
      b.resetAndDestroy();
    }
    this.pairs.clear();
    return n;
  }
  close(): void {
    this.cut();
    this.server.close();
  }
}

/** A long `/listen` GET that counts the bytes it receives. */
function listenTo(url: string): { bytes: () => number; open: () => boolean; stop: () => void } {
  const ac = new AbortController();
  let bytes = 0;
  let open = true;
  void (async () => {
    try {
      const res = await fetch(url, { signal: ac.signal });
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) bytes += chunk.byteLength;
    } catch {
      // aborted by stop() or closed by the server: `open` says which
    } finally {
      open = false;
    }
  })();
  return { bytes: () => bytes, open: () => open, stop: () => ac.abort() };
}

async function mediaPlaylist(hlsUrl: string): Promise<string | null> {
  const mv = await fetch(hlsUrl);
  if (mv.status !== 200) return null;
  const variant = (await mv.text()).split('\n').find((l) => l && !l.startsWith('#'));
  if (!variant) return null;
  const media = await fetch(new URL(variant, hlsUrl));
  return media.status === 200 ? media.text() : null;
}

const lastMsn = (playlist: string): number => {
  const seq = Number(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(playlist)?.[1] ?? NaN);
  return seq + playlist.split('\n').filter((l) => l.startsWith('#EXTINF')).length - 1;
};

describe('Liquidsoap whose connection is killed and comes back', () => {
  let t: TestServer;
  let relay: Relay;
  let liquidsoap: ChildProcess | null = null;
  let out = '';
  const tmp = tempDir('skylark-liq-');
  beforeAll(async () => {
    t = await startInProcess();
    relay = new Relay(t.server.icecastPort);
  });
  afterAll(async () => {
    liquidsoap?.kill('SIGKILL');
    relay?.close();
    await t?.close();
    tmp.cleanup();
  });

  it('resumes one broadcast within the window, keeps listeners, and starts a new one after it', async () => {
    const relayPort = await relay.listen();
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Flaky uplink', codec: 'mp3', quality: 'medium', reconnectWindow: 8 })).json as {
      id: string;
      streamKey: string;
      hlsUrl: string;
      listenUrl: string;
    };
    const script = path.join(tmp.dir, 'radio.liq');
    // Liquidsoap 2.1 (Debian): on_error returns the delay before it reconnects (s).
    writeFileSync(
      script,
      `settings.init.allow_root.set(true)
settings.log.stdout.set(true)
output.icecast(%mp3(bitrate=128), host="127.0.0.1", port=${relayPort}, user="source", password="${s.streamKey}", mount="/live/${s.id}", on_error=fun (_) -> 0.5, mksafe(sine()))
`,
    );
    liquidsoap = spawn('liquidsoap', [script], { stdio: ['ignore', 'pipe', 'pipe'] });
    liquidsoap.stdout!.on('data', (d) => (out = (out + d).slice(-4000)));
    liquidsoap.stderr!.on('data', (d) => (out = (out + d).slice(-4000)));
    const stream = async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json as { status: string };
    const broadcasts = async () => ((await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}/broadcasts`)).json as { data: { id: string; endedAt: string | null }[] }).data;

    await waitFor(async () => (await stream()).status === 'live', 30_000, 200, `live: ${out}`);
    const before = await waitFor(async () => {
      const p = await mediaPlaylist(s.hlsUrl);
      return p && p.includes('#EXTINF') ? p : null;
    }, 15_000, 200, 'first segment');
    const listener = listenTo(s.listenUrl);
    await waitFor(() => listener.bytes() > 32_000, 10_000, 100, '/listen bytes before the cut');

    // Cut 1, inside the window: Liquidsoap reconnects on its own, the broadcast goes on.
    expect(relay.cut()).toBeGreaterThan(0);
    const atCut = listener.bytes();
    await waitFor(() => relay.accepted >= 2 && relay.pairs.size > 0, 20_000, 100, `reconnect: ${out}`);
    await waitFor(() => listener.bytes() > atCut + 32_000, 15_000, 100, '/listen bytes after the reconnect');
    expect(listener.open()).toBe(true);
    expect((await stream()).status).toBe('live');
    const one = await broadcasts();
    expect(one).toHaveLength(1);
    expect(one[0]!.endedAt).toBeNull();
    const after = await waitFor(async () => {
      const p = await mediaPlaylist(s.hlsUrl);
      return p && p.includes('#EXT-X-DISCONTINUITY') && lastMsn(p) > lastMsn(before) + 1 ? p : null;
    }, 20_000, 200, 'segments after the reconnect, past a discontinuity');
    expect(lastMsn(after)).toBeGreaterThan(lastMsn(before));
    const decode = spawn(ffmpegPath(), ['-nostdin', '-hide_banner', '-loglevel', 'error', '-i', s.hlsUrl, '-t', '2', '-f', 'null', '-'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let errors = '';
    decode.stderr!.on('data', (d) => (errors += d));
    expect(await exited(decode)).toBe(0);
    expect(errors).toBe('');

    // Cut 2, held past the window: the relay refuses until the broadcast has ended; the next
    // connection of the same Liquidsoap starts a new broadcast on the same key.
    relay.server.close();
    relay.cut();
    await waitFor(async () => (await stream()).status === 'idle', 20_000, 200, 'idle after the window');
    await waitFor(() => !listener.open(), 10_000, 100, '/listen closed when the broadcast ended');
    await new Promise<void>((resolve) => relay.server.listen(relayPort, '127.0.0.1', () => resolve()));
    await waitFor(async () => (await stream()).status === 'live', 30_000, 200, `live again: ${out}`);
    const two = await broadcasts();
    expect(two).toHaveLength(2);
    expect(two[1]!.endedAt).not.toBeNull();
    const events = (await api(t.http, t.secretKey, 'GET', `/v2/events?limit=100`)).json as { data: { type: string; data: { object: { id?: string } } }[] };
    const mine = events.data.filter((e) => e.data.object?.id === s.id).map((e) => e.type).reverse();
    expect(mine.filter((x) => x === 'stream.started')).toHaveLength(2);
    expect(mine.filter((x) => x === 'stream.ended')).toHaveLength(1);
    listener.stop();
  }, 150_000);
});
