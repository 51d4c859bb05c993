/**
 * vitest setup file (vitest.config.ts `setupFiles`): after every test, the answers that servers
 * started by `startInProcess` sent and that do not conform to their OpenAPI document fail that test,
 * listing each problem (operation, status, ajv's complaint, the body).
 */
import { afterEach } from 'vitest';
import { takeOpenApiProblems } from './platform.js';

afterEach(() => {
  const problems = takeOpenApiProblems();
  if (problems.length) throw new Error(`${problems.length} answer(s) do not conform to the OpenAPI document:\n${problems.join('\n')}`);
});
