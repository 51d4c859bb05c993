/** What plays now from RTMP `onMetaData` values (docs/behaviour.md §11). */
import { describe, expect, it } from 'vitest';
import { nowPlayingOf } from '../../../../src/live/ingest/rtmp-ingest.js';

describe('nowPlayingOf', () => {
  it('takes title, artist and album strings, trimmed and capped; ignores other keys and types', () => {
    expect(nowPlayingOf({ title: ' Blue in Green ', artist: 'Miles Davis', encoder: 'Lavf59.27.100', duration: 0, audiocodecid: 10 })).toEqual({ title: 'Blue in Green', artist: 'Miles Davis', album: null });
    expect(nowPlayingOf({ title: 'x'.repeat(300), album: 'Kind of Blue', artist: 42 })).toEqual({ title: 'x'.repeat(256), artist: null, album: 'Kind of Blue' });
    expect(nowPlayingOf({ encoder: 'obs-output module', audiodatarate: 160 })).toBeNull();
    expect(nowPlayingOf({ title: '   ' })).toBeNull();
    expect(nowPlayingOf({ title: true })).toBeNull();
  });
});
