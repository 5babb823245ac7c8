import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['__test__/**/*.spec.ts'],
    // Each test file runs in its own child process: a hazard (heap bomb, runaway
    // built-in) can only ever take down that process, never the runner.
    pool: 'forks',
    // Three files at once: most of a file's time is spent waiting (child processes, hosts,
    // timers). Vitest's default, one less than the cores, ran one at a time on 2 cores; the
    // Node 26 suite took 319 s with two at once and 242 s with three. Specs never block a
    // worker on a child (support/spawn.ts runs them asynchronously): a worker blocked past
    // vitest's fixed 60 s RPC timeout fails the run ("Timeout calling onTaskUpdate").
    maxWorkers: 3,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
