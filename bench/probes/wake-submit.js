// `planRun` and `NativeEngine.submit` alone, without thread wake-ups: `node
// bench/probes/wake-submit.js [root]` holds the engine's only slot with a run waiting on a
// host call that is never answered, so the 20,000 runs submitted after it queue; prints
// one JSON line: CPU and wall µs per `planRun('1+1')`, per `submit` of a queued run, and
// per run to deliver the `done` events of the queued runs aborted by `shutdown()`.
const path = require('node:path');
const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const native = require(path.join(root, 'lib', 'native.js'));

const cpuUs = () => { const c = process.cpuUsage(); return c.user + c.system; };
const nowUs = () => Number(process.hrtime.bigint()) / 1e3;
const N = 20000;
const settings = new native.EngineSettings({ isolation: 'thread', memoryMb: 64, maxConcurrentIsolates: 1, warmPoolSize: 0, maxQueueSize: 1000000 });
const eng = new native.NativeEngine(settings);
let done = 0;
const onEvent = (ev) => { if (ev.type === 'done') done++; };
const hold = native.planRun('await f()', { isolation: 'thread', timeoutMs: 60000, capabilities: ['f'] });
eng.submit(hold, onEvent);
const plan = native.planRun('1+1', { isolation: 'thread' });
// Both spellings: a plan field before the plan was a class, a submit argument since.
plan.startedEvent = false;
for (let i = 0; i < 2000; i++) { native.planRun('1+1', { isolation: 'thread' }); eng.submit(plan, onEvent, false); }
const out = {};
let t = nowUs(), c = cpuUs();
for (let i = 0; i < N; i++) native.planRun('1+1', { isolation: 'thread' });
out.planRunCpuUs = (cpuUs() - c) / N;
out.planRunWallUs = (nowUs() - t) / N;
t = nowUs(); c = cpuUs();
for (let i = 0; i < N; i++) eng.submit(plan, onEvent, false);
out.submitCpuUs = (cpuUs() - c) / N;
out.submitWallUs = (nowUs() - t) / N;
const total = N + 2001;
t = nowUs(); c = cpuUs();
eng.shutdown();
(function wait() {
  if (done < total) return setImmediate(wait);
  out.doneCpuUs = (cpuUs() - c) / total;
  out.doneWallUs = (nowUs() - t) / total;
  console.log(JSON.stringify(out));
  process.exit(0);
})();
