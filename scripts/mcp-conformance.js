#!/usr/bin/env node
// `node scripts/mcp-conformance.js [--out <dir>] [--revision <rev>]...`: the official MCP
// conformance suite (@modelcontextprotocol/conformance, the version package.json pins) against
// `isolet mcp --http`, under every protocol revision the suite tests, every server scenario
// that applies to isolet's one tool (`APPLIES` below, with what each checks; `CANNOT_APPLY`
// says why the others cannot). Two servers on 127.0.0.1 without a token (the suite sends
// none): the default (stateless) one and a stateful one, whose 2026-07-28 tool has the
// `sandbox` argument declared as an `x-mcp-header`. Checks that cannot apply inside an
// applicable scenario are listed, with reasons, in .ci/mcp-conformance-baseline.yml.
//
// Prints, per revision and server, the scenarios passed out of those that apply and the
// checks passed out of those run; exits 1 if any scenario fails, or if the suite lists a
// scenario this script does not know (a newer suite: decide whether it applies). The suite
// needs Node 22+: run it with that `node` first on PATH (.ci/run step `mcp` does).
'use strict';
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const BIN = path.join(ROOT, 'bin', 'isolet.js');
const SUITE = path.join(path.dirname(require.resolve('@modelcontextprotocol/conformance/package.json', { paths: [ROOT] })), 'dist', 'index.js');
const BASELINE = path.join(ROOT, '.ci', 'mcp-conformance-baseline.yml');
const REVISIONS = ['2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28'];

/** The scenarios that apply to a server whose one tool is run_code, and what they check. */
const APPLIES = {
  'server-initialize': 'the initialize handshake, session id format',
  'server-session-lifecycle': 'DELETE ends a session; its id is 404 afterwards',
  'logging-set-level': 'logging/setLevel',
  ping: 'ping',
  'tools-list': 'tools/list: names, descriptions, input schemas, name format',
  'server-sse-multiple-streams': 'concurrent POST SSE streams',
  'dns-rebinding-protection': 'foreign Host/Origin refused, loopback accepted',
  'server-stateless': '2026-07-28: per-request _meta validation (-32602, HTTP 400), server/discover, unsupported versions, header mismatch (-32020), removed methods (-32601, HTTP 404), subscriptions/listen',
  caching: '2026-07-28: ttlMs and cacheScope on tools/list',
  'http-header-validation': '2026-07-28: Mcp-Method / Mcp-Name header checks (-32020, HTTP 400)',
  'http-custom-header-server-validation': "2026-07-28: Mcp-Param-* headers of x-mcp-header arguments (the stateful server's sandbox argument)",
  'input-required-result-unsupported-methods': '2026-07-28: no input_required result outside tools/call, prompts/get, resources/read',
};
/** Scenarios that apply only to the stateful server (the stateless tool has no x-mcp-header argument). */
const STATEFUL_ONLY = new Set(['http-custom-header-server-validation']);

/** The suite's other server scenarios, and why they cannot apply to isolet. */
const NEEDS_TEST_TOOL = "calls one of the suite's own test tools (test_simple_text, test_error_handling, ...); isolet's one tool is run_code";
const CANNOT_APPLY = {
  'tools-call-simple-text': NEEDS_TEST_TOOL,
  'tools-call-image': NEEDS_TEST_TOOL,
  'tools-call-audio': NEEDS_TEST_TOOL,
  'tools-call-embedded-resource': NEEDS_TEST_TOOL,
  'tools-call-mixed-content': NEEDS_TEST_TOOL,
  'tools-call-with-logging': `${NEEDS_TEST_TOOL} (isolet's specs hold run_code's logging to each revision)`,
  'tools-call-error': `${NEEDS_TEST_TOOL} (a failing run_code is an isError result, tested by isolet's specs)`,
  'tools-call-with-progress': `${NEEDS_TEST_TOOL} (run_code's progress notifications are tested by isolet's specs)`,
  'tools-call-sampling': 'a test tool that asks the client to sample an LLM; run_code never asks the client for anything',
  'tools-call-elicitation': 'a test tool that asks the client for input; run_code never does',
  'elicitation-sep1034-defaults': 'elicitation; run_code never asks the client for input',
  'elicitation-sep1330-enums': 'elicitation; run_code never asks the client for input',
  'json-schema-2020-12': "a test tool whose input schema has JSON Schema 2020-12 keywords; run_code's schema is its own",
  'server-sse-polling': 'the test_reconnection tool, which closes its stream mid-call (the suite marks it pending)',
  'completion-complete': 'completion of prompt or resource template arguments; isolet has neither',
  'resources-list': 'resources; isolet offers none',
  'resources-read-text': 'resources; isolet offers none',
  'resources-read-binary': 'resources; isolet offers none',
  'resources-templates-read': 'resources; isolet offers none',
  'resources-subscribe': 'resources; isolet offers none',
  'resources-unsubscribe': 'resources; isolet offers none',
  'sep-2164-resource-not-found': 'resources; isolet offers none (resources/read is -32601, Method not found)',
  'prompts-list': 'prompts; isolet offers none',
  'prompts-get-simple': 'prompts; isolet offers none',
  'prompts-get-with-args': 'prompts; isolet offers none',
  'prompts-get-embedded-resource': 'prompts; isolet offers none',
  'prompts-get-with-image': 'prompts; isolet offers none',
};
for (const name of [
  'basic-elicitation',
  'basic-sampling',
  'basic-list-roots',
  'request-state',
  'multiple-input-requests',
  'multi-round',
  'missing-input-response',
  'non-tool-request',
  'result-type',
  'tampered-state',
  'capability-check',
  'ignore-extra-params',
  'validate-input',
]) {
  CANNOT_APPLY[`input-required-result-${name}`] = "test tools or prompts that return input_required (multi-round-trip); run_code never asks the client for input";
}

function parseArgs(argv) {
  const args = { out: null, revisions: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--out') args.out = argv[++i];
    else if (argv[i] === '--revision') args.revisions.push(argv[++i]);
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (args.revisions.length === 0) args.revisions = REVISIONS;
  return args;
}

/** The server scenarios the suite runs under `revision`. */
function listed(revision) {
  const r = spawnSync(process.execPath, [SUITE, 'list', '--server', '--spec-version', revision], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`conformance list failed: ${r.stderr}`);
  return [...r.stdout.matchAll(/^\s+- (\S+) \[/gm)].map((m) => m[1]);
}

/** `isolet mcp --http 127.0.0.1:0 ...args`; resolves with its URL once it serves. */
function startServer(args) {
  const child = spawn(process.execPath, [BIN, 'mcp', '--http', '127.0.0.1:0', '--timeout-ms', '2000', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`isolet mcp did not start: ${stderr}`)), 60_000);
    child.stderr.on('data', (d) => {
      stderr += d;
      const m = /serving run_code on (\S+)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1] });
      }
    });
    child.once('exit', (code) => reject(new Error(`isolet mcp exited ${code}: ${stderr}`)));
  });
}

function run(url, scenario, revision, outDir) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SUITE, 'server', '--url', url, '--scenario', scenario, '--spec-version', revision, '--expected-failures', BASELINE, '-o', outDir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.once('exit', (code) => {
      const dir = fs.readdirSync(outDir).find((d) => d.startsWith(`server-${scenario}-`));
      const checks = dir === undefined ? [] : JSON.parse(fs.readFileSync(path.join(outDir, dir, 'checks.json'), 'utf8'));
      resolve({ code, output, checks });
    });
  });
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const out = args.out ?? fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-mcp-conformance-'));
  const suiteVersion = require(path.join(path.dirname(SUITE), '..', 'package.json')).version;
  console.log(`MCP conformance ${suiteVersion} (Node ${process.versions.node}) against isolet mcp --http; results in ${out}`);
  let failed = false;
  const plan = new Map();
  for (const revision of args.revisions) {
    const scenarios = listed(revision);
    const unknown = scenarios.filter((s) => !(s in APPLIES) && !(s in CANNOT_APPLY));
    if (unknown.length > 0) {
      console.log(`${revision}: scenarios this script does not know (add them to APPLIES or CANNOT_APPLY): ${unknown.join(', ')}`);
      failed = true;
    }
    plan.set(revision, { applies: scenarios.filter((s) => s in APPLIES), cannot: scenarios.filter((s) => s in CANNOT_APPLY) });
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-mcp-conformance-config-'));
  fs.writeFileSync(path.join(dir, 'stateful.json'), JSON.stringify({ stateful: true }));
  const servers = [
    { name: 'stateless', ...(await startServer([])) },
    { name: 'stateful', ...(await startServer(['--config', path.join(dir, 'stateful.json')])) },
  ];
  const rows = [];
  try {
    for (const [revision, { applies, cannot }] of plan) {
      for (const server of servers) {
        const scenarios = applies.filter((s) => server.name === 'stateful' || !STATEFUL_ONLY.has(s));
        const row = { revision, server: server.name, scenarios: scenarios.length, passed: 0, checks: 0, checksPassed: 0, baselined: 0, failures: [] };
        for (const scenario of scenarios) {
          const outDir = path.join(out, revision, server.name);
          fs.mkdirSync(outDir, { recursive: true });
          const r = await run(server.url, scenario, revision, outDir);
          const counted = r.checks.filter((c) => c.status !== 'SKIPPED' && c.status !== 'INFO');
          const bad = counted.filter((c) => c.status === 'FAILURE');
          row.checks += counted.length;
          row.checksPassed += counted.length - bad.length;
          row.baselined += r.code === 0 ? bad.length : 0;
          if (r.code === 0) row.passed++;
          else {
            row.failures.push(`${scenario}: ${bad.map((c) => `${c.id} (${c.errorMessage ?? ''})`).join('; ') || r.output.trim().split('\n').slice(-5).join(' | ')}`);
            failed = true;
          }
        }
        rows.push(row);
      }
      console.log(`${revision}: cannot apply (${cannot.length}): ${cannot.join(', ')}`);
    }
  } finally {
    for (const server of servers) server.child.kill('SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log('\nrevision    server     scenarios passed   checks passed (of them baselined: cannot apply)');
  for (const r of rows) {
    console.log(`${r.revision}  ${r.server.padEnd(9)}  ${`${r.passed}/${r.scenarios}`.padEnd(17)}  ${r.checksPassed}/${r.checks}${r.baselined > 0 ? ` (+${r.baselined} baselined)` : ''}`);
    for (const f of r.failures) console.log(`  FAILED ${f}`);
  }
  for (const [scenario, why] of Object.entries(CANNOT_APPLY)) if (process.env.ISOLET_CONFORMANCE_VERBOSE) console.log(`  n/a ${scenario}: ${why}`);
  process.exitCode = failed ? 1 : 0;
}

main().catch((err) => {
  console.error(err.stack || String(err));
  process.exitCode = 1;
});
