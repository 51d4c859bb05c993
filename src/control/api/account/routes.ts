/**
 * `GET /v2/account` (scope `account:read`): the account the key or token acts for — plan, default
 * region — and its rate-limit usage in the current 60 s window (this request included).
 */
import { notFound } from '../../../base/errors/errors.js';
import type { ApiServices } from '../services.js';
import { resourceRoutes } from '../resource.js';
import { ACCOUNT_DOCS as DOCS } from './openapi.js';

/** Registers the account route. */
export function mountAccount(s: ApiServices): void {
  const r = resourceRoutes(s, { read: 'account:read' });
  r.read('get', '/v2/account', DOCS.get, (_req, p) => {
    const account = s.accounts.get(p.accountId);
    if (!account) throw notFound('account', p.accountId);
    const u = s.guard.usage(p.accountId);
    return {
      status: 200,
      body: {
        ...account,
        usage: {
          object: 'rate_limit_usage',
          windowSeconds: u.windowS,
          limit: u.limit,
          used: u.used,
          remaining: u.remaining,
          resetsAt: new Date(s.now() + u.resetMs).toISOString(),
        },
      },
    };
  });
}
