/**
 * How every resource registers its routes (src/control/api/index.ts): each route needs the resource's read
 * or write scope (checked by the Guard before any body is read: 401/429/403 first) and carries its
 * OpenAPI description (`doc`, from the resource's `openapi.ts`); a query parameter the doc does not
 * list answers 400 `parameter_unknown`; list routes read the page query (`limit`, `after`,
 * `before`, and Stripe's `starting_after`/`ending_before`) and answer the list envelope (./lists.ts).
 */
import type { ApiReply, ApiRequest, HttpMethod } from '../../base/http/server.js';
import type { Principal, Scope } from '../../base/auth/api-keys.js';
import type { ScopedRoute } from '../../base/auth/guard.js';
import type { PageQuery } from '../../base/db/paginate.js';
import type { ApiServices } from './services.js';
import type { RouteDoc } from './openapi/registry.js';
import { ApiError } from '../../base/errors/errors.js';
import { cursorParamOf, parsePageQuery, rejectUnknownQuery } from './validation.js';
import { listReply, type ListPage } from './lists.js';

/** A route's handler: the request and who it acts for. */
export type ResourceHandler = (req: ApiRequest, p: Principal) => ApiReply | Promise<ApiReply>;
type Register = (method: HttpMethod, pattern: string, doc: RouteDoc, handler: ResourceHandler) => void;

/** The registrar of one resource's routes. */
export interface ResourceRoutes {
  /** The read scope's guard (for routes registered otherwise, e.g. an upload). */
  readonly readScope: ScopedRoute;
  /** The write scope's guard; throws when the resource has none. */
  readonly writeScope: ScopedRoute;
  /** Registers a route needing the read scope. */
  read: Register;
  /** Registers a route needing the write scope. @throws Error when the resource has no write scope */
  write: Register;
  /**
   * Registers `GET pattern` (read scope) answering the list envelope of `page(req, p, q)`, whose
   * `url` is the path with its parameters filled in. @throws ApiError 400 for a bad page query
   */
  list<T extends { id: string }>(pattern: string, doc: RouteDoc, page: (req: ApiRequest, p: Principal, q: PageQuery) => ListPage<T>): void;
}

/** The registrar of a resource whose routes need `scopes.read` or `scopes.write`. */
export function resourceRoutes(s: ApiServices, scopes: { read: Scope; write?: Scope }): ResourceRoutes {
  const readScope = s.guard.scope(scopes.read);
  const write = scopes.write && s.guard.scope(scopes.write);
  const writeScope = () => {
    if (!write) throw new Error(`the resource of ${scopes.read} has no write scope`);
    return write;
  };
  const register =
    (scoped: () => ScopedRoute): Register =>
    (method, pattern, doc, handler) => {
      const known = knownQuery(doc);
      s.http.api(
        method,
        pattern,
        (req, p: Principal) => {
          rejectUnknownQuery(req.query, known);
          return handler(req, p);
        },
        { ...scoped(), doc },
      );
    };
  return {
    readScope,
    get writeScope() {
      return writeScope();
    },
    read: register(() => readScope),
    write: register(writeScope),
    list(pattern, doc, page) {
      const known = knownQuery(doc);
      s.http.api(
        'get',
        pattern,
        (req, p) => {
          rejectUnknownQuery(req.query, known);
          const q = parsePageQuery(req.query);
          let items: ReturnType<typeof page>;
          try {
            items = page(req, p, q);
          } catch (e) {
            throw asSent(e, req.query);
          }
          return listReply(pathOf(pattern, req.params), items, q);
        },
        { ...readScope, doc },
      );
    },
  };
}

/**
 * The query parameters a route takes: those its RouteDoc lists (`doc.query`), so what is
 * documented and what is accepted are one list; any other is refused with 400 `parameter_unknown`
 * (docs/api-platform.md "Query parameters").
 */
export function knownQuery(doc: RouteDoc | undefined): ReadonlySet<string> {
  return new Set((doc?.query ?? []).map((q) => q.name));
}

/** An unknown-cursor error of a page read with `starting_after`/`ending_before`, its `param` renamed to the name sent. */
function asSent(e: unknown, q: URLSearchParams): unknown {
  if (!(e instanceof ApiError) || (e.param !== 'after' && e.param !== 'before')) return e;
  const sent = cursorParamOf(q, e.param);
  return sent === e.param ? e : new ApiError(e.code, e.message.replace(`'${e.param}'`, `'${sent}'`), { param: sent, status: e.status });
}

/** `pattern` with its `:name` parameters filled in from `params`, in order (`/v2/streams/:id/listeners` → `/v2/streams/stm_1/listeners`). */
function pathOf(pattern: string, params: readonly string[]): string {
  let i = 0;
  return pattern.includes(':') ? pattern.replace(/:[A-Za-z0-9_]+/g, () => params[i++] ?? '') : pattern;
}
