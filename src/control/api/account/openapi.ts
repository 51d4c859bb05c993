/** OpenAPI description of the account route (./routes.ts), passed as its `doc` option. */
import { valibot, type RouteDoc } from '../openapi/registry.js';
import { AccountObject } from './schemas.js';

export const ACCOUNT_DOCS = {
  get: {
    summary: 'Retrieve the account',
    description: 'Plan, default region and the rate-limit usage of the current 60-second window (this request included).',
    tags: ['account'],
    responses: { 200: { description: 'The account.', schema: valibot(AccountObject) } },
  },
} satisfies Record<string, RouteDoc>;
