// What a call costs Node's thread, for the specs that prepare large programs off it
// (parse-offload, typescript-offload): the event loop's largest delay while it runs, and
// the thread's own CPU time in it.
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { expect } from 'vitest';

/**
 * Preparing a 4 MB program on Node's thread cost it 0.85-2.2 s of CPU and held the loop
 * 1-9 s (bench/probes/parse-lag.js). Off it, the thread spends 15-80 ms of CPU on the copies
 * into the addon and to the worker (up to 170 ms with other test runs on the machine's two
 * cores), and the loop's largest delay is under 50 ms on a quiet machine, up to ~450 ms when
 * those runs leave it waiting for a core. CPU time is what other processes cannot inflate
 * much; the delay is what the host sees. Both bounds separate before from after.
 */
const CPU_BOUND_MS = 400;
const DELAY_BOUND_MS = 800;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const threadCpuMs = () => Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;

export interface OnNodesThread<T> {
  value: T;
  totalMs: number;
  /** monitorEventLoopDelay's max from the call on. */
  maxDelayMs: number;
  /** Node's main thread's CPU time during the call. */
  cpuMs: number;
}

/** Runs `start` and measures what it cost Node's thread. */
export async function onNodesThread<T>(start: () => Promise<T>): Promise<OnNodesThread<T>> {
  const histogram = monitorEventLoopDelay({ resolution: 2 });
  histogram.enable();
  try {
    // The histogram records from its second tick on: a stall before that would go unseen.
    await sleep(20);
    const cpu0 = threadCpuMs();
    const t0 = performance.now();
    const value = await start();
    const totalMs = performance.now() - t0;
    const cpuMs = threadCpuMs() - cpu0;
    // A stall just before `start` settled is recorded at the next tick.
    await sleep(10);
    return { value, totalMs, maxDelayMs: histogram.max / 1e6, cpuMs };
  } finally {
    histogram.disable();
  }
}

/** Asserts that the call measured did no parsing on Node's thread and never held its loop. */
export function expectOffNodesThread(m: OnNodesThread<unknown>): void {
  const figures = `CPU ${m.cpuMs.toFixed(0)} ms, largest delay ${m.maxDelayMs.toFixed(0)} ms, in ${m.totalMs.toFixed(0)} ms`;
  expect(m.cpuMs, figures).toBeLessThan(CPU_BOUND_MS);
  expect(m.maxDelayMs, figures).toBeLessThan(DELAY_BOUND_MS);
}
