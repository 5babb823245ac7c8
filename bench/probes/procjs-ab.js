// A/B of process isolation's hot paths (procjs-trivial.js) between two checkouts:
// `node bench/probes/procjs-ab.js <rootA> <rootB> [rounds]` runs `procjs-trivial.js` in a fresh child
// for A, then B, `rounds` times (default 5), and prints the median of each figure.
// E.g. A = `git archive <old> | tar -x -C /tmp/old` with the old build/, B = this checkout.
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const [a, b, roundsArg] = process.argv.slice(2);
if (!a || !b) {
  console.error('usage: node bench/probes/procjs-ab.js <rootA> <rootB> [rounds]');
  process.exit(2);
}
const rounds = Number(roundsArg || 5);
const probe = path.join(__dirname, 'procjs-trivial.js');
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
    process.stderr.write(`round ${r + 1}/${rounds} ${label} done\n`);
  }
}
const keys = Object.keys(samples.A[0]);
console.log(`Node ${process.version}, ${rounds} rounds alternated, medians. A = ${a}, B = ${b}`);
console.log('| figure | A | B | B/A |');
console.log('|---|---:|---:|---:|');
for (const k of keys) {
  const ma = median(samples.A.map((s) => s[k]));
  const mb = median(samples.B.map((s) => s[k]));
  console.log(`| ${k} | ${ma.toFixed(1)} | ${mb.toFixed(1)} | ${(mb / ma).toFixed(2)} |`);
}
