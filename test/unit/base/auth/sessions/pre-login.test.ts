/**
 * Pre-login tokens (src/base/auth/sessions.ts): a signed cookie bound to an expiry, its CSRF token
 * derived from it, nothing written to SQLite; login replaces it with a stored session.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../../../../src/base/db/database.js';
import { AccountsRepo } from '../../../../../src/base/db/accounts-repo.js';
import { PRE_LOGIN_TTL_MS, Sessions } from '../../../../../src/base/auth/sessions.js';

const dir = mkdtempSync(path.join(tmpdir(), 'skylark-prelogin-'));
const db = openDatabase(dir);
new AccountsRepo(db).insert({ id: 'acct_test', name: 'Test', plan: 'free', default_region: 'eu-west-1', owner_email: null, password_hash: null, created_at: 0 });
afterAll(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});
const clock = { t: 1_700_000_000_000 };
const secret = randomBytes(32);
const sessions = new Sessions(db, secret, () => false, () => clock.t);
const rows = () => db.prepare('SELECT COUNT(*) FROM sessions').pluck().get() as number;
const header = (setCookie: string) => setCookie.split(';')[0]!;

describe('pre-login tokens', () => {
  it('are signed cookies with a derived CSRF token; nothing is stored', () => {
    const before = rows();
    const a = sessions.preLogin('');
    const b = sessions.preLogin('');
    expect(a.setCookie).toMatch(/^skylark_session=[A-Za-z0-9]{22}\.[0-9a-z]+\.[A-Za-z0-9_-]{43}; Path=\/; Max-Age=3600; HttpOnly; SameSite=Lax$/);
    expect(a.session.accountId).toBeNull();
    expect(a.session.csrfToken).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(a.session.csrfToken).not.toBe(b.session.csrfToken);
    const back = sessions.current(header(a.setCookie!))!;
    expect(back.csrfToken).toBe(a.session.csrfToken);
    expect(back.idHash.equals(a.session.idHash)).toBe(true);
    expect(sessions.checkCsrf(back, a.session.csrfToken)).toBe(true);
    expect(sessions.checkCsrf(back, b.session.csrfToken)).toBe(false);
    expect(sessions.fromCookie(header(a.setCookie!))).toBeNull(); // not a signed-in session
    expect(rows()).toBe(before);
  });

  it('are refused when tampered with, signed under another secret, or expired', () => {
    const a = sessions.preLogin('');
    const value = header(a.setCookie!).split('=')[1]!;
    const [nonce, exp, mac] = value.split('.') as [string, string, string];
    const other = new Sessions(db, randomBytes(32), () => false, () => clock.t);
    for (const forged of [
      `${nonce}.${(parseInt(exp, 36) + 3600).toString(36)}.${mac}`,
      `${nonce.slice(1)}x.${exp}.${mac}`,
      `${nonce}.${exp}.${mac.slice(1)}A`,
      `${nonce}.${exp}`,
      header(other.preLogin('').setCookie!).split('=')[1]!,
    ]) {
      expect(sessions.current(`skylark_session=${forged}`), forged).toBeNull();
    }
    clock.t += PRE_LOGIN_TTL_MS;
    expect(sessions.current(`skylark_session=${value}`)).toBeNull();
  });

  it('are kept while more than half their hour is left, then renewed', () => {
    const a = sessions.preLogin('');
    clock.t += PRE_LOGIN_TTL_MS / 2 - 1000;
    const kept = sessions.preLogin(header(a.setCookie!));
    expect(kept.setCookie).toBeUndefined();
    expect(kept.session.csrfToken).toBe(a.session.csrfToken);
    clock.t += 2000;
    const renewed = sessions.preLogin(header(a.setCookie!));
    expect(renewed.setCookie).toBeDefined();
    expect(renewed.session.csrfToken).not.toBe(a.session.csrfToken);
  });

  it('login replaces the token with one stored session; logout and restart store nothing new', () => {
    const before = rows();
    const pre = sessions.preLogin('');
    const started = sessions.start('acct_test', pre.session);
    expect(started.setCookie).toMatch(/^skylark_session=[A-Za-z0-9]{32};/);
    expect(rows()).toBe(before + 1);
    const s = sessions.current(header(started.setCookie))!;
    expect(s.accountId).toBe('acct_test');
    const fresh = sessions.restart(s);
    expect(fresh.session.accountId).toBeNull();
    expect(rows()).toBe(before);
    expect(sessions.end(fresh.session)).toMatch(/Max-Age=0/);
    expect(rows()).toBe(before);
  });
});
