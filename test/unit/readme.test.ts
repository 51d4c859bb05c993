/**
 * The README stays true to the code: its first lines give exactly the two commands a fresh machine
 * needs (install and run, test), its Configuration table lists every setting of
 * `ALL_ENV_NAMES` (src/base/config.ts) with its flag, a default and a meaning, and its CLI
 * section names `accounts set-login`.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ALL_ENV_NAMES } from '../../src/base/config.js';
import { repoRoot } from '../helpers/server.js';

const readme = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');

/** The body of the `## <title>` section. */
function section(title: string): string {
  const start = readme.indexOf(`\n## ${title}\n`);
  if (start < 0) throw new Error(`README.md has no "## ${title}" section`);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
}

/** Rows of the Configuration table by variable: flag, default, meaning. */
function configRows(): Map<string, { flag: string; def: string; meaning: string }> {
  const rows = new Map<string, { flag: string; def: string; meaning: string }>();
  for (const line of section('Configuration').split('\n')) {
    const m = /^\| `(SKYLARK_[A-Z0-9_]+)` \| ([^|]+) \| ([^|]+) \| (.+) \|$/.exec(line);
    if (m) rows.set(m[1]!, { flag: m[2]!.trim(), def: m[3]!.trim(), meaning: m[4]!.trim() });
  }
  return rows;
}

describe('README.md', () => {
  it('starts with exactly two commands: install and run, and test', () => {
    const block = /^# Skylark\n\n```sh\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(block).toBeDefined();
    const commands = block!.trim().split('\n').map((l) => l.replace(/\s+#.*$/, '').trim());
    expect(commands).toEqual(['npm ci && npm start', 'npm test']);
  });

  it('lists every setting of ALL_ENV_NAMES in the Configuration table, with its flag, a default and a meaning', () => {
    const rows = configRows();
    const missing = Object.values(ALL_ENV_NAMES).filter((env) => !rows.has(env));
    expect(missing, 'settings missing from the README Configuration table').toEqual([]);
    for (const [key, env] of Object.entries(ALL_ENV_NAMES)) {
      const row = rows.get(env)!;
      expect(row.flag, env).toBe(`\`--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}\``);
      expect(row.def, env).not.toBe('');
      expect(row.meaning.length, env).toBeGreaterThan(5);
    }
  });

  it('names accounts set-login in its CLI section', () => {
    expect(section('CLI')).toMatch(/skylark accounts set-login --account ACCT --email E/);
  });
});
