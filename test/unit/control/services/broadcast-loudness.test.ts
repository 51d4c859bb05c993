/**
 * A broadcast's loudness in the broadcast log over a real SQLite file (docs/streams.md "Live
 * loudness"): the latest reading of a stream while fresh, the running broadcast's integrated
 * loudness from its momentary blocks (gated), written with the figures and when it ends, and
 * kept across a restart until new blocks arrive.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase, type Database } from '../../../../src/base/db/database.js';
import { EventsRepo } from '../../../../src/base/db/events-repo.js';
import { BroadcastsRepo } from '../../../../src/base/db/broadcasts-repo.js';
import { Outbox } from '../../../../src/base/outbox.js';
import { createLogger } from '../../../../src/base/logger.js';
import { Limits } from '../../../../src/base/limits/limits.js';
import { BroadcastLog } from '../../../../src/control/services/broadcasts.js';
import { WriteRetry } from '../../../../src/base/db/write-retry.js';

let dir: string;
let db: Database;
const log = createLogger('error');
let now = 1_000_000;

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'skylark-loudness-'));
  db = openDatabase(dir);
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** One run of the node: a broadcast log over the database, on the test clock. */
function node() {
  const broadcasts = new BroadcastLog({ repo: new BroadcastsRepo(db), outbox: new Outbox(new EventsRepo(db)), writes: new WriteRetry(db, log, new Limits(log)), log, now: () => now });
  const inTx = <T extends { after: () => void }>(f: () => T): T => {
    const r = db.transaction(f)();
    r.after();
    return r;
  };
  const second = (lufs: number, shortTerm = lufs) => broadcasts.onLoudness('stm_a', { momentary: Array.from({ length: 10 }, () => lufs), shortTerm });
  return { broadcasts, inTx, second, list: () => broadcasts.list('acct_a', 'stm_a', { limit: 10 }).data };
}

describe('BroadcastLog loudness', () => {
  it('keeps the latest reading while fresh and the running broadcast integrated loudness, gated', () => {
    const a = node();
    expect(a.broadcasts.loudness('stm_a')).toBeNull();
    a.second(-30.04); // no broadcast runs: the reading shows, nothing is integrated
    expect(a.broadcasts.loudness('stm_a')).toEqual({ shortTermLufs: -30, momentaryLufs: -30, integratedLufs: null });
    const { id } = a.inTx(() => a.broadcasts.start('acct_a', 'stm_a', now));
    expect(a.list()[0]).toMatchObject({ id, integratedLufs: null });
    a.second(-20);
    a.second(-20);
    a.second(-45); // under the relative gate (≈ −31.7)
    a.broadcasts.onLoudness('stm_a', { momentary: [-18, -19, -21], shortTerm: -20.56 });
    expect(a.broadcasts.loudness('stm_a')).toMatchObject({ shortTermLufs: -20.6, momentaryLufs: -21 });
    const integrated = a.broadcasts.loudness('stm_a')!.integratedLufs!;
    expect(integrated).toBeGreaterThan(-20);
    expect(integrated).toBeLessThan(-19.5);
    expect(a.list()[0]!.integratedLufs).toBe(integrated);
    now += 6000; // no reading for over 5 s: nothing measures the stream now
    expect(a.broadcasts.loudness('stm_a')).toBeNull();
    a.inTx(() => a.broadcasts.end('stm_a', now));
    a.broadcasts.close();
    // Stored when it ended.
    const b = node();
    expect(b.broadcasts.get('acct_a', 'stm_a', id).integratedLufs).toBe(integrated);
    b.broadcasts.close();
  });

  it('writes the value so far, keeps it across a restart until new blocks arrive, then measures those', () => {
    const a = node();
    const { id } = a.inTx(() => a.broadcasts.start('acct_a', 'stm_a', now));
    a.second(-16);
    a.broadcasts.close(); // writes what moved
    const b = node();
    expect(b.broadcasts.get('acct_a', 'stm_a', id)).toMatchObject({ endedAt: null, integratedLufs: -16 });
    b.second(-60);
    expect(b.list()[0]!.integratedLufs).toBe(-60);
    b.inTx(() => b.broadcasts.end('stm_a', now));
    expect(b.broadcasts.get('acct_a', 'stm_a', id).integratedLufs).toBe(-60);
    b.broadcasts.close();
  });

  it('measures nothing from silence: null stays null', () => {
    const a = node();
    const { id } = a.inTx(() => a.broadcasts.start('acct_a', 'stm_a', now));
    a.second(-120.7);
    expect(a.broadcasts.loudness('stm_a')).toEqual({ shortTermLufs: -120.7, momentaryLufs: -120.7, integratedLufs: null });
    a.inTx(() => a.broadcasts.end('stm_a', now));
    expect(a.broadcasts.get('acct_a', 'stm_a', id).integratedLufs).toBeNull();
    a.broadcasts.close();
  });
});
