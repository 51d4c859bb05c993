/**
 * The cap on title changes (docs/listeners.md "Title changes"): TitleCap applies the first change
 * of a quiet stream at once, coalesces later ones into the newest and applies it when the interval
 * has passed; streams are capped apart; `flush` applies what waits, `forget` drops it. And the
 * play log's chapters of a recording stop at MAX_CHAPTERS, keeping the first ones and the last.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TitleCap } from '../../../../src/base/limits/title-cap.js';
import { openDatabase } from '../../../../src/base/db/database.js';
import { EventsRepo } from '../../../../src/base/db/events-repo.js';
import { TracksRepo } from '../../../../src/base/db/tracks-repo.js';
import { Outbox } from '../../../../src/base/outbox.js';
import { createLogger } from '../../../../src/base/logger.js';
import { Limits } from '../../../../src/base/limits/limits.js';
import { MAX_CHAPTERS, PlayLog } from '../../../../src/control/services/play-log.js';
import { WriteRetry } from '../../../../src/base/db/write-retry.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('TitleCap', () => {
  it('applies the first change at once, then at most one per interval: the newest', () => {
    vi.useFakeTimers();
    const applied: Array<[string, string]> = [];
    const cap = new TitleCap<string>({ minIntervalMs: 2000, apply: (id, v) => applied.push([id, v]) });
    for (let i = 1; i <= 300; i++) cap.offer('stm_a', `t${i}`);
    expect(applied).toEqual([['stm_a', 't1']]);
    expect(cap.waiting()).toBe(1);
    vi.advanceTimersByTime(1999);
    expect(applied).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(applied).toEqual([['stm_a', 't1'], ['stm_a', 't300']]);
    // Within the next interval again: held, then the newest.
    cap.offer('stm_a', 'u1');
    cap.offer('stm_a', 'u2');
    expect(applied).toHaveLength(2);
    vi.advanceTimersByTime(2000);
    expect(applied.at(-1)).toEqual(['stm_a', 'u2']);
    // A quiet interval later the stream is forgotten: the next change applies at once.
    vi.advanceTimersByTime(2000);
    cap.offer('stm_a', 'v1');
    expect(applied.at(-1)).toEqual(['stm_a', 'v1']);
    cap.close();
  });

  it('caps each stream on its own; flush applies what waits, forget drops it', () => {
    vi.useFakeTimers();
    const applied: string[] = [];
    const cap = new TitleCap<string>({ minIntervalMs: 2000, apply: (id, v) => applied.push(`${id}:${v}`) });
    cap.offer('a', '1');
    cap.offer('b', '1');
    cap.offer('a', '2');
    cap.offer('b', '2');
    expect(applied).toEqual(['a:1', 'b:1']);
    cap.flush('a');
    expect(applied).toEqual(['a:1', 'b:1', 'a:2']);
    cap.forget('b');
    vi.advanceTimersByTime(5000);
    expect(applied).toEqual(['a:1', 'b:1', 'a:2']);
    cap.offer('b', '3');
    expect(applied.at(-1)).toBe('b:3');
    cap.close();
  });

  it('0 applies every change', () => {
    const applied: string[] = [];
    const cap = new TitleCap<string>({ minIntervalMs: 0, apply: (_id, v) => applied.push(v) });
    cap.offer('a', '1');
    cap.offer('a', '2');
    expect(applied).toEqual(['1', '2']);
  });
});

describe('chapters of a recording', () => {
  it(`stop at ${MAX_CHAPTERS}: the first ${MAX_CHAPTERS - 1} and the last track`, () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'skylark-chapters-'));
    const db = openDatabase(dir);
    try {
      const log = createLogger('error');
      const outbox = new Outbox(new EventsRepo(db));
      const playLog = new PlayLog({ repo: new TracksRepo(db), outbox, writes: new WriteRetry(db, log, new Limits(log)), log });
      const n = MAX_CHAPTERS + 250;
      for (let i = 0; i < n; i++) {
        const after = db.transaction(() => playLog.change({ accountId: 'acct_a', streamId: 'stm_a', title: `T${i}`, artist: null, album: null, url: null, artworkUrl: null }, 10_000 + i * 2000))();
        after();
      }
      const doc = playLog.chapters('stm_a', 10_000)!;
      expect(doc.chapters).toHaveLength(MAX_CHAPTERS);
      expect(doc.chapters[0]).toEqual({ startTime: 0, title: 'T0' });
      expect(doc.chapters[MAX_CHAPTERS - 2]).toEqual({ startTime: (MAX_CHAPTERS - 2) * 2, title: `T${MAX_CHAPTERS - 2}` });
      expect(doc.chapters[MAX_CHAPTERS - 1]).toEqual({ startTime: (n - 1) * 2, title: `T${n - 1}` });
      playLog.close();
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
