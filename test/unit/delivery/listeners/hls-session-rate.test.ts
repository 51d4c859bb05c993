/**
 * A crowd behind one address over its session rate (docs/listeners.md "Sessions per address"):
 * a session id refused for its address's rate is served untracked, and its later requests within
 * the rate's minute are answered without asking the rate again (the address cannot be admitted
 * before the minute turns: its count only grows within it). Once the minute turns the session asks
 * again and joins when its address is back under the rate. Real SQLite registry, the real access
 * check, an injected clock.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../../src/base/db/database.js';
import { EventsRepo } from '../../../../src/base/db/events-repo.js';
import { ListenersRepo } from '../../../../src/base/db/listeners-repo.js';
import { Outbox } from '../../../../src/base/outbox.js';
import { ListenerRegistry } from '../../../../src/delivery/listeners/registry.js';
import { HlsListenerAccess, registrySessions } from '../../../../src/delivery/listeners/hls-access.js';
import { trustedProxies } from '../../../../src/base/http/client-address.js';
import { ListenerTokens } from '../../../../src/base/auth/listener-tokens.js';
import { Limits } from '../../../../src/base/limits/limits.js';
import { createLogger } from '../../../../src/base/logger.js';
import type { RawRequestInfo } from '../../../../src/base/http/server.js';
import { tempDir } from '../../../helpers/server.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

const STREAM = 'stm_rate';
const behindNat: RawRequestInfo = { remoteAddress: () => '198.51.100.7', header: () => '' };

function world(perMinute: number) {
  const { dir, cleanup } = tempDir('skylark-rate-');
  const db = openDatabase(dir);
  // The start of a minute, so that the test controls when the rate's window turns.
  const clock = { t: 1_773_532_800_000 };
  const now = () => clock.t;
  const limits = new Limits(createLogger('error'), now);
  const registry = new ListenerRegistry({ db, repo: new ListenersRepo(db), outbox: new Outbox(new EventsRepo(db), now), log: createLogger('error'), now, hlsSessionsPerIpPerMinute: perMinute, limits });
  const nodeSecret = randomBytes(32);
  const access = new HlsListenerAccess({
    sessions: registrySessions(registry),
    policies: { policy: () => ({ accountId: 'acct_1', playback: 'public', publishableKeyTokens: false, codec: 'aac' }) },
    tokens: new ListenerTokens(nodeSecret, now),
    trusted: trustedProxies([]),
    nodeSecret,
    now,
  });
  cleanups.push(() => {
    registry.close();
    db.close();
    cleanup();
  });
  /** A session id minted by the multivariant playlist. */
  const mint = () => {
    const d = access.enter(STREAM, '');
    if (!d.ok) throw new Error('enter refused');
    return d.query.slice('sid='.length);
  };
  const play = (sid: string) => access.media(STREAM, `sid=${sid}&_HLS_msn=1&_HLS_part=0`, behindNat, 6_000);
  const refusals = () => limits.count('hls_sessions_per_ip');
  return { clock, registry, mint, play, refusals };
}

describe('HLS sessions over their address rate', () => {
  it('asks the rate once per session and minute, serves every request, and joins once the address is under the rate', () => {
    const w = world(2);
    const [a, b, c] = [w.mint(), w.mint(), w.mint()];
    for (const sid of [a, b, c]) expect(w.play(sid).ok).toBe(true);
    expect(w.registry.total()).toBe(2);
    expect(w.refusals()).toBe(1);

    // The refused session keeps playing: every request is answered, none asks the rate again this minute.
    for (let i = 0; i < 20; i++) {
      w.clock.t += 500;
      expect(w.play(c)).toMatchObject({ ok: true, private: false });
      w.registry.touch(STREAM, a);
      w.registry.touch(STREAM, b);
    }
    expect(w.refusals()).toBe(1);
    expect(w.registry.total()).toBe(2);

    // The next minute: the rate still counts the previous one (2 of 2), so it refuses again — once.
    w.clock.t = 1_773_532_800_000 + 60_000;
    for (let i = 0; i < 5; i++) expect(w.play(c).ok).toBe(true);
    expect(w.refusals()).toBe(2);
    expect(w.registry.total()).toBe(2);

    // Two minutes on the address is under the rate: the session asks again and joins.
    w.clock.t = 1_773_532_800_000 + 120_000;
    w.registry.touch(STREAM, a);
    w.registry.touch(STREAM, b);
    expect(w.play(c).ok).toBe(true);
    expect(w.registry.total()).toBe(3);
    expect(w.refusals()).toBe(2);
  });

  it('a session counted before its address went over the rate is never refused', () => {
    const w = world(1);
    const a = w.mint();
    expect(w.play(a).ok).toBe(true);
    const b = w.mint();
    expect(w.play(b).ok).toBe(true);
    expect(w.refusals()).toBe(1);
    for (let i = 0; i < 5; i++) expect(w.play(a).ok).toBe(true);
    expect(w.refusals()).toBe(1);
    expect(w.registry.total()).toBe(1);
  });
});
