// Warm trivial runs in thread mode, as `runSandbox('1+1')` makes them: `node
// bench/probes/wake-trivial.js [root]` prints one JSON line: wall p50 of 300 runs 2 ms
// apart, the CPU of Node's own thread per run (Node >= 23.9, `process.threadCpuUsage`;
// else the process's CPU, all threads), and the same for 300 runs back to back.
const path = require('node:path');
const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const { runSandbox } = require(path.join(root, 'index.js'));

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const nowUs = () => Number(process.hrtime.bigint()) / 1e3;
const threadCpu = typeof process.threadCpuUsage === 'function' ? () => process.threadCpuUsage() : () => process.cpuUsage();
const cpuUs = () => { const c = threadCpu(); return c.user + c.system; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function ok(code) {
  const r = await runSandbox(code, { isolation: 'thread' });
  if (!r.success) throw new Error(`${r.error.name}: ${r.error.message}`);
}

(async () => {
  const out = {};
  for (let i = 0; i < 50; i++) await ok('1+1');
  await sleep(100);
  const spaced = [];
  let cpu = 0;
  for (let i = 0; i < 300; i++) {
    await sleep(2);
    const t = nowUs(), c = cpuUs();
    await ok('1+1');
    spaced.push(nowUs() - t);
    cpu += cpuUs() - c;
  }
  out.spacedP50Us = median(spaced);
  out.spacedNodeCpuUs = cpu / 300;
  const b2b = [];
  cpu = 0;
  for (let i = 0; i < 300; i++) {
    const t = nowUs(), c = cpuUs();
    await ok('1+1');
    b2b.push(nowUs() - t);
    cpu += cpuUs() - c;
  }
  out.b2bP50Us = median(b2b);
  out.b2bNodeCpuUs = cpu / 300;
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });
