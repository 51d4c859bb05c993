// Builds the libFuzzer targets (test/fuzz/fuzz_*.cc) with clang (ASan + UBSan) and runs each one.
// Needs clang and libclang-rt (`.ci/run` installs them); skips with a message without them. Any
// finding fails the run and leaves its reproducer in the target's artifact folder.
//
//   node scripts/native-fuzz.mjs                 the short run of `npm test` and CI: FUZZ_SECONDS
//                                                (default 20) per target, FUZZ_JOBS at a time
//                                                (default: the number of cores), over the seed
//                                                corpus, with a scratch corpus in .build/
//   npm run fuzz -- --minutes N [--only a,b]     the long run: N minutes per target, one target at
//                                                a time (FUZZ_JOBS to change), each with a
//                                                persistent corpus outside the repository:
//                                                $SKYLARK_FUZZ_CORPUS_DIR/<target> (default
//                                                ~/.cache/skylark-fuzz/<target>), grown from the
//                                                seeds (test/fuzz/corpus/<target>, made from the
//                                                recorded fixtures by test/fuzz/make_corpus.mjs)
//                                                and kept for the next run; reproducers go to
//                                                <corpus dir>/<target>-artifacts/.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { cpus, homedir } from 'node:os';
import path from 'node:path';

function usage(message) {
  console.error(`fuzz: ${message}\nusage: node scripts/native-fuzz.mjs [--minutes N] [--only target[,target...]]`);
  process.exit(2);
}
const argv = process.argv.slice(2);
let minutes = null;
let only = null;
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--minutes') {
    minutes = Number(argv[++i]);
    if (!(minutes > 0)) usage('--minutes needs a positive number');
  } else if (argv[i] === '--only') {
    only = (argv[++i] ?? '').split(',').filter(Boolean);
    if (only.length === 0) usage('--only needs target names');
  } else {
    usage(`unknown argument ${argv[i]}`);
  }
}
const long = minutes !== null;
const seconds = long ? Math.round(minutes * 60) : Number(process.env.FUZZ_SECONDS ?? 20);
const jobs = Math.max(1, Number(process.env.FUZZ_JOBS ?? (long ? 1 : cpus().length)));
const corpusRoot = process.env.SKYLARK_FUZZ_CORPUS_DIR ?? path.join(homedir(), '.cache', 'skylark-fuzz');

if (spawnSync('clang++', ['--version']).status !== 0) {
  console.log('fuzz: clang++ not found, fuzz targets skipped (apt-get install -y clang libclang-rt-14-dev)');
  process.exit(0);
}
const dir = '.build/native-fuzz';
const run = (cmd, args) => execFileSync(cmd, args, { stdio: 'inherit' });
run('cmake', ['-S', 'native', '-B', dir, '-DSKYLARK_FUZZ=ON', '-DCMAKE_C_COMPILER=clang', '-DCMAKE_CXX_COMPILER=clang++', '-DCMAKE_BUILD_TYPE=RelWithDebInfo']);
run('cmake', ['--build', dir, '-j', String(Math.max(1, long ? jobs : cpus().length))]);

let targets = readdirSync('test/fuzz').filter((n) => /^fuzz_.*\.cc$/.test(n)).map((f) => f.replace(/\.cc$/, ''));
if (only) {
  const unknown = only.filter((t) => !targets.includes(t));
  if (unknown.length) usage(`no such target: ${unknown.join(', ')} (targets: ${targets.join(', ')})`);
  targets = targets.filter((t) => only.includes(t));
}

/** The corpus libFuzzer writes to, the seed folder it also reads, and where findings go. */
function folders(name) {
  const seeds = `test/fuzz/corpus/${name}`;
  if (long) return { work: path.join(corpusRoot, name), artifacts: path.join(corpusRoot, `${name}-artifacts`), seeds };
  return { work: `${dir}/corpus-${name}`, artifacts: `${dir}/corpus-${name}`, seeds };
}

function fuzz(name) {
  const { work, artifacts, seeds } = folders(name);
  mkdirSync(work, { recursive: true });
  mkdirSync(artifacts, { recursive: true });
  const before = readdirSync(work).length;
  const args = [work, ...(existsSync(seeds) ? [seeds] : []), `-max_total_time=${seconds}`, '-rss_limit_mb=1024', '-max_len=65536',
    '-print_final_stats=1', `-artifact_prefix=${artifacts}/`];
  return new Promise((resolve) => {
    const p = spawn(`${dir}/${name}`, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let tail = '';
    p.stderr.on('data', (d) => (tail = (tail + d).slice(-4000)));
    p.on('exit', (code) => {
      const runs = /stat::number_of_executed_units:\s*(\d+)/.exec(tail)?.[1] ?? '?';
      const corpus = long ? `, corpus ${before} → ${readdirSync(work).length} in ${work}` : '';
      console.log(`fuzz: ${name} ${seconds}s, ${runs} runs${corpus}, ${code === 0 ? 'clean' : `FAILED (exit ${code}; reproducer in ${artifacts}/)`}`);
      if (code !== 0) console.log(tail);
      resolve(code === 0);
    });
  });
}
const queue = [...targets];
let ok = true;
await Promise.all(Array.from({ length: Math.min(jobs, queue.length) }, async () => {
  while (queue.length) if (!(await fuzz(queue.shift()))) ok = false;
}));
if (!ok) {
  console.log('fuzz: a target found a problem');
  process.exit(1);
}
console.log(`fuzz: all ${targets.length} targets ran clean`);
