/**
 * The stream fallback (docs/streams.md "Fallback") heard by mpv, a player written elsewhere: mpv
 * listens to a stream's `listenUrl` (progressive AAC with ICY metadata, docs/icecast.md "ICY
 * metadata") across fallback → live → fallback, and we read what it reports over its JSON IPC
 * socket (`get_property metadata` → `icy-title`, `playback-time`):
 * - on the idle stream with a fallback, the ICY title is the episode's title;
 * - an FFmpeg RTMP publisher with `-metadata title=…` (docs/streams.md "Now playing") takes over:
 *   the ICY title becomes the live title;
 * - the publisher is killed: the ICY title is the episode's again;
 * - mpv stays connected all along: its process keeps running and `playback-time` keeps advancing
 *   in each phase.
 * The times mpv took to show each title are printed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { episodeWithAudio as createEpisode, toneMp3 } from '../../helpers/episodes.js';

let t: TestServer;
const tmp = tempDir('skylark-fallback-mpv-');
const children: ChildProcess[] = [];
let ipc: MpvIpc | null = null;

const v2 = (method: string, p: string, body?: unknown) => api(t.http, t.secretKey, method, `/v2${p}`, body);

const tone = (file: string, seconds: number, hz: number) => toneMp3(tmp.dir, file, seconds, hz);
const episodeWithAudio = (pid: string, title: string, audio: Buffer | null) => createEpisode(t.http, t.secretKey, pid, title, audio);

/** A client of mpv's JSON IPC (`--input-ipc-server`): one JSON command per line, answers matched by `request_id`. */
interface MpvIpc {
  /** The property's value; null when unavailable or not answered within 5 s. @throws Error when the socket closes */
  get(property: string): Promise<unknown>;
  /** How many requests went unanswered for 5 s. */
  unanswered(): number;
  close(): void;
}

async function connectIpc(socketPath: string): Promise<MpvIpc> {
  const sock = await waitFor(
    () =>
      new Promise<net.Socket | null>((resolve) => {
        const s = net.connect(socketPath, () => resolve(s));
        s.once('error', () => resolve(null));
      }),
    10_000,
    100,
    'the mpv IPC socket',
  );
  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  let next = 1;
  let unanswered = 0;
  let buf = '';
  sock.on('data', (d: Buffer) => {
    buf += d.toString('utf8');
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let msg: { request_id?: number; error?: string; data?: unknown };
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      const p = msg.request_id !== undefined ? pending.get(msg.request_id) : undefined;
      if (!p) continue; // an event
      pending.delete(msg.request_id!);
      if (msg.error === 'success') p.resolve(msg.data);
      else p.resolve(null); // e.g. "property unavailable" before playback starts
    }
  });
  const fail = () => {
    for (const p of pending.values()) p.reject(new Error('mpv IPC closed'));
    pending.clear();
  };
  sock.on('close', fail);
  sock.on('error', fail);
  return {
    get(property) {
      const id = next++;
      return new Promise((resolve, reject) => {
        // An answer that does not come in 5 s counts as "unavailable" (the callers poll again).
        const timer = setTimeout(() => {
          pending.delete(id);
          unanswered++;
          resolve(null);
        }, 5_000);
        pending.set(id, { resolve: (v) => (clearTimeout(timer), resolve(v)), reject: (e) => (clearTimeout(timer), reject(e)) });
        sock.write(`${JSON.stringify({ command: ['get_property', property], request_id: id })}\n`);
      });
    },
    unanswered: () => unanswered,
    close: () => sock.destroy(),
  };
}

beforeAll(async () => {
  t = await startInProcess({});
}, 60_000);

afterAll(async () => {
  ipc?.close();
  for (const c of children) {
    c.kill('SIGKILL');
    await exited(c);
  }
  await t?.close();
  tmp.cleanup();
});

describe('mpv across fallback → live → fallback', () => {
  it('shows the episode title, the live title, then the episode title again, and keeps playing', async () => {
    const pod = await v2('POST', '/podcasts', { title: 'Station archive' });
    expect(pod.status, pod.text).toBe(201);
    const e1 = await episodeWithAudio(pod.json.id, 'Episode one', tone('one.mp3', 30, 440));
    const created = await v2('POST', '/streams', { title: 'Station', codec: 'aac', reconnectWindow: 0, fallback: { episodeIds: [e1] } });
    expect(created.status, created.text).toBe(201);
    const s = created.json;
    expect(s.source).toBe('fallback');
    await waitFor(async () => (await v2('GET', `/streams/${s.id}`)).json.nowPlaying?.title === 'Episode one', 20_000, 100, 'the episode title on the stream');
    // On air once its first segment is cut (about one segment after the fallback starts): until then /listen is 404.
    await waitFor(async () => {
      const r = await fetch(s.listenUrl);
      await r.body?.cancel();
      return r.status === 200;
    }, 20_000, 200, 'the fallback on /listen');

    const socketPath = path.join(tmp.dir, 'mpv.sock');
    let mpvLog = '';
    const mpv = spawn('/usr/bin/mpv', ['--no-config', '--no-video', '--ao=null', '--msg-level=all=v', `--input-ipc-server=${socketPath}`, s.listenUrl], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(mpv);
    mpv.stdout!.on('data', (d) => (mpvLog = (mpvLog + d).slice(-20_000)));
    mpv.stderr!.on('data', (d) => (mpvLog = (mpvLog + d).slice(-20_000)));
    ipc = await connectIpc(socketPath);
    const m = ipc;
    const icyTitle = async () => ((await m.get('metadata')) as Record<string, string> | null)?.['icy-title'] ?? null;
    const playbackTime = async () => ((await m.get('playback-time')) as number | null) ?? 0;
    const alive = () => {
      expect(mpv.exitCode, `mpv exited; its output (end):\n${mpvLog.slice(-3000)}`).toBeNull();
      expect(mpv.signalCode).toBeNull();
    };
    /** Waits until mpv shows `title`; answers the time it took (ms). */
    const titleIs = async (title: string, what: string) => {
      const from = Date.now();
      let last: string | null = null;
      await waitFor(async () => {
        alive();
        return (last = await icyTitle()) === title;
      }, 25_000, 200, what).catch((e) => {
        throw new Error(`${(e as Error).message}; mpv shows ${JSON.stringify(last)} (${m.unanswered()} IPC requests unanswered); its output (end):\n${mpvLog.slice(-3000)}`);
      });
      return Date.now() - from;
    };
    /** Waits until playback-time has advanced `seconds` past its value now. */
    const advances = async (seconds: number, what: string) => {
      const from = await playbackTime();
      await waitFor(async () => {
        alive();
        return (await playbackTime()) >= from + seconds;
      }, seconds * 1000 + 15_000, 200, what);
    };

    // The fallback: the episode's title.
    const firstMs = await titleIs('Episode one', 'mpv shows the episode title');
    await advances(2, 'playback during the fallback');

    // A publisher with a title takes over.
    const start = Date.now();
    const pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60, codecArgs: ['-ac', '2', '-c:a', 'aac', '-b:a', '128k', '-metadata', 'title=Live show'] });
    children.push(pub);
    await waitFor(async () => (await v2('GET', `/streams/${s.id}`)).json.source === 'live', 20_000, 100, 'source live');
    await titleIs('Live show', 'mpv shows the live title');
    const liveMs = Date.now() - start;
    await advances(2, 'playback while live');

    // The publisher is killed: the fallback again, with the episode's title.
    const kill = Date.now();
    pub.kill('SIGKILL');
    await waitFor(async () => (await v2('GET', `/streams/${s.id}`)).json.source === 'fallback', 20_000, 100, 'source fallback');
    await titleIs('Episode one', 'mpv shows the episode title again');
    const backMs = Date.now() - kill;
    await advances(2, 'playback after the switch back');
    alive();
    const total = await playbackTime();
    console.log(`mpv ICY titles: episode after ${firstMs} ms; live title ${liveMs} ms after the publisher started; episode title again ${backMs} ms after it was killed; playback-time ${total.toFixed(1)} s; ${m.unanswered()} IPC requests unanswered`);
  }, 90_000);
});
