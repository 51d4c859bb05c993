/**
 * The one place that decides who a `/v2` request acts for and whether it may (spec
 * "Authentication", PRODUCT.md §7). Every resource's routes take their guards from here, so that
 * OAuth access tokens, rate limits and their headers apply to every endpoint alike.
 */
import type { ApiRequest } from '../http/server.js';
import type { AccountsRepo } from '../db/accounts-repo.js';
import { authenticate, requireScope, type Principal, type Scope } from '../auth/api-keys.js';

/** Route guards by scope. */
export class Guard {
  constructor(private readonly accounts: AccountsRepo) {}

  /**
   * Authenticates the request and requires `scope`.
   * @throws ApiError 401 (missing_token, invalid_token, key_revoked), 403 insufficient_scope
   */
  check(req: ApiRequest, scope: Scope): Principal {
    const p = authenticate(req.headers.authorization, this.accounts);
    requireScope(p, scope);
    return p;
  }

  /** Route options `{ guard }` requiring `scope` (checked before the body is read). */
  scope(scope: Scope): { guard: (req: ApiRequest) => Principal } {
    return { guard: (req) => this.check(req, scope) };
  }
}
