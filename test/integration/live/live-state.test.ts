/**
 * Live state with real FFmpeg publishers against an in-process server: events recorded durably,
 * reconnects within the window resume the timeline with a discontinuity, the newest publisher wins,
 * codec mismatches are refused with stream.error, DELETE of a live stream ends it, bad RTMP input
 * closes only that connection.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

let t: TestServer;
beforeAll(async () => {
  t = await startInProcess();
});
afterAll(async () => {
  await t?.close();
});

const getStream = async (id: string) => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${id}`)).json;
const eventsOf = (id: string) =>
  (t.server.db.prepare('SELECT type, data FROM events ORDER BY seq').all() as Array<{ type: string; data: string }>)
    .map((e) => ({ type: e.type, data: JSON.parse(e.data) }))
    .filter((e) => e.data.object.id === id);
const mediaPlaylist = async (hlsUrl: string) => (await fetch(hlsUrl.replace('index.m3u8', 'a128/index.m3u8'))).text();
const createStream = async (body: Record<string, unknown>) => {
  const r = await api(t.http, t.secretKey, 'POST', '/v2/streams', body);
  expect(r.status).toBe(201);
  return r.json;
};

describe('live state', () => {
  it('records stream.started with the live stream and resumes a reconnect with a discontinuity', async () => {
    const s = await createStream({ title: 'Reconnects', reconnectWindow: 20 });
    const url = `${s.rtmpUrl}/${s.streamKey}`;
    const first = publish(url, { seconds: 5 });
    await waitFor(async () => (await getStream(s.id)).status === 'live', 15_000, 100, 'live');
    const started = eventsOf(s.id).filter((e) => e.type === 'stream.started');
    expect(started).toHaveLength(1);
    const obj = started[0]!.data.object;
    expect(obj).toMatchObject({ id: s.id, title: 'Reconnects', status: 'live', listenerCount: 0 });
    expect(typeof obj.startedAt).toBe('string');
    expect(obj.streamKey).toBeUndefined();
    expect(await exited(first)).toBe(0);

    // Back within the window: same timeline, a discontinuity, no new events.
    const second = publish(url, { seconds: 5 });
    await waitFor(async () => (await mediaPlaylist(s.hlsUrl)).includes('#EXT-X-DISCONTINUITY\n'), 20_000, 200, 'discontinuity');
    expect(await exited(second)).toBe(0);
    const text = await mediaPlaylist(s.hlsUrl);
    const seqs = [...text.matchAll(/^(\d+)\.ts$/gm)].map((m) => Number(m[1]));
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBe(seqs[i - 1]! + 1);
    expect((await getStream(s.id)).status).toBe('live');
    expect(eventsOf(s.id).map((e) => e.type)).toEqual(['stream.started']);
  });

  it('lets the newest publisher with the key take over at once', async () => {
    const s = await createStream({ title: 'Takeover', reconnectWindow: 5 });
    const url = `${s.rtmpUrl}/${s.streamKey}`;
    const a = publish(url, { seconds: 30 });
    await waitFor(async () => (await getStream(s.id)).status === 'live', 15_000, 100, 'live');
    const b = publish(url, { seconds: 3, frequency: 880 });
    const aCode = await Promise.race([exited(a), new Promise((r) => setTimeout(() => r('still running'), 10_000))]);
    expect(aCode).not.toBe('still running'); // the old publisher was disconnected
    if (aCode === 'still running') a.kill('SIGKILL');
    expect(await exited(b)).toBe(0);
    expect(eventsOf(s.id).filter((e) => e.type === 'stream.started')).toHaveLength(1);
    await waitFor(async () => (await getStream(s.id)).status === 'idle', 15_000, 200, 'ended');
    const ended = eventsOf(s.id).filter((e) => e.type === 'stream.ended');
    expect(ended).toHaveLength(1);
    expect(ended[0]!.data.object).toMatchObject({ id: s.id, status: 'idle' });
    expect(ended[0]!.data.broadcastId).toBe(eventsOf(s.id).find((e) => e.type === 'stream.started')!.data.broadcastId);
  });

  it('refuses audio of another codec with stream.error codec_mismatch', async () => {
    const s = await createStream({ title: 'AAC only' });
    const p = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 5, codecArgs: ['-ac', '2', '-c:a', 'libmp3lame', '-b:a', '128k', '-ar', '44100'] });
    expect(await exited(p)).not.toBe(0);
    const errors = eventsOf(s.id).filter((e) => e.type === 'stream.error');
    expect(errors).toHaveLength(1);
    expect(errors[0]!.data.error).toMatchObject({ code: 'codec_mismatch', expected: 'aac', received: 'mp3' });
    expect((await getStream(s.id)).status).toBe('idle');
  });

  it('ends a live stream that is deleted, then forgets it', async () => {
    const s = await createStream({ title: 'Deleted live' });
    const p = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 30 });
    await waitFor(async () => (await getStream(s.id)).status === 'live', 15_000, 100, 'live');
    const del = await api(t.http, t.secretKey, 'DELETE', `/v2/streams/${s.id}`);
    expect(del.status).toBe(200);
    expect(del.json).toEqual({ id: s.id, object: 'stream', deleted: true });
    const code = await Promise.race([exited(p), new Promise((r) => setTimeout(() => r('still running'), 10_000))]);
    if (code === 'still running') p.kill('SIGKILL');
    expect(code).not.toBe('still running');
    expect(eventsOf(s.id).map((e) => e.type)).toEqual(['stream.started', 'stream.ended']);
    expect((await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).status).toBe(404);
  });

  it('closes a connection that sends garbage and keeps serving others', async () => {
    const garbage = await new Promise<string>((resolve) => {
      const sock = net.connect(t.server.rtmpPort, '127.0.0.1', () => sock.write(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(200))));
      sock.on('error', () => {});
      sock.on('close', () => resolve('closed'));
      setTimeout(() => resolve('open'), 5000);
    });
    expect(garbage).toBe('closed');
    // A declared 2 GB message after a valid handshake prefix is refused too.
    const big = await new Promise<string>((resolve) => {
      const sock = net.connect(t.server.rtmpPort, '127.0.0.1', () => {
        const c0c1 = Buffer.alloc(1537);
        c0c1[0] = 3;
        sock.write(c0c1);
      });
      let got = 0;
      sock.on('data', (d) => {
        got += d.length;
        if (got >= 3073) {
          // C2, then a type-0 chunk header declaring a 0x7FFFFFFF-byte... (24-bit max) audio message
          sock.write(Buffer.alloc(1536));
          sock.write(Buffer.from([0x04, 0, 0, 0, 0xff, 0xff, 0xff, 0x08, 1, 0, 0, 0]));
          sock.write(Buffer.alloc(4096, 0xaa));
        }
      });
      sock.on('error', () => {});
      sock.on('close', () => resolve('closed'));
      setTimeout(() => resolve('open'), 5000);
    });
    expect(big).toBe('closed');
    const s = await createStream({ title: 'Still fine', reconnectWindow: 0 });
    const p = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 2 });
    expect(await exited(p)).toBe(0);
    await waitFor(async () => (await getStream(s.id)).status === 'idle', 10_000, 100, 'ended');
  });
});
