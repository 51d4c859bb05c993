/**
 * The play log over a real SQLite file and the real listener registry (docs/behaviour.md §11): a track's
 * figures follow committed listener events, reach SQLite, survive a restart (a new PlayLog picks
 * the running track up from SQLite on the stream's next listener event) and end with the track;
 * chapters of a recording start at 0 for tracks set before it began.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase, type Database } from '../../../../src/base/db/database.js';
import { EventsRepo } from '../../../../src/base/db/events-repo.js';
import { ListenersRepo } from '../../../../src/base/db/listeners-repo.js';
import { TracksRepo } from '../../../../src/base/db/tracks-repo.js';
import { Outbox } from '../../../../src/base/outbox.js';
import { ListenerRegistry } from '../../../../src/delivery/listeners/registry.js';
import { createLogger } from '../../../../src/base/logger.js';
import { Limits } from '../../../../src/base/limits/limits.js';
import { PlayLog } from '../../../../src/control/services/play-log.js';
import { WriteRetry } from '../../../../src/base/db/write-retry.js';

let dir: string;
let db: Database;
const log = createLogger('error');

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'skylark-playlog-'));
  db = openDatabase(dir);
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** One run of the node: an outbox, a registry and a play log over the same database. */
function node() {
  const outbox = new Outbox(new EventsRepo(db));
  const registry = new ListenerRegistry({ db, repo: new ListenersRepo(db), outbox, log });
  const listeners = { countries: (id: string) => registry.active(id).map((s) => s.country), settle: () => registry.flush() };
  const playLog = new PlayLog({ repo: new TracksRepo(db), outbox, writes: new WriteRetry(db, log, new Limits(log)), log, listeners });
  let n = 0;
  const join = (country: string | null) =>
    registry.join({ streamId: 'stm_a', accountId: 'acct_a', key: `k${++n}`, protocol: 'icecast', country, userAgent: null, timeoutMs: 0 });
  const change = (title: string, at: number) => {
    playLog.settle();
    const after = db.transaction(() => playLog.change({ accountId: 'acct_a', streamId: 'stm_a', title, artist: null, album: null, url: null, artworkUrl: null }, at))();
    after();
  };
  return { outbox, registry, playLog, join, change, tracks: () => playLog.list('acct_a', 'stm_a', { limit: 20 }).data };
}

describe('PlayLog', () => {
  it('follows listener events, writes them, and continues the running track after a restart', () => {
    const a = node();
    const us = a.join('US');
    a.change('One', 1_000);
    expect(a.tracks()[0]).toMatchObject({ title: 'One', listenersAtStart: 1, peakListeners: 1, countries: [{ country: 'US', listeners: 1 }] });
    const de = a.join('DE');
    a.join(null);
    a.registry.flush();
    expect(a.tracks()[0]).toMatchObject({ peakListeners: 3, countries: [{ country: 'DE', listeners: 1 }, { country: 'US', listeners: 1 }, { country: null, listeners: 1 }] });
    a.registry.leave(de);
    a.registry.leave(us);
    a.registry.flush();
    a.registry.close();
    a.playLog.close(); // writes the figures
    const stored = db.prepare('SELECT peak_listeners, countries, ended_at FROM tracks').get() as { peak_listeners: number; countries: string; ended_at: number | null };
    expect(stored).toEqual({ peak_listeners: 3, countries: JSON.stringify([{ country: 'DE', listeners: 1 }, { country: 'US', listeners: 1 }, { country: null, listeners: 1 }]), ended_at: null });

    // The next run: the running track is picked up from SQLite on the stream's next listener event.
    const b = node();
    b.join('FR');
    b.join('FR');
    b.registry.flush();
    expect(b.tracks()[0]).toMatchObject({ title: 'One', endedAt: null, listenersAtStart: 1, peakListeners: 3 });
    expect(b.tracks()[0]!.countries).toEqual([
      { country: 'FR', listeners: 2 },
      { country: 'DE', listeners: 1 },
      { country: 'US', listeners: 1 },
      { country: null, listeners: 1 },
    ]);
    b.join('FR');
    b.registry.flush();
    expect(b.tracks()[0]).toMatchObject({ peakListeners: 3 });
    b.join('FR');
    b.registry.flush();
    expect(b.tracks()[0]).toMatchObject({ peakListeners: 4 });

    b.change('Two', 5_000);
    const [two, one] = b.tracks();
    expect(one).toMatchObject({ title: 'One', endedAt: new Date(5_000).toISOString(), peakListeners: 4 });
    expect(two).toMatchObject({ title: 'Two', startedAt: new Date(5_000).toISOString(), listenersAtStart: 4, countries: [{ country: 'FR', listeners: 4 }] });
    const after = db.transaction(() => b.playLog.end('stm_a', 9_000))();
    after();
    expect(b.tracks()[0]).toMatchObject({ title: 'Two', endedAt: new Date(9_000).toISOString() });
    b.registry.close();
    b.playLog.close();
  });

  it('chapters: seconds from the recording start, tracks set before it at 0 (the later one kept)', () => {
    const a = node();
    a.change('Before', 9_000);
    a.change('Also before', 9_500);
    a.change('Second', 11_500);
    a.change('Third', 13_250);
    expect(a.playLog.chapters('stm_a', 10_000)).toEqual({
      version: '1.2.0',
      chapters: [
        { startTime: 0, title: 'Also before' },
        { startTime: 1.5, title: 'Second' },
        { startTime: 3.25, title: 'Third' },
      ],
    });
    expect(a.playLog.chapters('stm_none', 0)).toBeNull();
    a.registry.close();
    a.playLog.close();
  });
});
