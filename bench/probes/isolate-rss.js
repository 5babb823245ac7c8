// RSS per warm idle isolate (thread mode), A/B between checkouts:
// `node bench/probes/isolate-rss.js <rootA> [rootB] [rounds]`. Each sample is a fresh child
// node (`--no-node-snapshot`, as `bench/run.js` runs it) that reads VmRSS before and after
// its engine made 16 warm isolates of 64 MB, as `bench/run.js --only=memory` does; the
// roots alternate, medians are printed (MB per isolate).
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const CHILD = String.raw`
  const count = Number(process.argv[1]);
  const rss = () => { const m = /VmRSS:\s+(\d+) kB/.exec(require('fs').readFileSync('/proc/self/status', 'latin1')); return Number(m[1]) / 1024; };
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  (async () => {
    const native = require(process.env.ISOLET_DIR + '/lib/native');
    const e = new native.NativeEngine(new native.EngineSettings({ isolation: 'thread', memoryMb: 64, maxConcurrentIsolates: count, warmPoolSize: count }));
    await sleep(300); const before = rss();
    e.warmUp();
    while (e.stats().warm < count) await sleep(10);
    await sleep(500);
    console.log(JSON.stringify({ perSandbox: (rss() - before) / count }));
    process.exit(0);
  })();`;

const args = process.argv.slice(2);
const rounds = /^\d+$/.test(args[args.length - 1] || '') ? Number(args.pop()) : 7;
const roots = (args.length ? args : [path.join(__dirname, '..', '..')]).map((r) => path.resolve(r));
const median = (xs) => { const s = [...xs].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const samples = roots.map(() => []);
for (let r = 0; r < rounds; r++) {
  roots.forEach((root, i) => {
    const child = spawnSync(process.execPath, ['--no-node-snapshot', '-e', CHILD, '16'], { encoding: 'utf8', env: { ...process.env, ISOLET_DIR: root } });
    if (child.status !== 0) throw new Error(`${root}: ${child.stderr}`);
    samples[i].push(JSON.parse(child.stdout).perSandbox);
  });
}
console.log(`Node ${process.version}, ${rounds} rounds alternated, RSS per warm idle isolate, medians`);
roots.forEach((root, i) => console.log(`${root}: ${median(samples[i]).toFixed(3)} MB (${samples[i].map((x) => x.toFixed(2)).join(' ')})`));
