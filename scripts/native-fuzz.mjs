// Builds the libFuzzer targets with clang and runs each for a short, bounded time (FUZZ_SECONDS,
// default 20) over its seed corpus. Used by `npm test`; needs clang (`.ci/run` installs it).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { cpus } from 'node:os';

const seconds = Number(process.env.FUZZ_SECONDS ?? 20);
const clang = spawnSync('clang++', ['--version']);
if (clang.status !== 0) {
  console.log('fuzz: clang++ not found, fuzz targets skipped (apt-get install -y clang libclang-rt-14-dev)');
  process.exit(0);
}
const dir = '.build/native-fuzz';
const run = (cmd, args, env) => execFileSync(cmd, args, { stdio: 'inherit', env: { ...process.env, ...env } });
run('cmake', ['-S', 'native', '-B', dir, '-DSKYLARK_FUZZ=ON', '-DCMAKE_CXX_COMPILER=clang++', '-DCMAKE_BUILD_TYPE=RelWithDebInfo']);
run('cmake', ['--build', dir, '-j', String(Math.max(1, cpus().length))]);
for (const f of readdirSync('test/fuzz').filter((n) => /^fuzz_.*\.cc$/.test(n))) {
  const name = f.replace(/\.cc$/, '');
  const corpus = `test/fuzz/corpus/${name}`;
  const work = `${dir}/corpus-${name}`;
  mkdirSync(work, { recursive: true });
  const args = [work, ...(existsSync(corpus) ? [corpus] : []), `-max_total_time=${seconds}`, '-rss_limit_mb=1024', '-max_len=65536', '-print_final_stats=1'];
  console.log(`fuzz: ${name} for ${seconds}s`);
  run(`${dir}/${name}`, args);
}
console.log('fuzz: all targets ran clean');
