/**
 * The API's error model (spec "Errors"): every failure is an ApiError with a stable `code` from the
 * table of src/base/errors/codes.ts, which gives its HTTP status; the `error.type` follows from the
 * status, and `param` names the offending parameter where there is one. The HTTP layer renders it
 * as `{ error: { type, code, message, param?, requestId } }`; nothing else reaches a client.
 */
import { ERROR_CODES, type ErrorCode } from './codes.js';

export { ERROR_CODES, type ErrorCode } from './codes.js';

/** Every `error.type` (spec "Errors"). */
export const ERROR_TYPES = [
  'invalid_request_error',
  'authentication_error',
  'permission_error',
  'not_found_error',
  'conflict_error',
  'rate_limit_error',
  'api_error',
] as const;
export type ErrorType = (typeof ERROR_TYPES)[number];

/**
 * The `error.type` of each status the table of codes answers with (a unit test checks that every
 * status of src/base/errors/codes.ts, `also` included, is here).
 */
export const STATUS_TYPE: Readonly<Record<number, ErrorType>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  406: 'invalid_request_error',
  409: 'conflict_error',
  413: 'invalid_request_error',
  415: 'invalid_request_error',
  429: 'rate_limit_error',
  500: 'api_error',
  // The node, not the request, is at fault (busy, at capacity, its data volume nearly full) and the
  // same request may succeed later: Stripe's `api_error`.
  503: 'api_error',
  507: 'api_error',
};

/** What an ApiError may carry besides its code and message. */
export interface ApiErrorOptions {
  /** The offending parameter (`metadata.key`, `recording.podcastId`, `after`). */
  param?: string | undefined;
  /** Extra response headers (e.g. `WWW-Authenticate`, `Retry-After`, `Allow`). */
  headers?: Record<string, string> | undefined;
  /**
   * Another status than the code's own: allowed only when the table lists it in the code's `also`
   * (e.g. `invalid_token` is 403 on HLS). Any other status is a programming error: the constructor
   * throws a TypeError (one array lookup, and only when a status is given).
   */
  status?: number | undefined;
}

/**
 * An error that the API answers with. `code` is a key of `ERROR_CODES` (a code missing from the
 * table does not compile); `status` is the table's (or `options.status`, see ApiErrorOptions);
 * `type` follows from the status.
 * @throws TypeError when `options.status` is neither the code's status nor one of its `also`
 */
export class ApiError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly code: ErrorCode;
  readonly param: string | undefined;
  /** Extra response headers (e.g. `WWW-Authenticate`, `Retry-After`). */
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, options: ApiErrorOptions = {}) {
    super(message);
    this.name = 'ApiError';
    const spec: { status: number; also?: readonly number[] } = ERROR_CODES[code];
    let status = spec.status;
    if (options.status !== undefined && options.status !== status) {
      if (!spec.also?.includes(options.status)) throw new TypeError(`error code '${code}' is not answered with status ${options.status} (src/base/errors/codes.ts)`);
      status = options.status;
    }
    this.status = status;
    this.type = STATUS_TYPE[status] ?? 'api_error';
    this.code = code;
    this.param = options.param;
    this.headers = options.headers ?? {};
  }
}

/** 400 `param_required`: a required parameter is missing. */
export const paramRequired = (param: string) => new ApiError('param_required', `Missing required parameter: ${param}.`, { param });
/** 400 `parameter_invalid`: a parameter has a value that is not allowed. */
export const paramInvalid = (param: string, message: string) => new ApiError('parameter_invalid', message, { param });
/** 400 `parameter_unknown`: the body names a parameter the endpoint does not take. */
export const paramUnknown = (param: string) => new ApiError('parameter_unknown', `Received unknown parameter: ${param}.`, { param });
/** 404 `resource_missing`: no such `what` with id `id` (or not this account's); `param` names the id. */
export const notFound = (what: string, id: string, param = 'id') => new ApiError('resource_missing', `No such ${what}: '${id}'.`, { param });
/** 409 `state_conflict`: the object cannot move to (or is already in) the state asked for. */
export const conflict = (message: string) => new ApiError('state_conflict', message);
/** 500 `internal_error` without details (the cause is logged with the request id, never shown). */
export const internalError = () => new ApiError('internal_error', 'An internal error occurred. Quote the request id when you report it.');
