// A catch-up segment's append in one native call (src/native/file-append.ts,
// native/binding/file_append.cc, native/io/file_append.cc): the pieces at the data offset, then the
// head and the records' range at the records offset, read back with node:fs.
import { closeSync, constants, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { appendSegment } from '../../../src/native/file-append.js';

const dir = mkdtempSync(path.join(tmpdir(), 'skylark-file-append-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const WRITE = constants.O_WRONLY | constants.O_CREAT;

describe('appendSegment', () => {
  it('writes the pieces one after the other at the data offset, then the head and the records range at the records offset, and says how long it took', () => {
    const seg = path.join(dir, 'a.seg');
    const idx = path.join(dir, 'a.idx');
    writeFileSync(seg, 'XXXXtorn tail');
    writeFileSync(idx, 'RRRR');
    const s = openSync(seg, WRITE);
    const i = openSync(idx, WRITE);
    try {
      const pieces = [Buffer.from('abc'), new Uint8Array(0), Buffer.from('0123456789').subarray(2, 6), new Uint8Array(70_000).fill(7)];
      const records = Buffer.from('..record-one..record-two..');
      const ms = appendSegment(s, pieces, 4, i, Buffer.from('HEAD'), records, 2, 10, 4);
      expect(ms).toBeGreaterThanOrEqual(0); // the time the writes took (ms)
      appendSegment(s, [Buffer.from('!')], 4 + 3 + 4 + 70_000, i, null, records, 14, 10, 18);
    } finally {
      closeSync(s);
      closeSync(i);
    }
    expect(readFileSync(seg)).toEqual(Buffer.concat([Buffer.from('XXXXabc2345'), Buffer.alloc(70_000, 7), Buffer.from('!')]));
    expect(readFileSync(idx, 'latin1')).toBe('RRRRHEADrecord-onerecord-two');
  });

  it('throws the system error of a failed write, and writes no record after a failed data write', () => {
    const idx = path.join(dir, 'b.idx');
    const i = openSync(idx, WRITE);
    writeFileSync(path.join(dir, 'b.seg'), '');
    const readOnly = openSync(path.join(dir, 'b.seg'), 'r'); // a data file not open for writing
    try {
      expect(() => appendSegment(readOnly, [Buffer.from('x')], 0, i, null, Buffer.from('rec'), 0, 3, 0)).toThrow(expect.objectContaining({ code: 'EBADF' }));
    } finally {
      closeSync(i);
      closeSync(readOnly);
    }
    expect(readFileSync(idx).length).toBe(0);
  });

  it('refuses arguments it cannot write from with a TypeError', () => {
    const b = Buffer.from('abc');
    expect(() => appendSegment(-1, [b], 0, 1, null, b, 0, 1, 0)).toThrow(TypeError);
    expect(() => appendSegment(1, [b], 0.5, 1, null, b, 0, 1, 0)).toThrow(TypeError);
    expect(() => appendSegment(1, ['abc' as unknown as Uint8Array], 0, 1, null, b, 0, 1, 0)).toThrow(TypeError);
    expect(() => appendSegment(1, [b], 0, 1, null, b, 2, 2, 0)).toThrow(TypeError);
    expect(() => appendSegment(1, [b], 0, 1, new Uint16Array(2) as unknown as Uint8Array, b, 0, 1, 0)).toThrow(TypeError);
  });
});
