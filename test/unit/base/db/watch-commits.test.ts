/**
 * `watchCommits` (src/base/db/database.ts): reports commits of other connections to the same file soon
 * after they happen, never the watching connection's own, and nothing after it is stopped.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, watchCommits } from '../../../../src/base/db/database.js';
import { tempDir, waitFor } from '../../../helpers/server.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

/** A fixed wait on purpose: what is checked is that nothing is reported meanwhile. */
const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('watchCommits', () => {
  it("reports another connection's commits, not its own, and stops when told", async () => {
    const { dir, cleanup } = tempDir('skylark-watch-');
    const db = openDatabase(dir);
    const other = openDatabase(dir);
    cleanups.push(cleanup, () => db.close(), () => other.close());
    db.exec('CREATE TABLE t (v INTEGER)');
    let reports = 0;
    const stop = watchCommits(db, () => reports++);
    cleanups.push(stop);

    db.prepare('INSERT INTO t VALUES (1)').run();
    await settle(1_300); // past both looks
    expect(reports).toBe(0);

    other.prepare('INSERT INTO t VALUES (2)').run();
    await waitFor(() => reports === 1, 5_000, 5, 'first report');
    for (let i = 0; i < 5; i++) other.prepare('INSERT INTO t VALUES (3)').run();
    await waitFor(() => reports >= 2, 5_000, 5, 'second report');

    await settle(1_300);
    const before = reports;
    stop();
    other.prepare('INSERT INTO t VALUES (4)').run();
    await settle(1_300);
    expect(reports).toBe(before);
  });
});
