// A/B of copy throughput between two checkouts, each with its addon built:
// `node bench/probes/copies-ab.js <rootA> <rootB> [rounds] [mode] [only]` runs
// `copies-paths.js` in a fresh child for A, then B (alternating the order), `rounds`
// times (default 3), and prints the median of each figure side by side.
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const [a, b, roundsArg, mode = 'thread', only = ''] = process.argv.slice(2);
if (!a || !b) {
  console.error('usage: node bench/probes/copies-ab.js <rootA> <rootB> [rounds] [mode] [only]');
  process.exit(2);
}
const rounds = Number(roundsArg || 3);
const probe = path.join(__dirname, 'copies-paths.js');
const median = (xs) => { const s = [...xs].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const samples = { A: [], B: [] };
for (let r = 0; r < rounds; r++) {
  for (const [label, root] of r % 2 ? [['B', b], ['A', a]] : [['A', a], ['B', b]]) {
    const child = spawnSync(process.execPath, [probe, path.resolve(root), mode, only], { encoding: 'utf8' });
    if (child.status !== 0) {
      console.error(`${label} failed:\n${child.stderr}`);
      process.exit(1);
    }
    samples[label].push(JSON.parse(child.stdout.trim().split('\n').pop()));
    process.stderr.write(`round ${r + 1}/${rounds} ${label} done\n`);
  }
}
console.log(`Node ${process.version}, ${mode}, ${rounds} rounds alternated, medians. A = ${a}, B = ${b}`);
console.log('| figure | A | B | B/A |');
console.log('|---|---:|---:|---:|');
for (const k of Object.keys(samples.A[0])) {
  const ma = median(samples.A.map((s) => s[k]));
  const mb = median(samples.B.map((s) => s[k]));
  console.log(`| ${k} | ${ma.toFixed(1)} | ${mb.toFixed(1)} | ${(mb / ma).toFixed(2)} |`);
}
