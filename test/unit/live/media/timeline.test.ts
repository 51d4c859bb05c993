/**
 * A stream's HLS timeline across restarts of the node (src/live/media/timeline.ts, docs/streams.md
 * "One timeline"): media registries over a real SQLite file (the node's own store, write retry
 * included) and real native segmenters fed a real AAC recording. A "restart" is a new registry
 * (and database connection) on the same file.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase, type Database } from '../../../../src/base/db/database.js';
import { TimelinesRepo } from '../../../../src/base/db/timelines-repo.js';
import { createLogger } from '../../../../src/base/logger.js';
import { Limits } from '../../../../src/base/limits/limits.js';
import { WriteRetry } from '../../../../src/base/db/write-retry.js';
import { timelineStore } from '../../../../src/app/live.js';
import { FlvReader } from '../../../../src/live/media/flv.js';
import type { StreamHub } from '../../../../src/live/media/hub.js';
import type { HubOptions } from '../../../../src/live/media/hub-types.js';
import { MediaRegistry } from '../../../../src/live/media/registry.js';
import { DISCONTINUITY_BLOCK, SEQUENCE_BLOCK, type TimelineMark, type TimelineStore } from '../../../../src/live/media/timeline.js';
import { mediaTemplate } from '../../../../src/delivery/hls/playlists.js';

const tags = new FlvReader().push(readFileSync(path.resolve(import.meta.dirname, '../../../fixtures/aac/sine48k_stereo_128k.flv')));
const log = createLogger('error', 'test', () => {});
const OPTS: HubOptions = { codec: 'aac', targetDurationMs: 2000, partTargetMs: 500, windowSegments: 3, ladder: [128] };

function insertStream(db: Database, id: string): void {
  db.prepare("INSERT OR IGNORE INTO accounts (id, name, plan, default_region, created_at) VALUES ('acc_t', 'T', 'paid', 'euw1', 0)").run();
  db.prepare(`INSERT INTO streams (id, account_id, title, status, quality, codec, region, stream_key_hash, stream_key_enc, reconnect_window, created_at)
    VALUES (?, 'acc_t', 'T', 'idle', 'medium', 'aac', 'euw1', x'00', x'00', 30, 0)`).run(id);
}

/** The node's timeline store over `db`, counting the marks it is asked to save. */
function store(db: Database): { store: TimelineStore; saves: Array<[string, string, TimelineMark]>; writes: WriteRetry } {
  const writes = new WriteRetry(db, log, new Limits(log));
  const real = timelineStore({ db, writes, now: Date.now });
  const saves: Array<[string, string, TimelineMark]> = [];
  return {
    store: { load: (id) => real.load(id), save: (id, layer, mark) => (saves.push([id, layer, mark]), real.save(id, layer, mark)) },
    saves,
    writes,
  };
}

/** Feeds `seconds` of the recording (looped) into the hub's passthrough layer, from ingest time `fromMs`. */
function feed(hub: StreamHub, seconds: number, fromMs = 0): void {
  const loop = tags.at(-1)!.timestampMs + 21;
  for (let base = 0; base < seconds * 1000; base += loop) {
    for (const t of tags) {
      if (base > 0 && t.body[1] === 0) continue; // the sequence header once
      if (base + t.timestampMs >= seconds * 1000) break;
      expect(hub.pushAudio(fromMs + base + t.timestampMs, t.body)).toEqual([]);
    }
  }
}

const until = async (fn: () => boolean, what: string) => {
  const end = Date.now() + 5000;
  while (!fn()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});
function dataDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'skylark-timeline-'));
  dirs.push(dir);
  return dir;
}

describe('the HLS timeline across restarts', () => {
  it('a new run continues above every number the last one handed out, after a discontinuity, writing once per block', async () => {
    const dir = dataDir();
    const db1 = openDatabase(dir);
    insertStream(db1, 'stm_t');
    const one = store(db1);
    const hub1 = new MediaRegistry(Date.now, one.store, log).open('stm_t', OPTS);
    feed(hub1, 24);
    hub1.end();
    const top1 = hub1.top;
    expect(top1.nextSequence).toBeGreaterThanOrEqual(11); // ~12 segments: numbered from 0 on a stream's first run
    expect(top1.segments[0]!.sequence).toBeLessThan(top1.nextSequence);
    // One mark for the whole run (a block lasts SEQUENCE_BLOCK / 2 segments before the next write).
    expect(one.saves).toHaveLength(1);
    await until(() => new TimelinesRepo(db1).load('stm_t').length === 1, 'the mark written');
    const [mark] = new TimelinesRepo(db1).load('stm_t');
    expect(mark).toEqual({ layer: 'a128', sequence: 2 + SEQUENCE_BLOCK, discontinuity: 2 + DISCONTINUITY_BLOCK });
    db1.close();

    // Restart: a new registry on the same file.
    const db2 = openDatabase(dir);
    const two = store(db2);
    const hub2 = new MediaRegistry(Date.now, two.store, log).open('stm_t', OPTS);
    feed(hub2, 6);
    const first = hub2.top.segments[0]!;
    expect(first.sequence).toBe(mark!.sequence);
    expect(first.sequence).toBeGreaterThan(top1.nextSequence); // above every name handed out before
    expect(first.discontinuity).toBe(true);
    expect(first.discontinuitySequence).toBe(mark!.discontinuity + 1);
    const playlist = Buffer.from(mediaTemplate(hub2.top).plain).toString();
    expect(playlist).toContain(`#EXT-X-MEDIA-SEQUENCE:${mark!.sequence}\n`);
    expect(playlist).toContain(`#EXT-X-DISCONTINUITY-SEQUENCE:${mark!.discontinuity}\n`);
    // The same codec configuration: the same init bytes under the same content-derived name.
    expect(Buffer.from(hub2.top.init!).equals(Buffer.from(top1.init!))).toBe(true);
    expect(hub2.top.initId).toBe(createHash('sha256').update(top1.init!).digest('hex').slice(0, 16));
    expect(playlist).toContain(`#EXT-X-MAP:URI="init-${hub2.top.initId}.mp4"`);
    // The new run reserved its own block at once.
    await until(() => new TimelinesRepo(db2).load('stm_t')[0]!.sequence === mark!.sequence + 2 + SEQUENCE_BLOCK, 'the next mark written');
    hub2.end();
    db2.close();
  });

  it('a locked database delays the mark, never the stream; the write lands once the lock goes', async () => {
    const dir = dataDir();
    const db = openDatabase(dir);
    insertStream(db, 'stm_l');
    const s = store(db);
    const blocker = openDatabase(dir);
    blocker.exec('BEGIN IMMEDIATE');
    const hub = new MediaRegistry(Date.now, s.store, log).open('stm_l', OPTS);
    feed(hub, 6);
    expect(hub.top.segments.length).toBeGreaterThanOrEqual(2);
    await until(() => s.writes.pending === 1, 'the write queued');
    expect(new TimelinesRepo(db).load('stm_l')).toEqual([]);
    blocker.exec('COMMIT');
    await until(() => new TimelinesRepo(db).load('stm_l').length === 1, 'the retried write');
    expect(new TimelinesRepo(db).load('stm_l')[0]!.sequence).toBeGreaterThan(hub.top.nextSequence);
    hub.end();
    s.writes.close();
    blocker.close();
    db.close();
  });

  it('marks that cannot be read: the timeline continues from the clock, above anything a run can have reached', () => {
    const broken: TimelineStore = {
      load: () => {
        throw Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' });
      },
      save: () => {},
    };
    const hub = new MediaRegistry(Date.now, broken, log).open('stm_x', OPTS);
    feed(hub, 4);
    expect(hub.top.segments[0]!.sequence).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000));
    expect(hub.top.segments[0]!.discontinuity).toBe(true);
    hub.end();
  });

  it('without a store a run starts each timeline at 0 (tools and tests)', () => {
    const hub = new MediaRegistry().open('stm_n', OPTS);
    feed(hub, 4);
    expect(hub.top.segments[0]!.sequence).toBe(0);
    expect(hub.top.segments[0]!.discontinuity).toBe(false);
    hub.end();
  });
});
