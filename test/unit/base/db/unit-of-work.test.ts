/**
 * The unit of work (src/base/db/unit-of-work.ts) on a real SQLite file with the real outbox: a committed change's
 * events are announced after the commit, a thrown change rolls back and announces nothing, and a
 * nested unit announces only when the outermost commits.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { UnitOfWork } from '../../../../src/base/db/unit-of-work.js';
import { openDatabase } from '../../../../src/base/db/database.js';
import { EventsRepo } from '../../../../src/base/db/events-repo.js';
import { Outbox } from '../../../../src/base/outbox.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A migrated database on a real file, its real outbox, what subscribers heard (the `v` of each event, per announcement), and the unit. */
function setup() {
  const dir = mkdtempSync(path.join(tmpdir(), 'skylark-uow-'));
  dirs.push(dir);
  const db = openDatabase(dir);
  db.exec('CREATE TABLE t (v INTEGER)');
  const outbox = new Outbox(new EventsRepo(db));
  const announced: number[][] = [];
  let batch: number[] | null = null;
  outbox.subscribe((e) => {
    if (!batch) {
      batch = [];
      announced.push(batch);
      queueMicrotask(() => (batch = null));
    }
    batch.push((e.data.object as { v: number }).v);
  });
  const insert = (v: number) => {
    db.prepare('INSERT INTO t (v) VALUES (?)').run(v);
    outbox.record('acct_test', 'webhook.test', { object: { v } });
  };
  const rows = () => (db.prepare('SELECT v FROM t ORDER BY v').all() as Array<{ v: number }>).map((r) => r.v);
  const events = () => (db.prepare('SELECT count(*) AS n FROM events').get() as { n: number }).n;
  return { uow: new UnitOfWork(db, outbox), insert, rows, events, announced, db, outbox };
}

/** `setup()` plus a second unit of work over the same connection and outbox (another service's). */
function setupTwo() {
  const s = setup();
  return { ...s, other: new UnitOfWork(s.db, s.outbox) };
}

describe('UnitOfWork', () => {
  it('commits, then announces the events of the change, and returns its result', () => {
    const { uow, insert, rows, announced } = setup();
    const out = uow.run(() => {
      insert(1);
      insert(2);
      expect(announced).toEqual([]); // nothing before the commit
      return 'done';
    });
    expect(out).toBe('done');
    expect(rows()).toEqual([1, 2]);
    expect(announced).toEqual([[1, 2]]);
  });

  it('rolls back a change that throws and announces nothing of it', () => {
    const { uow, insert, rows, events, announced } = setup();
    expect(() =>
      uow.run(() => {
        insert(1);
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(rows()).toEqual([]);
    expect(events()).toBe(0); // the event row went with the transaction
    uow.run(() => insert(3));
    expect(announced).toEqual([[3]]);
  });

  it('announces a nested unit only when the outermost commits', () => {
    const { uow, insert, rows, announced } = setup();
    uow.run(() => {
      insert(1);
      uow.run(() => insert(2));
      expect(announced).toEqual([]);
      // An inner unit that throws rolls back its savepoint; the outer one goes on.
      expect(() =>
        uow.run(() => {
          insert(9);
          throw new Error('inner');
        }),
      ).toThrow('inner');
    });
    expect(rows()).toEqual([1, 2]);
    expect(announced).toEqual([[1, 2]]);
  });
});

describe('UnitOfWork across services', () => {
  it('sees a unit of another service on the same connection as nested', () => {
    const { uow, insert, rows, announced, other } = setupTwo();
    uow.run(() => {
      insert(1);
      other.run(() => insert(2), { immediate: false });
      expect(announced).toEqual([]); // the inner unit of the other service announced nothing yet
    });
    expect(rows()).toEqual([1, 2]);
    expect(announced).toEqual([[1, 2]]);
  });
});
