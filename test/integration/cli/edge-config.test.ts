/**
 * `skylark edge-config` (docs/behaviour.md §12): the nginx.conf it prints caches media objects by path and
 * blocking reloads by path + `_HLS_msn` + `_HLS_part` (never the session id) with request
 * collapsing, never caches token streams, passes everything else through, adds `X-Cache-Status`,
 * keeps upstream connections alive and sends its media playlist log lines to `--log-to`; every
 * path nginx writes is under the cache dir; bad options are refused with a message naming them;
 * and Debian's nginx accepts the file as is (`nginx -t -c FILE`, when nginx is installed).
 */
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { EdgeConfigError, nginxEdgeConfig } from '../../../src/cli/edge-config.js';
import { main } from '../../../src/cli/main.js';
import { tempDir } from '../../helpers/server.js';
import { nginxBinary } from '../../../bench/lib/nginx-edges.js';
import { edgeLogSecretOf } from '../../../src/delivery/listeners/edge-log.js';
import { loadNodeSecret } from '../../../src/base/auth/secrets.js';

const base = { origin: 'http://10.0.0.5:8080', listen: '0.0.0.0:80', cacheDir: '/var/cache/skylark-edge', logTo: '10.0.0.5:5514', logSecret: 'edge-log-secret-0123456789' };

/** The body of the location whose regex starts with `prefix`. */
function location(conf: string, prefix: string): string {
  const start = conf.indexOf(`location ${prefix}`);
  expect(start, prefix).toBeGreaterThan(0);
  return conf.slice(start, conf.indexOf('\n        }', start));
}

describe('skylark edge-config', () => {
  it('caches objects by path and blocking reloads by path + _HLS_msn + _HLS_part, collapsing concurrent misses', () => {
    const conf = nginxEdgeConfig(base);
    const objects = location(conf, '~ ^/hls/[^/]+/[^/]+/[^/]+\\.(?:m4s|ts|mp4)$');
    expect(objects).toContain('proxy_cache_key $uri;');
    expect(objects).toContain('proxy_cache_lock on;');
    expect(objects).toContain('proxy_cache_use_stale updating;');
    const playlists = location(conf, '~ ^/hls/[^/]+/[^/]+/index\\.m3u8$');
    expect(playlists).toContain('proxy_cache_key $uri?_HLS_msn=$arg__HLS_msn&_HLS_part=$arg__HLS_part&_HLS_skip=$arg__HLS_skip;');
    expect(playlists).not.toMatch(/proxy_cache_key[^\n]*sid/);
    expect(playlists).toContain('proxy_cache_lock on;');
    expect(playlists).toContain('access_log syslog:server=10.0.0.5:5514,tag=skylark,nohostname skylark_edge if=$skylark_edge_log;');
    // One line per listener per segment: every request but the reloads for a segment's later parts.
    expect(conf).toMatch(/map \$arg__HLS_part \$skylark_edge_log \{\n\s+""\s+1;\n\s+"0"\s+1;\n\s+default 0;\n\s+\}/);
    for (const l of [objects, playlists]) {
      // A listener leaving does not abandon the fetch that fills the cache (test/integration/delivery/edges.test.ts).
      expect(l).toContain('proxy_ignore_client_abort on;');
      expect(l).toContain('proxy_cache_bypass $arg_token;');
      expect(l).toContain('proxy_no_cache $arg_token;');
    }
    const rest = location(conf, '/ {');
    expect(rest).not.toContain('proxy_cache ');
    expect(rest).toContain('proxy_buffering off;');
    // The log line: sid, the client address, user agent, path, status, time; no query (no token).
    // Each line carries its own MAC (nginx's perl module), never the secret itself.
    expect(conf).toMatch(/log_format skylark_edge escape=json '\{"v":2,"t":\$msec,"n":"\$request_id","s":\$status,"a":"\$remote_addr","u":"\$uri","sid":"\$arg_sid","ua":"\$http_user_agent","c":"\$upstream_cache_status","m":"\$skylark_edge_mac"\}'/);
    expect(conf).toContain('load_module /usr/lib/nginx/modules/ngx_http_perl_module.so;');
    expect(conf).toMatch(/perl_set \$skylark_edge_mac 'sub \{[^']*hmac_sha256_hex\(join\("\\n", "skylark-edge-v2", @f\), q\{edge-log-secret-0123456789\}\)/);
    expect(conf.match(/edge-log-secret-0123456789/g)).toHaveLength(1);
    expect(conf).not.toContain('$request_uri');
    expect(conf).toContain('add_header X-Cache-Status $upstream_cache_status always;');
    expect(conf).toMatch(/upstream skylark_origin \{\n\s+server 10\.0\.0\.5:8080;\n\s+keepalive \d+;/);
    expect(conf).toContain('proxy_set_header Connection "";');
    expect(conf).toContain('proxy_set_header X-Forwarded-For $remote_addr;');
    expect(conf).not.toMatch(/^\s*set_real_ip_from/m);
    expect(conf).not.toMatch(/^\s*daemon /m); // the operator chooses: nginx -c FILE [-g 'daemon off;']
  });

  it('keeps everything nginx writes under the cache dir', () => {
    const conf = nginxEdgeConfig(base);
    const paths = [...conf.matchAll(/^\s*(?:pid|lock_file|error_log|[a-z_]+_temp_path|proxy_cache_path) (\S+)/gm)].map((m) => m[1]!);
    expect(paths.length).toBe(9);
    for (const p of paths) expect(p.startsWith('/var/cache/skylark-edge/')).toBe(true);
  });

  it('trusts X-Forwarded-For only from --trust-forwarded-from, and logs nothing without --log-to', () => {
    const conf = nginxEdgeConfig({ ...base, logTo: undefined, trustForwardedFrom: ['10.1.0.0/16', '2001:db8::/32'] });
    expect(conf).toContain('set_real_ip_from 10.1.0.0/16;\n    set_real_ip_from 2001:db8::/32;\n    real_ip_header X-Forwarded-For;\n    real_ip_recursive on;');
    expect(conf).not.toContain('syslog:');
  });

  it('refuses options nginx could not take', () => {
    const bad: Array<[Partial<typeof base> & Record<string, unknown>, RegExp]> = [
      [{ origin: 'ftp://x' }, /--origin/],
      [{ origin: 'http://x:8080/v2' }, /without a path/],
      [{ listen: 'nohost' }, /--listen/],
      [{ listen: '1.2.3.4:70000' }, /--listen/],
      [{ cacheDir: '/tmp/a b' }, /--cache-dir/],
      [{ cacheDir: '/tmp/x;evil' }, /--cache-dir/],
      [{ logTo: '10.0.0.5' }, /--log-to/],
      [{ trustForwardedFrom: ['10.0.0.0/33'] }, /--trust-forwarded-from/],
      [{ user: 'a;b' }, /--user/],
      [{ logSecret: undefined }, /edge-log secret/],
      [{ logSecret: "x'; evil" }, /edge-log secret/],
    ];
    for (const [o] of bad) expect(() => nginxEdgeConfig({ ...base, ...o } as never), JSON.stringify(o)).toThrow(EdgeConfigError);
    for (const [o, msg] of bad) expect(() => nginxEdgeConfig({ ...base, ...o } as never)).toThrow(msg);
  });

  it('is printed by the CLI; a missing option exits 2', async () => {
    const { dir, cleanup } = tempDir('skylark-edge-cli-');
    const cacheDir = path.join(dir, 'edge');
    const out: string[] = [];
    const err: string[] = [];
    const w = process.stdout.write.bind(process.stdout);
    const e = process.stderr.write.bind(process.stderr);
    process.stdout.write = ((s: string) => (out.push(String(s)), true)) as typeof process.stdout.write;
    process.stderr.write = ((s: string) => (err.push(String(s)), true)) as typeof process.stderr.write;
    try {
      expect(await main(['edge-config', '--origin', base.origin, '--listen', base.listen, '--cache-dir', cacheDir, '--log-to', base.logTo, '--data-dir', dir])).toBe(0);
      expect(await main(['edge-config', '--origin', base.origin, '--listen', base.listen])).toBe(2);
    } finally {
      process.stdout.write = w;
      process.stderr.write = e;
    }
    try {
      // The secret derived from the node secret it made in the data dir (as `serve` would).
      expect(out.join('')).toBe(nginxEdgeConfig({ ...base, cacheDir, logSecret: edgeLogSecretOf(loadNodeSecret(dir)) }));
      expect(err.join('')).toMatch(/edge-config needs --cache-dir/);
    } finally {
      cleanup();
    }
  });

  it.skipIf(!nginxBinary())("is accepted by Debian's nginx as is (nginx -t -c FILE)", () => {
    const { dir, cleanup } = tempDir('skylark-edge-conf-');
    try {
      chmodSync(dir, 0o755);
      const file = path.join(dir, 'nginx.conf');
      writeFileSync(file, nginxEdgeConfig({ ...base, listen: '127.0.0.1:1', cacheDir: dir, trustForwardedFrom: ['127.0.0.1'] }));
      const r = spawnSync(nginxBinary()!, ['-t', '-c', file], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/test is successful/);
    } finally {
      cleanup();
    }
  });
});
