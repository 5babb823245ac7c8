// The macOS cross build cannot run the darwin `node` it compiles against, so
// scripts/prebuild-darwin.js reads what build.rs's probe would print (V8's layout flags,
// version, ABI) from that node's headers. Checked here against Nodes that do run: the
// answer read from a Node's headers must equal the one its own process.config gives.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');
const { probeAnswer } = require('../scripts/prebuild-darwin') as { probeAnswer: (include: string) => Record<string, unknown> };

// build.rs's PROBE, the fields that decide the binary (execPath aside).
const PROBE = `const v = process.config.variables;
console.log(JSON.stringify({
  version: process.versions.node, abi: process.versions.modules,
  pc: v.v8_enable_pointer_compression, pcShared: v.v8_enable_pointer_compression_shared_cage,
  smi31: v.v8_enable_31bit_smis_on_64bit_arch, sandbox: v.v8_enable_sandbox,
  checks: v.v8_enable_v8_checks, zones: v.v8_enable_zone_compression,
  extCode: v.v8_enable_external_code_space, directLocal: v.v8_enable_direct_local,
  css: v.v8_enable_conservative_stack_scanning, mapPacking: v.v8_enable_map_packing }))`;

const PROBE_KEYS = Object.fromEntries(
  ['version', 'abi', 'pc', 'pcShared', 'smi31', 'sandbox', 'checks', 'zones', 'extCode', 'directLocal', 'css', 'mapPacking'].map((k) => [k, true]),
);

/** This Node and the cached Node lines of .ci/run, each with its headers. */
function nodes(): { node: string; include: string }[] {
  const found = [{ node: process.execPath, include: path.join(path.dirname(path.dirname(process.execPath)), 'include', 'node') }];
  for (const major of [22, 24, 26]) {
    const bin = path.join(root, '.ci-cache', `node${major}`, 'package', 'bin', 'node');
    if (fs.existsSync(bin)) found.push({ node: bin, include: path.join(root, '.ci-cache', `node${major}`, 'package', 'include', 'node') });
  }
  return found;
}

describe('prebuild-darwin: the probe answer read from a Node\'s headers', () => {
  it('equals what that Node reports about itself, for every Node at hand', async () => {
    const checked = nodes().filter((n) => fs.existsSync(path.join(n.include, 'config.gypi')));
    expect(checked.length).toBeGreaterThan(0);
    for (const { node, include } of checked) {
      const r = await runChild(node, ['-e', PROBE]);
      expect(r.status, r.stderr).toBe(0);
      const reported = JSON.parse(r.stdout);
      const { execPath: _, ...read } = probeAnswer(include);
      // Value for value (a flag missing from both is undefined in both), so a variable
      // the reader misses fails even where the flag is off.
      for (const key of Object.keys(PROBE_KEYS)) expect(read[key], `${node}: ${key}`).toStrictEqual(reported[key]);
    }
  });
});
