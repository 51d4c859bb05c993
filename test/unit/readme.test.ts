/**
 * The README and the docs stay true to the code and to the tree: the README's first lines give
 * exactly the two commands a fresh machine needs (install and run, test); docs/configuration.md
 * lists every setting of `ALL_ENV_NAMES` (src/base/config.ts) with its flag, a default and a
 * meaning; docs/cli.md names `accounts set-login`; and every relative link in README.md and
 * docs/*.md points at a file of the repository.
 */
import { describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ALL_ENV_NAMES } from '../../src/base/config.js';
import { repoRoot } from '../helpers/server.js';

const read = (rel: string): string => readFileSync(path.join(repoRoot, rel), 'utf8');
const readme = read('README.md');

/** Rows of the settings table of docs/configuration.md by variable: flag, default, meaning. */
function configRows(): Map<string, { flag: string; def: string; meaning: string }> {
  const rows = new Map<string, { flag: string; def: string; meaning: string }>();
  for (const line of read('docs/configuration.md').split('\n')) {
    const m = /^\| `(SKYLARK_[A-Z0-9_]+)` \| ([^|]+) \| ([^|]+) \| (.+) \|$/.exec(line);
    if (m) rows.set(m[1]!, { flag: m[2]!.trim(), def: m[3]!.trim(), meaning: m[4]!.trim() });
  }
  return rows;
}

/**
 * The relative link targets of a Markdown text: `[text](target)` and `![alt](target)`, outside
 * fenced code blocks, without a scheme (`https:`, `mailto:`) and without the `#fragment`.
 */
function relativeLinks(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, '');
  const targets: string[] = [];
  for (const m of prose.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    const target = m[1]!;
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) continue;
    targets.push(target.replace(/#.*$/, ''));
  }
  return targets;
}

describe('README.md', () => {
  it('starts with exactly two commands: install and run, and test', () => {
    const block = /^# Skylark\n\n```sh\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(block).toBeDefined();
    const commands = block!.trim().split('\n').map((l) => l.replace(/\s+#.*$/, '').trim());
    expect(commands).toEqual(['npm ci && npm start', 'npm test']);
  });

  it('stays a quick start and a map: at most 250 lines', () => {
    expect(readme.trimEnd().split('\n').length).toBeLessThanOrEqual(250);
  });
});

describe('docs/configuration.md and docs/cli.md', () => {
  it('lists every setting of ALL_ENV_NAMES in the Configuration table, with its flag, a default and a meaning', () => {
    const rows = configRows();
    const missing = Object.values(ALL_ENV_NAMES).filter((env) => !rows.has(env));
    expect(missing, 'settings missing from the docs/configuration.md table').toEqual([]);
    for (const [key, env] of Object.entries(ALL_ENV_NAMES)) {
      const row = rows.get(env)!;
      expect(row.flag, env).toBe(`\`--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}\``);
      expect(row.def, env).not.toBe('');
      expect(row.meaning.length, env).toBeGreaterThan(5);
    }
  });

  it('names accounts set-login in the CLI reference', () => {
    expect(read('docs/cli.md')).toMatch(/skylark accounts set-login --account ACCT --email E/);
  });
});

describe('links', () => {
  it('every relative link in README.md and docs/ points at a file of the repository', () => {
    const files = ['README.md', ...readdirSync(path.join(repoRoot, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
    const broken: string[] = [];
    for (const file of files) {
      for (const target of relativeLinks(read(file))) {
        if (target === '') continue;
        const resolved = path.resolve(path.dirname(path.join(repoRoot, file)), decodeURIComponent(target));
        if (!resolved.startsWith(repoRoot + path.sep) || !existsSync(resolved)) broken.push(`${file} → ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
