/**
 * `GET /v2/account` (scope `account:read`): the account the key or token acts for — plan, default
 * region — and its rate-limit usage in the current 60 s window (this request included).
 */
import type { AppContext, Feature } from '../../context.js';
import { notFound } from '../../errors/errors.js';
import { toAccountObject } from '../../services/accounts.js';
import { valibot } from '../openapi/registry.js';
import { AccountObject } from '../openapi/schemas.js';

/** Registers the account route. */
export function registerAccountRoutes(ctx: AppContext): Feature {
  const { http, guard, accounts } = ctx;
  http.api(
    'get',
    '/v2/account',
    (_req, p) => {
      const row = accounts.get(p.accountId);
      if (!row) throw notFound('account', p.accountId);
      const u = guard.usage(p.accountId);
      return {
        status: 200,
        body: {
          ...toAccountObject(row),
          usage: {
            object: 'rate_limit_usage',
            windowSeconds: u.windowS,
            limit: u.limit,
            used: u.used,
            remaining: u.remaining,
            resetsAt: new Date(ctx.now() + u.resetMs).toISOString(),
          },
        },
      };
    },
    {
      ...guard.scope('account:read'),
      doc: {
        summary: 'Retrieve the account',
        description: 'Plan, default region and the rate-limit usage of the current 60-second window (this request included).',
        tags: ['account'],
        responses: { 200: { description: 'The account.', schema: valibot(AccountObject) } },
      },
    },
  );
  return {};
}
