// RtmpSession (native addon) against recorded FFmpeg publishes and hostile input.
// Fixtures: test/fixtures/rtmp/*.bin, recorded by scripts/record-rtmp-fixture.mjs.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { RtmpSession, type RtmpEvent, type RtmpHandler } from '../../../src/native/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixture = (name: string) => readFileSync(path.join(here, '../../fixtures/rtmp', name));
// 48 kHz (lavfi sine is mono), 44.1 kHz mono, and 48 kHz with timestamps from 20000 s on (an
// extended-timestamp header for the jump past 0xFFFFFF ms).
const FIXTURES = ['ffmpeg-aac-48k.bin', 'ffmpeg-aac-44k-mono.bin', 'ffmpeg-aac-48k-extts.bin'];
const HANDSHAKE = 1 + 2 * 1536;

const newSession = (opts?: { maxMessageBytes?: number }) => new RtmpSession(opts);

/** Feeds `bytes` in pieces of `step`, accepting publishes; returns every event. */
function feed(bytes: Uint8Array, step: number, session = newSession()): RtmpEvent[] {
  const events: RtmpEvent[] = [];
  for (let i = 0; i < bytes.length; i += step) {
    for (const ev of session.push(bytes.subarray(i, i + step))) {
      events.push(ev);
      if (ev.type === 'publish') session.acceptPublish();
    }
    session.takeOutput();
  }
  return events;
}

const comparable = (events: RtmpEvent[]) =>
  events.map((e) => (e.type === 'audio' ? { ...e, data: e.data.toString('hex') } : e));

// ---- a minimal client: AMF0 encoder and chunk writer (fmt 0 + type-3 continuations) ----
const amf = {
  str: (s: string) => {
    const b = Buffer.from(s);
    return Buffer.concat([Buffer.from([0x02, b.length >> 8, b.length & 0xff]), b]);
  },
  num: (n: number) => {
    const b = Buffer.alloc(9);
    b[0] = 0;
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
  h.writeUIntBE(0, 1, 3);
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

// ---- a minimal reader for the server's output ----
interface OutMessage { type: number; streamId: number; body: Buffer }
function parseOutput(out: Buffer): OutMessage[] {
  const msgs: OutMessage[] = [];
  let pos = HANDSHAKE;
  let chunkSize = 128;
  const open = new Map<number, { type: number; streamId: number; len: number; parts: Buffer[]; got: number }>();
  while (pos < out.length) {
    const b0 = out[pos++]!;
    const fmt = b0 >> 6;
    const csid = b0 & 0x3f;
    let m = open.get(csid);
    if (fmt === 0) {
      const len = out.readUIntBE(pos + 3, 3);
      m = { type: out[pos + 6]!, streamId: out.readUInt32LE(pos + 7), len, parts: [], got: 0 };
      open.set(csid, m);
      pos += 11;
    } else if (fmt !== 3 || !m) throw new Error(`unexpected chunk fmt ${fmt}`);
    const n = Math.min(chunkSize, m.len - m.got);
    m.parts.push(out.subarray(pos, pos + n));
    m.got += n;
    pos += n;
    if (m.got === m.len) {
      const body = Buffer.concat(m.parts);
      msgs.push({ type: m.type, streamId: m.streamId, body });
      if (m.type === 1) chunkSize = body.readUInt32BE(0);
      open.delete(csid);
    }
  }
  return msgs;
}
type Amf = number | string | boolean | null | undefined | { [k: string]: Amf };
function decodeAmf(b: Buffer): Amf[] {
  let p = 0;
  const str = () => { const n = b.readUInt16BE(p); p += 2; const s = b.toString('utf8', p, p + n); p += n; return s; };
  const value = (): Amf => {
    const t = b[p++];
    if (t === 0) { p += 8; return b.readDoubleBE(p - 8); }
    if (t === 1) return b[p++] !== 0;
    if (t === 2) return str();
    if (t === 5) return null;
    if (t === 6) return undefined;
    if (t === 3) {
      const o: Record<string, Amf> = {};
      for (;;) { const k = str(); if (k === '' && b[p] === 9) { p++; return o; } o[k] = value(); }
    }
    throw new Error(`AMF0 type ${t}`);
  };
  const out: Amf[] = [];
  while (p < b.length) out.push(value());
  return out;
}

describe('RtmpSession with recorded FFmpeg publishes', () => {
  for (const name of FIXTURES) {
    it(`${name}: whole and byte by byte give identical events`, () => {
      const bytes = fixture(name);
      const whole = feed(bytes, bytes.length);
      const bytewise = feed(bytes, 1);
      expect(comparable(bytewise)).toEqual(comparable(whole));

      const connect = whole.find((e) => e.type === 'connect');
      expect(connect).toMatchObject({ type: 'connect', app: 'live/stm_test', fourCcList: [] });
      expect(whole.find((e) => e.type === 'publish')).toEqual({
        type: 'publish', streamName: 'sk_euw1_testkey', publishType: 'live', streamId: 1,
      });
      const meta = whole.find((e) => e.type === 'metadata');
      expect(meta && meta.type === 'metadata' && meta.values.audiocodecid).toBe(10);
      const audio = whole.filter((e): e is Extract<RtmpEvent, { type: 'audio' }> => e.type === 'audio');
      expect(audio.length).toBeGreaterThan(100);
      expect(Buffer.isBuffer(audio[0]!.data)).toBe(true);
      expect([audio[0]!.data[0], audio[0]!.data[1]]).toEqual([0xaf, 0x00]); // AAC sequence header
      expect(audio.slice(1).every((a) => a.data[0] === 0xaf && a.data[1] === 0x01)).toBe(true);
      for (let i = 1; i < audio.length; i++) expect(audio[i]!.timestamp).toBeGreaterThanOrEqual(audio[i - 1]!.timestamp);
      expect(audio.at(-1)!.timestamp).toBeGreaterThan(2500);
      if (name.includes('extts')) expect(audio[1]!.timestamp).toBeGreaterThan(0xffffff);
      expect(whole.at(-1)).toEqual({ type: 'unpublish', streamId: 1 });
      expect(whole.some((e) => e.type === 'error')).toBe(false);
    });
  }

  it('bytesIn counts every byte, end() is quiet after a clean publish', () => {
    const bytes = fixture(FIXTURES[0]!);
    const s = newSession();
    feed(bytes, 4096, s);
    expect(s.bytesIn).toBe(bytes.length);
    expect(s.end()).toEqual([]);
  });

  it('replies to connect, releaseStream, FCPublish, createStream and the accepted publish', () => {
    const bytes = fixture(FIXTURES[0]!);
    const s = newSession();
    const out: Buffer[] = [];
    let accepted = false;
    // Feed until the publish arrives, then accept (as the ingest server does).
    for (let i = 0; i < bytes.length && !accepted; i += 64) {
      for (const ev of s.push(bytes.subarray(i, i + 64))) {
        if (ev.type === 'publish') { s.acceptPublish(); accepted = true; }
      }
      const o = s.takeOutput();
      if (o) out.push(o);
    }
    expect(accepted).toBe(true);
    expect(s.takeOutput()).toBeNull();
    const all = Buffer.concat(out);
    expect(all[0]).toBe(3);
    expect([...all.subarray(5, 9)]).toEqual([0, 0, 0, 0]); // S1 zero "version" bytes
    expect(all.subarray(1 + 1536, HANDSHAKE).equals(bytes.subarray(1, 1 + 1536))).toBe(true); // S2 == C1
    const msgs = parseOutput(all);
    expect(msgs.slice(0, 3).map((m) => m.type)).toEqual([5, 6, 1]);
    expect(msgs[0]!.body.readUInt32BE(0)).toBe(2500000);
    expect([msgs[1]!.body.readUInt32BE(0), msgs[1]!.body[4]]).toEqual([2500000, 2]);
    expect(msgs[2]!.body.readUInt32BE(0)).toBe(4096);
    const cmds = msgs.filter((m) => m.type === 20).map((m) => ({ streamId: m.streamId, v: decodeAmf(m.body) }));
    expect(cmds[0]!.v).toEqual([
      '_result', 1,
      { fmsVer: 'FMS/3,0,1,123', capabilities: 31 },
      { level: 'status', code: 'NetConnection.Connect.Success', description: 'Connection succeeded.', objectEncoding: 0 },
    ]);
    expect(cmds.map((c) => c.v[0])).toEqual(['_result', '_result', '_result', 'onFCPublish', '_result', 'onStatus']);
    expect(cmds[4]!.v.slice(2)).toEqual([null, 1]); // createStream → message stream 1
    const streamBegin = msgs.find((m) => m.type === 4)!;
    expect([streamBegin.body.readUInt16BE(0), streamBegin.body.readUInt32BE(2)]).toEqual([0, 1]);
    expect(cmds[5]!.streamId).toBe(1);
    expect(cmds[5]!.v[3]).toMatchObject({ level: 'status', code: 'NetStream.Publish.Start' });
  });

  it('rejectPublish answers onStatus level error with the code', () => {
    const s = newSession();
    const pub = Buffer.concat([
      connected(),
      command(amf.str('createStream'), amf.num(2), amf.nul()),
      chunked(4, 20, 1, Buffer.concat([amf.str('publish'), amf.num(3), amf.nul(), amf.str('sk_bad'), amf.str('live')])),
    ]);
    const events = s.push(pub);
    expect(events.map((e) => e.type)).toEqual(['connect', 'publish']);
    s.rejectPublish('NetStream.Publish.BadName', 'unknown stream key');
    const status = parseOutput(s.takeOutput()!).filter((m) => m.type === 20).at(-1)!;
    expect(status.streamId).toBe(1);
    expect(decodeAmf(status.body)).toEqual([
      'onStatus', 0, null, { level: 'error', code: 'NetStream.Publish.BadName', description: 'unknown stream key' },
    ]);
  });

  it('rejectPublish also refuses a running publish (codec mismatch after accept)', () => {
    const s = newSession();
    s.push(Buffer.concat([
      connected(),
      command(amf.str('createStream'), amf.num(2), amf.nul()),
      chunked(4, 20, 1, Buffer.concat([amf.str('publish'), amf.num(3), amf.nul(), amf.str('sk_ok'), amf.str('live')])),
    ]));
    s.acceptPublish();
    const before = s.takeOutput()!; // chunk headers of later replies are relative to these
    s.rejectPublish('NetStream.Publish.Rejected', 'This stream accepts aac audio, not mp3.');
    const status = parseOutput(Buffer.concat([before, s.takeOutput()!])).filter((m) => m.type === 20).at(-1)!;
    expect(decodeAmf(status.body)[3]).toMatchObject({ level: 'error', code: 'NetStream.Publish.Rejected' });
  });
});

describe('RtmpSession with bad input', () => {
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
  ];
  for (const [name, make, code] of cases) {
    for (const step of [Infinity, 1]) {
      it(`${name} → ${code} (${step === 1 ? 'byte by byte' : 'whole'})`, () => {
        const s = newSession();
        const bytes = make();
        const events: RtmpEvent[] = [];
        for (let i = 0; i < bytes.length; i += step === Infinity ? bytes.length : 1) {
          events.push(...s.push(bytes.subarray(i, step === Infinity ? bytes.length : i + 1)));
        }
        const errors = events.filter((e) => e.type === 'error');
        expect(errors).toHaveLength(1);
        expect(errors[0]).toMatchObject({ type: 'error', code });
        expect(typeof (errors[0] as { message: string }).message).toBe('string');
        // Sticky: later pushes (even valid ones) return [].
        expect(s.push(fixture(FIXTURES[0]!))).toEqual([]);
        expect(s.end()).toEqual([]);
      });
    }
  }

  it('a publisher that vanishes mid-chunk → end() gives protocol_violation', () => {
    const bytes = fixture(FIXTURES[0]!);
    const s = newSession();
    const cut = Math.floor(bytes.length / 2);
    const events = feed(bytes.subarray(0, cut), 1000, s);
    expect(events.some((e) => e.type === 'error')).toBe(false);
    // The cut lands inside an audio message (or its header) with overwhelming likelihood; scan to be sure.
    let last: RtmpEvent[] = s.end();
    let extra = 0;
    while (last.length === 0 && extra < 2000) {
      const t = newSession();
      feed(bytes.subarray(0, cut + ++extra), 1000, t);
      last = t.end();
    }
    expect(last).toHaveLength(1);
    expect(last[0]).toMatchObject({ type: 'error', code: 'protocol_violation' });
  });

  it('memory stays bounded: many chunk streams each opening a 1 MiB message', () => {
    const s = newSession();
    const parts = [connected()];
    for (let i = 0; i < 20; i++) parts.push(Buffer.from([10 + i, 0, 0, 0, 0x10, 0, 0, 8, 1, 0, 0, 0]), Buffer.alloc(128, 0xaf));
    const events = s.push(Buffer.concat(parts));
    expect(events.filter((e) => e.type === 'error')).toMatchObject([{ code: 'message_too_large' }]);
  });

  it('video is dropped without events; maxMessageBytes caps audio', () => {
    const s = newSession({ maxMessageBytes: 4096 });
    const events = s.push(Buffer.concat([
      connected(),
      chunked(6, 9, 1, Buffer.alloc(100_000, 0x17)),
      chunked(4, 8, 1, Buffer.alloc(5000, 0xaf)),
    ]));
    expect(events.map((e) => e.type)).toEqual(['connect', 'error']);
    expect(events[1]).toMatchObject({ code: 'message_too_large' });
  });

  it('wrong JS arguments throw TypeError', () => {
    const s = newSession();
    expect(() => s.push('bytes' as unknown as Uint8Array)).toThrow(TypeError);
    expect(() => s.push(new Uint16Array(4) as unknown as Uint8Array)).toThrow(TypeError);
    expect(() => s.rejectPublish(1 as unknown as string, 'x')).toThrow(TypeError);
    expect(() => new RtmpSession({ maxMessageBytes: -1 })).toThrow(TypeError);
    expect(() => new RtmpSession({ maxMessageBytes: 1.5e9 })).toThrow(TypeError);
    expect(s.push(new Uint8Array(0))).toEqual([]);
  });
});

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
const published = () => Buffer.concat([
  connected(),
  command(amf.str('createStream'), amf.num(2), amf.nul()),
  chunked(4, 20, 1, Buffer.concat([amf.str('publish'), amf.num(3), amf.nul(), amf.str('sk_ok'), amf.str('live')])),
]);

describe('RtmpSession.pushTo (the batched audio path)', () => {
  for (const name of FIXTURES) {
    it(`${name}: pushTo gives the events push() gives, in order, at any split`, () => {
      const bytes = fixture(name);
      const expected = comparable(feed(bytes, bytes.length));
      for (const step of [1, 7, 333, 4096, 65536]) {
        const s = newSession();
        const got: RtmpEvent[] = [];
        const handler: RtmpHandler = {
          audio: (timestamp, data) => got.push({ type: 'audio', timestamp, data }),
          event: (e) => {
            got.push(e);
            if (e.type === 'publish') s.acceptPublish();
          },
        };
        for (let i = 0; i < bytes.length; i += step) {
          s.pushTo(bytes.subarray(i, i + step), handler);
          if (s.hasOutput) expect(s.takeOutput()).not.toBeNull();
          expect(s.takeOutput()).toBeNull();
        }
        // Bodies handed out earlier are never overwritten by later pushes.
        expect(comparable(got)).toEqual(expected);
      }
    });
  }

  it('audio bodies are Buffers that stay valid (and unchanged) after later pushes', () => {
    const s = newSession();
    s.push(published());
    s.acceptPublish();
    const kept: Buffer[] = [];
    const handler: RtmpHandler = { audio: (_t, d) => kept.push(d), event: () => {} };
    for (let i = 0; i < 50; i++) s.pushTo(audioMessages(3, (j) => 10 + i + j), handler);
    expect(kept).toHaveLength(150);
    kept.forEach((d, k) => {
      const i = Math.floor(k / 3);
      const j = k % 3;
      expect(Buffer.isBuffer(d)).toBe(true);
      expect(d.length).toBe(10 + i + j);
      expect(d[0]).toBe(0xaf);
      expect(d.subarray(1).every((b) => b === j)).toBe(true);
    });
  });

  it('batches larger than the initial buffers (events and bytes), then small again', () => {
    const s = newSession();
    s.push(Buffer.concat([published(), chunked(2, 1, 0, Buffer.from([0, 0, 0x10, 0]))])); // chunk size 4096
    s.acceptPublish();
    const check = (count: number, size: (i: number) => number) => {
      const events = s.push(audioMessages(count, size, 4096));
      expect(events).toHaveLength(count);
      events.forEach((e, i) => {
        expect(e.type).toBe('audio');
        if (e.type !== 'audio') return;
        expect(e.timestamp).toBe(1000 + i);
        expect(e.data.length).toBe(size(i));
        expect(e.data[0]).toBe(0xaf);
        expect(e.data[e.data.length - 1]).toBe(size(i) > 1 ? i & 0xff : 0xaf);
      });
    };
    check(1000, () => 3); // more events than the initial meta slots
    check(40, (i) => 1000 + i * 97); // more bytes than the initial arena
    check(3, () => 600_000); // past the shrink threshold
    check(5, (i) => 300 + i); // back to small batches
    check(2, () => 1);
  });

  it('interleaves audio and control events in message order', () => {
    const s = newSession();
    const events = s.push(Buffer.concat([
      published(),
      audioMessages(2, () => 20),
      command(amf.str('FCUnpublish'), amf.num(4), amf.nul(), amf.str('sk_ok')),
      audioMessages(1, () => 20), // after unpublish: dropped
    ]));
    expect(events.map((e) => e.type)).toEqual(['connect', 'publish', 'audio', 'audio', 'unpublish']);
  });

  it('takeOutput() is null when push() produced no replies; push inside the handler throws', () => {
    const s = newSession();
    s.push(published());
    expect(s.hasOutput).toBe(true);
    expect(s.takeOutput()).not.toBeNull();
    expect(s.hasOutput).toBe(false);
    s.acceptPublish();
    expect(s.hasOutput).toBe(true);
    expect(s.takeOutput()).not.toBeNull();
    s.push(audioMessages(2, () => 50));
    expect(s.hasOutput).toBe(false);
    expect(s.takeOutput()).toBeNull();
    expect(() => s.pushTo(audioMessages(1, () => 5), { audio: () => s.push(new Uint8Array(1)), event: () => {} }))
      .toThrow(/re-entrant/);
    expect(s.push(audioMessages(1, () => 5)).map((e) => e.type)).toEqual(['audio']); // still usable
  });
});
