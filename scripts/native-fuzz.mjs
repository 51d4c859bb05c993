// Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for FUZZ_SECONDS (default
// 20) over its seed corpus, FUZZ_JOBS targets at a time (default: the number of cores). Used by
// `npm test`; needs clang and libclang-rt (`.ci/run` installs them), and skips with a message
// without them. Any finding fails the run and leaves its reproducer in the work corpus folder.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { cpus } from 'node:os';

const seconds = Number(process.env.FUZZ_SECONDS ?? 20);
const jobs = Math.max(1, Number(process.env.FUZZ_JOBS ?? cpus().length));
if (spawnSync('clang++', ['--version']).status !== 0) {
  console.log('fuzz: clang++ not found, fuzz targets skipped (apt-get install -y clang libclang-rt-14-dev)');
  process.exit(0);
}
const dir = '.build/native-fuzz';
const run = (cmd, args) => execFileSync(cmd, args, { stdio: 'inherit' });
run('cmake', ['-S', 'native', '-B', dir, '-DSKYLARK_FUZZ=ON', '-DCMAKE_CXX_COMPILER=clang++', '-DCMAKE_BUILD_TYPE=RelWithDebInfo']);
run('cmake', ['--build', dir, '-j', String(Math.max(1, cpus().length))]);

const targets = readdirSync('test/fuzz').filter((n) => /^fuzz_.*\.cc$/.test(n)).map((f) => f.replace(/\.cc$/, ''));
function fuzz(name) {
  const corpus = `test/fuzz/corpus/${name}`;
  const work = `${dir}/corpus-${name}`;
  mkdirSync(work, { recursive: true });
  const args = [work, ...(existsSync(corpus) ? [corpus] : []), `-max_total_time=${seconds}`, '-rss_limit_mb=1024', '-max_len=65536',
    '-print_final_stats=1', `-artifact_prefix=${work}/`];
  return new Promise((resolve) => {
    const p = spawn(`${dir}/${name}`, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let tail = '';
    p.stderr.on('data', (d) => (tail = (tail + d).slice(-4000)));
    p.on('exit', (code) => {
      const runs = /stat::number_of_executed_units:\s*(\d+)/.exec(tail)?.[1] ?? '?';
      console.log(`fuzz: ${name} ${seconds}s, ${runs} runs, ${code === 0 ? 'clean' : `FAILED (exit ${code})`}`);
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
