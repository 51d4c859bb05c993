#!/usr/bin/env node
/**
 * Scans log files for real secrets: `node scripts/scan-secrets.mjs DIR_OR_FILE…`. CI runs it on the
 * test servers' logs (SKYLARK_TEST_LOG_DIR, see test/helpers/server.ts) after `npm test`; the
 * server's logger redacts secrets (src/base/logger.ts), so a match is a secret that got past it.
 *
 * A secret is a known prefix followed by its random base62 part at (nearly) full length, with no
 * letter or digit on either side: stream keys `sk_<region code>_` + 40, API keys `svc_sk_`,
 * `svc_pk_`, `svc_pub_` + 32, webhook signing secrets `whsec_` + 32, OAuth refresh tokens `rt_` + 43,
 * OAuth client secrets `cs_` + 40, and JWTs (OAuth access tokens, listener tokens). Field names
 * such as `rt_count` and redacted forms such as `svc_sk_…REDACTED` do not match.
 *
 * Prints `file:line: <kind> <prefix>…(<n> characters)` per finding — never the secret — and exits
 * 0 when clean, 1 when a secret was found, 2 on a usage error or when there was no file to scan
 * (a log directory left empty means the logs were not written where the scan looks).
 */
import { createReadStream, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

const EDGE_BEFORE = '(?<![A-Za-z0-9])';
const EDGE_AFTER = '(?![A-Za-z0-9])';

/** The secret shapes: `kind`, the kept `prefix` (group 1) and the random part (group 2). */
export const SECRET_SHAPES = [
  { kind: 'stream key', re: /(sk_[a-z]{2,6}[0-9]{1,2}_)([A-Za-z0-9]{32,})/ },
  { kind: 'API key', re: /(svc_(?:sk|pk|pub)_)([A-Za-z0-9]{24,})/ },
  { kind: 'webhook signing secret', re: /(whsec_)([A-Za-z0-9]{24,})/ },
  { kind: 'OAuth refresh token', re: /(rt_)([A-Za-z0-9]{32,})/ },
  { kind: 'OAuth client secret', re: /(cs_)([A-Za-z0-9]{32,})/ },
  { kind: 'JWT', re: /(eyJ)([A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{20,})/ },
].map((s) => ({ kind: s.kind, re: new RegExp(EDGE_BEFORE + s.re.source + EDGE_AFTER, 'g') }));

/** Every shape in one expression, for the one test a clean line costs. */
const ANY = new RegExp(SECRET_SHAPES.map((s) => `(?:${s.re.source})`).join('|'));

/**
 * The secrets in `text`: kind, offset, the public prefix and the random part's length (never the
 * random part itself).
 * @returns {{ kind: string, index: number, prefix: string, length: number }[]}
 */
export function findSecrets(text) {
  if (!ANY.test(text)) return [];
  const found = [];
  for (const { kind, re } of SECRET_SHAPES) {
    re.lastIndex = 0;
    for (const m of text.matchAll(re)) found.push({ kind, index: m.index, prefix: m[1], length: m[2].length });
  }
  return found.sort((a, b) => a.index - b.index);
}

/** Regular files under `p` (a file or a directory, recursively), sorted. */
function filesUnder(p) {
  const st = statSync(p);
  if (st.isFile()) return [p];
  if (!st.isDirectory()) return [];
  return readdirSync(p)
    .sort()
    .flatMap((name) => filesUnder(path.join(p, name)));
}

/**
 * Scans every file under `paths`, line by line (files of any size).
 * @returns {Promise<{ files: number, findings: { file: string, line: number, kind: string, prefix: string, length: number }[] }>}
 * @throws Error (ENOENT) when a path does not exist
 */
export async function scan(paths) {
  const files = paths.flatMap(filesUnder);
  const findings = [];
  for (const file of files) {
    const lines = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
    let n = 0;
    for await (const line of lines) {
      n++;
      for (const f of findSecrets(line)) findings.push({ file, line: n, kind: f.kind, prefix: f.prefix, length: f.length });
    }
  }
  return { files: files.length, findings };
}

async function main(argv) {
  if (argv.length === 0) {
    process.stderr.write('usage: node scripts/scan-secrets.mjs DIR_OR_FILE…\n');
    return 2;
  }
  let result;
  try {
    result = await scan(argv);
  } catch (e) {
    process.stderr.write(`scan-secrets: ${e.message}\n`);
    return 2;
  }
  if (result.files === 0) {
    process.stderr.write(`scan-secrets: no file to scan under ${argv.join(', ')}\n`);
    return 2;
  }
  for (const f of result.findings) process.stdout.write(`${f.file}:${f.line}: ${f.kind} ${f.prefix}…(${f.length} characters)\n`);
  if (result.findings.length > 0) {
    process.stderr.write(`scan-secrets: ${result.findings.length} secret(s) in ${new Set(result.findings.map((f) => f.file)).size} of ${result.files} file(s)\n`);
    return 1;
  }
  process.stdout.write(`scan-secrets: no secret in ${result.files} file(s)\n`);
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  process.exitCode = await main(process.argv.slice(2));
}
