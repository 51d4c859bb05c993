/**
 * Maps valibot results to the API's 400 errors: a missing required key → `param_required`, an
 * unknown key → `parameter_unknown`, anything else → `parameter_invalid`, each with `param` as the
 * dotted path (`metadata.key`).
 */
import * as v from 'valibot';
import { ApiError, paramInvalid, paramRequired, paramUnknown } from '../../base/errors/errors.js';
import type { PageQuery } from '../../base/db/paginate.js';

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

/** Stripe's names of the page cursors, accepted as aliases (docs/api-platform.md "Query parameters"). */
export const CURSOR_ALIASES = { after: 'starting_after', before: 'ending_before' } as const;

/**
 * The query parameter names a page query was read from: `after`/`before`, or their aliases
 * `starting_after`/`ending_before` when those were used (an error about a cursor names what the
 * client sent).
 */
export function cursorParamOf(q: URLSearchParams, name: 'after' | 'before'): string {
  return q.has(name) ? name : q.has(CURSOR_ALIASES[name]) ? CURSOR_ALIASES[name] : name;
}

/**
 * One cursor: `name` or its alias, not both.
 * @throws ApiError 400 `parameter_invalid` (param: the alias) when both are given
 */
function cursorOf(q: URLSearchParams, name: 'after' | 'before'): string | undefined {
  const alias = CURSOR_ALIASES[name];
  const plain = q.get(name);
  const aliased = q.get(alias);
  if (plain !== null && aliased !== null) throw new ApiError('parameter_invalid', `Use either ${name} or ${alias}, not both.`, { param: alias });
  return plain ?? aliased ?? undefined;
}

/**
 * Refuses any query parameter whose name is not in `known`, as unknown body fields are refused.
 * @throws ApiError 400 `parameter_unknown` with `param` naming the first unknown one
 */
export function rejectUnknownQuery(q: URLSearchParams, known: ReadonlySet<string>): void {
  for (const name of q.keys()) if (!known.has(name)) throw paramUnknown(name);
}

/**
 * `limit` (1–100, default 20), `after`, `before` (mutually exclusive; `starting_after` and
 * `ending_before` are their aliases) from a query string.
 * @throws ApiError 400 `parameter_invalid` (param names the offending parameter as sent)
 */
export function parsePageQuery(q: URLSearchParams): PageQuery {
  const limitRaw = q.get('limit');
  let limit = 20;
  if (limitRaw !== null) {
    if (!/^\d+$/.test(limitRaw) || Number(limitRaw) < 1 || Number(limitRaw) > 100) {
      throw paramInvalid('limit', 'limit must be an integer from 1 to 100.');
    }
    limit = Number(limitRaw);
  }
  const after = cursorOf(q, 'after');
  const before = cursorOf(q, 'before');
  if (after !== undefined && before !== undefined) {
    const b = cursorParamOf(q, 'before');
    throw new ApiError('parameter_invalid', `Use either ${cursorParamOf(q, 'after')} or ${b}, not both.`, { param: b });
  }
  if (after === '') throw paramInvalid(cursorParamOf(q, 'after'), `${cursorParamOf(q, 'after')} must be an object id.`);
  if (before === '') throw paramInvalid(cursorParamOf(q, 'before'), `${cursorParamOf(q, 'before')} must be an object id.`);
  return { limit, after, before };
}

/** Validates a query parameter against allowed values; undefined when absent. @throws ApiError 400 */
export function queryEnum<T extends string>(q: URLSearchParams, name: string, allowed: readonly T[]): T | undefined {
  const value = q.get(name);
  if (value === null) return undefined;
  if (!(allowed as readonly string[]).includes(value)) throw paramInvalid(name, `${name} must be one of: ${allowed.join(', ')}.`);
  return value as T;
}
