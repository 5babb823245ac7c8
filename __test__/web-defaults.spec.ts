// The web platform APIs are on by default where models' code runs - the Code Mode executor
// (stateless and stateful), the MCP server (stateless and stateful) and `isolet run` - each
// with its way to turn them off (`web: false`, `"web": false`, `--no-web`); runSandbox and
// SandboxEngine keep them off unless asked. A persistent sandbox keeps its choice.
import { afterAll, describe, expect, it } from 'vitest';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createFetchCapability, runSandbox, SandboxEngine } from '..';
import { IsoletExecutor } from '../lib/codemode';
import { entryPoints, MODES } from './support/entry-points';
import { ok } from './support/results';

const entry = entryPoints('web-defaults');
const PROBE = '[typeof URL, typeof TextEncoder, typeof setTimeout, typeof crypto]';
const ON = ['function', 'function', 'function', 'object'];
const OFF = ['undefined', 'undefined', 'undefined', 'undefined'];

const executors: IsoletExecutor[] = [];
afterAll(async () => {
  for (const e of executors) await e.dispose();
});
function executor(options: ConstructorParameters<typeof IsoletExecutor>[0]): IsoletExecutor {
  const e = new IsoletExecutor({ timeoutMs: 10_000, maxConcurrentIsolates: 2, ...options });
  executors.push(e);
  return e;
}

describe.each(MODES)('defaults (%s isolation)', (isolation) => {
  it('runSandbox and SandboxEngine: off unless asked', async () => {
    expect(ok(await runSandbox(PROBE, { isolation }))).toEqual(OFF);
    const session = entry.engine(isolation).submit({ code: `return ${PROBE}` });
    expect((await session.done).type === 'result' && (await session.done)).toMatchObject({ data: OFF });
  });

  it('the Code Mode executor: on by default, web: false turns them off, a stateful one keeps its choice', async () => {
    const on = executor({ isolation });
    expect(on.web).toBe(true);
    expect(await on.execute(`async () => ${PROBE}`, {})).toEqual({ result: ON, logs: [] });
    const off = executor({ isolation, web: false });
    expect(off.web).toBe(false);
    expect(await off.execute(`async () => ${PROBE}`, {})).toEqual({ result: OFF, logs: [] });
    for (const [web, expected] of [[true, ON], [false, OFF]] as const) {
      const stateful = executor({ isolation, stateful: true, web });
      // Every execution of the session's one sandbox, the first and those after it.
      for (let i = 0; i < 2; i++) expect((await stateful.execute(`async () => ${PROBE}`, {})).result).toEqual(expected);
    }
  });

  it('the MCP server: on by default, "web": false turns them off, stateless and stateful', async () => {
    for (const [config, expected] of [[{}, ON], [{ web: false }, OFF], [{ stateful: true }, ON], [{ stateful: true, web: false }, OFF]] as const) {
      const client = await entry.mcpClient({ ...config, isolation });
      for (let i = 0; i < 2; i++) {
        const r = await entry.callTool(client, PROBE);
        expect([r.isError, JSON.parse(r.text)], JSON.stringify(config)).toEqual([undefined, expected]);
      }
    }
  });

  it('isolet run: on by default, --no-web or "web": false turns them off, the flag winning', async () => {
    const run = (args: string[]) => entry.isoletRun('probe.js', PROBE, ['--isolation', isolation, ...args]);
    expect(JSON.parse((await run([])).stdout)).toEqual(ON);
    expect(JSON.parse((await run(['--no-web'])).stdout)).toEqual(OFF);
    const fs = await import('node:fs');
    const path = await import('node:path');
    const os = await import('node:os');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-web-config-'));
    try {
      const off = path.join(dir, 'off.json');
      fs.writeFileSync(off, JSON.stringify({ web: false }));
      expect(JSON.parse((await run(['--config', off])).stdout)).toEqual(OFF);
      const on = path.join(dir, 'on.json');
      fs.writeFileSync(on, JSON.stringify({ web: true }));
      expect(JSON.parse((await run(['--config', on, '--no-web'])).stdout)).toEqual(OFF);
      const bad = path.join(dir, 'bad.json');
      fs.writeFileSync(bad, JSON.stringify({ web: 'no' }));
      const refused = await run(['--config', bad]);
      expect([refused.exit, refused.stderr]).toEqual([2, expect.stringContaining(`web must be a boolean, got 'no'`)]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the Code Mode executor with a fetch capability', () => {
  it('gives every execution WHATWG fetch over it, and refuses anything but a fetch capability', async () => {
    const server = http.createServer((req, res) => res.end(JSON.stringify({ path: req.url })));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const fetch = createFetchCapability({ allowedOrigins: [origin] });
      for (const stateful of [false, true]) {
        const e = executor({ fetch, stateful });
        const r = await e.execute(`async () => (await fetch('${origin}/users?id=7')).json()`, {});
        expect(r).toEqual({ result: { path: '/users?id=7' }, logs: [] });
        const off = await e.execute(`async () => { try { await fetch('http://127.0.0.1:1/') } catch (e) { return e.message } }`, {});
        expect(off.result).toBe('fetch: origin http://127.0.0.1:1 is not in the allow-list');
        // Its name is taken: no provider may be called fetch.
        expect((await e.execute('async () => 1', [{ name: 'fetch', fns: { get: async () => 1 } }])).error).toBe('Provider name "fetch" is reserved');
      }
      expect(await executor({}).execute('async () => typeof fetch', {})).toEqual({ result: 'undefined', logs: [] });
      expect(() => new IsoletExecutor({ fetch: async () => 1 } as never)).toThrow('fetch must be a fetch capability made by createFetchCapability({ allowedOrigins })');
    } finally {
      server.close();
    }
  });
});

describe('a SandboxEngine config', () => {
  it('web: true is the default of its requests; a request may say otherwise', async () => {
    const engine = new SandboxEngine({ isolation: 'thread', web: true });
    await engine.init();
    try {
      const result = async (request: object) => {
        const end = await engine.submit({ code: `return ${PROBE}`, ...request }).done;
        return end.type === 'result' ? end.data : end;
      };
      expect(await result({})).toEqual(ON);
      expect(await result({ web: false })).toEqual(OFF);
    } finally {
      await engine.shutdown();
    }
  });
});
