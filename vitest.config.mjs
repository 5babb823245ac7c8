import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['__test__/**/*.spec.ts'],
    // Each test file runs in its own child process: a hazard (heap bomb, runaway
    // built-in) can only ever take down that process, never the runner.
    pool: 'forks',
    // Two files at once: most of a file's time is spent waiting (child processes, hosts,
    // timers). Vitest's default, one less than the cores, ran one at a time on 2 cores.
    // Three took the Node 26 suite from 319 s to 242 s, but under CI's load a worker
    // blocked in spawnSync past vitest's 60 s RPC timeout ("Timeout calling onTaskUpdate").
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
