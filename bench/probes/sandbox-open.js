// What opening a persistent sandbox costs, per isolation mode:
// `node bench/probes/sandbox-open.js [count] [rounds]`. Each round is a fresh child node
// (`--no-node-snapshot`, as bench/run.js runs it) with an initialized engine; it opens
// `count` sandboxes (64 MB) one after another and keeps them open, and reports the time of
// each `engine.openSandbox()` (until it resolves) and of the first run in it, this
// process's RSS added per open sandbox, and (process mode) the RSS of each sandbox's own
// host process. Prints the medians over all rounds as one JSON line per mode.
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const CHILD = String.raw`
  const [mode, count] = [process.argv[1], Number(process.argv[2])];
  const fs = require('fs');
  const rssOf = (pid) => { const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync('/proc/' + pid + '/status', 'latin1')); return Number(m[1]) / 1024; };
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  (async () => {
    const { SandboxEngine } = require(process.env.ISOLET_DIR);
    const engine = new SandboxEngine({ isolation: mode, memoryMb: 64, maxConcurrentIsolates: count + 2, warmPoolSize: 2, processes: 1 });
    await engine.init();
    const shared = new Set(engine.stats().processes?.pids ?? []);
    await sleep(500);
    const before = rssOf('self');
    const open = [], first = [], boxes = [];
    for (let i = 0; i < count; i++) {
      let t = performance.now();
      const sb = await engine.openSandbox();
      open.push(performance.now() - t);
      t = performance.now();
      const r = await sb.run('var n = 1; n');
      if (!r.success) throw r.error;
      first.push(performance.now() - t);
      boxes.push(sb);
    }
    await sleep(500);
    const parentPer = (rssOf('self') - before) / count;
    const hosts = (engine.stats().processes?.pids ?? []).filter((p) => !shared.has(p));
    const hostRss = hosts.map(rssOf);
    for (const sb of boxes) sb.close();
    await engine.shutdown();
    console.log(JSON.stringify({ open, first, parentPer, hostRss }));
    process.exit(0);
  })();`;

const count = Number(process.argv[2] || 16);
const rounds = Number(process.argv[3] || 3);
const root = path.join(__dirname, '..', '..');
const median = (xs) => { const s = [...xs].sort((x, y) => x - y); return s.length ? s[Math.floor(s.length / 2)] : null; };
const p90 = (xs) => { const s = [...xs].sort((x, y) => x - y); return s.length ? s[Math.min(s.length - 1, Math.floor(s.length * 0.9))] : null; };
const round1 = (x) => (x === null ? null : Math.round(x * 10) / 10);
for (const mode of ['process', 'thread']) {
  const all = { open: [], first: [], parentPer: [], hostRss: [] };
  for (let r = 0; r < rounds; r++) {
    const out = spawnSync(process.execPath, ['--no-node-snapshot', '-e', CHILD, mode, String(count)], {
      env: { ...process.env, ISOLET_DIR: root },
      encoding: 'utf8',
      timeout: 120_000,
    });
    if (out.status !== 0) throw new Error(`${mode} round ${r}: ${out.stderr}`);
    const s = JSON.parse(out.stdout.trim().split('\n').pop());
    all.open.push(...s.open);
    all.first.push(...s.first);
    all.parentPer.push(s.parentPer);
    all.hostRss.push(...s.hostRss);
  }
  console.log(
    JSON.stringify({
      mode,
      sandboxes: count,
      rounds,
      openMs: { p50: round1(median(all.open)), p90: round1(p90(all.open)) },
      firstRunMs: { p50: round1(median(all.first)), p90: round1(p90(all.first)) },
      parentRssMbPerSandbox: round1(median(all.parentPer)),
      ownHostRssMb: all.hostRss.length ? { p50: round1(median(all.hostRss)), max: round1(Math.max(...all.hostRss)) } : null,
    }),
  );
}
