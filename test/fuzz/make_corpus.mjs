// Regenerates the seed corpora of the media fuzz targets from the FFmpeg-made fixtures
// (test/fixtures/{aac,mp3,opus,rtmp}): `node test/fuzz/make_corpus.mjs`. Seeds stay small (< 32 KB; the
// fuzz_pipeline ones, whole publishes, under the 64 KiB -max_len of scripts/native-fuzz.mjs).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = path.join(here, '..', 'fixtures');

function flvAudio(rel) {
  const b = fs.readFileSync(path.join(fixtures, rel));
  const tags = [];
  let off = b.readUInt32BE(5) + 4;
  while (off + 11 <= b.length) {
    const size = b.readUIntBE(off + 1, 3);
    const ts = (b.readUIntBE(off + 4, 3) | (b[off + 7] << 24)) >>> 0;
    if (off + 11 + size > b.length) break;
    if (b[off] === 8) tags.push({ ts, body: b.subarray(off + 11, off + 11 + size) });
    off += 11 + size + 4;
  }
  return tags;
}
function oggPackets(rel) {
  const b = fs.readFileSync(path.join(fixtures, rel));
  const packets = [];
  let cur = [];
  let off = 0;
  while (off + 27 <= b.length && b.toString('latin1', off, off + 4) === 'OggS') {
    const n = b[off + 26];
    let body = off + 27 + n;
    for (let i = 0; i < n; i++) {
      const l = b[off + 27 + i];
      cur.push(b.subarray(body, body + l));
      body += l;
      if (l < 255) { packets.push(Buffer.concat(cur)); cur = []; }
    }
    off = body;
  }
  return packets;
}
const ex = (type, fourcc, payload) => Buffer.concat([Buffer.from([0x90 | type]), Buffer.from(fourcc, 'latin1'), payload]);
function write(target, name, bytes) {
  const dir = path.join(here, 'corpus', target);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, name), bytes);
}

const aac48 = flvAudio('aac/sine48k_stereo_128k.flv');
const aac44 = flvAudio('aac/sine44k1_mono_64k.flv');
const mp3 = flvAudio('mp3/sine44k1_stereo_128k.flv');
const mp3lsf = flvAudio('mp3/sine22k05_mono_32k.flv');
const opus = oggPackets('opus/sine48k_stereo_128k.ogg');
const opusTags = [{ ts: 0, body: ex(0, 'Opus', opus[0]) }, ...opus.slice(2).map((p, i) => ({ ts: i * 20, body: ex(1, 'Opus', p) }))];

// fuzz_flv_audio: single tag bodies of every kind.
const flvSeeds = {
  aac_seq: aac48[0].body, aac_frame: aac48[1].body, aac44_seq: aac44[0].body, mp3_frame: mp3[0].body,
  mp3lsf_frame: mp3lsf[0].body, opus_head: opusTags[0].body, opus_packet: opusTags[1].body,
  ex_mp4a_seq: ex(0, 'mp4a', aac48[0].body.subarray(2)), ex_mp3: ex(1, '.mp3', mp3[0].body.subarray(1)),
  ex_end: ex(2, 'Opus', Buffer.alloc(0)), ex_multichannel: ex(4, 'Opus', Buffer.from([0, 2])),
  multitrack: Buffer.concat([Buffer.from([0x95, 0x01]), Buffer.from('Opus'), Buffer.from([0, 0, 0, 3, 0xfc])]),
  pcm: Buffer.from([0x3e, 0, 0, 0, 0]), flac: ex(1, 'fLaC', Buffer.from([0xff, 0xf8])),
};
for (const [k, v] of Object.entries(flvSeeds)) write('fuzz_flv_audio', k, v);

// fuzz_aac: AudioSpecificConfigs (+ 2 bytes for the payload size), FFmpeg's and hand-made HE/HEv2/960.
const ascs = { lc48_stereo: aac48[0].body.subarray(2), lc44_mono: aac44[0].body.subarray(2),
  he_explicit: Buffer.from([0x2b, 0x92, 0x08, 0x00]), hev2_explicit: Buffer.from([0xeb, 0x09, 0x88, 0x00]),
  he_sync_ext: Buffer.from([0x13, 0x10, 0x56, 0xe5, 0x98]), lc_960: Buffer.from([0x11, 0x94]),
  explicit_rate: Buffer.from([0x17, 0x80, 0x5d, 0xc0, 0x10]) };
for (const [k, v] of Object.entries(ascs)) write('fuzz_aac', k, Buffer.concat([v, Buffer.from([0x01, 0x80])]));

// fuzz_opus: OpusHead (FFmpeg's, a 5.1 family-1 one) and packets.
write('fuzz_opus', 'opus_head', opus[0]);
write('fuzz_opus', 'opus_head_51', Buffer.concat([Buffer.from('OpusHead'), Buffer.from([1, 6, 0x38, 1, 0x80, 0xbb, 0, 0, 0, 0, 1, 4, 2, 0, 4, 1, 2, 3, 5])]));
for (let i = 2; i < 6; i++) write('fuzz_opus', `packet_${i}`, opus[i]);
write('fuzz_opus', 'packet_code3', Buffer.from([0x7b, 0x83, 0x10, 0x20, 0x30]));

// fuzz_mp3: a chunk selector byte, then runs of frames (MPEG-1 and MPEG-2 LSF), and a damaged run.
const run = (tags, n) => Buffer.concat(tags.slice(0, n).map((t) => t.body.subarray(1)));
write('fuzz_mp3', 'mpeg1_frames', Buffer.concat([Buffer.from([0x0d]), run(mp3, 5)]));
write('fuzz_mp3', 'mpeg2_frames', Buffer.concat([Buffer.from([0x00]), run(mp3lsf, 10)]));
const damaged = Buffer.from(run(mp3, 4));
damaged.fill(0x11, 300, 340);
write('fuzz_mp3', 'damaged', Buffer.concat([Buffer.from([0x25]), Buffer.from([0xff, 0xfb, 0x90]), damaged]));

// fuzz_segmenter_fmp4: options byte, then [u16 len][u8 delta/4ms][body] per tag.
function seed(options, tags, n) {
  const parts = [Buffer.from([options])];
  let last = tags[0].ts;
  for (const t of tags.slice(0, n)) {
    const d = Math.min(254, Math.round((t.ts - last) / 4));
    last = t.ts;
    const h = Buffer.alloc(3);
    h.writeUInt16BE(t.body.length);
    h[2] = d;
    parts.push(h, t.body);
  }
  return Buffer.concat(parts);
}
write('fuzz_segmenter_fmp4', 'aac_fmp4_parts', seed(0b0000_1101, aac44, 60));   // 500 ms target, 500 ms parts
write('fuzz_segmenter_fmp4', 'aac_ts', seed(0b0001_0001, aac48, 40));
write('fuzz_segmenter_fmp4', 'mp3_fmp4_parts', seed(0b0000_0101, mp3, 30));    // 500 ms, 100 ms parts
write('fuzz_segmenter_fmp4', 'mp3_ts', seed(0b0101_0001, mp3lsf, 40));         // expect mp3
write('fuzz_segmenter_fmp4', 'opus_fmp4_parts', seed(0b0110_1101, opusTags, 60)); // expect opus
write('fuzz_segmenter_fmp4', 'opus_mismatch', seed(0b0010_1100, opusTags, 10)); // expect aac
write('fuzz_segmenter_fmp4', 'aac_ts_caps', seed(0b1001_0011, aac48, 60));      // 2000 ms, byte caps
write('fuzz_segmenter_fmp4', 'opus_fmp4_parts_caps', seed(0b1000_1111, opusTags, 90)); // 2000/500 ms, byte caps

// fuzz_pipeline: [options][records], records [op][u16 n][...] (see test/fuzz/fuzz_pipeline.cc). The
// harness sends its own handshake, so the recorded FFmpeg publishes (test/fixtures/rtmp) go in
// without theirs; MP3 and Opus publishes are built from the FFmpeg-made fixtures.
const HANDSHAKE_BYTES = 1 + 2 * 1536;
function amf(...values) {
  const one = (v) => {
    if (v === null) return Buffer.from([0x05]);
    if (typeof v === 'number') { const b = Buffer.alloc(9); b.writeDoubleBE(v, 1); return b; }
    if (typeof v === 'string') { const s = Buffer.from(v); return Buffer.concat([Buffer.from([2, s.length >> 8, s.length & 255]), s]); }
    const parts = [Buffer.from([3])];
    for (const [k, val] of Object.entries(v)) parts.push(Buffer.from([k.length >> 8, k.length & 255]), Buffer.from(k), one(val));
    parts.push(Buffer.from([0, 0, 9]));
    return Buffer.concat(parts);
  };
  return Buffer.concat(values.map(one));
}
function chunkHeader(csid, type, streamId, ts, length) {
  const h = Buffer.alloc(12);
  h[0] = csid;
  h.writeUIntBE(ts, 1, 3);
  h.writeUIntBE(length, 4, 3);
  h[7] = type;
  h.writeUInt32LE(streamId, 8);
  return h;
}
function rtmpMessage(csid, type, streamId, ts, body, chunkSize) {
  const out = [chunkHeader(csid, type, streamId, ts, body.length)];
  for (let o = 0; o < body.length; o += chunkSize) {
    if (o > 0) out.push(Buffer.from([0xc0 | csid]));
    out.push(body.subarray(o, o + chunkSize));
  }
  return Buffer.concat(out);
}
function setChunkSize(n) {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return rtmpMessage(2, 1, 0, 0, b, 128);
}
const publishPrefix = Buffer.concat([
  setChunkSize(4096),
  rtmpMessage(3, 20, 0, 0, amf('connect', 1, { app: 'live/stm_test', type: 'nonprivate', tcUrl: 'rtmp://127.0.0.1/live/stm_test' }), 4096),
  rtmpMessage(3, 20, 0, 0, amf('createStream', 2, null), 4096),
  rtmpMessage(3, 20, 1, 0, amf('publish', 3, null, 'sk_test_key', 'live'), 4096),
]);
const audio = (tags) => Buffer.concat(tags.map((t) => rtmpMessage(4, 8, 1, t.ts, t.body, 4096)));
function records(options, ...recs) {
  const parts = [Buffer.from([options])];
  for (const r of recs) {
    if (r.fill) {
      parts.push(Buffer.from([2, r.fill >> 8, r.fill & 255, r.value]));
      continue;
    }
    for (let o = 0; o < r.push.length; o += 65535) {
      const piece = r.push.subarray(o, o + 65535);
      parts.push(Buffer.from([r.bytewise ? 1 : 0, piece.length >> 8, piece.length & 255]), piece);
    }
  }
  return Buffer.concat(parts);
}
const recorded = (name) => fs.readFileSync(path.join(fixtures, 'rtmp', name)).subarray(HANDSHAKE_BYTES);
// options: bit 0 TS, bits 1-2 parts (0/100/250/500 ms), bit 3 audio message cap.
write('fuzz_pipeline', 'aac48_fmp4', records(0x00, { push: recorded('ffmpeg-aac-48k.bin') }));
write('fuzz_pipeline', 'aac44_parts500_cap', records(0x0e, { push: recorded('ffmpeg-aac-44k-mono.bin') }));
write('fuzz_pipeline', 'aac_extts_ts_cap', records(0x09, { push: recorded('ffmpeg-aac-48k-extts.bin') }));
write('fuzz_pipeline', 'aac48_bytewise_prefix', records(0x02, { push: recorded('ffmpeg-aac-48k.bin').subarray(0, 1500), bytewise: true }));
write('fuzz_pipeline', 'mp3_ts_cap', records(0x09, { push: publishPrefix }, { push: audio(mp3.slice(0, 120)) }));
write('fuzz_pipeline', 'mp3lsf_fmp4_parts100', records(0x02, { push: publishPrefix }, { push: audio(mp3lsf.slice(0, 80)) }));
write('fuzz_pipeline', 'opus_fmp4_parts100_cap', records(0x0a, { push: publishPrefix }, { push: audio(opusTags.slice(0, 150)) }));
// A 1 MiB E-RTMP Opus packet (what made a 50 MiB segment before the caps), then ordinary ones.
const bigLength = 6 + 16383 * 64;
write('fuzz_pipeline', 'opus_huge_packet', records(0x04,
  { push: publishPrefix }, // the publish is accepted after this read, as the listener does
  { push: Buffer.concat([audio(opusTags.slice(0, 3)), setChunkSize(0x7fffffff), chunkHeader(4, 8, 1, 60, bigLength), ex(1, 'Opus', Buffer.from([0xf8]))]) },
  { fill: 16383, value: 0x00 },
  { push: audio(opusTags.slice(3, 40).map((t) => ({ ts: t.ts + 60, body: t.body }))) }));
// Before publishing: partial commands on two chunk streams past the 64 KiB pre-publish cap.
const cmdBody = Buffer.alloc(60000, 0x41);
const partialCmd = (csid, chunks) => rtmpMessage(csid, 20, 0, 0, cmdBody, 4096).subarray(0, 12 + chunks * 4097 - 1);
write('fuzz_pipeline', 'prepublish_partials', records(0x00, { push: Buffer.concat([setChunkSize(4096), partialCmd(3, 10), partialCmd(4, 2)]) }));
// fuzz_rtp_receive: options byte (bit 0: GCM's 16-byte tag; bits 1-6: the jitter buffer's cap),
// then [u16 len][datagram] per datagram: RTP of the Opus fixture's packets (10-byte zero tags),
// in order, then reordered with losses, a padded one, a STUN request and an RTCP SR between them.
const rtpPacket = (seq, ts, payload, { pad = 0, ssrc = 0x11223344 } = {}) => {
  const h = Buffer.alloc(12);
  h[0] = pad ? 0xa0 : 0x80;
  h[1] = 111;
  h.writeUInt16BE(seq & 0xffff, 2);
  h.writeUInt32BE(ts >>> 0, 4);
  h.writeUInt32BE(ssrc, 8);
  const padding = pad ? Buffer.concat([Buffer.alloc(pad - 1), Buffer.from([pad])]) : Buffer.alloc(0);
  return Buffer.concat([h, payload, padding, Buffer.alloc(10)]);
};
const datagrams = (options, list) => Buffer.concat([Buffer.from([options]), ...list.flatMap((d) => [Buffer.from([d.length >> 8, d.length & 0xff]), d])]);
const opusRtp = opus.slice(2, 42);
write('fuzz_rtp_receive', 'in_order', datagrams(0x20, opusRtp.map((p, i) => rtpPacket(65520 + i, i * 960, p))));
const shuffled = [0, 2, 1, 3, 5, 4, 7, 8, 11, 9, 10, 13, 12, 14, 17, 16, 18, 19];
write('fuzz_rtp_receive', 'reordered_lossy', datagrams(0x10, [
  ...shuffled.map((i) => rtpPacket(i, i * 960, opusRtp[i])),
  Buffer.from('000100002112a442000000000000000000000000', 'hex'),
  Buffer.from('80c80006112233440000000000000000000000000000000000000000', 'hex'),
  rtpPacket(20, 20 * 960, opusRtp[20], { pad: 4 }),
  rtpPacket(21, 21 * 960, opusRtp[21], { ssrc: 0x55667788 }),
]));
// SRTCP as the publisher sends it (RFC 3711 §3.4): SR + SDES, E ‖ index, a 10-byte tag; then one
// with a length running past the packet, between RTP packets.
const srtcpSrSdes = Buffer.from('80c80006112233440000000100000002000000030000000400000005' + '81ca00031122334401026162' + '00000000' + '80000007' + '00'.repeat(10), 'hex');
write('fuzz_rtp_receive', 'srtcp_reports', datagrams(0x00, [
  rtpPacket(0, 0, opusRtp[0]),
  srtcpSrSdes,
  Buffer.from('80c8ff0611223344' + '00'.repeat(20) + '80000008' + '00'.repeat(10), 'hex'),
  rtpPacket(1, 960, opusRtp[1]),
]));
