// Segmenter byte caps from JS (native/binding/segmenter.cc): option checks, `frame_too_large`
// (an oversized Opus packet, an AAC frame over what ADTS carries) and `segment_too_large`, each
// dropping the frame while the segmenter goes on; no caps unless asked for.
import { describe, expect, it } from 'vitest';
import { Segmenter, type SegmenterEvent } from '../../../src/native/segmenter.js';
import { exAudio, flvAudioTags, opusTags } from '../../helpers/rtmp-client-bytes.js';

const opus = opusTags('opus/sine48k_stereo_128k.ogg');
const aac = flvAudioTags('aac/sine48k_stereo_128k.flv');
/** An E-RTMP Opus CodedFrames tag: one 20 ms CELT frame (TOC 0xF8) of `bytes`. */
const opusPacket = (bytes: number) => exAudio(1, 'Opus', Buffer.concat([Buffer.from([0xf8]), Buffer.alloc(bytes - 1, 0x55)]));
const errors = (events: SegmenterEvent[]) => events.filter((e) => e.type === 'error').map((e) => (e as { code: string }).code);

describe('Segmenter byte caps', () => {
  it('checks the options', () => {
    for (const bad of [-1, 1.5, 2 ** 24, 'x'])
      expect(() => new Segmenter({ container: 'fmp4', maxFrameBytes: bad as number })).toThrow(/maxFrameBytes/);
    for (const bad of [-1, 2 ** 32, Number.NaN])
      expect(() => new Segmenter({ container: 'ts', maxSegmentBytes: bad })).toThrow(/maxSegmentBytes/);
    expect(() => new Segmenter({ container: 'ts', maxFrameBytes: 0, maxSegmentBytes: 0 })).not.toThrow();
  });

  it('drops a frame over maxFrameBytes with frame_too_large and goes on', () => {
    const s = new Segmenter({ container: 'fmp4', expectCodec: 'opus', maxFrameBytes: 1000 });
    expect(s.pushAudio(0, opus[0]!.body)[0]).toMatchObject({ type: 'config', codec: 'opus' });
    expect(s.pushAudio(0, opusPacket(1001))).toEqual([{ type: 'error', code: 'frame_too_large', message: expect.stringContaining('1000') }]);
    expect(s.pushAudio(0, opusPacket(1000))).toEqual([]);
    const segments = s.flush().filter((e) => e.type === 'segment');
    expect(segments).toHaveLength(1);
    expect(segments[0]).toMatchObject({ frames: 1 });
  });

  it('AAC frames over 8184 bytes are frame_too_large without any option', () => {
    for (const container of ['ts', 'fmp4'] as const) {
      const s = new Segmenter({ container });
      s.pushAudio(0, aac[0]!.body);
      const huge = Buffer.concat([Buffer.from([0xaf, 0x01]), Buffer.alloc(8185, 0x11)]);
      expect(errors(s.pushAudio(0, huge))).toEqual(['frame_too_large']);
    }
  });

  it('drops frames that would take the segment over maxSegmentBytes; segments keep coming', () => {
    const s = new Segmenter({ container: 'fmp4', partTargetMs: 500, maxSegmentBytes: 20_000 });
    const events: SegmenterEvent[] = [];
    for (const t of aac) events.push(...s.pushAudio(t.ts, t.body));
    events.push(...s.flush());
    const codes = new Set(errors(events));
    expect([...codes]).toEqual(['segment_too_large']);
    const segments = events.filter((e) => e.type === 'segment');
    expect(segments.length).toBeGreaterThanOrEqual(2);
    // 128 kbps: 20000 bytes is ~1.25 s of frames; every full segment stops there (fMP4 headers on top).
    for (const seg of segments) expect(seg.data.length).toBeLessThan(20_000 + 2_000);
  });

  it('without caps a 60 KB Opus packet is taken as before', () => {
    const s = new Segmenter({ container: 'fmp4' });
    s.pushAudio(0, opus[0]!.body);
    expect(s.pushAudio(0, opusPacket(60_000))).toEqual([]);
    expect(s.flush().find((e) => e.type === 'segment')).toMatchObject({ frames: 1 });
  });
});
