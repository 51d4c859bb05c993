/**
 * Maps valibot results to the API's 400 errors: a missing required key → `param_required`, an
 * unknown key → `parameter_unknown`, anything else → `parameter_invalid`, each with `param` as the
 * dotted path (`metadata.key`).
 */
import * as v from 'valibot';
import { ApiError, paramInvalid, paramRequired, paramUnknown } from '../errors/errors.js';
import type { PageQuery } from '../db/paginate.js';

/** Validates `input` against `schema`. @throws ApiError 400 */
export function parse<S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> {
  const res = v.safeParse(schema, input, { abortPipeEarly: true });
  if (res.success) return res.output;
  throw toApiError(res.issues[0]);
}

function toApiError(issue: v.BaseIssue<unknown>): ApiError {
  const param = (issue.path ?? []).map((p) => String(p.key)).join('.');
  if (issue.kind === 'schema' && issue.type === 'strict_object' && issue.input !== undefined && issue.expected === 'never') {
    return paramUnknown(param);
  }
  if (issue.input === undefined && issue.expected !== 'never' && issue.path && issue.path.length > 0) {
    return paramRequired(param);
  }
  return paramInvalid(param || 'body', `Invalid ${param || 'body'}: ${issue.message}`);
}

/** `limit` (1–100, default 20), `after`, `before` (mutually exclusive) from a query string. @throws ApiError 400 */
export function parsePageQuery(q: URLSearchParams): PageQuery {
  const limitRaw = q.get('limit');
  let limit = 20;
  if (limitRaw !== null) {
    if (!/^\d+$/.test(limitRaw) || Number(limitRaw) < 1 || Number(limitRaw) > 100) {
      throw paramInvalid('limit', 'limit must be an integer from 1 to 100.');
    }
    limit = Number(limitRaw);
  }
  const after = q.get('after') ?? undefined;
  const before = q.get('before') ?? undefined;
  if (after !== undefined && before !== undefined) {
    throw new ApiError('parameter_invalid', 'Use either after or before, not both.', { param: 'before' });
  }
  if (after === '') throw paramInvalid('after', 'after must be an object id.');
  if (before === '') throw paramInvalid('before', 'before must be an object id.');
  return { limit, after, before };
}

/** Validates a query parameter against allowed values; undefined when absent. @throws ApiError 400 */
export function queryEnum<T extends string>(q: URLSearchParams, name: string, allowed: readonly T[]): T | undefined {
  const value = q.get(name);
  if (value === null) return undefined;
  if (!(allowed as readonly string[]).includes(value)) throw paramInvalid(name, `${name} must be one of: ${allowed.join(', ')}.`);
  return value as T;
}
