/**
 * Conversion of the earlier catch-up layout at start (docs/behaviour.md "Catch-up radio",
 * "Storage"): a file per segment (`<dataDir>/catch-up/<stream>/<layer>/<sequence>.<m4s|ts>`)
 * indexed by a row of SQLite's `catch_up_segments` (migration 020). Each layer's indexed segments
 * are appended, in media sequence order, to the layer-hours of the current layout (their bytes,
 * then their records), then the layer's rows and files are deleted. A conversion cut short runs
 * again at the next start: a segment appended twice is read back once (records whose number does
 * not rise are skipped), and one whose file is gone is left out.
 */
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { CatchUpRepo, CatchUpSegmentRow } from '../../base/db/catch-up-repo.js';
import type { Logger } from '../../base/logger.js';
import type { LayerFiles } from './hour-store.js';

const SAFE_NAME = /^[A-Za-z0-9_]{1,64}$/;

/** Converts every layer of the earlier layout (see the module comment); returns the segments converted. */
export function convertLegacy(repo: CatchUpRepo, dir: string, files: (streamId: string, layer: string) => LayerFiles, log: Logger): number {
  let n = 0;
  for (const streamId of repo.legacyStreams()) {
    for (const layer of repo.legacyLayers(streamId)) {
      if (!SAFE_NAME.test(streamId) || !SAFE_NAME.test(layer)) {
        repo.forgetLegacy(streamId, layer);
        continue;
      }
      const f = files(streamId, layer);
      const done = convertLayer(repo, f, streamId, layer, path.join(dir, streamId, layer));
      n += done;
      log.info('catch-up layer converted to layer-hour files', { streamId, layer, segments: done });
    }
  }
  return n;
}

/** Converts one layer, in batches of rows by sequence number; returns the segments appended. */
function convertLayer(repo: CatchUpRepo, f: LayerFiles, streamId: string, layer: string, layerDir: string): number {
  let n = 0;
  let after = -1;
  for (let rows = repo.legacyRows(streamId, layer, after); rows.length > 0; rows = repo.legacyRows(streamId, layer, after)) {
    for (const r of rows) {
      after = r.sequence;
      if (r.sequence <= f.index.lastSequence) continue; // converted by a run cut short
      if (appendRow(f, r, layerDir)) n++;
    }
  }
  f.closeWriter();
  repo.forgetLegacy(streamId, layer);
  return n;
}

/** Appends one row's segment file; false when the file is gone. */
function appendRow(f: LayerFiles, r: CatchUpSegmentRow, layerDir: string): boolean {
  const file = path.join(layerDir, `${r.sequence}.${r.ext}`);
  let data: Buffer;
  try {
    data = readFileSync(file);
  } catch {
    return false;
  }
  const ts = r.ext === 'ts';
  const e = { sequence: r.sequence, startMs: r.start_ms, durationMs: r.duration_ms, offset: 0, length: data.byteLength, discontinuity: r.discontinuity === 1, discontinuitySequence: r.discontinuity_sequence, initId: ts ? '' : r.init_id, ts };
  f.appendSync(e, [data], r.broadcast_id, 0);
  rmSync(file, { force: true });
  return true;
}
