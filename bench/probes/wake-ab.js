// A/B of any probe that prints one JSON line of figures: `node bench/probes/wake-ab.js
// <probe.js> <rootA> <rootB> [rounds]` runs `<probe> <root>` in a fresh child for A and B,
// alternating the order every round (default 7 rounds), and prints the medians side by side.
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const [probeArg, a, b, roundsArg] = process.argv.slice(2);
if (!probeArg || !a || !b) {
  console.error('usage: node bench/probes/wake-ab.js <probe.js> <rootA> <rootB> [rounds]');
  process.exit(2);
}
const probe = path.resolve(probeArg);
const rounds = Number(roundsArg || 7);
const median = (xs) => { const s = [...xs].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const samples = { A: [], B: [] };
for (let r = 0; r < rounds; r++) {
  for (const [label, root] of r % 2 ? [['B', b], ['A', a]] : [['A', a], ['B', b]]) {
    const child = spawnSync(process.execPath, [probe, path.resolve(root)], { encoding: 'utf8' });
    if (child.status !== 0) {
      console.error(`${label} failed:\n${child.stderr}`);
      process.exit(1);
    }
    samples[label].push(JSON.parse(child.stdout.trim().split('\n').pop()));
  }
}
const keys = Object.keys(samples.A[0]);
console.log(`${path.basename(probe)}, Node ${process.version}, ${rounds} rounds alternated, medians. A = ${a}, B = ${b}`);
console.log('| figure | A | B | B/A |');
console.log('|---|---:|---:|---:|');
for (const k of keys) {
  const ma = median(samples.A.map((s) => s[k]));
  const mb = median(samples.B.map((s) => s[k]));
  console.log(`| ${k} | ${ma.toFixed(1)} | ${mb.toFixed(1)} | ${(mb / ma).toFixed(2)} |`);
}
