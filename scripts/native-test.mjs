// Builds the C++ core with ASan+UBSan and runs its unit tests (ctest). Used by `npm test`.
import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';

const dir = '.build/native-test';
const run = (cmd, args) => execFileSync(cmd, args, { stdio: 'inherit' });
run('cmake', ['-S', 'native', '-B', dir, '-DSKYLARK_SANITIZE=ON', '-DCMAKE_BUILD_TYPE=Debug']);
run('cmake', ['--build', dir, '-j', String(Math.max(1, cpus().length))]);
run('ctest', ['--test-dir', dir, '--output-on-failure']);
