// The sandbox's ECMAScript environment must be exactly the one V8 gives a plain
// `node:vm` context of the same Node, apart from the differences listed in ALLOWED.
// Regression: on Node 20 sandbox isolates started from V8's own snapshot while the
// process's shared read-only heap came from Node's, and `Math.E` sat under the key `'`.
import path from 'node:path';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { runSandbox } from '..';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');

// Walks every object reachable from the global object through own properties (string and
// symbol keys), accessors and prototypes, breadth first, without calling any getter.
// Each property becomes `path -> "<w|-><e|-><c|-> <typeof> @<first path of that object>"`
// (data) or `accessor <e><c> get ... set ...`; primitives are printed exactly.
const WALKER = String.raw`(() => {
  const out = {};
  const seen = new Map([[globalThis, 'globalThis']]);
  const queue = [[globalThis, 'globalThis']];
  const keyName = (k) => (typeof k === 'symbol' ? '[' + (k.description ?? '') + ']' : k);
  const prim = (v) => {
    if (typeof v === 'number') return Object.is(v, -0) ? '-0' : 'number ' + String(v);
    if (typeof v === 'string') return 'string ' + JSON.stringify(v);
    if (typeof v === 'bigint') return 'bigint ' + v;
    if (typeof v === 'symbol') return 'symbol ' + String(v.description);
    return String(v);
  };
  const ref = (v, p) => {
    if (v === null || (typeof v !== 'object' && typeof v !== 'function')) return prim(v);
    if (!seen.has(v)) {
      seen.set(v, p);
      queue.push([v, p]);
    }
    return typeof v + ' @' + seen.get(v);
  };
  while (queue.length) {
    const [obj, p] = queue.shift();
    out[p + ' [[Prototype]]'] = ref(Object.getPrototypeOf(obj), p + '.[[Prototype]]');
    for (const key of Reflect.ownKeys(obj)) {
      const d = Object.getOwnPropertyDescriptor(obj, key);
      const at = p + '.' + keyName(key);
      const flags = (d.enumerable ? 'e' : '-') + (d.configurable ? 'c' : '-');
      out[at] = 'value' in d
        ? (d.writable ? 'w' : '-') + flags + ' ' + ref(d.value, at)
        : 'accessor ' + flags + ' get ' + ref(d.get, at + '<get>') + ' set ' + ref(d.set, at + '<set>');
    }
  }
  return JSON.stringify(out);
})()`;

// The sandbox's console (src/web/js/09_console.js, with or without `web`): Node's methods,
// printing as Node does, captured into the run's logs.
const CAPTURED_CONSOLE = [
  'log', 'info', 'debug', 'warn', 'error', 'dir', 'dirxml', 'table', 'trace', 'assert', 'clear',
  'count', 'countReset', 'group', 'groupCollapsed', 'groupEnd', 'time', 'timeEnd', 'timeLog',
];

// Every documented difference between a sandbox and a node:vm context. A property path
// may differ only if one of these explains it.
const ALLOWED: { why: string; applies: (p: string) => boolean }[] = [
  {
    why: 'WebAssembly is removed (not ECMAScript; its Memory would allocate outside the budget)',
    applies: (p) => p === 'globalThis.WebAssembly' || p.startsWith('globalThis.WebAssembly.') || p.startsWith('globalThis.WebAssembly '),
  },
  {
    // V8's own console reports only to an inspector; the sandbox's captures Node's methods
    // (checked separately) and has no other members (no profile, timeStamp or context).
    why: "console is captured: Node's console methods, on a plain object",
    applies: (p) =>
      (p.startsWith('globalThis.console.') || p === 'globalThis.console [[Prototype]]') &&
      !CAPTURED_CONSOLE.some((m) => p === `globalThis.console.${m}` || p.startsWith(`globalThis.console.${m}.`) || p.startsWith(`globalThis.console.${m} `)) &&
      p !== 'globalThis.console.[Symbol.toStringTag]',
  },
  {
    // node:vm makes its global object from an API template, whose prototype carries that
    // template's anonymous constructor; a plain V8 context's carries Object.
    why: "the global object's prototype's constructor (node:vm's global template)",
    applies: (p) => p === 'globalThis.[[Prototype]].constructor' || p.startsWith('globalThis.[[Prototype]].constructor.') || p.startsWith('globalThis.[[Prototype]].constructor '),
  },
];

async function sandboxBuiltins(): Promise<Record<string, string>> {
  const r = await runSandbox(WALKER, { timeoutMs: 30_000 });
  if (!r.success) throw new Error(`walker failed in the sandbox: ${r.error.name}: ${r.error.message}`);
  return JSON.parse(r.output as string);
}

describe('the ECMAScript environment', () => {
  it('matches a plain node:vm context, apart from the documented differences', async () => {
    const reference: Record<string, string> = JSON.parse(vm.runInContext(WALKER, vm.createContext()));
    const sandbox = await sandboxBuiltins();
    // Sanity: the walk reaches deep into the built-ins on both sides.
    expect(Object.keys(reference).length).toBeGreaterThan(2000);
    expect(reference['globalThis.Math.E']).toBe(`--- number ${Math.E}`);

    const unexplained: string[] = [];
    for (const p of new Set([...Object.keys(reference), ...Object.keys(sandbox)])) {
      if (reference[p] === sandbox[p] || ALLOWED.some((a) => a.applies(p))) continue;
      unexplained.push(`${p}: vm ${reference[p]} | sandbox ${sandbox[p]}`);
    }
    expect(unexplained).toEqual([]);

    // Each allowed difference is real and exactly as documented.
    expect(reference['globalThis.WebAssembly']).toMatch(/^w-c object/);
    expect(Object.keys(sandbox).some((p) => p.startsWith('globalThis.WebAssembly'))).toBe(false);
    const consoleMembers = Object.keys(sandbox)
      .filter((p) => /^globalThis\.console\.[^.[\s]+$/.test(p) || p === 'globalThis.console.[Symbol.toStringTag]')
      .map((p) => p.slice('globalThis.console.'.length))
      .sort();
    expect(consoleMembers).toEqual([...CAPTURED_CONSOLE, '[Symbol.toStringTag]'].sort());
    expect(sandbox['globalThis.console']).toBe(reference['globalThis.console']);
  });

  it('shows the same source text for every global function, except the two guarded constructors', async () => {
    // ArrayBuffer and SharedArrayBuffer are Proxies of the built-ins with only a
    // `construct` trap (it charges maxByteLength against the run's memory), and
    // Function.prototype.toString of a Proxy omits the name. That is the only difference.
    const probe = `JSON.stringify(Object.getOwnPropertyNames(globalThis).filter((k) => typeof globalThis[k] === 'function').map((k) => [k, Function.prototype.toString.call(globalThis[k])]))`;
    const reference = new Map<string, string>(JSON.parse(vm.runInContext(probe, vm.createContext())));
    const r = await runSandbox(probe);
    const sandbox = new Map<string, string>(JSON.parse(r.success ? (r.output as string) : '[]'));
    expect(sandbox.size).toBeGreaterThan(40);
    const differing = [...sandbox].filter(([k, text]) => reference.get(k) !== text).map(([k, text]) => [k, text]);
    expect(differing).toEqual([
      ['ArrayBuffer', 'function () { [native code] }'],
      ['SharedArrayBuffer', 'function () { [native code] }'],
    ]);
  });

  it('has Math.E and no stray keys on Math', async () => {
    const r = await runSandbox('[Math.E === Math.exp(1), Object.getOwnPropertyNames(Math).filter((k) => !/^[A-Za-z0-9_]+$/.test(k))]');
    expect(r.success && r.output).toEqual([true, []]);
  });

  it('is exact when Node itself runs without its startup snapshot', async () => {
    const code = `require(${JSON.stringify(root)}).runSandbox('[Math.E, Math.PI, typeof Intl.v8BreakIterator]').then((r) => console.log(JSON.stringify(r.output)))`;
    for (const env of [
      { args: ['--no-node-snapshot'], env: {} },
      { args: [], env: { NODE_OPTIONS: '--no-node-snapshot' } },
    ]) {
      const r = await runChild(process.execPath, [...env.args, '-e', code], {
        timeout: 30_000,
        env: { ...process.env, ...env.env },
      });
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      expect(JSON.parse(r.stdout)).toEqual([Math.E, Math.PI, 'undefined']);
    }
  });
});
