/**
 * The table of error codes (src/base/errors/codes.ts) is what every answer's code and status come from:
 * each status it lists has an `error.type`; an ApiError takes its status from the table and may
 * take another only where the table lists it (`also`); and the OpenAPI document, built from every
 * resource's routes as mounted, names only codes of the table, each under one of its statuses.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ApiError, ERROR_CODES, ERROR_TYPES, STATUS_TYPE, type ErrorCode } from '../../../../src/base/errors/errors.js';
import { statusesOf } from '../../../../src/base/errors/codes.js';
import { buildOpenApi, STD_ERRORS } from '../../../../src/control/api/openapi/document.js';
import { mountApi, type ApiServices } from '../../../../src/control/api/index.js';
import { HttpServer } from '../../../../src/base/http/server.js';
import { Guard } from '../../../../src/base/auth/guard.js';
import { AccountsRepo } from '../../../../src/base/db/accounts-repo.js';
import { openDatabase } from '../../../../src/base/db/database.js';
import { MIGRATIONS } from '../../../../src/base/db/migrations.js';
import { Limits } from '../../../../src/base/limits/limits.js';
import { createLogger } from '../../../../src/base/logger.js';
import { tempDir } from '../../../helpers/server.js';

const codes = Object.keys(ERROR_CODES) as ErrorCode[];

describe('the table of error codes', () => {
  it('gives every status it lists (also included) an error.type', () => {
    for (const code of codes) {
      for (const status of statusesOf(code)) {
        expect(STATUS_TYPE[status], `${code} ${status}`).toBeDefined();
        expect(ERROR_TYPES).toContain(STATUS_TYPE[status]);
      }
    }
    expect(STATUS_TYPE[503]).toBe('api_error');
    expect(STATUS_TYPE[507]).toBe('api_error');
  });

  it('every code has a description', () => {
    for (const code of codes) expect(ERROR_CODES[code].description.length, code).toBeGreaterThan(10);
  });
});

describe('ApiError', () => {
  it('takes its status from the table and its type from the status', () => {
    const e = new ApiError('stream_ended', 'ended', { param: 'id', headers: { 'Retry-After': '1' } });
    expect(e).toMatchObject({ status: 409, type: 'conflict_error', code: 'stream_ended', param: 'id', message: 'ended', headers: { 'Retry-After': '1' } });
    expect(new ApiError('database_busy', 'busy')).toMatchObject({ status: 503, type: 'api_error', param: undefined, headers: {} });
    for (const code of codes) expect(new ApiError(code, 'x').status, code).toBe(ERROR_CODES[code].status);
  });

  it('takes another status only where the table lists it in also', () => {
    expect(new ApiError('invalid_token', 'x', { status: 403 })).toMatchObject({ status: 403, type: 'permission_error' });
    expect(new ApiError('key_revoked', 'x', { status: 409 })).toMatchObject({ status: 409, type: 'conflict_error' });
    expect(new ApiError('stream_ended', 'x', { status: 409 }).status).toBe(409); // its own status
    expect(() => new ApiError('stream_ended', 'x', { status: 400 })).toThrow(TypeError);
    expect(() => new ApiError('resource_missing', 'x', { status: 500 })).toThrow(/resource_missing.*500/);
  });
});

describe('the OpenAPI document', () => {
  const tmp = tempDir();
  const db = openDatabase(tmp.dir, MIGRATIONS);
  afterAll(() => {
    db.close();
    tmp.cleanup();
  });

  it('its standard error lists hold table codes, each under one of its statuses', () => {
    for (const [status, { codes: listed }] of Object.entries(STD_ERRORS)) {
      for (const code of listed) expect(statusesOf(code), `${status} ${code}`).toContain(Number(status));
    }
  });

  it('names only codes of the table, each under one of its statuses, for every mounted route', () => {
    const log = createLogger('error');
    const http = new HttpServer({ maxJsonBodyBytes: 1 << 20, log });
    // Registration needs only the server, the guard and the log; handlers (never run here) use the services.
    const notCalled = {} as never;
    const services: ApiServices = {
      http,
      guard: new Guard(new AccountsRepo(db)),
      urls: () => ({ baseUrl: 'http://h/v2', authUrl: 'http://h', ingestUrl: 'rtmp://h', icecastUrl: 'h:8000', cdnUrl: 'http://h' }),
      now: Date.now,
      log,
      limits: new Limits(log, Date.now),
      accounts: notCalled,
      streams: notCalled,
      listeners: notCalled,
      podcasts: notCalled,
      episodes: notCalled,
      podcastStats: notCalled,
      episodeMedia: notCalled,
      uploads: { maxBytes: 1 << 20, minFreeDiskBytes: 0 },
      webhooks: notCalled,
      events: notCalled,
    };
    mountApi(services);
    const doc = buildOpenApi(http.routes(), services.urls()) as { paths: Record<string, Record<string, { responses: Record<string, { description: string }> }>> };
    http.close();

    let seen = 0;
    for (const [p, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        for (const [status, res] of Object.entries(op.responses)) {
          if (Number(status) < 400) continue;
          const listed = /`error\.code`: (.*)\.$/.exec(res.description)?.[1] ?? '';
          for (const [, code] of listed.matchAll(/`([a-z_]+)`/g)) {
            expect(Object.keys(ERROR_CODES), `${method} ${p} ${status}`).toContain(code);
            expect(statusesOf(code as ErrorCode), `${method} ${p} ${status} ${code}`).toContain(Number(status));
            seen++;
          }
        }
      }
    }
    expect(seen).toBeGreaterThan(100);
    expect(Object.keys(doc.paths)).toContain('/podcasts/{id}/episodes/{eid}/audio');
  });
});
