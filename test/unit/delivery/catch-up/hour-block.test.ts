// A layer-hour's sidecar record (src/delivery/catch-up/hour-block.ts, docs/behaviour.md "Catch-up
// radio" "Storage"): made in place in the hour's in-memory records, byte for byte the layout of the
// module comment, and read back by `readHour`.
import { describe, expect, it } from 'vitest';
import { broadcastRecord, HourBlock, readHour, RECORD_BYTES, writeSegmentRecord, type SegmentEntry } from '../../../../src/delivery/catch-up/hour-block.js';

/** The layout written field by field with Buffer's own methods (FNV-1a of bytes 0–43 at 44). */
function reference(e: SegmentEntry, slot: number): Buffer {
  const b = Buffer.alloc(RECORD_BYTES);
  b[0] = 1;
  b[1] = (e.discontinuity ? 1 : 0) | (e.ts ? 2 : 0);
  b.writeUInt16LE(slot, 2);
  b.writeUInt32LE(e.durationMs, 4);
  b.writeDoubleLE(e.sequence, 8);
  b.writeDoubleLE(e.startMs, 16);
  b.writeUInt32LE(e.offset, 24);
  b.writeUInt32LE(e.length, 28);
  b.writeUInt32LE(e.discontinuitySequence, 32);
  if (e.initId) b.write(e.initId, 36, 8, 'hex');
  let h = 0x811c9dc5;
  for (let i = 0; i < 44; i++) h = Math.imul(h ^ b[i]!, 0x01000193);
  b.writeUInt32LE(h >>> 0, 44);
  return b;
}

const entry = (k: number, initId: string): SegmentEntry => ({
  sequence: 1_000_000 + k,
  startMs: Date.parse('2026-11-30T00:00:00Z') + k * 2002.5,
  durationMs: 2000 + (k % 7),
  offset: k * 32_768 + (k % 3),
  length: 32_000 + k,
  discontinuity: k % 5 === 0,
  discontinuitySequence: k >> 2,
  initId,
  ts: initId === '',
});

describe('a layer-hour record', () => {
  it('is written in place into the hour’s records byte for byte as the layout, over whatever the place held', () => {
    const b = new HourBlock('2026113000', 1);
    const ids = ['0123456789abcdef', 'FEDCBA9876543210', '', '01234567zz89abcd'];
    const expected: Buffer[] = [];
    for (let k = 0; k < 40; k++) {
      const e = entry(k, ids[k % ids.length]!);
      const slot = k % 3 === 0 ? 0xffff : k % 3;
      const at = b.reserve(); // grows the store from one record's room, keeping the records before
      b.store.fill(0xa5, at, at + RECORD_BYTES);
      writeSegmentRecord(b.view, at, e, slot);
      b.pushReserved();
      expected.push(reference(e, slot));
    }
    expect(b.n).toBe(40);
    expect(b.store.subarray(0, 40 * RECORD_BYTES)).toEqual(Buffer.concat(expected));
    expect(b.dataEnd).toBe(39 * 32_768 + (39 % 3) + 32_039);
    expect(b.seq(39)).toBe(1_000_039);
    expect(b.initOf(1)).toBe('fedcba9876543210');
  });

  it('reads back from a sidecar written of them, broadcast records included', () => {
    const recs = [broadcastRecord('brd_a', 0), reference(entry(1, '0123456789abcdef'), 0), reference(entry(2, ''), 0xffff)];
    const { block, validBytes } = readHour('2026113000', Buffer.concat(recs), 1 << 30, 0);
    expect(validBytes).toBe(3 * RECORD_BYTES);
    expect(block.n).toBe(2);
    expect(block.row(0, 'stm_x', 'a').broadcast_id).toBe('brd_a');
    expect(block.row(1, 'stm_x', 'a')).toMatchObject({ sequence: 1_000_002, ext: 'ts', init_id: '', broadcast_id: null });
  });
});
