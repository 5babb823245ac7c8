// ES modules next to a script: 400 runSandbox runs of each case per isolation mode, the
// median and p90 in ms (a module, a module importing two modules of its map, the same two
// fetched through `resolve`: two round trips to this thread).
// `node bench/probes/module-runs.js` (after `node scripts/build.js`).
'use strict';
const { runSandbox } = require('../..');
(async () => {
  const modules = { 'a.js': "import { b } from './b.js'; export const a = () => b + 1;", 'b.js': 'export const b = 1;' };
  const cases = {
    script: ['1 + 1', {}],
    module: ['export default 1 + 1', { type: 'module' }],
    'module+2 imports': ["import { a } from './a.js'; export default a()", { type: 'module', modules }],
    'module+resolve(2)': ["import { a } from './a.js'; export default a()", { type: 'module', resolve: (k) => modules[k] }],
  };
  for (const isolation of ['thread', 'process']) {
    for (const [name, [code, opts]] of Object.entries(cases)) {
      const times = [];
      for (let i = 0; i < 400; i++) {
        const t = process.hrtime.bigint();
        const r = await runSandbox(code, { isolation, ...opts });
        if (!r.success) throw r.error;
        times.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
      times.sort((a, b) => a - b);
      console.log(isolation, name, 'median ms', times[200].toFixed(3), 'p90', times[360].toFixed(3));
    }
  }
  process.exit(0);
})();
