/**
 * Structured logging: one JSON object per line on stderr (stdout is kept for the machine-readable
 * lines that `serve` and the CLI print). Levels: debug < info < warn < error.
 *
 * Secrets never reach the output (docs/behaviour.md §2, §13): the message and every string field, nested
 * ones included, pass through `redactSecrets` before the line is written.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/**
 * What a secret looks like: its public prefix (kept) and its random base62 part (replaced), from
 * 8 characters on, so that a key cut short (a log line quoting 80 characters of an RTMP app path)
 * or mistyped still counts. The shapes:
 * stream keys `sk_<region code>_…` (src/control/services/streams.ts), API keys `svc_sk_…`, `svc_pk_…` and
 * the retired `svc_pub_…` (src/base/auth/api-keys.ts), webhook signing secrets `whsec_…`
 * (src/control/services/webhooks.ts), OAuth refresh tokens `rt_…` (src/control/oauth/service.ts), OAuth client
 * secrets `cs_…` (src/control/oauth/clients.ts), and JWTs (`eyJ…`: OAuth access tokens, listener tokens).
 * A letter or digit right before the prefix means it is part of a longer word (`task_…`), not a secret.
 */
const SECRET =
  /(?<![A-Za-z0-9])(?:(sk_[a-z]{2,6}[0-9]{1,2}_|svc_(?:sk|pk|pub)_|whsec_|rt_|cs_)[A-Za-z0-9]{8,}|(eyJ)[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)/;
const SECRET_ALL = new RegExp(SECRET.source, 'g');

/**
 * `text` with every secret-shaped token replaced by its prefix and `…REDACTED`
 * (`sk_euw1_…REDACTED`, `svc_sk_…REDACTED`, `eyJ…REDACTED`). Costs one regex test when nothing matches.
 */
export function redactSecrets(text: string): string {
  if (!SECRET.test(text)) return text;
  return text.replace(SECRET_ALL, (_m, prefix: string | undefined, jwt: string | undefined) => `${prefix ?? jwt}…REDACTED`);
}

/** JSON.stringify replacer: every string value (at any depth) redacted. */
const redactingReplacer = (_key: string, value: unknown) => (typeof value === 'string' ? redactSecrets(value) : value);

/** A logger bound to a component name. */
export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(component: string): Logger;
}

/**
 * Creates a logger writing lines at or above `level` to `sink` (default: process.stderr). Every
 * string in a line (message and fields, at any depth) is passed through `redactSecrets`.
 */
export function createLogger(level: LogLevel = 'info', component = 'skylark', sink: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  const min = ORDER[level];
  const write = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[lvl] < min) return;
    sink(JSON.stringify({ time: new Date().toISOString(), level: lvl, component, msg, ...fields }, redactingReplacer) + '\n');
  };
  return {
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    warn: (m, f) => write('warn', m, f),
    error: (m, f) => write('error', m, f),
    child: (c) => createLogger(level, `${component}.${c}`, sink),
  };
}
