/**
 * The ladder process's loudness output (docs/streams.md "Live loudness"): the `ebur128` analysis
 * output is always in the arguments, and its frame log lines read as momentary and short-term
 * loudness; the silencedetect output stays as it was.
 */
import { describe, expect, it } from 'vitest';
import { LOUDNESS_FLOOR, parseEbur128, transcoderArgs } from '../../../../src/live/media/transcoder.js';

describe('ladder loudness', () => {
  it('always measures with ebur128 at log level info, beside silencedetect when asked', () => {
    for (const args of [transcoderArgs('aac', [64]), transcoderArgs('opus', [128, 64]), transcoderArgs('mp3', [], 5)]) {
      expect(args.join(' ')).toContain('-map 0:a:0 -af ebur128=framelog=info -f null -');
      expect(args).toEqual(expect.arrayContaining(['-loglevel', 'info', '-nostats']));
    }
    expect(transcoderArgs('aac', [64], 7).join(' ')).toContain('-af ebur128=framelog=info -f null - -map 0:a:0 -af silencedetect=n=-50dB:d=7 -f null -');
  });

  it('reads FFmpeg 5.1 frame log lines', () => {
    expect(parseEbur128('[Parsed_ebur128_0 @ 0x55a2a1b99300] t: 3.49998    TARGET:-23 LUFS    M: -20.1 S: -21.0     I: -20.5 LUFS       LRA:   0.3 LU')).toEqual({ momentary: -20.1, shortTerm: -21 });
    expect(parseEbur128('[Parsed_ebur128_0 @ 0x5] t: 0.1  TARGET:-23 LUFS    M:-120.7 S:-120.7     I: -70.0 LUFS       LRA:   0.0 LU')).toEqual({ momentary: -120.7, shortTerm: -120.7 });
    expect(parseEbur128('[Parsed_ebur128_0 @ 0x5] t: 0.1  TARGET:-23 LUFS    M: -inf S: nan     I: -70.0 LUFS       LRA:   0.0 LU')).toEqual({ momentary: LOUDNESS_FLOOR, shortTerm: LOUDNESS_FLOOR });
    expect(parseEbur128('[Parsed_ebur128_0 @ 0x5] t: 0.1  TARGET:-23 LUFS    M: -3.2 S: +1.5     I: -3.0 LUFS       LRA:   0.0 LU')).toEqual({ momentary: -3.2, shortTerm: 1.5 });
  });

  it('leaves other lines alone', () => {
    expect(parseEbur128('[silencedetect @ 0x5] silence_start: 1.5')).toBeNull();
    expect(parseEbur128('    I:         -41.1 LUFS')).toBeNull();
    expect(parseEbur128('[Parsed_ebur128_0 @ 0x5] Summary:')).toBeNull();
    expect(parseEbur128('Stream mapping:')).toBeNull();
  });
});
