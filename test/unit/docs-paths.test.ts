/**
 * Every repository path the documents name exists: each `src/…`, `native/…`, `test/…` and
 * `scripts/…` path in README.md and docs/ (and docs/bench/) names a file or folder of the tree. A
 * path under a git-ignored folder (test artifacts) is not checked; `{a,b}` lists are expanded; a
 * test named without its `.test.ts` counts.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const PATH = /(?<![\w./@-])((?:src|native|test|scripts)\/[\w./{},-]*[\w}])/g;

const ignored = readFileSync(path.join(root, '.gitignore'), 'utf8')
  .split('\n')
  .map((l) => l.trim().replace(/^\//, ''))
  .filter((l) => l && !l.startsWith('#') && !l.startsWith('!') && !l.includes('*'));

/** `a/{b,c}/d` → `a/b/d`, `a/c/d`. */
function expand(p: string): string[] {
  const m = /^(.*?)\{([^{}]*)\}(.*)$/.exec(p);
  return m ? m[2]!.split(',').flatMap((alt) => expand(m[1] + alt + m[3])) : [p];
}

function exists(p: string): boolean {
  const clean = p.replace(/[.,:;]+$/, '');
  if (ignored.some((i) => clean.startsWith(i.replace(/\/$/, '')))) return true;
  return [clean, `${clean}.test.ts`].some((c) => existsSync(path.join(root, c)));
}

const documents = ['README.md', ...readdirSync(path.join(root, 'docs'), { recursive: true }).map((f) => path.join('docs', String(f)))].filter((f) =>
  f.endsWith('.md'),
);

describe('paths named in the documents', () => {
  it.each(documents)('%s names only paths that exist', (doc) => {
    const missing: string[] = [];
    readFileSync(path.join(root, doc), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        for (const m of line.matchAll(PATH)) for (const p of expand(m[1]!)) if (!exists(p)) missing.push(`${doc}:${i + 1}: ${p}`);
      });
    expect(missing).toEqual([]);
  });
});
