// What preparing a large program costs Node's thread, per entry point: `node
// bench/probes/parse-lag.js [root] [thread|process] [rounds]` submits a ~4 MB program (many
// `x += 1;` lines ending in an expression; with a top-level await for the persistent
// sandbox and the stateful MCP tool) through each entry point of the checkout at `root`
// and prints one JSON line each: the event-loop delay around each call
// (monitorEventLoopDelay's max, ms), Node's main thread's CPU time in it
// (/proc/self/task/<pid>/schedstat: unlike the delay, not raised by other processes on the
// cores), its wall time, and whether it gave the program's value. Every entry point is
// loaded and warmed with a small program first. `baseline` is a trivial run: its delay is
// the machine's noise.
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const { monitorEventLoopDelay } = require('node:perf_hooks');

const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const isolation = process.argv[3] || 'thread';
const rounds = Number(process.argv[4] || 3);
const isolet = require(root);
const { IsoletExecutor } = require(path.join(root, 'lib', 'codemode'));
const { runCommand } = require(path.join(root, 'lib', 'cli', 'run'));
const { createMcpServer, mcpSettings } = require(path.join(root, 'lib', 'mcp'));
const { Client } = require(require.resolve('@modelcontextprotocol/sdk/client/index.js', { paths: [root] }));
const { InMemoryTransport } = require(require.resolve('@modelcontextprotocol/sdk/inMemory.js', { paths: [root] }));

const LINES = 500_000;
// ~4 MB. `var`: persistent sandboxes (sandbox.run, MCP stateful) run it again.
const body = 'var x = 0;\n' + 'x += 1;\n'.repeat(LINES);
const LIMITS = { timeoutMs: 60_000, memoryMb: 512 };
const mainCpuMs = () => Number(fs.readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function measure(call) {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  // The histogram records from its second tick on: a stall before that would go unseen.
  await sleep(20);
  const cpu0 = mainCpuMs();
  const t0 = performance.now();
  const value = await call();
  const wallMs = performance.now() - t0;
  const cpuMs = mainCpuMs() - cpu0;
  await sleep(10);
  h.disable();
  return { lagMs: h.max / 1e6, cpuMs, wallMs, value };
}

async function mcpClient(settings) {
  const mcp = createMcpServer(settings);
  const [serverSide, clientSide] = InMemoryTransport.createLinkedPair();
  await mcp.server.connect(serverSide);
  const client = new Client({ name: 'parse-lag', version: '1' });
  await client.connect(clientSide);
  const call = async (code) => {
    const r = await client.callTool({ name: 'run_code', arguments: { code } });
    return r.isError ? r.content[0].text.slice(0, 200) : JSON.parse(r.content[0].text);
  };
  return { call, close: () => mcp.close() };
}

(async () => {
  const engine = new isolet.SandboxEngine({ isolation, memoryMb: LIMITS.memoryMb, maxConcurrentIsolates: 2, warmPoolSize: 0 });
  await engine.init();
  const executorOptions = { timeout: LIMITS.timeoutMs, memoryMb: LIMITS.memoryMb, maxConcurrentIsolates: 2, isolation };
  const executor = new IsoletExecutor(executorOptions);
  const settings = mcpSettings({ timeoutMs: LIMITS.timeoutMs, memoryMb: LIMITS.memoryMb, isolation });
  const mcp = await mcpClient(settings);
  const closers = [() => mcp.close(), () => executor.dispose(), () => engine.shutdown()];
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'parse-lag-')), 'big.js');
  let out = '';
  const io = { stdout: { write: (s) => (out += s) }, stderr: { write: () => {} } };
  const isoletRun = async (source) => {
    fs.writeFileSync(file, source);
    out = '';
    const args = [file, '--timeout-ms', String(LIMITS.timeoutMs), '--memory-mb', String(LIMITS.memoryMb), '--isolation', isolation];
    await runCommand(args, io);
    return JSON.parse(out || 'null');
  };
  // A persistent sandbox keeps what each 4 MB run compiled (a few runs fill 512 MB): the
  // stateful entry points get a fresh one for every round, opened before it is measured.
  const fresh = {
    sandbox: async () => {
      const sandbox = await isolet.createSandbox({ isolation, memoryLimitMb: LIMITS.memoryMb, timeoutMs: LIMITS.timeoutMs });
      closers.push(async () => sandbox.close());
      return (code) => sandbox.run(code).then((r) => (r.success ? r.output : r.error.message));
    },
    mcp: async () => {
      const client = await mcpClient({ ...settings, stateful: true });
      closers.push(() => client.close());
      return client.call;
    },
    codemode: async () => {
      const stateful = new IsoletExecutor({ ...executorOptions, stateful: true });
      closers.push(() => stateful.dispose());
      return (code) => stateful.execute(code, []).then((r) => r.error ?? r.result);
    },
  };

  // Each takes the program's tail (the last expression, `return` or the completion value)
  // and, for the stateful ones, this round's sandbox.
  const entries = {
    baseline: () => isolet.runSandbox('1', { isolation }).then((r) => (r.success ? LINES : r.error.message)),
    runSandbox: (tail) => isolet.runSandbox(tail(body, 'x'), { isolation, timeoutMs: LIMITS.timeoutMs, memoryLimitMb: LIMITS.memoryMb }).then((r) => (r.success ? r.output : r.error.message)),
    'engine.submit': (tail) =>
      engine.submit({ code: tail(body, 'return x'), isolateLimits: { wallTimeMs: LIMITS.timeoutMs } }).done.then((e) => (e.type === 'result' ? e.data : e.error.message)),
    'sandbox.run': (tail, run) => run(tail(body, 'x')),
    'sandbox.run await': (tail, run) => run(tail(body, 'await null;\nx')),
    'isolet run': (tail) => isoletRun(tail(body, 'x')),
    mcp: (tail) => mcp.call(tail(body, 'x')),
    'mcp stateful': (tail, run) => run(tail(body, 'await null;\nx')),
    codemode: (tail) => executor.execute(`async () => {\n${tail(body, 'return x;')}\n}`, []).then((r) => r.error ?? r.result),
    'codemode stateful': (tail, run) => run(`async () => {\n${tail(body, 'return x;')}\n}`),
  };
  const freshFor = { 'sandbox.run': fresh.sandbox, 'sandbox.run await': fresh.sandbox, 'mcp stateful': fresh.mcp, 'codemode stateful': fresh.codemode };
  const small = (_, end) => `var x = ${LINES};\n${end}`;
  const large = (program, end) => program + end;
  for (const [entry, call] of Object.entries(entries)) {
    const open = freshFor[entry];
    const warm = await call(small, open && (await open()));
    const lags = [];
    const cpus = [];
    const walls = [];
    let ok = warm === LINES || String(warm).slice(0, 200);
    for (let i = 0; i < rounds && ok === true; i++) {
      const run = open && (await open());
      if (run) await run(small(body, 'x'));
      const { lagMs, cpuMs, wallMs, value } = await measure(() => call(large, run));
      lags.push(+lagMs.toFixed(1));
      cpus.push(+cpuMs.toFixed(1));
      walls.push(Math.round(wallMs));
      if (value !== LINES) ok = String(value).slice(0, 200);
    }
    console.log(JSON.stringify({ entry, isolation, maxLagMs: Math.max(...lags), lagsMs: lags, mainCpuMs: cpus, wallMs: walls, ok }));
  }
  for (const close of closers) await close();
  process.exit(0);
})();
