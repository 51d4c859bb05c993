import { configDefaults, defineConfig } from 'vitest/config';

// Two projects, every test file in exactly one: `unit` (test/unit/: pure, no process spawned and no
// socket opened; `npm run check` runs it alone) and `integration` (every other test file: real
// servers, FFmpeg, sockets, browsers).
export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default'],
    projects: [
      {
        extends: true,
        // One module graph per worker: pure tests share nothing but imports, and importing the
        // planes once per worker instead of once per file is most of the project's time.
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'], isolate: false },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, 'test/unit/**'],
          // Answers of servers started by startInProcess that break the OpenAPI document fail the test.
          setupFiles: ['test/helpers/openapi-setup.ts'],
        },
      },
    ],
  },
});
