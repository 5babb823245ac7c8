// Nothing of one run survives into a later run in the same process. Every run gets a
// fresh isolate: a warm one, prepared before the run arrives (console installed,
// WebAssembly removed), or one made for it. So a run that changes everything it can
// reach (globals, built-in prototypes, console, Error's hooks, the symbol registry, a
// finalizer) is followed here, one isolate at a time, by a run queued behind it and by
// one submitted after it (on the warm isolate prepared meanwhile): neither may see any
// of it, in both isolation modes.
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxEngine, DEFAULT_ISOLATE_LIMITS, DEFAULT_BRIDGE_LIMITS, type SandboxEngineConfig } from '..';

const engines: SandboxEngine[] = [];
afterAll(async () => {
  while (engines.length) await engines.pop()!.shutdown();
});

async function makeEngine(isolation: 'thread' | 'process') {
  const config: SandboxEngineConfig = {
    memoryMb: 64,
    maxConcurrentIsolates: 1,
    warmPoolSize: 1,
    wasmModules: [],
    defaultIsolateLimits: DEFAULT_ISOLATE_LIMITS,
    defaultBridgeLimits: DEFAULT_BRIDGE_LIMITS,
    isolation,
  };
  const engine = new SandboxEngine(isolation === 'process' ? { ...config, processes: 1 } : config);
  engines.push(engine);
  await engine.init();
  return engine;
}

const POLLUTE = `
  globalThis.leakedGlobal = 'from the first run';
  var leakedVar = 1;
  Object.prototype.polluted = 'proto';
  Array.prototype.push = function () { return 'hijacked'; };
  Promise.prototype.then = function () { return 'hijacked'; };
  JSON.parse = () => 'hijacked';
  Function.prototype.toString = () => 'hijacked';
  Object.defineProperty(String.prototype, 'sneaky', { get() { return 'proto'; } });
  console.log = () => 'hijacked';
  console.extra = 'added';
  Error.stackTraceLimit = 0;
  Error.prepareStackTrace = () => 'hijacked';
  Symbol.for('isolet.run-isolation').description;
  globalThis.keep = new FinalizationRegistry(() => { globalThis.finalized = true; });
  globalThis.keep.register({}, 'x');
  Math.random = () => 0.5;
  delete globalThis.Reflect;
  return 'polluted';
`;

// Everything the first run changed, as seen from a later run: each entry is what a
// fresh context gives.
const CHECK = `
  const seen = {};
  seen.leakedGlobal = typeof leakedGlobal;
  seen.leakedVar = typeof leakedVar;
  seen.polluted = ({}).polluted;
  seen.sneaky = 'abc'.sneaky;
  const arr = [];
  seen.push = arr.push(7);
  seen.parse = JSON.parse('{"a":1}').a;
  seen.toString = Function.prototype.toString.call(Math.max).includes('[native code]');
  seen.then = typeof Promise.resolve(1).then(() => 2);
  seen.logName = console.log.name;
  seen.logReturns = console.log('from a later run');
  seen.consoleExtra = typeof console.extra;
  seen.stackTraceLimit = Error.stackTraceLimit;
  seen.prepareStackTrace = typeof Error.prepareStackTrace;
  seen.stack = typeof new Error('x').stack === 'string' && new Error('x').stack.includes('Error: x');
  seen.keep = typeof keep;
  seen.finalized = typeof finalized;
  seen.random = [Math.random(), Math.random()].some((x) => x !== 0.5);
  seen.reflect = typeof Reflect;
  seen.webAssembly = typeof WebAssembly;
  return seen;
`;

const FRESH = {
  leakedGlobal: 'undefined',
  leakedVar: 'undefined',
  sneaky: undefined,
  push: 1,
  parse: 1,
  toString: true,
  // biome-ignore lint/suspicious/noThenProperty: the global names a run may not see change
  then: 'object',
  logName: 'log',
  consoleExtra: 'undefined',
  stackTraceLimit: 10,
  prepareStackTrace: 'undefined',
  stack: true,
  keep: 'undefined',
  finalized: 'undefined',
  random: true,
  reflect: 'object',
  webAssembly: 'undefined',
};

describe.each(['thread', 'process'] as const)('a later run sees nothing of an earlier one (%s isolation)', (isolation) => {
  it('globals, prototypes, console, Error hooks and finalizers are all fresh, run after run', async () => {
    const engine = await makeEngine(isolation);
    const expectFresh = (end: Awaited<ReturnType<typeof engine.submit>['done']>) => {
      expect(end.type).toBe('result');
      const seen = (end as { data: Record<string, unknown> }).data;
      expect(seen).toMatchObject(FRESH);
      expect(seen.polluted).toBeUndefined();
      expect(seen.logReturns).toBeUndefined();
    };
    for (let round = 0; round < 5; round++) {
      // One isolate at a time: the check waits in the queue for the polluting run's slot.
      const polluting = engine.submit({ requestId: `p${round}`, code: POLLUTE });
      const queued = engine.submit({ requestId: `q${round}`, code: CHECK });
      expect(await polluting.done).toMatchObject({ type: 'result', data: 'polluted' });
      expectFresh(await queued.done);
      const later = await engine.submit({ requestId: `p${round}b`, code: POLLUTE }).done;
      expect(later).toMatchObject({ type: 'result', data: 'polluted' });
      expectFresh(await engine.submit({ requestId: `c${round}`, code: CHECK }).done);
    }
  });
});
