/**
 * Who a broadcast counts (docs/behaviour.md §2 "Broadcasts"), in the broadcast log over a real
 * SQLite file on a test clock: the listeners of the stream when it starts count from its start —
 * an open connection at once, an HLS session once it is seen during the broadcast, never one that
 * leaves without a request in it — and listeners who join while it runs count from their join.
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
import { BroadcastLog, type PresentListener } from '../../../../src/control/services/broadcasts.js';
import { WriteRetry } from '../../../../src/base/db/write-retry.js';

let dir: string;
let db: Database;
const log = createLogger('error');
const T = Date.parse('2026-06-01T12:00:00Z');
let now = T;

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'skylark-brd-listeners-'));
  db = openDatabase(dir);
  now = T;
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const iso = (ms: number) => new Date(ms).toISOString();

describe('BroadcastLog listeners', () => {
  it('counts the listeners present at the start from then, pending HLS sessions once seen, and later joins', () => {
    const outbox = new Outbox(new EventsRepo(db));
    // The registry as the log sees it: live listeners and their last requests.
    const live = new Map<string, PresentListener>([
      ['lst_open', { id: 'lst_open', country: 'DE', open: true, lastSeenAt: T - 60_000 }],
      ['lst_playing', { id: 'lst_playing', country: null, open: false, lastSeenAt: T - 500 }],
      ['lst_stale', { id: 'lst_stale', country: 'FR', open: false, lastSeenAt: T - 5000 }],
    ]);
    const broadcasts = new BroadcastLog({
      repo: new BroadcastsRepo(db),
      outbox,
      writes: new WriteRetry(db, log, new Limits(log)),
      log,
      now: () => now,
      listeners: () => [...live.values()],
      lastSeen: (_s, id) => live.get(id)?.lastSeenAt ?? null,
    });
    const event = (type: 'listener.joined' | 'listener.left', id: string, country: string | null, connectedAt: number, lastSeenAt: number) => {
      outbox.record('acct_a', type, { object: { id, object: 'listener', streamId: 'stm_a', protocol: 'hls', country, connectedAt: iso(connectedAt), lastSeenAt: iso(lastSeenAt) } });
      outbox.flush();
    };
    const b = db.transaction(() => broadcasts.start('acct_a', 'stm_a', T))();
    b.after();
    const get = () => broadcasts.get('acct_a', 'stm_a', b.id);
    // At the start: the open connection; the HLS sessions wait for a request.
    expect(get()).toMatchObject({ peakListeners: 1, totalListeners: 1 });

    now = T + 1000;
    live.get('lst_playing')!.lastSeenAt = T + 800; // its next playlist reload
    expect(get()).toMatchObject({ peakListeners: 2, totalListeners: 2, listenerSeconds: 2 });

    // The stale session times out without a request in the broadcast: never counted.
    live.delete('lst_stale');
    event('listener.left', 'lst_stale', 'FR', T - 60_000, T - 5000);
    // A listener joins and leaves during it; a repeated join of a counted one is no new listener.
    event('listener.joined', 'lst_new', 'NL', T + 2000, T + 2000);
    event('listener.joined', 'lst_open', 'DE', T - 60_000, T - 60_000);
    now = T + 3000;
    event('listener.left', 'lst_new', 'NL', T + 2000, T + 3000);

    now = T + 10_000;
    const end = db.transaction(() => broadcasts.end('stm_a', now))();
    end.after();
    const f = get();
    expect(f).toMatchObject({ peakListeners: 3, totalListeners: 3, listenerSeconds: 21, durationSeconds: 10 });
    expect(f.countries).toHaveLength(3);
    expect(f.countries).toEqual(expect.arrayContaining([
      { country: 'DE', listeners: 1 },
      { country: 'NL', listeners: 1 },
      { country: null, listeners: 1 },
    ]));
    broadcasts.close();
  });

  it('counts a pending session that leaves after a request in the broadcast, up to that request', () => {
    const outbox = new Outbox(new EventsRepo(db));
    const broadcasts = new BroadcastLog({
      repo: new BroadcastsRepo(db),
      outbox,
      writes: new WriteRetry(db, log, new Limits(log)),
      log,
      now: () => now,
      listeners: () => [{ id: 'lst_hls', country: null, open: false, lastSeenAt: T - 1500 }],
      lastSeen: () => null, // already gone from the registry when the log looks
    });
    const b = db.transaction(() => broadcasts.start('acct_a', 'stm_a', T))();
    b.after();
    outbox.record('acct_a', 'listener.left', { object: { id: 'lst_hls', object: 'listener', streamId: 'stm_a', protocol: 'hls', country: null, connectedAt: iso(T - 30_000), lastSeenAt: iso(T + 4000) } });
    outbox.flush();
    now = T + 20_000;
    db.transaction(() => broadcasts.end('stm_a', now))().after();
    expect(broadcasts.get('acct_a', 'stm_a', b.id)).toMatchObject({ peakListeners: 1, totalListeners: 1, listenerSeconds: 4 });
    broadcasts.close();
  });
});
