/**
 * The configuration file's values (src/base/config-file.ts, docs/configuration.md "Configuration
 * file"): each TOML type becomes what the flag would carry and is judged as the flag; lists take
 * arrays; dates, tables and arrays elsewhere are refused with the line and the key; the file comes
 * after flags and environment variables.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../../src/base/config.js';
import { flagsWithConfigFile, readConfigFile } from '../../../src/base/config-file.js';
import { tempDir } from '../../helpers/server.js';

const dir = tempDir('skylark-config-file-unit-');
afterAll(dir.cleanup);
let n = 0;
function file(text: string): string {
  const f = path.join(dir.dir, `c${n++}.toml`);
  writeFileSync(f, text);
  return f;
}
const settings = (text: string, env: NodeJS.ProcessEnv = {}, flags: Record<string, string> = {}) => loadConfig(env, flagsWithConfigFile(readConfigFile(file(text)), env, flags));
const refusal = (text: string) => {
  try {
    readConfigFile(file(text));
  } catch (e) {
    if (e instanceof ConfigError) return e.message;
    throw e;
  }
  throw new Error('accepted');
};

describe('readConfigFile', () => {
  it('turns integers, strings, booleans and list arrays into the flags\' values', () => {
    const c = settings(`http-port = 9000\nrtmp-port = "1936"\nabr-ladder = false\nhttp10 = 1\ntrusted-proxies = ["10.0.0.0/8", "::1/128"]\nmin-free-disk-bytes = 1_000_000\ndata-dir = "/srv/skylark"\n`);
    expect(c.httpPort).toBe(9000);
    expect(c.rtmpPort).toBe(1936);
    expect(c.abrLadder).toBe(false);
    expect(c.http10).toBe(true);
    expect(c.trustedProxies).toEqual(['10.0.0.0/8', '::1/128']);
    expect(c.limits.minFreeDiskBytes).toBe(1_000_000);
    expect(c.dataDir).toBe('/srv/skylark');
  });

  it('comes after flags and environment variables; an empty variable is unset', () => {
    expect(settings('http-port = 9000\n', { SKYLARK_HTTP_PORT: '9001' }).httpPort).toBe(9001);
    expect(settings('http-port = 9000\n', { SKYLARK_HTTP_PORT: '9001' }, { 'http-port': '9002' }).httpPort).toBe(9002);
    expect(settings('http-port = 9000\n', { SKYLARK_HTTP_PORT: '' }).httpPort).toBe(9000);
  });

  it('refuses what no flag could carry, with the line and the key', () => {
    expect(refusal('\nhttp-port = 1.5\n')).toMatch(/c\d+\.toml:2: invalid http-port: /);
    expect(refusal('http-port = true\n')).toMatch(/:1: invalid http-port: /);
    expect(refusal('log-level = 1979-05-27\n')).toMatch(/:1: invalid log-level: a date or time is not a value of any setting$/);
    expect(refusal('http-port = { a = 1 }\n')).toMatch(/:1: invalid http-port: takes one value, not a table$/);
    expect(refusal('trusted-proxies = ["10.0.0.0/8,1.2.3.4/32"]\n')).toMatch(/:1: invalid trusted-proxies: the array may hold only strings without commas$/);
    expect(refusal('http.port = 8080\n')).toMatch(/:1: unknown key 'http' \(settings are top-level keys/);
    expect(refusal('HTTP_PORT = 8080\n')).toMatch(/:1: unknown key 'HTTP_PORT' \(did you mean http-port\?\)$/);
    expect(refusal('config = "/etc/other.toml"\n')).toMatch(/:1: unknown key 'config'/);
    expect(refusal('http-port = 8080\nhttp-port = 8081\n')).toMatch(/:2:1: not valid TOML: /);
  });
});
