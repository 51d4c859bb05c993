/**
 * Configuration (PRODUCT.md §1, §9): environment variables `SKYLARK_*`, overridden by flags of the
 * same name in kebab case (`--http-port 0`), validated with valibot. Public URLs default to the
 * addresses actually bound (resolved after listening; see `resolvePublicUrls`).
 */
import * as v from 'valibot';
import path from 'node:path';

/** Validated configuration. Ports are numbers (0 = pick a free port); durations in ms unless named. */
export interface Config {
  httpHost: string;
  httpPort: number;
  rtmpHost: string;
  rtmpPort: number;
  dataDir: string;
  baseUrl?: string | undefined;
  authUrl?: string | undefined;
  ingestUrl?: string | undefined;
  cdnUrl?: string | undefined;
  webhooksAllowPrivate: boolean;
  trustedProxies: string[];
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  /** HLS segment target duration (ms). */
  segmentDurationMs: number;
  /** LL-HLS part target (ms) for fMP4 layers; 0 = classic HLS only. */
  partDurationMs: number;
  /** Whether streams get the ABR ladder's encoded layers (an FFmpeg codec process per live stream). */
  abrLadder: boolean;
  /**
   * Merged ingest reads (ms): a live publisher's socket is read every this often instead of on
   * every message while no LL-HLS part or segment is about to close (0 = read as bytes arrive).
   */
  ingestMergeMs: number;
  /** Segments kept in the live window. */
  liveWindowSegments: number;
  /** Largest JSON body accepted (bytes). */
  maxJsonBodyBytes: number;
  /** Largest episode audio upload accepted (bytes; default 500 MB). */
  maxUploadBytes: number;
}

/** The names that PRODUCT.md §1 makes a contract, with their defaults. */
export const ENV_NAMES = {
  httpHost: 'SKYLARK_HTTP_HOST',
  httpPort: 'SKYLARK_HTTP_PORT',
  rtmpHost: 'SKYLARK_RTMP_HOST',
  rtmpPort: 'SKYLARK_RTMP_PORT',
  dataDir: 'SKYLARK_DATA_DIR',
  baseUrl: 'SKYLARK_BASE_URL',
  authUrl: 'SKYLARK_AUTH_URL',
  ingestUrl: 'SKYLARK_INGEST_URL',
  cdnUrl: 'SKYLARK_CDN_URL',
  webhooksAllowPrivate: 'SKYLARK_WEBHOOKS_ALLOW_PRIVATE',
  trustedProxies: 'SKYLARK_TRUSTED_PROXIES',
  logLevel: 'SKYLARK_LOG_LEVEL',
  segmentDurationMs: 'SKYLARK_SEGMENT_DURATION_MS',
  partDurationMs: 'SKYLARK_PART_DURATION_MS',
  abrLadder: 'SKYLARK_ABR_LADDER',
  ingestMergeMs: 'SKYLARK_INGEST_MERGE_MS',
  liveWindowSegments: 'SKYLARK_LIVE_WINDOW_SEGMENTS',
  maxUploadBytes: 'SKYLARK_MAX_UPLOAD_BYTES',
} as const satisfies Partial<Record<keyof Config, string>>;

const port = v.pipe(v.string(), v.regex(/^\d{1,5}$/, 'must be a port number 0-65535'), v.transform(Number), v.maxValue(65535));
const httpUrl = v.pipe(v.string(), v.url(), v.regex(/^https?:\/\//, 'must be an http(s):// URL'), v.transform((s) => s.replace(/\/+$/, '')));

const RawConfig = v.object({
  httpHost: v.optional(v.pipe(v.string(), v.minLength(1)), '127.0.0.1'),
  httpPort: v.optional(port, '8080'),
  rtmpHost: v.optional(v.pipe(v.string(), v.minLength(1)), '127.0.0.1'),
  rtmpPort: v.optional(port, '1935'),
  dataDir: v.optional(v.pipe(v.string(), v.minLength(1)), './data'),
  baseUrl: v.optional(httpUrl),
  authUrl: v.optional(httpUrl),
  ingestUrl: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9.\-[\]:]+$/, 'must be host[:port]'))),
  cdnUrl: v.optional(httpUrl),
  webhooksAllowPrivate: v.optional(v.picklist(['0', '1', 'true', 'false']), '0'),
  trustedProxies: v.optional(v.string(), ''),
  logLevel: v.optional(v.picklist(['debug', 'info', 'warn', 'error']), 'info'),
  segmentDurationMs: v.optional(v.pipe(v.string(), v.regex(/^\d+$/), v.transform(Number), v.minValue(500), v.maxValue(10000)), '2000'),
  partDurationMs: v.optional(
    v.pipe(v.string(), v.regex(/^\d+$/), v.transform(Number), v.check((n) => n === 0 || (n >= 100 && n <= 2000), 'must be 0 or 100-2000')),
    '500',
  ),
  abrLadder: v.optional(v.picklist(['0', '1', 'true', 'false']), '1'),
  ingestMergeMs: v.optional(v.pipe(v.string(), v.regex(/^\d+$/, 'must be 0-200 (ms)'), v.transform(Number), v.maxValue(200)), '100'),
  liveWindowSegments: v.optional(v.pipe(v.string(), v.regex(/^\d+$/), v.transform(Number), v.minValue(3), v.maxValue(100)), '6'),
  maxUploadBytes: v.optional(v.pipe(v.string(), v.regex(/^\d{1,15}$/, 'must be a positive integer of bytes'), v.transform(Number), v.minValue(1)), '500000000'),
});

/** Thrown when configuration is invalid; the message names the variable or flag. */
export class ConfigError extends Error {}

/**
 * Builds the configuration from `env` and `flags` (flags win). Flags are the kebab-case names
 * (`http-port`) already parsed into strings.
 * @throws ConfigError naming the offending setting.
 */
export function loadConfig(env: NodeJS.ProcessEnv, flags: Record<string, string | undefined> = {}): Config {
  const raw: Record<string, string> = {};
  for (const [key, envName] of Object.entries(ENV_NAMES)) {
    const flag = flags[key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)];
    const value = flag ?? env[envName];
    if (value !== undefined && value !== '') raw[key] = value;
  }
  const res = v.safeParse(RawConfig, raw);
  if (!res.success) {
    const issue = res.issues[0];
    const key = issue.path?.[0]?.key as keyof typeof ENV_NAMES | undefined;
    const name = key ? `${ENV_NAMES[key]} / --${String(key).replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}` : 'configuration';
    throw new ConfigError(`invalid ${name}: ${issue.message}`);
  }
  const o = res.output;
  return {
    ...o,
    dataDir: path.resolve(o.dataDir),
    webhooksAllowPrivate: o.webhooksAllowPrivate === '1' || o.webhooksAllowPrivate === 'true',
    abrLadder: o.abrLadder === '1' || o.abrLadder === 'true',
    trustedProxies: o.trustedProxies.split(',').map((s) => s.trim()).filter(Boolean),
    maxJsonBodyBytes: 1024 * 1024,
  };
}

/** The four public addresses of PRODUCT.md §9, after listening. */
export interface PublicUrls {
  /** `{base_url}`, ends in `/v2`. */
  baseUrl: string;
  authUrl: string;
  /** `host[:port]` inside `rtmp://{ingest_url}/live/…`. */
  ingestUrl: string;
  cdnUrl: string;
}

/** Fills unset public URLs from the bound addresses (ports as actually bound when 0 was asked). */
export function resolvePublicUrls(config: Config, httpPort: number, rtmpPort: number): PublicUrls {
  const host = (h: string) => (h.includes(':') ? `[${h}]` : h === '0.0.0.0' ? '127.0.0.1' : h);
  const http = `http://${host(config.httpHost)}:${httpPort}`;
  return {
    baseUrl: config.baseUrl ?? `${http}/v2`,
    authUrl: config.authUrl ?? http,
    ingestUrl: config.ingestUrl ?? `${host(config.rtmpHost)}:${rtmpPort}`,
    cdnUrl: config.cdnUrl ?? http,
  };
}
