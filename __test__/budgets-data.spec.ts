// Defaults that fit data (issue 23): with the default options, results and inputs as big as
// the coda seed's datasource scripts make (`return data.accounts.map(...)`) cross in both
// isolation modes, from runSandbox, a SandboxEngine session and a persistent sandbox: an
// array of 1,500,000 numbers, 100,000 rows of 5 fields, 5,000 rows of 32 fields, a Map of
// 200,000 entries, a 4 MB string, an 8 MB Uint8Array. Before, each of the first four was
// refused (maxOutputValues, 32,768). What stays refused (values that cost the parent far
// more than their bytes) is budgets-values.spec.ts's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, runSandbox, SandboxEngine, type Isolation, type Sandbox, type SandboxSession } from '..';
import { ok } from './support/results';

/** The shapes: how the sandbox makes one, the same value on the host, and a check of a copy. */
const SHAPES: Record<string, { code: string; host: () => unknown; check: (v: any) => void }> = {
  numbers: {
    code: 'Array.from({ length: 1.5e6 }, (_, i) => i + 0.5)',
    host: () => Array.from({ length: 1.5e6 }, (_, i) => i + 0.5),
    check: (v) => {
      expect(v).toHaveLength(1.5e6);
      expect([v[0], v[777777], v[1.5e6 - 1]]).toEqual([0.5, 777777.5, 1.5e6 - 0.5]);
    },
  },
  rows5: {
    code: "Array.from({ length: 100000 }, (_, i) => ({ id: i, name: 'name-' + i, email: 'u' + i + '@example.com', balance: i * 1.25, active: i % 2 === 0 }))",
    host: () => Array.from({ length: 100000 }, (_, i) => ({ id: i, name: 'name-' + i, email: 'u' + i + '@example.com', balance: i * 1.25, active: i % 2 === 0 })),
    check: (v) => {
      expect(v).toHaveLength(100000);
      expect(v[99999]).toEqual({ id: 99999, name: 'name-99999', email: 'u99999@example.com', balance: 99999 * 1.25, active: false });
    },
  },
  rows32: {
    code: "Array.from({ length: 5000 }, (_, i) => { const o = {}; for (let k = 0; k < 32; k++) o['field' + k] = k % 3 ? i + k : 'v' + k; return o; })",
    host: () =>
      Array.from({ length: 5000 }, (_, i) => {
        const o: Record<string, unknown> = {};
        for (let k = 0; k < 32; k++) o['field' + k] = k % 3 ? i + k : 'v' + k;
        return o;
      }),
    check: (v) => {
      expect(v).toHaveLength(5000);
      expect(Object.keys(v[4999])).toHaveLength(32);
      expect([v[4999].field0, v[4999].field31]).toEqual(['v0', 5030]);
    },
  },
  map: {
    code: "new Map(Array.from({ length: 200000 }, (_, i) => [i, 'v' + i]))",
    host: () => new Map(Array.from({ length: 200000 }, (_, i) => [i, 'v' + i])),
    check: (v) => {
      expect(v).toBeInstanceOf(Map);
      expect(v.size).toBe(200000);
      expect(v.get(199999)).toBe('v199999');
    },
  },
  string: {
    code: "(() => { const s = 'abcd'.repeat(1 << 20); s.indexOf('z'); return s; })()",
    host: () => 'abcd'.repeat(1 << 20),
    check: (v) => {
      expect(v.length).toBe(4 << 20);
      expect(v.slice(-4)).toBe('abcd');
    },
  },
  bytes: {
    code: '(() => { const u = new Uint8Array(8 << 20); for (let i = 0; i < u.length; i += 4096) u[i] = i >> 12; return u; })()',
    host: () => {
      const u = new Uint8Array(8 << 20);
      for (let i = 0; i < u.length; i += 4096) u[i] = i >> 12;
      return u;
    },
    check: (v) => {
      expect(v).toBeInstanceOf(Uint8Array);
      expect(v.length).toBe(8 << 20);
      expect([v[4096 * 7], v[(8 << 20) - 4096]]).toEqual([7, 2047 & 0xff]);
    },
  },
};
const NAMES = Object.keys(SHAPES);
/** Host copies, made once. */
const VALUES = new Map(NAMES.map((n) => [n, SHAPES[n].host()]));

/** Code that checks an input in the sandbox and answers with a short digest of it. */
const DIGEST = `(v) => v instanceof Map ? ['map', v.size, v.get(199999)]
  : v instanceof Uint8Array ? ['bytes', v.length, v[4096 * 7]]
  : typeof v === 'string' ? ['string', v.length, v.slice(-4)]
  : ['array', v.length, JSON.stringify(v[v.length - 1])]`;
const expectedDigest = (name: string) => {
  const v = VALUES.get(name) as any;
  if (v instanceof Map) return ['map', v.size, v.get(199999)];
  if (v instanceof Uint8Array) return ['bytes', v.length, v[4096 * 7]];
  if (typeof v === 'string') return ['string', v.length, v.slice(-4)];
  return ['array', v.length, JSON.stringify(v[v.length - 1])];
};

describe.each(['thread', 'process'] as Isolation[])('defaults fit data (%s mode)', (isolation) => {
  describe('runSandbox', () => {
    it.each(NAMES)('returns %s', async (name) => {
      SHAPES[name].check(ok(await runSandbox(SHAPES[name].code, { isolation, timeoutMs: 20000 })));
    });

    it.each(NAMES)('takes %s from a capability', async (name) => {
      const out = ok(await runSandbox(`const d = await get(); return (${DIGEST})(d);`, { isolation, timeoutMs: 20000, capabilities: { get: () => VALUES.get(name) } }));
      expect(out).toEqual(expectedDigest(name));
    });

    it.each(NAMES)('passes %s to a capability as its argument', async (name) => {
      let seen: unknown;
      const put = (v: unknown) => {
        seen = v;
        return true;
      };
      expect(ok(await runSandbox(`return await put(${SHAPES[name].code});`, { isolation, timeoutMs: 20000, capabilities: { put } }))).toBe(true);
      SHAPES[name].check(seen);
    });
  });

  describe('a SandboxEngine session', () => {
    let engine: SandboxEngine;
    beforeAll(async () => {
      engine = new SandboxEngine({ isolation, processes: 1 });
      await engine.init();
    });
    afterAll(() => engine.shutdown());

    const last = async (session: SandboxSession, onData?: (id: number, key: string) => void) => {
      let end: any;
      for await (const e of session) {
        if (e.type === 'dataRequest' && onData) onData(e.id, e.key);
        if (e.type === 'result' || e.type === 'error') end = e;
      }
      return end;
    };

    it.each(NAMES)('returns %s', async (name) => {
      const end = await last(engine.submit({ requestId: name, code: `return ${SHAPES[name].code}` }));
      expect(end.type, end.message).toBe('result');
      SHAPES[name].check(end.data);
    });

    it.each(NAMES)('reads %s from data given with the request', async (name) => {
      const end = await last(engine.submit({ requestId: name, code: `return (${DIGEST})(data.v)`, data: { v: VALUES.get(name) } }));
      expect(end.type, end.message).toBe('result');
      expect(end.data).toEqual(expectedDigest(name));
    });

    it('a data answer that turns out not to be copyable after its first slice fails the read, not respond', async () => {
      // 200,000 rows take more than one slice to write; the function at their end is met late.
      const rows: unknown[] = Array.from({ length: 200000 }, (_, i) => ({ id: i, name: 'n' + i }));
      rows.push({ id: -1, f: () => 1 });
      const session = engine.submit({ requestId: 'late', code: 'try { return data.accounts.length; } catch (e) { return e.message; }' });
      let threw: unknown = 'no';
      const end = await last(session, (id) => {
        try {
          session.respond(id, rows);
        } catch (e) {
          threw = e;
        }
      });
      expect(threw).toBe('no');
      expect(end.type).toBe('result');
      expect(end.data).toMatch(/^respond\(.+\): value cannot be copied into the sandbox: .*could not be cloned/);
    });

    it.each(NAMES)('reads %s from a data answer', async (name) => {
      const session = engine.submit({ requestId: name, code: `return (${DIGEST})(data.accounts)` });
      const end = await last(session, (id) => session.respond(id, VALUES.get(name)));
      expect(end.type, end.message).toBe('result');
      expect(end.data).toEqual(expectedDigest(name));
    });
  });

  describe('a persistent sandbox', () => {
    let sb: Sandbox;
    beforeAll(async () => {
      sb = await createSandbox({ isolation, timeoutMs: 20000 });
      ok(await sb.run(`var digest = ${DIGEST}; var make = (name) => ({ ${NAMES.map((n) => `${n}: () => ${SHAPES[n].code}`).join(', ')} })[name]();`));
    });
    afterAll(() => sb.close());

    it.each(NAMES)('returns %s from run and from call', async (name) => {
      SHAPES[name].check(ok(await sb.run(`make(${JSON.stringify(name)})`)));
      SHAPES[name].check(ok(await sb.call('make', name)));
    });

    it.each(NAMES)('takes %s as a call argument', async (name) => {
      expect(ok(await sb.call('digest', VALUES.get(name)))).toEqual(expectedDigest(name));
    });
  });
});
