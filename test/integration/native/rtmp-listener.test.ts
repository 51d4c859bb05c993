// RtmpListener (native/binding/rtmp_addon.cc over native/io): real TCP on 127.0.0.1, port 0, fed the recorded
// FFmpeg publishes of test/fixtures/rtmp. Checks what JS hears, routing into a Segmenter without a
// JS call per message, timeouts, closes from either side, and argument errors.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { RtmpListener, type RtmpConnectionHandler } from '../../../src/native/rtmp-listener.js';
import { Segmenter, type SegmenterEvent } from '../../../src/native/segmenter.js';
import { closeAll, connect, startListener as start, until } from '../../helpers/listener-harness.js';
import { publishedAudio } from '../../helpers/rtmp-messages.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixture = (name: string) => readFileSync(path.join(here, '../../fixtures/rtmp', name));
const FFMPEG_48K = fixture('ffmpeg-aac-48k.bin');
const HANDSHAKE_IN = 1 + 2 * 1536; // C0 C1 C2

afterEach(closeAll);
const listeners: RtmpListener[] = [];
afterEach(() => {
  for (const l of listeners.splice(0)) l.close();
});

/** Audio messages in a fixture, from the TypeScript reference reader (test/unit/native/rtmp-messages.ts). */
function referenceAudio(bytes: Buffer) {
  return publishedAudio(bytes).map((m) => ({ ts: m.timestamp, bytes: m.body.length }));
}

describe('RtmpListener (native ingest I/O)', () => {
  it('hears a recorded FFmpeg publish like the reference reader does, replies on the socket, counts audio bytes', async () => {
    const { port, heard } = start((h, e) => {
      if (e.type === 'publish') h.conn.acceptPublish();
    });
    const c = connect(port);
    c.socket.write(FFMPEG_48K);
    const ref = referenceAudio(FFMPEG_48K);
    const h = await until(() => heard[0]?.audio.length === ref.length && heard[0]);
    expect(h.conn.remote).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(h.events.map((e) => e.type)).toEqual(expect.arrayContaining(['connect', 'publish']));
    expect(h.audio.map(({ ts, bytes }) => ({ ts, bytes }))).toEqual(ref);
    expect(h.audio.every((a) => !a.segmented)).toBe(true);
    expect(h.conn.audioBytes).toBe(ref.reduce((n, a) => n + a.bytes, 0));
    // S0 S1 S2, then the connect replies and onStatus NetStream.Publish.Start.
    const out = await until(() => c.received().includes('NetStream.Publish.Start') && c.received());
    expect(out[0]).toBe(3);
    expect(out.length).toBeGreaterThan(HANDSHAKE_IN);
  });

  /**
   * Publishes the fixture to a listener that routes the publish into a new fMP4 Segmenter as
   * soon as it is accepted: the bytes up to the publish go first, so the route is in place before
   * the rest. `before`: audio messages JS heard before the route.
   */
  async function publishRouted(frames: boolean, mergeReadsMs = 0) {
    const seg = new Segmenter({ container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'aac' });
    const { port, heard } = start(
      (h, e) => {
        if (e.type === 'publish') {
          h.conn.acceptPublish();
          h.conn.route({ segmenter: seg, onEvents: (events) => h.segmenterEvents.push(...events) }, frames, mergeReadsMs > 0);
        }
      },
      { mergeReadsMs },
    );
    const c = connect(port);
    c.socket.write(FFMPEG_48K.subarray(0, 3500));
    const h = await until(() => heard[0]?.events.some((e) => e.type === 'publish') && heard[0]);
    const before = h.audio.length;
    c.socket.write(FFMPEG_48K.subarray(3500));
    const ref = referenceAudio(FFMPEG_48K);
    await until(() => h.conn.audioBytes === ref.reduce((n, a) => n + a.bytes, 0));
    return { h, before, ref, c };
  }

  for (const merge of [0, 40]) {
    it(`routed${merge ? ', merged reads every 40 ms' : ''}: audio goes to the Segmenter in C++; JS hears its parts and segments, and only sequence headers`, async () => {
      const { h, before, c } = await publishRouted(false, merge);
      const routed = h.audio.slice(before);
      expect(routed.every((a) => a.segmented && a.header)).toBe(true);
      // The same segments a JS-fed segmenter makes of the same audio (here: the routed part only).
      const jsSeg = new Segmenter({ container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'aac' });
      const expected: SegmenterEvent[] = [];
      for (const m of publishedAudio(FFMPEG_48K).slice(before)) expected.push(...jsSeg.pushAudio(m.timestamp, m.body));
      const kinds = (evs: SegmenterEvent[]) => evs.map((e) => (e.type === 'part' ? `p${e.sequence}.${e.partIndex}` : e.type === 'segment' ? `s${e.sequence}` : e.type));
      await until(() => h.segmenterEvents.length >= expected.length);
      expect(kinds(h.segmenterEvents)).toEqual(kinds(expected));
      expect(h.segmenterEvents.some((e) => e.type === 'segment')).toBe(true);
      const segBytes = (evs: SegmenterEvent[]) => evs.filter((e) => e.type === 'segment').map((e) => (e as { data: Buffer }).data.toString('hex'));
      expect(segBytes(h.segmenterEvents)).toEqual(segBytes(expected));
      // The peer's close reaches JS from a merged (timer-read) connection too.
      c.socket.end();
      await until(() => h.closed.length === 1);
      expect(h.closed[0]).toEqual({ reason: 'peer closed', error: null });
    });
  }

  it('routed with frames: every message still reaches JS, flagged segmented', async () => {
    const { h, before, ref } = await publishRouted(true);
    await until(() => h.audio.length === ref.length);
    expect(h.audio.slice(before).every((a) => a.segmented)).toBe(true);
    expect(h.segmenterEvents.some((e) => e.type === 'part')).toBe(true);
    // route(null): back to plain delivery on the next read.
    h.conn.route(null, true);
    expect(() => h.conn.route({ segmenter: {} as unknown as Segmenter, onEvents: () => {} }, false)).toThrow(TypeError);
  });

  it('a peer that vanishes mid-message: closed() with protocol_violation; a clean close: "peer closed"', async () => {
    const { port, heard } = start();
    const a = connect(port);
    a.socket.write(FFMPEG_48K.subarray(0, HANDSHAKE_IN + 40));
    await until(() => heard.length === 1);
    a.socket.end();
    const h = await until(() => heard[0]!.closed.length === 1 && heard[0]);
    expect(h.closed[0]!.error?.code).toBe('protocol_violation');

    const b = connect(port);
    b.socket.write(FFMPEG_48K.subarray(0, HANDSHAKE_IN));
    await until(() => heard.length === 2);
    b.socket.end();
    const h2 = await until(() => heard[1]!.closed.length === 1 && heard[1]);
    expect(h2.closed[0]).toEqual({ reason: 'peer closed', error: null });
  });

  it('close() from JS ends the socket (FIN) without a closed() call; setTimeout reports silence once', async () => {
    const { port, heard } = start();
    const a = connect(port);
    a.socket.write(FFMPEG_48K.subarray(0, 100));
    const h = await until(() => heard[0]);
    h.conn.setTimeout(1000);
    await until(() => h.timeouts === 1, 4000);
    await new Promise((r) => setTimeout(r, 1200)); // A fixed wait on purpose: one timeout, not one per second.
    expect(h.timeouts).toBe(1);
    h.conn.close();
    await a.ended;
    expect(h.closed).toEqual([]);
  });

  it('garbage gets an error event; the listener keeps serving', async () => {
    const { port, heard } = start();
    const bad = connect(port);
    bad.socket.write(Buffer.alloc(4000, 0xff));
    const h = await until(() => heard[0]?.events.find((e) => e.type === 'error') && heard[0]);
    expect(h.events.find((e) => e.type === 'error')).toMatchObject({ code: 'handshake_invalid' });
    h.conn.close();
    const good = connect(port);
    good.socket.write(FFMPEG_48K);
    await until(() => heard[1]?.events.some((e) => e.type === 'publish'));
  });

  it('listen on a port in use throws with the code; bad arguments throw TypeError', () => {
    const { port } = start();
    const other = new RtmpListener({}, () => {
      throw new Error('never');
    });
    expect(() => other.listen('127.0.0.1', port)).toThrow(/EADDRINUSE/);
    other.close();
    expect(() => new RtmpListener({ maxMessageBytes: 5 }, () => ({}) as RtmpConnectionHandler)).toThrow(TypeError);
    const l = new RtmpListener({}, () => ({}) as RtmpConnectionHandler);
    listeners.push(l);
    expect(() => l.listen('not an ip', 0)).toThrow();
  });
});
