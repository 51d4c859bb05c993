/** What every route kind needs of the HTTP server that registers it. */
import type uWS from 'uWebSockets.js';
import type { Limits } from '../../limits/limits.js';
import type { Logger } from '../../log/logger.js';
import type { Replies } from '../reply.js';

export interface RouteHost {
  readonly app: uWS.TemplatedApp;
  readonly replies: Replies;
  readonly log: Logger;
  /** Where body-cap hits are counted (`http_body_bytes`); none when absent. */
  readonly limits: Limits | undefined;
  /** The JSON body cap (bytes); also the drain cap of requests refused by the 404/405 fallbacks. */
  readonly maxJsonBodyBytes: number;
}
