/** The Account resource takes no request body; its answer (`GET /v2/account`, docs/behaviour.md §7), for the OpenAPI document (./openapi.ts). */
import * as v from 'valibot';
import { nullableString, objectId, timestamp } from '../openapi/schemas.js';
import { REGION_IDS } from '../streams/schemas.js';

/** The account with its rate-limit usage of the current window. */
export const AccountObject = v.object({
  id: objectId('acct'),
  object: v.literal('account'),
  name: v.string(),
  plan: v.picklist(['free', 'paid']),
  defaultRegion: v.picklist(REGION_IDS),
  email: nullableString,
  createdAt: timestamp,
  usage: v.object({
    object: v.literal('rate_limit_usage'),
    windowSeconds: v.pipe(v.number(), v.integer()),
    limit: v.pipe(v.number(), v.integer()),
    used: v.pipe(v.number(), v.integer(), v.minValue(0)),
    remaining: v.pipe(v.number(), v.integer(), v.minValue(0)),
    resetsAt: timestamp,
  }),
});
