/**
 * `toApiError` (src/base/http/reply.ts), where an unexpected failure becomes an answer: a SQLite error
 * (better-sqlite3's own `SqliteError`, recognised by its code) that means "busy" or "locked" answers
 * 503 `database_busy` with `Retry-After: 1`, a full database 507 `insufficient_storage`; every other
 * failure, SQLite's included, stays 500 `internal_error` without details, and is logged.
 */
import { describe, expect, it } from 'vitest';
import Sqlite from 'better-sqlite3';
import { statusLine, toApiError } from '../../../../src/base/http/reply.js';
import { ApiError } from '../../../../src/base/errors/errors.js';

function logged() {
  const lines: Array<{ level: string; msg: string; fields?: Record<string, unknown> }> = [];
  return {
    lines,
    log: {
      error: (msg: string, fields?: Record<string, unknown>) => lines.push({ level: 'error', msg, fields }),
      warn: (msg: string, fields?: Record<string, unknown>) => lines.push({ level: 'warn', msg, fields }),
    },
  };
}

describe('toApiError', () => {
  it('busy and locked SQLite errors (extended codes too) → 503 database_busy, Retry-After: 1', () => {
    for (const code of ['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY_TIMEOUT', 'SQLITE_LOCKED', 'SQLITE_LOCKED_SHAREDCACHE']) {
      const l = logged();
      const e = toApiError(new Sqlite.SqliteError('database is locked', code), 'req_1', l.log);
      expect(e, code).toMatchObject({ status: 503, code: 'database_busy', type: 'api_error', headers: { 'Retry-After': '1' } });
      expect(e.message).not.toContain('locked'); // the driver's text is not shown
      expect(l.lines).toMatchObject([{ level: 'warn', fields: { requestId: 'req_1', code } }]);
    }
  });

  it('SQLITE_FULL → 507 insufficient_storage', () => {
    const e = toApiError(new Sqlite.SqliteError('database or disk is full', 'SQLITE_FULL'), 'req_2', undefined);
    expect(e).toMatchObject({ status: 507, code: 'insufficient_storage', type: 'api_error' });
  });

  it('anything else stays 500 internal_error, logged with the request id', () => {
    for (const err of [new Sqlite.SqliteError('UNIQUE constraint failed', 'SQLITE_CONSTRAINT_UNIQUE'), Object.assign(new Error('no space'), { code: 'ENOSPC' }), new Error('boom'), 'a string']) {
      const l = logged();
      const e = toApiError(err, 'req_3', l.log);
      expect(e).toMatchObject({ status: 500, code: 'internal_error' });
      expect(l.lines).toMatchObject([{ level: 'error', fields: { requestId: 'req_3' } }]);
    }
  });

  it('an ApiError is answered as it is', () => {
    const own = new ApiError('stream_ended', 'ended');
    expect(toApiError(own, 'req_4', undefined)).toBe(own);
  });
});

describe('statusLine', () => {
  it.each([
    [200, '200 OK'],
    [301, '301 Moved Permanently'],
    [302, '302 Found'],
    [303, '303 See Other'],
    [307, '307 Temporary Redirect'],
    [308, '308 Permanent Redirect'],
    [416, '416 Range Not Satisfiable'],
    [599, '599 Unknown'],
  ])('%i → %s (RFC 9110 §15 reason phrases, never "Status")', (status, line) => {
    expect(statusLine(status)).toBe(line);
  });
});
