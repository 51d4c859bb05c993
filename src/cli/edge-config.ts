/**
 * `skylark edge-config` (docs/edges.md): a complete `nginx.conf` for a stock nginx (Debian's
 * package: `proxy_cache`, `realip`, syslog access logs) in front of a Skylark origin.
 *
 * What the edge does (decisions: docs/edges.md):
 * - Media objects (`/hls/<id>/<layer>/<file>.m4s|.ts|.mp4`): cached by URI path
 *   (`proxy_cache_key $uri`), kept as long as the origin says (a year, immutable), dropped 10 min
 *   after their last use; `proxy_cache_lock on`: concurrent misses of one object become one origin
 *   fetch; `proxy_cache_use_stale updating`.
 * - Media playlists (`/hls/<id>/<layer>/index.m3u8`): cached by path + `_HLS_msn` + `_HLS_part` +
 *   `_HLS_skip` (a delta update, docs/ll-hls.md; never the session id), with the same lock, so a blocking reload is fetched once per edge and
 *   answered to every listener waiting on it. The origin's `Cache-Control` decides what is kept: a
 *   blocking reload that lists its part for one target duration, a timed-out one never
 *   (`no-store`); a non-blocking LL-HLS playlist never (`no-cache`), a classic one for half a
 *   target duration. Every media playlist request sends one access log line to the origin
 *   (`--log-to`), which counts the listener from it (sid, client address, user agent).
 * - Token streams (`?token=`): never cached (`proxy_cache_bypass`/`proxy_no_cache $arg_token`, and
 *   the origin answers `private, no-store` anyway).
 * - Everything else (the multivariant playlist, which mints a session id per listener; `/v2`,
 *   `/listen`, `/whep`, feeds, the dashboard): passed through unbuffered.
 * - Every answer carries `X-Cache-Status: $upstream_cache_status`; the origin gets
 *   `X-Forwarded-For: <client address>` (list the edge in `SKYLARK_TRUSTED_PROXIES`) over
 *   keep-alive upstream connections.
 * - The pid file, error log, lock file, temp and cache directories all live under `--cache-dir`, so
 *   `nginx -c FILE` runs as root (workers as `nobody`, or `--user`) or unprivileged alike.
 *   `makeEdgeDirs` creates them (the CLI does, unless `--no-mkdir`), so the printed file runs as
 *   is: nginx creates a missing temp or cache folder itself, but not the folder they are in.
 * - Each log line sent to the origin carries its own MAC: an HMAC-SHA-256 under the node's
 *   edge-log secret (`logSecret`) of the line's fields, its time and its request id, computed by
 *   nginx's perl module (Debian's `libnginx-mod-http-perl`, loaded by `load_module`; Digest::SHA is
 *   in perl's core) as the line is written. The secret itself never travels; the origin's receiver
 *   counts no line whose MAC, freshness or uniqueness fails (src/delivery/listeners/edge-log.ts).
 * - The optional access log file (`--access-log`) writes the path and only the `_HLS_msn` /
 *   `_HLS_part` of the query: never a listener token (`token=`) or session id (`sid=`).
 * - TLS (`--tls-cert`, `--tls-key`): the edge listens with `ssl` on `--listen` and speaks HTTP/2
 *   (RFC 9113, negotiated by ALPN, RFC 7301) besides HTTP/1.1: Safari plays LL-HLS only over
 *   HTTP/2. nginx turns HTTP/2 on with `http2 on;` from 1.25.1 and with `listen … http2` before
 *   (Debian 12 ships 1.22), so the form follows `nginxVersion` (`nginx -v`); unknown, the older
 *   form, which newer nginx still takes (with a deprecation warning).
 */
import path from 'node:path';
import { chmodSync, mkdirSync } from 'node:fs';
import { isIP } from 'node:net';

/** What `skylark edge-config` is given. */
export interface EdgeConfigOptions {
  /** The origin's HTTP base URL (`http(s)://host[:port]`, no path). */
  origin: string;
  /** Where the edge listens: `host:port` (`[v6]:port`). */
  listen: string;
  /** Directory for the cache, temp files, pid file and error log (made absolute). */
  cacheDir: string;
  /** The origin's edge log receiver (`SKYLARK_EDGE_LOG_HOST`:`SKYLARK_EDGE_LOG_PORT`), `host:port`; none = no log lines. */
  logTo?: string | undefined;
  /**
   * The origin's edge-log secret (`SKYLARK_EDGE_LOG_SECRET`, or the one derived from its data dir):
   * written into every log line sent to `logTo`. Required with `logTo`.
   */
  logSecret?: string | undefined;
  /**
   * CIDRs (or addresses) whose `X-Forwarded-For` the edge believes (nginx `realip`): a load
   * balancer or CDN in front of the edge. The client address it yields is what the origin gets
   * and what the log line carries.
   */
  trustForwardedFrom?: string[] | undefined;
  /** nginx worker user when started as root (default: nginx's own, `nobody`). */
  user?: string | undefined;
  /** Largest cache on disk (nginx size, e.g. `2g`). */
  cacheMaxSize?: string | undefined;
  /** Also write every request, with its cache status and upstream address, to this file. */
  accessLog?: string | undefined;
  /** TLS on `listen`: the certificate chain (PEM) and its private key; both or neither. */
  tlsCert?: string | undefined;
  tlsKey?: string | undefined;
  /** The nginx that runs the file (`1.22.1`): decides how HTTP/2 is turned on; unknown = before 1.25.1. */
  nginxVersion?: string | undefined;
}

/** Thrown for an option nginx could not take as given; the message names it. */
export class EdgeConfigError extends Error {}

/** Characters allowed in a path or name written into the config unquoted. */
const SAFE = /^[\w@%+=:,./-]+$/;

/** `host:port` → [host, port] (IPv6 in brackets). @throws EdgeConfigError */
function hostPort(s: string, what: string): { host: string; port: number } {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(s.trim());
  const port = m ? Number(m[2]) : NaN;
  if (!m || !(port > 0 && port < 65536)) throw new EdgeConfigError(`${what} must be host:port (got '${s}')`);
  return { host: m[1]!, port };
}

/** An absolute, config-safe path. @throws EdgeConfigError */
function safePath(p: string, what: string): string {
  const abs = path.resolve(p);
  if (!SAFE.test(abs)) throw new EdgeConfigError(`${what} may hold only letters, digits and @%+=:,./_- (got '${p}')`);
  return abs;
}

/** A CIDR or address as nginx's `set_real_ip_from` takes it. @throws EdgeConfigError */
function cidr(s: string): string {
  const [addr, len, ...rest] = s.trim().split('/');
  const family = isIP(addr ?? '');
  const max = family === 4 ? 32 : 128;
  if (!family || rest.length > 0 || (len !== undefined && !(/^\d{1,3}$/.test(len) && Number(len) <= max))) throw new EdgeConfigError(`--trust-forwarded-from must be an IP address or CIDR (got '${s}')`);
  return s.trim();
}

/** The options of `nginxEdgeConfig`, checked and resolved into what the config text writes. */
interface EdgeSettings {
  origin: URL;
  tls: boolean;
  /** The origin as nginx's `upstream` `server` takes it (`host:port`, IPv6 in brackets). */
  upstream: string;
  listen: { host: string; port: number };
  /** The absolute cache dir. */
  dir: string;
  logTo: { host: string; port: number } | null;
  trusted: string[];
  maxSize: string;
  accessLog: string | null;
  scheme: 'http' | 'https';
  /** The edge's own TLS (absolute paths) and whether its nginx takes `http2 on;` (≥ 1.25.1); null: plain HTTP. */
  edgeTls: { cert: string; key: string; http2Directive: boolean } | null;
}

/**
 * Checks `o` and resolves it into `EdgeSettings`, in the order the options are reported.
 * @throws EdgeConfigError naming the option that nginx could not take
 */
function edgeSettings(o: EdgeConfigOptions): EdgeSettings {
  let origin: URL;
  try {
    origin = new URL(o.origin);
  } catch {
    throw new EdgeConfigError(`--origin must be an http(s):// URL (got '${o.origin}')`);
  }
  if (!/^https?:$/.test(origin.protocol) || (origin.pathname !== '/' && origin.pathname !== '') || origin.search || origin.username) {
    throw new EdgeConfigError(`--origin must be http(s)://host[:port] without a path (got '${o.origin}')`);
  }
  const tls = origin.protocol === 'https:';
  const upstream = `${origin.hostname.includes(':') && !origin.hostname.startsWith('[') ? `[${origin.hostname}]` : origin.hostname}:${origin.port || (tls ? 443 : 80)}`;
  const listen = hostPort(o.listen, '--listen');
  const dir = safePath(o.cacheDir, '--cache-dir');
  const logTo = o.logTo ? hostPort(o.logTo, '--log-to') : null;
  if (logTo && !(o.logSecret && /^[A-Za-z0-9_-]{16,128}$/.test(o.logSecret))) {
    throw new EdgeConfigError('--log-to needs the origin\'s edge-log secret: run edge-config with the origin\'s --data-dir, or set SKYLARK_EDGE_LOG_SECRET as the origin has it (16-128 characters of A-Z a-z 0-9 _ -)');
  }
  const trusted = (o.trustForwardedFrom ?? []).map(cidr);
  if (o.user !== undefined && !/^[a-z_][a-z0-9_-]{0,31}$/i.test(o.user)) throw new EdgeConfigError(`--user must be a user name (got '${o.user}')`);
  const maxSize = o.cacheMaxSize ?? '2g';
  if (!/^\d{1,9}[kKmMgG]?$/.test(maxSize)) throw new EdgeConfigError(`--cache-max-size must be an nginx size such as 2g (got '${maxSize}')`);
  const accessLog = o.accessLog ? safePath(o.accessLog, '--access-log') : null;
  return { origin, tls, upstream, listen, dir, logTo, trusted, maxSize, accessLog, scheme: tls ? 'https' : 'http', edgeTls: edgeTls(o) };
}

/**
 * The edge's TLS settings of `o`, or null without `--tls-cert`/`--tls-key`.
 * @throws EdgeConfigError when only one of them is given, a path is not config-safe, or
 *   `--nginx-version` is not a version
 */
function edgeTls(o: EdgeConfigOptions): EdgeSettings['edgeTls'] {
  if (o.tlsCert === undefined && o.tlsKey === undefined) return null;
  if (!o.tlsCert || !o.tlsKey) throw new EdgeConfigError('--tls-cert and --tls-key go together');
  const v = o.nginxVersion === undefined ? null : /^(\d+)\.(\d+)\.(\d+)$/.exec(o.nginxVersion.trim());
  if (o.nginxVersion !== undefined && !v) throw new EdgeConfigError(`--nginx-version must be a version such as 1.22.1 (got '${o.nginxVersion}')`);
  const [major, minor, patch] = v ? v.slice(1).map(Number) : [0, 0, 0];
  const http2Directive = major! > 1 || (major === 1 && (minor! > 25 || (minor === 25 && patch! >= 1)));
  return { cert: safePath(o.tlsCert, '--tls-cert'), key: safePath(o.tlsKey, '--tls-key'), http2Directive };
}

/** The `listen` directive of the server block, and with TLS the certificate and HTTP/2 directives. */
function listenLines(s: EdgeSettings): string {
  const at = `${s.listen.host}:${s.listen.port}`;
  const t = s.edgeTls;
  if (!t) return `listen ${at} backlog=4096;`;
  return [
    t.http2Directive ? `listen ${at} ssl backlog=4096;` : `listen ${at} ssl http2 backlog=4096;`,
    ...(t.http2Directive ? ['http2 on;'] : []),
    '# HTTP/2 (ALPN h2) and HTTP/1.1 over TLS: Safari plays LL-HLS only over HTTP/2.',
    `ssl_certificate ${t.cert};`,
    `ssl_certificate_key ${t.key};`,
    'ssl_protocols TLSv1.2 TLSv1.3;',
    'ssl_session_cache shared:skylark_tls:10m;',
    'ssl_session_timeout 1d;',
    'ssl_session_tickets off;',
  ].join('\n        ');
}

/** Where Debian's nginx keeps its perl module (package `libnginx-mod-http-perl`). */
export const PERL_MODULE = '/usr/lib/nginx/modules/ngx_http_perl_module.so';

/** The main-context line that loads the perl module, when log lines are sent (their MACs are computed in perl). */
function logModule(s: EdgeSettings): string {
  return s.logTo ? `# The log lines' MACs are computed by nginx's perl module (Debian: apt-get install libnginx-mod-http-perl).\nload_module ${PERL_MODULE};\n` : '';
}

/**
 * `$skylark_edge_mac`: the hex HMAC-SHA-256 under `secret` of the fields the `skylark_edge` line
 * writes, joined by newlines after `skylark-edge-v2` (src/delivery/listeners/edge-log.ts
 * `edgeLineMac`). nginx evaluates it while writing the line, from the same variables, so `$msec`
 * is the same text in the line and in the MAC. `secret` matches `[A-Za-z0-9_-]` only, so it needs
 * no quoting inside perl's `q{}`.
 */
function lineMac(secret: string): string {
  return `    perl_require Digest/SHA.pm;
    perl_set $skylark_edge_mac 'sub {
        my $r = shift;
        my @f = map { my $v = $r->variable($_); defined $v ? $v : "" } qw(msec request_id status remote_addr uri arg_sid http_user_agent upstream_cache_status);
        return Digest::SHA::hmac_sha256_hex(join("\\n", "skylark-edge-v2", @f), q{${secret}});
    }';`;
}

/** The cache directives shared by the media object and media playlist locations (the lock, the token bypass). */
const CACHE_LOCK = [
  'proxy_cache skylark_edge;',
  'proxy_cache_lock on;',
  '# Long enough for a blocking reload the origin holds (≤ 3 target durations of ≤ 10 s):',
  '# one fetch per key even while the origin waits for the part.',
  'proxy_cache_lock_timeout 35s;',
  'proxy_cache_lock_age 35s;',
  'proxy_read_timeout 40s;',
  '# A listener that leaves does not end the fetch that fills the cache: nginx would drop it, and',
  '# every listener waiting on the lock would then go to the origin itself.',
  'proxy_ignore_client_abort on;',
  '# Token streams (?token=) are never cached: each request reaches the origin, which checks the token.',
  'proxy_cache_bypass $arg_token;',
  'proxy_no_cache $arg_token;',
];
/** `lines` indented by `n` spaces (empty lines stay empty), one per line. */
const ind = (lines: string[], n: number) => lines.map((l) => (l ? ' '.repeat(n) + l : l)).join('\n');

/**
 * The nginx.conf text for `o` (see the module comment).
 * @throws EdgeConfigError naming the option that nginx could not take
 */
export function nginxEdgeConfig(o: EdgeConfigOptions): string {
  const s = edgeSettings(o);
  const text = `${preamble(o, s)}
http {
${httpSettings(o, s)}
${serverBlock(s)}
}
`;
  return text.replace(/^[ \t]+$/gm, '').replace(/\n{3,}/g, '\n\n').replace(/\n*$/, '\n');
}

/** The head of the file: how it was made and is run, the main context (user, workers, pid, logs) and `events`. */
function preamble(o: EdgeConfigOptions, s: EdgeSettings): string {
  const { dir } = s;
  return `# Skylark edge (docs/edges.md in the Skylark repository), made by:
#   skylark edge-config --origin ${o.origin} --listen ${o.listen} --cache-dir ${o.cacheDir}${o.logTo ? ` --log-to ${o.logTo}` : ''}${s.trusted.map((c) => ` --trust-forwarded-from ${c}`).join('')}
# The folders it names under the cache dir were made by edge-config (unless --no-mkdir: then mkdir -p them).
# Run it with Debian's nginx:  nginx -c <this file>        (add -g 'daemon off;' to stay in the foreground)
# Reload after editing:        nginx -c <this file> -s reload
# The origin must list this edge's address in SKYLARK_TRUSTED_PROXIES (X-Forwarded-For and the log lines).
${logModule(s)}${o.user ? `user ${o.user};` : '# Started as root, the worker processes run as nginx\'s default user (nobody): it must be able to reach the cache dir.'}
worker_processes auto;
# Each listener holds one or two connections: above a few thousand per worker, raise the open-file
# limit (worker_rlimit_nofile, or the service manager's LimitNOFILE).
pid ${dir}/nginx.pid;
lock_file ${dir}/nginx.lock;
error_log ${dir}/error.log warn;

events {
    worker_connections 16384;
}
`;
}

/** The `http` context up to the `server` block: connections, temp paths, the cache, the log formats, realip and the upstream. */
function httpSettings(o: EdgeConfigOptions, s: EdgeSettings): string {
  const { dir, trusted } = s;
  return `    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65s;
    # LL-HLS players make several requests a second on one connection.
    keepalive_requests 1000000;
    server_tokens off;
    client_max_body_size 0;
    client_body_temp_path ${dir}/temp-body;
    proxy_temp_path ${dir}/temp-proxy;
    fastcgi_temp_path ${dir}/temp-fastcgi;
    uwsgi_temp_path ${dir}/temp-uwsgi;
    scgi_temp_path ${dir}/temp-scgi;

    # Objects by URI path, blocking-reload playlists by path + _HLS_msn + _HLS_part (see the locations).
    proxy_cache_path ${dir}/cache levels=1:2 keys_zone=skylark_edge:32m max_size=${s.maxSize} inactive=10m use_temp_path=off;

    # Media playlist requests are logged to the origin's edge log receiver (RFC 3164 over UDP): the
    # session id, the client's own address, its user agent, the path, the status, the time (s.ms).
    # The query is not sent: a listener token never travels in a log line. "m" authenticates the
    # line: an HMAC-SHA-256 of its fields, its time and its request id under the origin's edge-log
    # secret (keep this file private), so the origin counts no altered, stale (> 60 s) or replayed
    # line. Logged: every
    # request but the blocking reloads for parts other than a segment's first, i.e. one line per
    # listener per segment (a listener leaves after 3 target durations without one), not one per part.
    map $arg__HLS_part $skylark_edge_log {
        ""      1;
        "0"     1;
        default 0;
    }
${s.logTo ? lineMac(o.logSecret ?? '') : '    # (no --log-to: no skylark_edge log format)'}
    ${s.logTo ? '' : '# '}log_format skylark_edge escape=json '{"v":2,"t":$msec,"n":"$request_id","s":$status,"a":"$remote_addr","u":"$uri","sid":"$arg_sid","ua":"$http_user_agent","c":"$upstream_cache_status","m":"$skylark_edge_mac"}';
    # The access log file (--access-log) writes the path and, of the query, only _HLS_msn and
    # _HLS_part: never a listener token or a session id.
    map $arg__HLS_msn $skylark_log_query {
        ""      "";
        default "?_HLS_msn=$arg__HLS_msn&_HLS_part=$arg__HLS_part";
    }
    log_format skylark_edge_file '$msec $remote_addr "$request_method $uri$skylark_log_query $server_protocol" $status $body_bytes_sent cache=$upstream_cache_status rt=$request_time ustatus=$upstream_status urt=$upstream_response_time upstream=$upstream_addr';
${
  trusted.length
    ? `
    # The client address comes from X-Forwarded-For when the request comes from these (a load balancer or CDN in front):
${trusted.map((c) => `    set_real_ip_from ${c};`).join('\n')}
    real_ip_header X-Forwarded-For;
    real_ip_recursive on;
`
    : `
    # To believe X-Forwarded-For from a load balancer or CDN in front of this edge, run edge-config with
    # --trust-forwarded-from CIDR (nginx realip: set_real_ip_from, real_ip_header X-Forwarded-For).
`
}
    upstream skylark_origin {
        server ${s.upstream};
        keepalive 64;
        keepalive_requests 1000000;
        # Shorter than the origin's 10 s idle timeout: the edge closes an idle connection before the
        # origin can, so a request is never sent down a connection the origin is closing (nginx
        # would send it again on a new one).
        keepalive_timeout 5s;
    }
`;
}

/** The `server` block: the proxy headers and the four locations (media objects, catch-up, media playlists, everything else). */
function serverBlock(s: EdgeSettings): string {
  const { logTo, scheme } = s;
  const syslog = logTo
    ? `access_log syslog:server=${logTo.host}:${logTo.port},tag=skylark,nohostname skylark_edge if=$skylark_edge_log;`
    : '# (no --log-to: the origin counts only the listeners whose requests reach it)';
  const fileLog = s.accessLog ? `access_log ${s.accessLog} skylark_edge_file;` : '';
  return `    server {
        ${listenLines(s)}

        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host $host;
        # The client's own address (after realip): the origin trusts it from this edge (SKYLARK_TRUSTED_PROXIES).
        proxy_set_header X-Forwarded-For $remote_addr;
        proxy_set_header X-Forwarded-Proto $scheme;${s.tls ? `\n        proxy_ssl_server_name on;\n        proxy_ssl_name ${s.origin.hostname};` : ''}
        add_header X-Cache-Status $upstream_cache_status always;
        ${fileLog}

        # Segments, parts, init sections: the same URI for every listener, immutable.
        location ~ ^/hls/[^/]+/[^/]+/[^/]+\\.(?:m4s|ts|mp4)$ {
            proxy_pass ${scheme}://skylark_origin;
${ind(CACHE_LOCK, 12)}
            proxy_cache_key $uri;
            proxy_cache_use_stale updating;
        }

        # Catch-up (docs/behaviour.md §17): kept objects and archive playlists, immutable once in the
        # past (the origin's Cache-Control says which); the other catch-up playlists answer no-cache.
        location ~ ^/hls/[^/]+/(?:catchup|archive)/ {
            proxy_pass ${scheme}://skylark_origin;
${ind(CACHE_LOCK, 12)}
            proxy_cache_key $uri;
        }

        # Media playlists. A blocking reload (_HLS_msn, _HLS_part, and _HLS_skip: a delta update is
        # other bytes) is fetched once per key and shared by every listener asking for it; the
        # session id (sid) is not part of the key.
        location ~ ^/hls/[^/]+/[^/]+/index\\.m3u8$ {
            proxy_pass ${scheme}://skylark_origin;
${ind(CACHE_LOCK, 12)}
            proxy_cache_key $uri?_HLS_msn=$arg__HLS_msn&_HLS_part=$arg__HLS_part&_HLS_skip=$arg__HLS_skip;
            ${syslog}${fileLog ? `\n            ${fileLog}` : ''}
        }

        # Everything else: the multivariant playlist (a session id per listener), the API, progressive
        # listening, WHEP, feeds, episode audio, the dashboard: passed through, not cached, not buffered.
        location / {
            proxy_pass ${scheme}://skylark_origin;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
        }
    }`;
}

/**
 * The folders the config of `o` names (absolute): the cache dir itself, the cache and each temp
 * path under it, and the access log's folder.
 * @throws EdgeConfigError when a path is not config-safe
 */
export function edgeDirs(o: Pick<EdgeConfigOptions, 'cacheDir' | 'accessLog'>): string[] {
  const dir = safePath(o.cacheDir, '--cache-dir');
  const dirs = [dir, ...['cache', 'temp-body', 'temp-proxy', 'temp-fastcgi', 'temp-uwsgi', 'temp-scgi'].map((d) => path.join(dir, d))];
  if (o.accessLog) dirs.push(path.dirname(safePath(o.accessLog, '--access-log')));
  return [...new Set(dirs)];
}

/**
 * Creates the folders of `edgeDirs(o)` (parents too; existing ones are kept). A folder it creates
 * is made 0755 (umask aside) so that nginx's workers, which run as another user when nginx is
 * started as root, can reach the cache dir; nginx gives the cache and temp folders to its worker
 * user itself at start.
 * @throws EdgeConfigError naming the folder that could not be made (and `--no-mkdir`)
 */
export function makeEdgeDirs(o: Pick<EdgeConfigOptions, 'cacheDir' | 'accessLog'>): void {
  for (const d of edgeDirs(o)) {
    try {
      const first = mkdirSync(d, { recursive: true, mode: 0o755 });
      if (first !== undefined) chmodSync(d, 0o755);
    } catch (e) {
      throw new EdgeConfigError(`cannot create ${d} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): run edge-config where nginx will run, as a user who may create it, or pass --no-mkdir and create the folders yourself`);
    }
  }
}
