// What an idle open persistent sandbox costs the machine, per isolation mode (the figure
// behind maxOpenSandboxes' default, docs/budgets.md):
// `node bench/probes/sandbox-memory.js [count] [rounds]`. Each round is a fresh child node
// with an initialized engine (64 MB sandboxes); it opens `count` sandboxes, gives each a
// little state (`globalThis.x = i`), waits a second, and reports per open sandbox: the
// drop in the machine's MemAvailable (/proc/meminfo: what the machine has left, shared
// pages counted once), this process's added RSS, and (process mode) each sandbox host's
// RSS and PSS (its share of pages shared with other hosts: the node binary, the addon).
// Prints the medians over all rounds as one JSON line per mode (MODES=process: one mode).
// Other work on the machine moves MemAvailable: run it on a quiet machine, or with many
// rounds.
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const CHILD = String.raw`
  const [mode, count] = [process.argv[1], Number(process.argv[2])];
  const fs = require('fs');
  const kb = (text, key) => Number(new RegExp(key + ':\\s+(\\d+) kB').exec(text)[1]) / 1024;
  const available = () => kb(fs.readFileSync('/proc/meminfo', 'latin1'), 'MemAvailable');
  const rssOf = (pid) => kb(fs.readFileSync('/proc/' + pid + '/status', 'latin1'), 'VmRSS');
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  (async () => {
    const { SandboxEngine } = require(process.env.ISOLET_DIR);
    const engine = new SandboxEngine({ isolation: mode, memoryMb: 64, maxConcurrentIsolates: 4, warmPoolSize: 1, processes: 1, maxOpenSandboxes: count });
    await engine.init();
    const shared = new Set(engine.stats().processes?.pids ?? []);
    await sleep(1000);
    const [avail0, rss0] = [available(), rssOf('self')];
    const boxes = [];
    for (let i = 0; i < count; i += 10) {
      boxes.push(...(await Promise.all(Array.from({ length: Math.min(10, count - i) }, () => engine.openSandbox()))));
    }
    await Promise.all(boxes.map((sb, i) => sb.run('globalThis.x = ' + i).then((r) => { if (!r.success) throw r.error; })));
    await sleep(1000);
    const [avail1, rss1] = [available(), rssOf('self')];
    const hosts = (engine.stats().processes?.pids ?? []).filter((p) => !shared.has(p));
    const rollup = hosts.map((p) => fs.readFileSync('/proc/' + p + '/smaps_rollup', 'latin1'));
    for (const sb of boxes) sb.close();
    await engine.shutdown();
    console.log(JSON.stringify({
      availablePer: (avail0 - avail1) / count,
      parentPer: (rss1 - rss0) / count,
      hostRss: rollup.map((t) => kb(t, 'Rss')),
      hostPss: rollup.map((t) => kb(t, 'Pss')),
    }));
  })().catch((e) => { console.error(e); process.exit(1); });
`;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : null;
};
const round1 = (x) => (x === null ? null : Math.round(x * 10) / 10);

const count = Number(process.argv[2] || 100);
const rounds = Number(process.argv[3] || 3);
for (const mode of (process.env.MODES || 'thread,process').split(",")) {
  const runs = [];
  for (let r = 0; r < rounds; r++) {
    const out = spawnSync(process.execPath, ['-e', CHILD, mode, String(count)], {
      env: { ...process.env, ISOLET_DIR: path.resolve(__dirname, '..', '..') },
      encoding: 'utf8',
      maxBuffer: 1 << 24,
    });
    if (out.status !== 0) throw new Error(`${mode} round ${r}: ${out.stderr}`);
    runs.push(JSON.parse(out.stdout.trim().split('\n').pop()));
  }
  console.log(JSON.stringify({
    mode,
    count,
    rounds,
    memAvailableMbPerSandbox: round1(median(runs.map((r) => r.availablePer))),
    memAvailableMbPerSandboxRange: [round1(Math.min(...runs.map((r) => r.availablePer))), round1(Math.max(...runs.map((r) => r.availablePer)))],
    parentRssMbPerSandbox: round1(median(runs.map((r) => r.parentPer))),
    hostRssMb: round1(median(runs.flatMap((r) => r.hostRss))),
    hostPssMb: round1(median(runs.flatMap((r) => r.hostPss))),
  }));
}
