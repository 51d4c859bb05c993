/**
 * A catch-up segment's append in one native call (native/binding/file_append.cc, docs/decisions.md
 * "Catch-up storage"): the segment's bytes with one `pwritev` at a known offset of its layer-hour's
 * `.seg`, then its sidecar record(s) with one more at a known offset of `.idx`, on the calling
 * thread. Two system calls and nothing else: none of Node's per-call checks, request objects or
 * copies of small buffers that two `fs.writeSync` calls cost.
 */
import { loadedAddon } from './addon.js';

interface FileAppendAddon {
  appendSegment(
    dataFd: number,
    data: readonly Uint8Array[],
    dataAt: number,
    recordsFd: number,
    head: Uint8Array | null,
    records: Uint8Array,
    recordsFrom: number,
    recordsBytes: number,
    recordsAt: number,
  ): number;
}
const addon = loadedAddon as FileAppendAddon;

/**
 * Writes the pieces of `data` one after the other at byte `dataAt` of `dataFd` (all of them, again
 * after a short write), then — only once they are all written — `head` (a 48-byte broadcast record,
 * or null) followed by bytes `[recordsFrom, recordsFrom + recordsBytes)` of `records` at byte
 * `recordsAt` of `recordsFd`. Positions and lengths in bytes. Returns the time the writes took (ms,
 * a monotonic clock). The addon's own function (no JavaScript frame between).
 * @throws Error with `code` (`EIO`, `ENOSPC`, `EBADF`, …) and `errno` (negative, as Node's) when a
 *   write fails; TypeError on an argument that is not a whole number ≥ 0 or a range outside `records`
 */
export const appendSegment: FileAppendAddon['appendSegment'] = addon.appendSegment;
