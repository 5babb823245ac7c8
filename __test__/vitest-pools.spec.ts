// vitest runs test files in worker threads by default (`threads`, `vmThreads`) or in
// child processes (`forks`). A test file whose thread-mode runs got stuck in built-ins
// that ignore termination (quarantined threads that outlive the file's worker) must not
// change the runner's exit status: 0 when its tests pass, vitest's 1 when one fails.
// Regression: with `threads` and `vmThreads` the runner ended with SIGSEGV (139) or
// SIGTRAP (133) after "4 passed", on Node 20, 22, 24 and 26.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');
const project = path.join(__dirname, 'support', 'vitest-stuck');
const vitest = path.join(root, 'node_modules', 'vitest', 'vitest.mjs');

async function runVitest(pool: string, fail: boolean) {
  // The child is a runner of its own: none of this runner's worker variables.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(VITEST|TINYPOOL)/.test(k)));
  const r = await runChild(process.execPath, [vitest, 'run', '--root', project, `--pool=${pool}`], {
    timeout: 120_000,
    env: { ...env, NO_COLOR: '1', FORCE_COLOR: '0', ISOLET_FIXTURE_FAIL: fail ? '1' : '0' },
  });
  return { status: r.status, signal: r.signal, out: `${r.stdout}\n${r.stderr}` };
}

describe('vitest pools with stuck thread-mode runs, judged by the runner\'s exit status', () => {
  for (const pool of ['threads', 'vmThreads', 'forks']) {
    it(`--pool=${pool}: 0 when the tests pass, 1 when one fails`, async () => {
      const passing = await runVitest(pool, false);
      expect(passing.signal, passing.out).toBeNull();
      expect(passing.status, passing.out).toBe(0);
      expect(passing.out).toMatch(/Tests\s+4 passed \(4\)/);

      const failing = await runVitest(pool, true);
      expect(failing.signal, failing.out).toBeNull();
      expect(failing.status, failing.out).toBe(1);
      expect(failing.out).toMatch(/Tests\s+1 failed \| 4 passed \(5\)/);
    }, 240_000);
  }
});
