/**
 * Structured logging: one JSON object per line on stderr (stdout is kept for the machine-readable
 * lines that `serve` and the CLI print). Levels: debug < info < warn < error.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** A logger bound to a component name. */
export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(component: string): Logger;
}

/** Creates a logger writing lines at or above `level` to `sink` (default: process.stderr). */
export function createLogger(level: LogLevel = 'info', component = 'skylark', sink: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  const min = ORDER[level];
  const write = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[lvl] < min) return;
    sink(JSON.stringify({ time: new Date().toISOString(), level: lvl, component, msg, ...fields }) + '\n');
  };
  return {
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    warn: (m, f) => write('warn', m, f),
    error: (m, f) => write('error', m, f),
    child: (c) => createLogger(level, `${component}.${c}`, sink),
  };
}
