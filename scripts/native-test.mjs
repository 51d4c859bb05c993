// Checks the native layout rules, then builds the C++ core with ASan+UBSan and runs its unit tests
// (ctest). Used by `npm test`.
//
// Layout (docs/native-api.md "Layout"): only addon.cc and native/binding/ include napi.h; native/io/
// (libuv sockets and read scheduling) includes no napi.h and no parser of the core but the RTMP
// session it drives, the HTTP request framing (and reload reading) of the HTTP front and the RTP receive
// (demultiplexing, jitter buffer) of the WHIP receive; native/core/ includes
// neither Node, libuv, sockets nor threads.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import path from 'node:path';

/** Every C++ file under `dir` (relative to the repository root). */
function sources(dir) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && /\.(cc|h)$/.test(e.name))
    .map((e) => path.join(e.parentPath ?? e.path, e.name));
}
const includes = (file) => [...readFileSync(file, 'utf8').matchAll(/^\s*#\s*include\s*[<"]([^>"]+)[>"]/gm)].map((m) => m[1]);
const rules = [
  { dir: 'native/core', forbid: /^(napi\.h|node_api\.h|node\.h|uv\.h|thread|mutex|condition_variable|sys\/socket\.h|netinet\/.*|arpa\/.*|io\/.*|binding\/.*)$/ },
  { dir: 'native/io', forbid: /^(napi\.h|node_api\.h|node\.h|binding\/.*|core\/(?!rtmp\/session\.h$|http\/framing\.h$|http\/reload\.h$|rtp\/receive\.h$|util\/).*)$/ },
];
const broken = [];
for (const { dir, forbid } of rules) {
  for (const file of sources(dir)) for (const inc of includes(file)) if (forbid.test(inc)) broken.push(`${file}: #include ${inc}`);
}
if (broken.length) {
  console.error(`native layout: these includes break the rules (scripts/native-test.mjs):\n  ${broken.join('\n  ')}`);
  process.exit(1);
}

const dir = '.build/native-test';
const run = (cmd, args) => execFileSync(cmd, args, { stdio: 'inherit' });
run('cmake', ['-S', 'native', '-B', dir, '-DSKYLARK_SANITIZE=ON', '-DCMAKE_BUILD_TYPE=Debug']);
run('cmake', ['--build', dir, '-j', String(Math.max(1, cpus().length))]);
run('ctest', ['--test-dir', dir, '--output-on-failure']);
