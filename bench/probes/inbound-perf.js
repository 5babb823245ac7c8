// A loop for `perf record` of host-call replies into the sandbox (helper inbound):
// `perf record -F 2000 -g node --perf-basic-prof bench/probes/inbound-perf.js [root] [u8|str] [runs]`
// then `perf report --children --sort comm,sym -g none`. Each thread-mode run asks a
// capability for one 32 MB Uint8Array (or ASCII string) and returns its length.
const path = require('node:path');

const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const kind = process.argv[3] || 'u8';
const runs = Number(process.argv[4] || 40);
const { runSandbox } = require(path.join(root, 'index.js'));

const BIG = 32 << 20;
const value = kind === 'str' ? 'abcdefgh'.repeat(BIG / 8) : new Uint8Array(BIG).fill(7);
const LIMITS = { isolation: 'thread', memoryLimitMb: 1024, maxOutputBytes: 64 << 20, maxMessageBytes: 64 << 20, timeoutMs: 20000 };

(async () => {
  for (let i = 0; i < runs; i++) {
    const r = await runSandbox('return (await get()).length', { ...LIMITS, capabilities: { get: () => value } });
    if (!r.success || r.output !== BIG) throw new Error(r.success ? `wrong length ${r.output}` : r.error.message);
  }
})();
