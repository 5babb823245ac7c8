// maxMessageBytes on the host side: a tool's reply, a data answer and sandbox.call's
// arguments are all written through one function (intoSandbox in lib/bridge.js), a module
// source from `resolve` is held to the same bound, and the limit set is the limit
// enforced: a value of exactly maxMessageBytes goes in, one byte less refuses it with an
// error naming the limit.
import { describe, expect, it } from 'vitest';
import { createSandbox, runSandbox, SandboxEngine, type Isolation, type SandboxSession } from '..';
import { failed, ok } from './support/results';

const VALUE = 'x'.repeat(5000);
/** The byte count an over-the-limit message reports. */
const bytesIn = (message: string) => {
  const m = /: (\d+) bytes, over the bridge limit of (\d+) bytes \(maxMessageBytes\)/.exec(message);
  expect(m, message).not.toBeNull();
  return Number(m![1]);
};

describe.each(['thread', 'process'] as Isolation[])('maxMessageBytes on the host side (%s)', (isolation) => {
  it("a tool's reply", async () => {
    const get = () => VALUE;
    const code = 'try { return (await get()).length } catch (e) { return e.name + ": " + e.message }';
    const refused = ok(await runSandbox(code, { isolation, capabilities: { get }, maxMessageBytes: 100 })) as string;
    expect(refused).toMatch(/^RangeError: get's reply: \d+ bytes, over the bridge limit of 100 bytes \(maxMessageBytes\)$/);
    const size = bytesIn(refused);
    expect(ok(await runSandbox(code, { isolation, capabilities: { get }, maxMessageBytes: size }))).toBe(VALUE.length);
    expect(ok(await runSandbox(code, { isolation, capabilities: { get }, maxMessageBytes: size - 1 }))).toBe(
      `RangeError: get's reply: ${size} bytes, over the bridge limit of ${size - 1} bytes (maxMessageBytes)`,
    );
  });

  it("sandbox.call's arguments", async () => {
    const call = async (maxMessageBytes: number) => {
      const sandbox = await createSandbox({ isolation, maxMessageBytes });
      try {
        ok(await sandbox.run('globalThis.size = (s) => s.length; undefined'));
        return await sandbox.call('size', VALUE);
      } finally {
        sandbox.close();
      }
    };
    const refused = failed(await call(100));
    expect(refused.name).toBe('SandboxValidationError');
    expect(refused.message).toMatch(/^sandbox\.call\(size\): arguments: \d+ bytes, over the bridge limit of 100 bytes \(maxMessageBytes\)$/);
    const size = bytesIn(refused.message);
    expect(ok(await call(size))).toBe(VALUE.length);
    expect(failed(await call(size - 1)).message).toBe(`sandbox.call(size): arguments: ${size} bytes, over the bridge limit of ${size - 1} bytes (maxMessageBytes)`);
  });

  it("a module source from resolve", async () => {
    const source = `export default ${JSON.stringify(VALUE)}.length;`;
    const load = (maxMessageBytes: number) =>
      runSandbox('import n from "big"; export default n;', { isolation, type: 'module', resolve: () => source, maxMessageBytes });
    const refused = failed(await load(100));
    expect(refused.message).toMatch(/failed: the source of big: \d+ bytes, over the bridge limit of 100 bytes \(maxMessageBytes\)$/);
    const size = bytesIn(refused.message);
    expect(ok(await load(size))).toBe(VALUE.length);
    expect(failed(await load(size - 1)).message).toContain(`the source of big: ${size} bytes, over the bridge limit of ${size - 1} bytes (maxMessageBytes)`);
  });

  it('a data answer', async () => {
    const engine = new SandboxEngine({ isolation, maxConcurrentIsolates: 1 });
    await engine.init();
    // Answers the run's one data request with VALUE; what respond threw, and the run's end.
    const answer = async (maxMessageBytes: number) => {
      const session: SandboxSession = engine.submit({ requestId: String(maxMessageBytes), code: 'return data.v.length', bridgeLimits: { maxMessageBytes } });
      let thrown: Error | undefined;
      let end: any;
      for await (const e of session) {
        if (e.type === 'dataRequest') {
          try {
            session.respond(e.id, VALUE);
          } catch (err) {
            thrown = err as Error;
            session.respond(e.id, '');
          }
        }
        if (e.type === 'result' || e.type === 'error') end = e;
      }
      return { thrown, end };
    };
    try {
      const refused = await answer(100);
      expect(refused.thrown?.name).toBe('SandboxValidationError');
      expect(refused.thrown?.message).toMatch(/^respond\(\d+\): value: \d+ bytes, over the bridge limit of 100 bytes \(maxMessageBytes\)$/);
      expect(refused.end.data).toBe(0);
      const size = bytesIn(refused.thrown!.message);
      const fits = await answer(size);
      expect(fits.thrown).toBeUndefined();
      expect(fits.end.data).toBe(VALUE.length);
      const over = await answer(size - 1);
      expect(over.thrown?.message).toMatch(new RegExp(`: ${size} bytes, over the bridge limit of ${size - 1} bytes \\(maxMessageBytes\\)$`));
    } finally {
      await engine.shutdown();
    }
  });
});
