// Copy throughput of one checkout: `node bench/probes/copies-paths.js [root] [mode] [only]`
// (root: a checkout with a built addon, default this one; mode: thread (default) or process;
// only: comma-separated figure prefixes, e.g. `u8,str`). Prints one JSON line of medians:
// for each value, the copy run's ms minus the same run without the move (as bench/run.js
// does) and the resulting MB/s. `ab.js <A> <B> [rounds] --probe=copies-paths.js [mode] [only]` alternates it between two checkouts.
const path = require('node:path');
const v8 = require('node:v8');

const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const mode = process.argv[3] || 'thread';
const only = (process.argv[4] || '').split(',').filter(Boolean);
const { runSandbox } = require(path.join(root, 'index.js'));

const BIG = 32 * 1024 * 1024;
const LIMITS = { isolation: mode, memoryLimitMb: 1024, maxOutputBytes: 64 << 20, maxMessageBytes: 64 << 20, timeoutMs: 20000 };
const GRAPH_N = 60000; // bench/run.js's graph
const BUILD_GRAPH = `function buildGraph(n) {
  const a = [];
  for (let i = 0; i < n; i++) a.push({ id: i, name: 'item-' + i, tags: ['alpha', 'beta', 'gamma'], pos: { x: i * 0.5, y: -i, z: i % 7 }, ok: i % 2 === 0 });
  return a;
}`;
// eslint-disable-next-line no-new-func
const buildGraph = new Function(`${BUILD_GRAPH}; return buildGraph;`)();

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const now = () => Number(process.hrtime.bigint()) / 1e6;

async function ok(code, options) {
  const r = await runSandbox(code, { ...LIMITS, ...options });
  if (!r.success) throw new Error(`${r.error.name}: ${r.error.message}`);
  return r.output;
}

function check(cond, what) {
  if (!cond) throw new Error(`wrong result: ${what}`);
}

(async () => {
  const u8 = new Uint8Array(BIG).fill(7);
  const str = 'abcdefgh'.repeat(BIG / 8);
  str.indexOf('z');
  const twoByte = '\u00e9\u4e2d'.repeat(BIG / 4);
  twoByte.indexOf('z');
  const graph = buildGraph(GRAPH_N);
  const graphBytes = v8.serialize(graph).length;
  const cases = {
    u8Out: [BIG, async () => check((await ok(`const u = new Uint8Array(${BIG}).fill(7); u`)).length === BIG, 'u8 out'),
      async () => check((await ok(`const u = new Uint8Array(${BIG}).fill(7); u.length`)) === BIG, 'u8 out base')],
    u8In: [BIG, async () => check((await ok('return (await get()).length', { capabilities: { get: () => u8 } })) === BIG, 'u8 in'),
      async () => check((await ok('return await get()', { capabilities: { get: () => BIG } })) === BIG, 'u8 in base')],
    strOut: [BIG, async () => check((await ok(`const s = 'abcdefgh'.repeat(${BIG / 8}); s.indexOf('z'); s`)).length === BIG, 'str out'),
      async () => check((await ok(`const s = 'abcdefgh'.repeat(${BIG / 8}); s.indexOf('z'); s.length`)) === BIG, 'str out base')],
    strIn: [BIG, async () => check((await ok('return (await get()).length', { capabilities: { get: () => str } })) === BIG, 'str in'),
      async () => check((await ok('return await get()', { capabilities: { get: () => BIG } })) === BIG, 'str in base')],
    twoByteIn: [BIG, async () => check((await ok('return (await get()).length', { capabilities: { get: () => twoByte } })) === BIG / 2, 'two-byte in'),
      async () => check((await ok('return await get()', { capabilities: { get: () => BIG / 2 } })) === BIG / 2, 'two-byte in base')],
    graphOut: [graphBytes, async () => check((await ok(`${BUILD_GRAPH}; buildGraph(${GRAPH_N})`)).length === GRAPH_N, 'graph out'),
      async () => check((await ok(`${BUILD_GRAPH}; buildGraph(${GRAPH_N}).length`)) === GRAPH_N, 'graph out base')],
    graphIn: [graphBytes, async () => check((await ok('const g = await get(); return g.length', { capabilities: { get: () => graph } })) === GRAPH_N, 'graph in'),
      async () => check((await ok('const g = await get(); return g', { capabilities: { get: () => GRAPH_N } })) === GRAPH_N, 'graph in base')],
  };
  const out = {};
  for (const [name, [bytes, copy, base]] of Object.entries(cases)) {
    if (only.length && !only.some((p) => name.startsWith(p))) continue;
    const times = { copy: [], base: [] };
    await copy();
    await base();
    for (let r = 0; r < 5; r++) {
      for (const [k, f] of r % 2 ? [['base', base], ['copy', copy]] : [['copy', copy], ['base', base]]) {
        const t = now();
        await f();
        times[k].push(now() - t);
      }
    }
    const ms = Math.max(1e-3, median(times.copy) - median(times.base));
    out[`${name} ms`] = ms;
    out[`${name} MB/s`] = bytes / 1e6 / (ms / 1000);
  }
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
