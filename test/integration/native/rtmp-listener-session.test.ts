// The RTMP session as JS hears it through RtmpListener, over real TCP on 127.0.0.1: recorded FFmpeg
// publishes (test/fixtures/rtmp/*.bin, recorded by scripts/record-rtmp-fixture.mjs) whole and in
// pieces, the replies on the socket (handshake, connect, createStream, publish accept / reject),
// hostile input (one error event with its stable code, then nothing), and the batched audio path
// (bodies stay valid after later reads; batches past the initial buffers and back; message order).
// The same session behaviours are checked byte by byte in C++ (test/native/rtmp_session_test.cc).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { RtmpListener, type RtmpConnectionHandler, type RtmpControlEvent } from '../../../src/native/rtmp-listener.js';
import { closeAll, connect, startListener, until, writeInPieces, type Heard } from '../../helpers/listener-harness.js';
import { HANDSHAKE_BYTES, decodeAmf, publishedAudio, readMessages } from '../../helpers/rtmp-messages.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixture = (name: string) => readFileSync(path.join(here, '../../fixtures/rtmp', name));
// 48 kHz (lavfi sine is mono), 44.1 kHz mono, and 48 kHz with timestamps from 20000 s on (an
// extended-timestamp header for the jump past 0xFFFFFF ms).
const FIXTURES = ['ffmpeg-aac-48k.bin', 'ffmpeg-aac-44k-mono.bin', 'ffmpeg-aac-48k-extts.bin'];

afterEach(closeAll);

const acceptPublish = (h: Heard, e: RtmpControlEvent) => {
  if (e.type === 'publish') h.conn.acceptPublish();
};

/** What a connection heard, comparable across runs: events in order, audio as timestamp + hex. */
const comparable = (h: Heard) => {
  let a = 0;
  let k = 0;
  return h.order.map((t) => {
    if (t !== 'audio') return h.events[k++];
    const m = h.audio[a++]!;
    return { type: 'audio', timestamp: m.ts, data: m.data.toString('hex') };
  });
};

// ---- a minimal client: AMF0 encoder and chunk writer (fmt 0 + type-3 continuations) ----
const amf = {
  str: (s: string) => {
    const b = Buffer.from(s);
    return Buffer.concat([Buffer.from([0x02, b.length >> 8, b.length & 0xff]), b]);
  },
  num: (n: number) => {
    const b = Buffer.alloc(9);
    b.writeDoubleBE(n, 1);
    return b;
  },
  nul: () => Buffer.from([0x05]),
  obj: (props: Record<string, Buffer>) =>
    Buffer.concat([
      Buffer.from([0x03]),
      ...Object.entries(props).flatMap(([k, v]) => {
        const kb = Buffer.from(k);
        return [Buffer.from([kb.length >> 8, kb.length & 0xff]), kb, v];
      }),
      Buffer.from([0, 0, 9]),
    ]),
};
function chunked(csid: number, type: number, streamId: number, payload: Buffer, chunkSize = 128): Buffer {
  const parts: Buffer[] = [];
  const h = Buffer.alloc(12);
  h[0] = csid;
  h.writeUIntBE(payload.length, 4, 3);
  h[7] = type;
  h.writeUInt32LE(streamId, 8);
  parts.push(h);
  for (let off = 0; off < payload.length || off === 0; off += chunkSize) {
    if (off > 0) parts.push(Buffer.from([0xc0 | csid]));
    parts.push(payload.subarray(off, off + chunkSize));
    if (payload.length === 0) break;
  }
  return Buffer.concat(parts);
}
const handshake = () => Buffer.concat([Buffer.from([3]), Buffer.alloc(2 * 1536, 7)]);
const command = (...values: Buffer[]) => chunked(3, 20, 0, Buffer.concat(values));
const connectCmd = () =>
  command(amf.str('connect'), amf.num(1), amf.obj({ app: amf.str('live/stm_test'), tcUrl: amf.str('rtmp://h/live/stm_test') }));
const connected = () => Buffer.concat([handshake(), connectCmd()]);
const published = () => Buffer.concat([
  connected(),
  command(amf.str('createStream'), amf.num(2), amf.nul()),
  chunked(4, 20, 1, Buffer.concat([amf.str('publish'), amf.num(3), amf.nul(), amf.str('sk_ok'), amf.str('live')])),
]);
/** Audio messages on csid 4 / stream 1 with fmt-0 headers (timestamp = 1000 + i), bodies of `size(i)` bytes. */
function audioMessages(count: number, size: (i: number) => number, chunkSize = 128): Buffer {
  const parts: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const body = Buffer.alloc(size(i), i & 0xff);
    body[0] = 0xaf;
    const m = chunked(4, 8, 1, body, chunkSize);
    m.writeUIntBE(1000 + i, 1, 3);
    parts.push(m);
  }
  return Buffer.concat(parts);
}
/** The server's output: the command replies (type 20) with their AMF0 values. */
const commandsIn = (out: Buffer) =>
  readMessages(out).filter((m) => m.type === 20).map((m) => ({ streamId: m.streamId, v: decodeAmf(m.body) }));

describe('RtmpListener with recorded FFmpeg publishes', () => {
  for (const name of FIXTURES) {
    it(`${name}: the session's events, whole and in pieces alike; a clean end`, async () => {
      const bytes = fixture(name);
      const { port, heard } = startListener(acceptPublish);
      const ref = publishedAudio(bytes);
      const whole = connect(port);
      whole.socket.write(bytes);
      const h = await until(() => heard[0]?.events.some((e) => e.type === 'unpublish') && heard[0]?.audio.length === ref.length && heard[0]);
      // The same events in pieces of 333 bytes (reads of every size around message boundaries).
      const pieces = connect(port);
      await writeInPieces(pieces.socket, bytes, 333);
      const h2 = await until(() => heard[1]?.events.some((e) => e.type === 'unpublish') && heard[1]?.audio.length === ref.length && heard[1]);
      expect(comparable(h2)).toEqual(comparable(h));

      const connectEvent = h.events.find((e) => e.type === 'connect');
      expect(connectEvent).toMatchObject({ type: 'connect', app: 'live/stm_test', fourCcList: [] });
      expect(h.events.find((e) => e.type === 'publish')).toEqual({
        type: 'publish', streamName: 'sk_euw1_testkey', publishType: 'live', streamId: 1,
      });
      const meta = h.events.find((e) => e.type === 'metadata');
      expect(meta && meta.type === 'metadata' && meta.values.audiocodecid).toBe(10);
      const audio = h.audio;
      expect(audio.length).toBeGreaterThan(100);
      expect(audio.map((a) => ({ ts: a.ts, body: a.data.toString('hex') }))).toEqual(ref.map((m) => ({ ts: m.timestamp, body: m.body.toString('hex') })));
      expect(Buffer.isBuffer(audio[0]!.data)).toBe(true);
      expect([audio[0]!.data[0], audio[0]!.data[1]]).toEqual([0xaf, 0x00]); // AAC sequence header
      expect(audio.slice(1).every((a) => a.data[0] === 0xaf && a.data[1] === 0x01)).toBe(true);
      for (let i = 1; i < audio.length; i++) expect(audio[i]!.ts).toBeGreaterThanOrEqual(audio[i - 1]!.ts);
      expect(audio.at(-1)!.ts).toBeGreaterThan(2500);
      if (name.includes('extts')) expect(audio[1]!.ts).toBeGreaterThan(0xffffff);
      expect(h.events.at(-1)).toEqual({ type: 'unpublish', streamId: 1 });
      expect(h.events.some((e) => e.type === 'error')).toBe(false);
      // The recording ends between messages: the peer's close is clean.
      whole.socket.end();
      await until(() => h.closed.length === 1);
      expect(h.closed[0]).toEqual({ reason: 'peer closed', error: null });
    });
  }

  it('replies to connect, releaseStream, FCPublish, createStream and the accepted publish', async () => {
    const bytes = fixture(FIXTURES[0]!);
    const messages = readMessages(bytes);
    const publishAt = messages.findIndex((m) => m.type === 20 && decodeAmf(m.body)[0] === 'publish');
    const publishEnd = messages[publishAt]!.end;
    const audioEnd = messages[publishAt + 20]!.end; // metadata and audio messages after it
    const { port, heard } = startListener(acceptPublish);
    const c = connect(port);
    c.socket.write(bytes.subarray(0, publishEnd)); // as far as the publish (accepted at once)
    const all = await until(() => c.received().includes('NetStream.Publish.Start') && c.received());
    expect(heard[0]!.events.map((e) => e.type)).toEqual(['connect', 'publish']);
    expect(all[0]).toBe(3);
    expect([...all.subarray(5, 9)]).toEqual([0, 0, 0, 0]); // S1 zero "version" bytes
    expect(all.subarray(1 + 1536, HANDSHAKE_BYTES).equals(bytes.subarray(1, 1 + 1536))).toBe(true); // S2 == C1
    const msgs = readMessages(all);
    expect(msgs.slice(0, 3).map((m) => m.type)).toEqual([5, 6, 1]);
    expect(msgs[0]!.body.readUInt32BE(0)).toBe(2500000);
    expect([msgs[1]!.body.readUInt32BE(0), msgs[1]!.body[4]]).toEqual([2500000, 2]);
    expect(msgs[2]!.body.readUInt32BE(0)).toBe(4096);
    const cmds = commandsIn(all);
    expect(cmds[0]!.v).toEqual([
      '_result', 1,
      { fmsVer: 'FMS/3,0,1,123', capabilities: 31 },
      { level: 'status', code: 'NetConnection.Connect.Success', description: 'Connection succeeded.', objectEncoding: 0 },
    ]);
    expect(cmds.map((x) => x.v[0])).toEqual(['_result', '_result', '_result', 'onFCPublish', '_result', 'onStatus']);
    expect(cmds[4]!.v.slice(2)).toEqual([null, 1]); // createStream → message stream 1
    const streamBegin = msgs.find((m) => m.type === 4)!;
    expect([streamBegin.body.readUInt16BE(0), streamBegin.body.readUInt32BE(2)]).toEqual([0, 1]);
    expect(cmds[5]!.streamId).toBe(1);
    expect(cmds[5]!.v[3]).toMatchObject({ level: 'status', code: 'NetStream.Publish.Start' });
    // Audio makes no replies: after the accept, the next bytes written are the answer to a ping.
    const before = all.length;
    const ping = chunked(2, 4, 0, Buffer.from([0, 6, 0, 0, 0x12, 0x34]));
    c.socket.write(Buffer.concat([bytes.subarray(publishEnd, audioEnd), ping]));
    const after = await until(() => c.received().length > before && c.received());
    const tail = readMessages(after).slice(msgs.length);
    expect(tail.map((m) => [m.type, m.body.toString('hex')])).toEqual([[4, '000700001234']]); // Ping Response
  });

  it('rejectPublish answers onStatus level error with the code', async () => {
    const { port, heard } = startListener((h, e) => {
      if (e.type === 'publish') h.conn.rejectPublish('NetStream.Publish.BadName', 'unknown stream key');
    });
    const c = connect(port);
    c.socket.write(published());
    const out = await until(() => c.received().includes('NetStream.Publish.BadName') && c.received());
    expect(heard[0]!.events.map((e) => e.type)).toEqual(['connect', 'publish']);
    const status = readMessages(out).filter((m) => m.type === 20).at(-1)!;
    expect(status.streamId).toBe(1);
    expect(decodeAmf(status.body)).toEqual([
      'onStatus', 0, null, { level: 'error', code: 'NetStream.Publish.BadName', description: 'unknown stream key' },
    ]);
  });

  it('rejectPublish also refuses a running publish (codec mismatch after accept)', async () => {
    const { port } = startListener((h, e) => {
      if (e.type !== 'publish') return;
      h.conn.acceptPublish();
      h.conn.rejectPublish('NetStream.Publish.Rejected', 'This stream accepts aac audio, not mp3.');
    });
    const c = connect(port);
    c.socket.write(published());
    const out = await until(() => c.received().includes('NetStream.Publish.Rejected') && c.received());
    const status = commandsIn(out).at(-1)!;
    expect(status.v[3]).toMatchObject({ level: 'error', code: 'NetStream.Publish.Rejected' });
    expect(commandsIn(out).some((x) => (x.v[3] as { code?: string } | undefined)?.code === 'NetStream.Publish.Start')).toBe(true);
  });
});

describe('RtmpListener with bad input: one error event with a stable code, then nothing', () => {
  const cases: Array<[string, () => Buffer, string]> = [
    ['garbage on the port', () => Buffer.from('GET / HTTP/1.1\r\nHost: example\r\n\r\n'), 'handshake_invalid'],
    ['a 16 MiB declared audio message (24-bit maximum)', () =>
      Buffer.concat([connected(), Buffer.from([0x04, 0, 0, 0, 0xff, 0xff, 0xff, 8, 1, 0, 0, 0, 0xaf])]), 'message_too_large'],
    ['chunk size 0', () => Buffer.concat([connected(), chunked(2, 1, 0, Buffer.from([0, 0, 0, 0]))]), 'chunk_size_invalid'],
    ['chunk size 2^31', () => Buffer.concat([connected(), chunked(2, 1, 0, Buffer.from([0x80, 0, 0, 0]))]), 'chunk_size_invalid'],
    ['an AMF0 bomb (deep nesting)', () =>
      Buffer.concat([handshake(), command(amf.str('connect'), amf.num(1), Buffer.concat([
        ...Array.from({ length: 2000 }, () => Buffer.from([0x03, 0, 1, 0x61])), Buffer.from([0x05]),
      ]))]), 'amf0_too_deep'],
    ['an AMF0 bomb (huge strict array count)', () =>
      Buffer.concat([handshake(), command(amf.str('connect'), amf.num(1), Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 5]))]),
      'amf0_invalid'],
    ['connect app of the wrong AMF type', () =>
      Buffer.concat([handshake(), command(amf.str('connect'), amf.num(1), amf.obj({ app: amf.num(1) }))]), 'command_invalid'],
    ['publish name of the wrong AMF type', () =>
      Buffer.concat([connected(), chunked(4, 20, 1, Buffer.concat([amf.str('publish'), amf.num(3), amf.nul(), amf.num(5)]))]),
      'command_invalid'],
    ['a stream name over 1024 bytes', () =>
      Buffer.concat([connected(), chunked(4, 20, 1, Buffer.concat([amf.str('publish'), amf.num(3), amf.nul(), amf.str('k'.repeat(1025))]))]),
      'stream_name_too_long'],
    ['a first chunk that is not type 0', () => Buffer.concat([connected(), Buffer.from([0x44, 0, 0, 0, 0, 0, 1, 8, 0xaf])]),
      'protocol_violation'],
    ['many chunk streams each opening a 1 MiB message (memory stays bounded)', () => {
      const parts = [connected()];
      for (let i = 0; i < 20; i++) parts.push(Buffer.from([10 + i, 0, 0, 0, 0x10, 0, 0, 8, 1, 0, 0, 0]), Buffer.alloc(128, 0xaf));
      return Buffer.concat(parts);
    }, 'message_too_large'],
  ];
  for (const [name, make, code] of cases) {
    it(`${name} → ${code}`, async () => {
      const { port, heard } = startListener(acceptPublish, { prePublishBytes: 1 << 30 });
      const c = connect(port);
      c.socket.write(make());
      const h = await until(() => heard[0]?.events.some((e) => e.type === 'error') && heard[0]);
      const errors = h.events.filter((e) => e.type === 'error');
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatchObject({ type: 'error', code });
      expect(typeof (errors[0] as { message: string }).message).toBe('string');
      // Sticky: later (valid) bytes on the connection bring nothing, up to its clean close.
      const heardBefore = h.order.length;
      c.socket.end(fixture(FIXTURES[0]!));
      await until(() => h.closed.length === 1);
      expect(h.order.length).toBe(heardBefore);
      expect(h.closed[0]).toEqual({ reason: 'peer closed', error: null });
    });
  }

  it('video is dropped without events; maxMessageBytes caps audio', async () => {
    const { port, heard } = startListener(acceptPublish, { maxMessageBytes: 4096 });
    const c = connect(port);
    c.socket.write(Buffer.concat([
      connected(),
      chunked(6, 9, 1, Buffer.alloc(100_000, 0x17)),
      chunked(4, 8, 1, Buffer.alloc(5000, 0xaf)),
    ]));
    const h = await until(() => heard[0]?.events.some((e) => e.type === 'error') && heard[0]);
    expect(h.order).toEqual(['connect', 'error']);
    expect(h.events[1]).toMatchObject({ code: 'message_too_large' });
  });

  it('wrong JS arguments throw TypeError', async () => {
    expect(() => new RtmpListener({ maxMessageBytes: -1 }, () => ({}) as RtmpConnectionHandler)).toThrow(TypeError);
    expect(() => new RtmpListener({ maxMessageBytes: 1.5e9 }, () => ({}) as RtmpConnectionHandler)).toThrow(TypeError);
    const { port, heard } = startListener();
    connect(port).socket.write(published());
    const h = await until(() => heard[0]?.events.some((e) => e.type === 'publish') && heard[0]);
    expect(() => h.conn.rejectPublish(1 as unknown as string, 'x')).toThrow(TypeError);
    expect(() => h.conn.setTimeout('1' as unknown as number)).toThrow(TypeError);
  });
});

describe('RtmpListener audio batches (the read → JS path)', () => {
  /** A publishing connection (accepted) with chunk size 4096, and its Heard. */
  async function publishing(options = {}) {
    const { port, heard } = startListener(acceptPublish, options);
    const c = connect(port);
    c.socket.write(Buffer.concat([published(), chunked(2, 1, 0, Buffer.from([0, 0, 0x10, 0]))]));
    const h = await until(() => heard[0]?.events.some((e) => e.type === 'publish') && heard[0]);
    return { c, h };
  }

  it('audio bodies are Buffers that stay valid (and unchanged) after later reads', async () => {
    const { c, h } = await publishing();
    for (let i = 0; i < 50; i++) {
      await writeInPieces(c.socket, audioMessages(3, (j) => 10 + i + j, 4096), 1 << 20);
    }
    await until(() => h.audio.length === 150);
    h.audio.forEach(({ data: d }, k) => {
      const i = Math.floor(k / 3);
      const j = k % 3;
      expect(Buffer.isBuffer(d)).toBe(true);
      expect(d.length).toBe(10 + i + j);
      expect(d[0]).toBe(0xaf);
      expect(d.subarray(1).every((b) => b === j)).toBe(true);
    });
  });

  it('batches larger than the initial buffers (events and bytes, one read), then small again', async () => {
    // A 1.5 MB message makes the arena grow past the 1 MiB shrink threshold.
    const { c, h } = await publishing({ maxMessageBytes: 4_000_000 });
    const check = async (count: number, size: (i: number) => number) => {
      const from = h.audio.length;
      c.socket.write(audioMessages(count, size, 4096));
      await until(() => h.audio.length === from + count);
      h.audio.slice(from).forEach((e, i) => {
        expect(e.ts).toBe(1000 + i);
        expect(e.data.length).toBe(size(i));
        expect(e.data[0]).toBe(0xaf);
        expect(e.data[e.data.length - 1]).toBe(size(i) > 1 ? i & 0xff : 0xaf);
      });
    };
    await check(1000, () => 3); // more events than the initial meta slots
    await check(40, (i) => 1000 + i * 97); // more bytes than the initial arena
    await check(2, () => 1_500_000); // past the shrink threshold
    await check(5, (i) => 300 + i); // back to small batches
    await check(2, () => 1);
    expect(h.events.some((e) => e.type === 'error')).toBe(false);
  });

  it('interleaves audio and control events in message order', async () => {
    const { port, heard } = startListener(acceptPublish);
    const c = connect(port);
    c.socket.write(Buffer.concat([
      published(),
      audioMessages(2, () => 20),
      command(amf.str('FCUnpublish'), amf.num(4), amf.nul(), amf.str('sk_ok')),
      audioMessages(1, () => 20), // after unpublish: dropped
      chunked(2, 4, 0, Buffer.from([0, 6, 0, 0, 0, 9])), // a ping: its answer means all was read
    ]));
    await until(() => c.received().includes(Buffer.from([0, 7, 0, 0, 0, 9])));
    expect(heard[0]!.order).toEqual(['connect', 'publish', 'audio', 'audio', 'unpublish']);
  });
});
