/**
 * The API's error model (spec "Errors"): every failure is an ApiError with an HTTP status, an
 * `error.type`, a stable `code` and, where relevant, the offending `param`. The HTTP layer renders
 * it as `{ error: { type, code, message, param?, requestId } }`; nothing else reaches a client.
 */
export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'conflict_error'
  | 'rate_limit_error'
  | 'api_error';

const STATUS_TYPE: Record<number, ErrorType> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  409: 'conflict_error',
  413: 'invalid_request_error',
  415: 'invalid_request_error',
  429: 'rate_limit_error',
  500: 'api_error',
  // The node, not the request, is at fault (its data volume is nearly full): Stripe's `api_error`.
  507: 'api_error',
};

/** An error that the API answers with. `status` is the HTTP status; `type` follows from it. */
export class ApiError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly code: string;
  readonly param: string | undefined;
  /** Extra response headers (e.g. `WWW-Authenticate`, `Retry-After`). */
  readonly headers: Record<string, string>;

  constructor(status: number, code: string, message: string, param?: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.type = STATUS_TYPE[status] ?? 'api_error';
    this.code = code;
    this.param = param;
    this.headers = headers;
  }
}

/** 400 `param_required`: a required parameter is missing. */
export const paramRequired = (param: string) =>
  new ApiError(400, 'param_required', `Missing required parameter: ${param}.`, param);
/** 400 `parameter_invalid`: a parameter has a value that is not allowed. */
export const paramInvalid = (param: string, message: string) => new ApiError(400, 'parameter_invalid', message, param);
/** 400 `parameter_unknown`: the body names a parameter the endpoint does not take. */
export const paramUnknown = (param: string) =>
  new ApiError(400, 'parameter_unknown', `Received unknown parameter: ${param}.`, param);
/** 404 `resource_missing`. */
export const notFound = (what: string, id: string, param = 'id') =>
  new ApiError(404, 'resource_missing', `No such ${what}: '${id}'.`, param);
/** 409 `conflict_error` with code `state_conflict`. */
export const conflict = (message: string) => new ApiError(409, 'state_conflict', message);
