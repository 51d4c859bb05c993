/**
 * The HTTP library's loader (src/base/http/uws.ts, docs/decisions.md "uWebSockets.js builds and
 * Node.js lines"): it names the binary it really loaded (the object the HTTP front's hooks patch),
 * and a Node.js ABI that no build carries stops with a message naming what was found and what is
 * supported, not a bare dlopen error.
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { HTTP_LIBRARY_BUILD, HTTP_LIBRARY_OBJECT, uWS } from '../../../src/base/http/uws.js';
import { repoRoot } from '../../helpers/server.js';

describe('uWebSockets.js loader', () => {
  it('loads a build for this Node.js and names its binary by the path the process mapped', () => {
    expect(typeof uWS.App).toBe('function');
    expect(path.isAbsolute(HTTP_LIBRARY_OBJECT)).toBe(true);
    expect(path.basename(HTTP_LIBRARY_OBJECT)).toBe(`uws_${process.platform}_${process.arch}_${process.versions.modules}.node`);
    expect(existsSync(HTTP_LIBRARY_OBJECT)).toBe(true);
    if (process.platform === 'linux') expect(readFileSync('/proc/self/maps', 'utf8')).toContain(HTTP_LIBRARY_OBJECT);
    expect(HTTP_LIBRARY_BUILD).toMatch(/^uWebSockets\.js v20\.\S+ .*glibc ≥ 2\.\d+/);
  });

  it('stops with the Node.js, ABI and glibc found and the lines supported when no build carries the ABI', async () => {
    const script = "Object.defineProperty(process.versions, 'modules', { value: '999' }); await import('./src/base/http/uws.ts');";
    const run = promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: repoRoot });
    const err = (await run.then(
      () => null,
      (e: unknown) => e,
    )) as { code?: number; stderr?: string } | null;
    expect(err?.code).toBe(1);
    expect(err?.stderr).toContain(`has no build that loads on Node.js ${process.version} (ABI 999`);
    expect(err?.stderr).toContain('Supported: Node.js 20, 22 or 24 on glibc 2.38 or newer');
    expect(err?.stderr).toMatch(/uWebSockets\.js v20\.57\.0 .*: no uws_\w+_999\.node/);
    expect(err?.stderr).toMatch(/@trufflesuite\/uws-js-unofficial .*: no uws_\w+_999\.node/);
  });
});
