/**
 * The WebRTC packet source of an AAC stream hands ADTS frames to its codec process (real FFmpeg);
 * an AAC frame over 8184 bytes, which ADTS cannot carry, is dropped and logged once — the source
 * keeps running instead of throwing out of the hub's fan-out.
 */
import { describe, expect, it } from 'vitest';
import { StreamAudioSource, type PacketSink } from '../../../src/delivery/webrtc/source.js';
import { createLogger } from '../../../src/base/logger.js';
import type { StreamHub } from '../../../src/live/media/hub.js';
import { readAudioTag } from '../../../src/live/media/codec.js';

describe('StreamAudioSource with an oversized AAC frame', () => {
  it('drops it, logs once, and keeps transcoding', () => {
    const lines: string[] = [];
    const log = createLogger('warn', 'test', (l) => lines.push(l));
    const hub = { onAudio: () => () => {}, audioHeader: null } as unknown as StreamHub;
    const source = new StreamAudioSource('stm_big', hub, 'aac', log, () => {});
    const sink: PacketSink = { send: () => {}, close: () => {} };
    source.add(sink); // starts the codec process
    try {
      expect(source.transcoding).toBe(true);
      const tag = (packetType: number, body: Uint8Array) => Uint8Array.from([0xaf, packetType, ...Array.from(body)]);
      const audio = (ts: number, b: Uint8Array) => source.audio(ts, b, readAudioTag(b));
      audio(0, tag(0, Uint8Array.from([0x11, 0x90])));
      audio(21, tag(1, new Uint8Array(300)));
      expect(() => audio(42, tag(1, new Uint8Array(8185)))).not.toThrow();
      expect(() => audio(64, tag(1, new Uint8Array(20_000)))).not.toThrow();
      audio(85, tag(1, new Uint8Array(8184)));
      expect(source.droppedFrames).toBe(2);
      const warned = lines.filter((l) => l.includes('too large for ADTS'));
      expect(warned).toHaveLength(1);
      expect(warned[0]).toContain('stm_big');
      expect(source.transcoding).toBe(true);
    } finally {
      source.remove(sink);
    }
  });
});
