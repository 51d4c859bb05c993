/**
 * The configuration file (docs/configuration.md "Configuration file"): `skylark serve --config FILE`
 * or `SKYLARK_CONFIG=FILE`, a TOML 1.0 document (https://toml.io/en/v1.0.0) whose keys are the
 * settings' flag names at top level (`http-port = 8080`, `trusted-proxies = ["10.0.0.0/8"]`); no
 * tables. Each value is turned into the text a flag or environment variable would carry and judged
 * by `loadConfig` (src/base/config.ts) exactly as that flag would be, so a value means the same and
 * is refused for the same reason whichever way it comes. Flags, then environment variables, win
 * over the file.
 *
 * Every error is a `ConfigError` that names the file, the line and the key
 * (`/etc/skylark/skylark.toml:3: unknown key 'htp-port' (did you mean http-port?)`); the CLI exits 2
 * with it. The whole file is judged, a value overridden by a flag or a variable included.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse, TomlDate, TomlError } from 'smol-toml';
import { ALL_ENV_NAMES, ConfigError, loadConfig } from './config.js';

/** `rtmpPort` → `rtmp-port`: a setting's flag name, which is its key in the file. */
const kebab = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** The settings that take a comma-separated list: in the file, also a TOML array of strings. */
const LIST_KEYS = new Set(['trusted-proxies', 'ice-servers', 'feed-notify-urls']);

/** A configuration file, read and checked. */
export interface ConfigFile {
  /** The file's absolute path. */
  path: string;
  /** Each key of the file (a flag name, `http-port`) with its value as a flag would carry it (`'8080'`). */
  values: Record<string, string>;
}

/** Every key the file may hold (the flag names), with its environment variable. */
function fileKeys(): Map<string, string> {
  return new Map(Object.entries(ALL_ENV_NAMES).map(([field, env]) => [kebab(field), env]));
}

/**
 * Reads, parses and checks the configuration file at `file` (resolved against the working
 * directory): TOML, top-level keys only, each a known setting with a value `loadConfig` accepts.
 * @returns the file's settings as flag values (numbers and booleans as their TOML text, arrays of a
 *   list setting joined with commas)
 * @throws ConfigError `FILE: cannot read …`, `FILE:LINE:COLUMN: not valid TOML: …`,
 *   `FILE:LINE: unknown key 'K'` or `FILE:LINE: invalid K: …`
 */
export function readConfigFile(file: string): ConfigFile {
  const abs = path.resolve(file);
  let text: string;
  try {
    text = readFileSync(abs, 'utf8');
  } catch (e) {
    throw new ConfigError(`${abs}: cannot read the configuration file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  let doc: Record<string, unknown>;
  try {
    doc = parse(text);
  } catch (e) {
    if (!(e instanceof TomlError)) throw e;
    const [first, ...excerpt] = e.message.replace(/^Invalid TOML document: /, '').split('\n');
    throw new ConfigError(`${abs}:${e.line}:${e.column}: not valid TOML: ${first}\n${excerpt.join('\n').replace(/^\n+|\n+$/g, '')}`);
  }
  const keys = fileKeys();
  const where = (key: string) => {
    const line = keyLine(text, key);
    return line ? `${abs}:${line}` : abs;
  };
  // A misspelt key is named first, before any value is judged: it is the likelier mistake.
  for (const [key, value] of Object.entries(doc)) {
    if (!keys.has(key)) throw new ConfigError(`${where(key)}: unknown key '${key}'${unknownHint(key, value, [...keys.keys()])}`);
  }
  const values: Record<string, string> = {};
  for (const [key, value] of Object.entries(doc)) {
    const at = where(key);
    const flag = flagText(key, value);
    if (typeof flag !== 'string') throw new ConfigError(`${at}: invalid ${key}: ${flag.error}`);
    try {
      // The flag's own validation, the rest at their defaults.
      loadConfig({}, { [key]: flag });
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      throw new ConfigError(`${at}: invalid ${key}: ${e.message.replace(/^invalid [A-Z0-9_]+ \/ --[a-z0-9-]+: /, '')}`);
    }
    values[key] = flag;
  }
  return { path: abs, values };
}

/**
 * The flags to hand to `loadConfig` so that flags win over environment variables, which win over
 * the file: `flags`, plus each value of `file` whose variable is not set (non-empty) in `env`.
 */
export function flagsWithConfigFile(file: ConfigFile, env: NodeJS.ProcessEnv, flags: Record<string, string | undefined>): Record<string, string | undefined> {
  const keys = fileKeys();
  const out: Record<string, string | undefined> = {};
  for (const [key, value] of Object.entries(file.values)) {
    const envValue = env[keys.get(key)!];
    if (envValue === undefined || envValue === '') out[key] = value;
  }
  for (const [key, value] of Object.entries(flags)) if (value !== undefined) out[key] = value;
  return out;
}

/** `value` (a TOML value of `key`) as a flag's text, or why it cannot be one. */
function flagText(key: string, value: unknown): string | { error: string } {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (value instanceof TomlDate) return { error: 'a date or time is not a value of any setting' };
  if (Array.isArray(value)) {
    if (!LIST_KEYS.has(key)) return { error: 'takes one value, not an array' };
    if (!value.every((x) => typeof x === 'string' && !x.includes(','))) return { error: 'the array may hold only strings without commas' };
    return value.join(',');
  }
  return { error: 'takes one value, not a table' };
}

/** What to say after `unknown key 'K'`: a table's rule, or the closest known key. */
function unknownHint(key: string, value: unknown, known: string[]): string {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && !(value instanceof TomlDate)) {
    return ' (settings are top-level keys named as their flags, e.g. http-port = 8080: no tables or dotted keys)';
  }
  let best = '';
  let bestDistance = Infinity;
  for (const k of known) {
    const d = editDistance(key.toLowerCase().replace(/_/g, '-'), k);
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return bestDistance <= Math.max(2, Math.floor(key.length / 4)) ? ` (did you mean ${best}?)` : ' (the keys are the flags of docs/configuration.md without their --)';
}

/** Levenshtein distance of `a` and `b`. */
function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

/**
 * The 1-based line where top-level `key` is defined in `text` (a valid TOML document): the first
 * line that starts with the key (bare or quoted, before `=` or `.`) or a table header naming it,
 * and before which the document is complete TOML (so not a line inside a multi-line string).
 * 0 if not found.
 */
function keyLine(text: string, key: string): number {
  const k = key.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const name = `(?:${k}|"${k}"|'${k}')`;
  const starts = new RegExp(`^\\s*(?:${name}\\s*[=.]|\\[\\[?\\s*${name}\\s*[\\].])`);
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    if (!starts.test(lines[i]!)) continue;
    try {
      parse(lines.slice(0, i).join('\n'));
      return i + 1;
    } catch {
      // Inside a multi-line string or array: not where the key is defined.
    }
  }
  return 0;
}
