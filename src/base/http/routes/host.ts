/** What every route kind needs of the HTTP server that registers it. */
import type uWS from 'uWebSockets.js';
import type { Limits } from '../../limits/limits.js';
import type { Logger } from '../../logger.js';
import type { Replies } from '../reply.js';
import { RequestBody } from '../body.js';

export interface RouteHost {
  readonly app: uWS.TemplatedApp;
  readonly replies: Replies;
  readonly log: Logger;
  /** Where body-cap hits are counted (`http_body_bytes`); none when absent. */
  readonly limits: Pick<Limits, 'hit'> | undefined;
  /** The JSON body cap (bytes); also the drain cap of requests refused by the 404/405 fallbacks. */
  readonly maxJsonBodyBytes: number;
}

/**
 * The capped body reader of one request (src/base/http/body.ts) for a route kind: the client going away
 * marks `state.aborted`; a body over `maxBytes` is counted as `http_body_bytes` for the client at
 * `remoteAddress()` (read only then).
 */
export function bodyReader(host: RouteHost, res: uWS.HttpResponse, req: uWS.HttpRequest, state: { aborted: boolean }, maxBytes: number, remoteAddress: () => string): RequestBody {
  return new RequestBody(res, req, {
    maxBytes,
    onAbort: () => {
      state.aborted = true;
    },
    onTooLarge: () => host.limits?.hit('http_body_bytes', remoteAddress(), { maxBytes }),
  });
}
