// A/B of a probe between two checkouts, each with its addon built:
// `node bench/probes/ab.js <rootA> <rootB> [rounds] [--probe=<file.js>] [probe args...]`
// runs `<probe> <root> [probe args...]` in a fresh child for A, then B (the order
// alternating every round), `rounds` times (default 5), and prints the median of each
// figure of the probe's last output line (one JSON object of numbers) side by side.
// The probe defaults to hot-paths.js. E.g. A = `git archive <old> | tar -x -C /tmp/old`
// with the old build/, B = this checkout; `--probe=copies-paths.js thread u8Out,strOut`.
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const args = process.argv.slice(2);
const probeArg = args.find((x) => x.startsWith('--probe='));
const [a, b, roundsArg, ...probeArgs] = args.filter((x) => x !== probeArg);
if (!a || !b) {
  console.error('usage: node bench/probes/ab.js <rootA> <rootB> [rounds] [--probe=<file.js>] [probe args...]');
  process.exit(2);
}
const rounds = Number(roundsArg || 5);
const probeName = probeArg ? probeArg.slice('--probe='.length) : 'hot-paths.js';
const probe = path.isAbsolute(probeName) ? probeName : path.join(__dirname, probeName);
const median = (xs) => { const s = [...xs].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const samples = { A: [], B: [] };
for (let r = 0; r < rounds; r++) {
  for (const [label, root] of r % 2 ? [['B', b], ['A', a]] : [['A', a], ['B', b]]) {
    const child = spawnSync(process.execPath, [probe, path.resolve(root), ...probeArgs], { encoding: 'utf8' });
    if (child.status !== 0) {
      console.error(`${label} failed:\n${child.stderr}`);
      process.exit(1);
    }
    samples[label].push(JSON.parse(child.stdout.trim().split('\n').pop()));
    process.stderr.write(`round ${r + 1}/${rounds} ${label} done\n`);
  }
}
const keys = Object.keys(samples.A[0]);
console.log(`Node ${process.version}, ${path.basename(probe)}, ${rounds} rounds alternated, medians. A = ${a}, B = ${b}`);
console.log('| figure | A | B | B/A |');
console.log('|---|---:|---:|---:|');
for (const k of keys) {
  const ma = median(samples.A.map((s) => s[k]));
  const mb = median(samples.B.map((s) => s[k]));
  console.log(`| ${k} | ${ma.toFixed(1)} | ${mb.toFixed(1)} | ${(mb / ma).toFixed(2)} |`);
}
