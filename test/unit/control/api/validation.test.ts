/** valibot issues → API errors, and the list query (docs/behaviour.md §7 "Errors", §9 "Lists"). */
import { describe, expect, it } from 'vitest';
import * as v from 'valibot';
import { parse, parsePageQuery, queryEnum } from '../../../../src/control/api/validation.js';
import { CreateStream, UpdateStream } from '../../../../src/control/api/streams/schemas.js';
import { ApiError } from '../../../../src/base/errors/errors.js';

function errorOf(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    return e as ApiError;
  }
  throw new Error('expected an ApiError');
}

describe('parse', () => {
  it('returns the validated output (title trimmed)', () => {
    expect(parse(CreateStream, { title: '  hi  ' })).toEqual({ title: 'hi' });
  });

  it('missing required key → param_required with the dotted path', () => {
    expect(errorOf(() => parse(CreateStream, {}))).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'param_required', param: 'title' });
    expect(errorOf(() => parse(CreateStream, { title: 't', recording: {} }))).toMatchObject({ code: 'param_required', param: 'recording.podcastId' });
  });

  it('unknown key → parameter_unknown, also nested', () => {
    expect(errorOf(() => parse(CreateStream, { title: 't', nope: 1 }))).toMatchObject({ code: 'parameter_unknown', param: 'nope' });
    expect(errorOf(() => parse(CreateStream, { title: 't', recording: { podcastId: 'pod_1', x: null } }))).toMatchObject({
      code: 'parameter_unknown',
      param: 'recording.x',
    });
    // An unknown key whose value is null is still unknown (not "required").
    expect(errorOf(() => parse(UpdateStream, { codec: null }))).toMatchObject({ code: 'parameter_unknown', param: 'codec' });
  });

  it('bad value → parameter_invalid naming the parameter', () => {
    expect(errorOf(() => parse(CreateStream, { title: 't', quality: 'x' }))).toMatchObject({ code: 'parameter_invalid', param: 'quality' });
    expect(errorOf(() => parse(CreateStream, { title: 't', metadata: { a: 1 } }))).toMatchObject({ code: 'parameter_invalid', param: 'metadata.a' });
    expect(errorOf(() => parse(CreateStream, { title: 't', metadata: ['a'] }))).toMatchObject({ code: 'parameter_invalid', param: 'metadata' });
    expect(errorOf(() => parse(UpdateStream, { metadata: ['a'] }))).toMatchObject({ code: 'parameter_invalid', param: 'metadata' });
    expect(errorOf(() => parse(CreateStream, { title: 't', recording: [] }))).toMatchObject({ code: 'parameter_invalid', param: 'recording' });
  });

  it('a top-level type error names "body"', () => {
    expect(errorOf(() => parse(v.object({ a: v.string() }), 'x'))).toMatchObject({ code: 'parameter_invalid', param: 'body' });
  });

  it('metadata: 16 keys and 512-char values at most', () => {
    const m16 = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, 'x'.repeat(512)]));
    expect(parse(CreateStream, { title: 't', metadata: m16 }).metadata).toEqual(m16);
    expect(errorOf(() => parse(CreateStream, { title: 't', metadata: { ...m16, k16: 'v' } }))).toMatchObject({ param: 'metadata' });
    expect(errorOf(() => parse(CreateStream, { title: 't', metadata: { a: 'x'.repeat(513) } })).param).toMatch(/^metadata/);
    // PATCH allows null values (removal); the 16-key cap is checked after the merge by the service.
    expect(parse(UpdateStream, { metadata: { a: null, b: 'x' } }).metadata).toEqual({ a: null, b: 'x' });
  });
});

describe('parsePageQuery', () => {
  const q = (s: string) => parsePageQuery(new URLSearchParams(s));

  it('defaults to limit 20 and no cursor', () => {
    expect(q('')).toEqual({ limit: 20, after: undefined, before: undefined });
  });

  it('limit 1..100', () => {
    expect(q('limit=1').limit).toBe(1);
    expect(q('limit=100').limit).toBe(100);
    for (const bad of ['0', '101', '-1', '1.5', 'x', '', '1e1', '+5']) {
      expect(errorOf(() => q(`limit=${encodeURIComponent(bad)}`))).toMatchObject({ status: 400, code: 'parameter_invalid', param: 'limit' });
    }
  });

  it('after and before are exclusive; empty cursors refused', () => {
    expect(q('after=stm_a')).toMatchObject({ after: 'stm_a', before: undefined });
    expect(q('before=stm_a')).toMatchObject({ after: undefined, before: 'stm_a' });
    expect(errorOf(() => q('after=a&before=b'))).toMatchObject({ status: 400 });
    expect(errorOf(() => q('after='))).toMatchObject({ param: 'after' });
    expect(errorOf(() => q('before='))).toMatchObject({ param: 'before' });
  });
});

describe('queryEnum', () => {
  it('returns the value, undefined when absent, 400 naming the parameter otherwise', () => {
    const allowed = ['idle', 'live'] as const;
    expect(queryEnum(new URLSearchParams('status=idle'), 'status', allowed)).toBe('idle');
    expect(queryEnum(new URLSearchParams(''), 'status', allowed)).toBeUndefined();
    expect(errorOf(() => queryEnum(new URLSearchParams('status=x'), 'status', allowed))).toMatchObject({ param: 'status' });
  });
});
