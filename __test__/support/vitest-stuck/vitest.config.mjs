// A small project whose tests leave thread-mode runs stuck in built-ins that ignore
// termination, for __test__/worker-exit.spec.ts: vitest runs it in a child node with
// each pool (threads, vmThreads, forks) and the status is judged from outside.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['*.test.mjs'],
    testTimeout: 30_000,
  },
});
