/**
 * `GET /v2/account` (scope `account:read`): the account the key or token acts for — plan, default
 * region — and its rate-limit usage in the current 60 s window (this request included).
 */
import { notFound } from '../../errors/errors.js';
import type { ApiServices } from '../services.js';
import { ACCOUNT_DOCS as DOCS } from './openapi.js';

/** Registers the account route. */
export function mountAccount(s: ApiServices): void {
  const { guard } = s;
  s.http.api(
    'get',
    '/v2/account',
    (_req, p) => {
      const account = s.accounts.get(p.accountId);
      if (!account) throw notFound('account', p.accountId);
      const u = guard.usage(p.accountId);
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
    },
    { ...guard.scope('account:read'), doc: DOCS.get },
  );
}
