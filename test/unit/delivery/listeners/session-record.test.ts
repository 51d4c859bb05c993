/**
 * What the registry keeps per listener (docs/bench/listener-memory.md): a progressive connection's
 * session is found by its listener id (no key string, no key field of its own); a keyed session
 * (HLS `sid`, token subject, WebRTC peer) keeps its key; protocol, `left` and the timeout share
 * one small integer; a stream's sessions share one record of the stream and its account. Real SQLite.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../../src/base/db/database.js';
import { EventsRepo } from '../../../../src/base/db/events-repo.js';
import { ListenersRepo } from '../../../../src/base/db/listeners-repo.js';
import { Outbox } from '../../../../src/base/outbox.js';
import { createLogger } from '../../../../src/base/logger.js';
import { ListenerRegistry } from '../../../../src/delivery/listeners/registry.js';
import { KeyedSession, Session, type JoinInfo } from '../../../../src/delivery/listeners/session.js';
import { tempDir } from '../../../helpers/server.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

function registry() {
  const { dir, cleanup } = tempDir('skylark-rec-');
  const db = openDatabase(dir);
  const r = new ListenerRegistry({ db, repo: new ListenersRepo(db), outbox: new Outbox(new EventsRepo(db), Date.now), log: createLogger('error') });
  cleanups.push(() => {
    r.close();
    db.close();
    cleanup();
  });
  return r;
}

const join = (key: string, protocol: JoinInfo['protocol']): JoinInfo => ({ streamId: 'stm_1', accountId: 'acct_1', key, protocol, country: 'DE', userAgent: 'VLC/3.0', timeoutMs: protocol === 'hls' ? 6000 : 0 });

describe('session records', () => {
  it('a progressive session is found by its id and keeps no key of its own', () => {
    const r = registry();
    const s = r.join(join('', 'icecast'));
    expect(s).toBeInstanceOf(Session);
    expect(s).not.toBeInstanceOf(KeyedSession);
    expect(s.key).toBe(s.id);
    expect(s.protocol).toBe('icecast');
    expect(Object.keys(s).sort()).toEqual(['bits', 'connected', 'country', 'id', 'order', 'persistedRel', 'seenRel', 'stream', 'userAgent']);
    expect([s.streamId, s.accountId, s.timeoutMs]).toEqual(['stm_1', 'acct_1', 0]);
    expect(r.touch('stm_1', s.id)).toBe(true);
    r.leave(s);
    expect(s.left).toBe(true);
    expect(s.protocol).toBe('icecast'); // unchanged by leaving
    expect(r.touch('stm_1', s.id)).toBe(false);
  });

  it('a keyed session keeps its key, and its protocol and left flag apart', () => {
    const r = registry();
    for (const p of ['hls', 'webrtc', 'icecast'] as const) {
      const s = r.join(join(`k-${p}`, p));
      expect(s).toBeInstanceOf(KeyedSession);
      expect(s.key).toBe(`k-${p}`);
      expect(s.id).toMatch(/^lst_/);
      expect(s.protocol).toBe(p);
      expect(s.timeoutMs).toBe(p === 'hls' ? 6000 : 0);
      expect(s.left).toBe(false);
      expect(r.join(join(`k-${p}`, p))).toBe(s); // found again by its key
      r.leave(s);
      expect([s.left, s.protocol, s.timeoutMs]).toEqual([true, p, p === 'hls' ? 6000 : 0]);
    }
  });

  it("a stream's sessions share one record of the stream and its account; the timeout shares the protocol's integer", () => {
    const r = registry();
    const a = r.join(join('', 'icecast'));
    const b = r.join({ ...join('sid-b', 'hls'), timeoutMs: 4500.5 });
    expect(a.stream).toBe(b.stream);
    expect([b.streamId, b.accountId, b.timeoutMs]).toEqual(['stm_1', 'acct_1', 4501]); // rounded up to a whole ms
    const other = r.join({ ...join('', 'icecast'), accountId: 'acct_2' });
    expect([other.streamId, other.accountId]).toEqual(['stm_1', 'acct_2']);
    expect(a.accountId).toBe('acct_1');
    r.leave(b);
    expect([b.left, b.protocol, b.timeoutMs]).toEqual([true, 'hls', 4501]);
  });
});
