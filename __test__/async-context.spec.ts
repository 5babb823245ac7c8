// Host functions run in the async context of the code that started the run (its
// AsyncLocalStorage store: a request, a tenant), in both isolation modes, even though the
// events of every run of an engine arrive through one channel made with the engine.
import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, expect, it } from 'vitest';
import { runSandbox } from '..';

const modes = ['thread', 'process'] as const;

describe.each(modes)('async context of host calls (%s isolation)', (isolation) => {
  it('runSandbox: the default engine made by the first caller does not lend its store to later runs', async () => {
    const tenant = new AsyncLocalStorage<string>();
    const whoAmI = () => tenant.getStore() ?? 'none';
    const run = (name: string) =>
      tenant.run(name, () => runSandbox('const a = await whoAmI(); const b = await whoAmI(); return a + "/" + b;', { isolation, capabilities: { whoAmI } }));
    const first = await run('first');
    const later = await Promise.all([run('second'), run('third')]);
    expect([first, ...later].map((r) => (r.success ? r.output : r.error))).toEqual(['first/first', 'second/second', 'third/third']);
  });
});
