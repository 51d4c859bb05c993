/**
 * The listener registry's timers (docs/listeners.md "Hot path and memory"): with no listener it arms
 * none, so an idle server is not woken; the expiry wheel runs only while a session is filed on it,
 * the last-seen flush only while a session (or an unwritten peak) is tracked. Sessions still expire
 * on time, also when the wheel starts again after a long idle spell. Real SQLite, fake timers, an
 * injected clock moved with them.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openDatabase, type Database } from '../../../../src/base/db/database.js';
import { EventsRepo } from '../../../../src/base/db/events-repo.js';
import { ListenersRepo } from '../../../../src/base/db/listeners-repo.js';
import { Outbox } from '../../../../src/base/outbox.js';
import { ListenerRegistry } from '../../../../src/delivery/listeners/registry.js';
import type { JoinInfo } from '../../../../src/delivery/listeners/session.js';
import { createLogger } from '../../../../src/base/logger.js';
import { tempDir } from '../../../helpers/server.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
  vi.useRealTimers();
});

function world() {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
  const { dir, cleanup } = tempDir('skylark-lst-');
  const db: Database = openDatabase(dir);
  const clock = { t: 1_773_532_800_000 };
  const now = () => clock.t;
  const registry = new ListenerRegistry({ db, repo: new ListenersRepo(db), outbox: new Outbox(new EventsRepo(db), now), log: createLogger('error'), now });
  cleanups.push(() => {
    registry.close();
    db.close();
    cleanup();
  });
  /** Moves the clock and the fake timers together, 100 ms at a time. */
  const advance = (ms: number) => {
    for (let left = ms; left > 0; left -= 100) {
      clock.t += Math.min(100, left);
      vi.advanceTimersByTime(Math.min(100, left));
    }
  };
  const events = () => db.prepare('SELECT type FROM events ORDER BY seq').pluck().all() as string[];
  return { db, clock, registry, advance, events };
}

const hls = (key: string): JoinInfo => ({ streamId: 'stm_1', accountId: 'acct_1', key, protocol: 'hls', country: null, userAgent: null, timeoutMs: 6_000 });

describe('listener registry timers', () => {
  it('arms no timer without listeners, runs while sessions live, and stops once they left', () => {
    const w = world();
    expect(vi.getTimerCount()).toBe(0);
    w.advance(60_000);
    expect(vi.getTimerCount()).toBe(0);

    w.registry.join(hls('a'));
    expect(vi.getTimerCount()).toBe(3); // join batch, expiry wheel, last-seen flush
    w.advance(100);
    expect(w.events()).toEqual(['listener.joined']);
    expect(vi.getTimerCount()).toBe(2);

    // Seen every second for 20 s: still there, last-seen written by the 15 s flush.
    for (let i = 0; i < 20; i++) {
      w.advance(1_000);
      expect(w.registry.touch('stm_1', 'a')).toBe(true);
    }
    expect(w.registry.total()).toBe(1);
    const seen = w.db.prepare('SELECT last_seen_at FROM listeners').pluck();
    expect(seen.get()).toBeGreaterThan(w.clock.t - 15_000);

    // Silent: leaves 6 s (± one 500 ms slot) after its last request; then every timer stops.
    const last = w.clock.t;
    w.advance(5_900);
    expect(w.registry.total()).toBe(1);
    w.advance(700);
    expect(w.registry.total()).toBe(0);
    w.advance(100);
    expect(w.events()).toEqual(['listener.joined', 'listener.left']);
    expect(w.db.prepare('SELECT left_at - ? FROM listeners').pluck().get(last)).toBeLessThanOrEqual(6_600);
    w.advance(15_000); // the last-seen flush writes the peak once more, then stops
    expect(vi.getTimerCount()).toBe(0);
    w.advance(600_000);
    expect(vi.getTimerCount()).toBe(0);
    expect(w.registry.stats('stm_1')).toMatchObject({ listenerCount: 0, peakListenerCount: 1, totalListeners: 1 });
  });

  it('a session without timeout (WebRTC) uses no wheel; a wheel started after a long idle spell expires on time', () => {
    const w = world();
    const peer = w.registry.join({ ...hls('peer'), protocol: 'webrtc', timeoutMs: 0 });
    expect(vi.getTimerCount()).toBe(2); // join batch, last-seen flush
    w.advance(100);
    w.registry.leave(peer);
    w.advance(20_000);
    expect(vi.getTimerCount()).toBe(0);

    w.advance(3_600_000);
    w.registry.join(hls('b'));
    const joinedAt = w.clock.t;
    while (w.registry.total() > 0 && w.clock.t - joinedAt < 60_000) w.advance(100);
    expect(w.clock.t - joinedAt).toBeGreaterThanOrEqual(6_000);
    expect(w.clock.t - joinedAt).toBeLessThanOrEqual(6_600);
    w.advance(20_000);
    expect(vi.getTimerCount()).toBe(0);
    expect(w.events()).toEqual(['listener.joined', 'listener.left', 'listener.joined', 'listener.left']);
  });
});

describe('listener registry: sessions keyed by their listener id', () => {
  it("a join without a key (progressive) is found by its id, touched, listed and left like any other", () => {
    const w = world();
    const icy: JoinInfo = { streamId: 'stm_1', accountId: 'acct_1', key: '', protocol: 'icecast', country: null, userAgent: null, timeoutMs: 0 };
    const a = w.registry.join(icy);
    const b = w.registry.join(icy);
    const h = w.registry.join(hls('sid-1'));
    expect(a).not.toBe(b); // no key: never the same session
    expect(a.key).toBe(a.id);
    expect(w.registry.get('stm_1', a.id)).toBe(a);
    expect(w.registry.get('stm_1', h.id)).toBe(h);
    expect(w.registry.get('stm_1', 'sid-1')).toBeUndefined(); // an HLS key is no listener id
    w.advance(1_000);
    expect(w.registry.touch('stm_1', a.id)).toBe(true);
    expect(a.lastSeenAt).toBe(w.clock.t);
    expect(w.registry.active('stm_1')).toEqual([a, b, h]);
    w.registry.leave(a);
    expect(w.registry.get('stm_1', a.id)).toBeUndefined();
    expect(w.registry.listenerCount('stm_1')).toBe(2);
  });
});
