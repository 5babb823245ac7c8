import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['__test__/**/*.spec.ts'],
    // Each test file runs in its own child process: a hazard (heap bomb, runaway
    // built-in) can only ever take down that process, never the runner.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
