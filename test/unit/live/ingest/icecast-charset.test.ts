/**
 * The text of Icecast's `updinfo` call (src/live/ingest/icecast-http.ts): the query is read as bytes
 * (`%XX`, `+`) and decoded in the `charset=` the call names — ISO-8859-1, Windows-1252, UTF-8 —
 * and without one as UTF-8 when the bytes are valid UTF-8, else ISO-8859-1.
 */
import { describe, expect, it } from 'vitest';
import { decodeCharset, queryBytes } from '../../../../src/live/ingest/icecast-http.js';

const song = (query: string) => queryBytes(query).get('song')!;

describe('updinfo charset', () => {
  it('%E9 with charset=ISO-8859-1 is é; Windows-1252 maps 0x80–0x9F; UTF-8 sequences', () => {
    expect(decodeCharset(song('mode=updinfo&song=Caf%E9+Tune'), 'ISO-8859-1')).toBe('Café Tune');
    expect(decodeCharset(song('song=%93Hi%94+%80'), 'windows-1252')).toBe('“Hi” €');
    expect(decodeCharset(song('song=%93'), 'iso-8859-1')).toBe('\u0093');
    expect(decodeCharset(song('song=Caf%C3%A9'), 'UTF-8')).toBe('Café');
  });

  it('without a charset: UTF-8 when valid, else ISO-8859-1', () => {
    expect(decodeCharset(song('song=Caf%C3%A9'), null)).toBe('Café');
    expect(decodeCharset(song('song=Caf%E9'), null)).toBe('Café');
  });

  it('an unknown charset is refused', () => {
    expect(() => decodeCharset(song('song=x'), 'KOI8-R')).toThrow(/unsupported charset/);
  });

  it('raw bytes of the request head (read as Latin-1) stay bytes; a bad escape stays as sent', () => {
    expect(decodeCharset(song('song=Caf\u00e9'), 'ISO-8859-1')).toBe('Café');
    expect(song('song=100%+sure%zz').toString('latin1')).toBe('100% sure%zz');
    expect(queryBytes('a=1&a=2&b').get('a')!.toString()).toBe('1');
    expect(queryBytes('a=1&a=2&b').get('b')!.length).toBe(0);
  });
});
