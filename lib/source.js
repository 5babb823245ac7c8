'use strict';
// Prepares a program's text before it is submitted (lib/source-transform.js: Code Mode's
// function source, TypeScript's types erased, the last-expression or top-level-await
// rewrite). Small input is prepared inline, where a worker round trip would cost more;
// larger input on one worker thread, so that parsing megabytes (seconds) never holds the
// host's event loop. The run's wall-clock limit bounds that work.
const path = require('node:path');
const { SandboxValidationError, SandboxTimeoutError } = require('./errors');
const { own } = require('./own');
const { transformSource, unparsable, amaroDiscarded } = require('./source-transform');

/**
 * Input up to this many UTF-16 units is prepared inline: about a millisecond once the
 * parsers are loaded, no more than a round trip to the worker.
 */
const INLINE_MAX = 8 * 1024;

/** The worker thread that prepares larger input; created on first use, replaced if it dies. */
let preparer = null;

function getPreparer() {
  if (preparer !== null) return preparer;
  const { Worker } = require('node:worker_threads');
  const worker = new Worker(path.join(__dirname, 'source-worker.js'), {
    // acorn's tree of a 4 MB program takes about 180 MB; amaro's WebAssembly memory is
    // outside this heap, bounded by the input it is given.
    resourceLimits: { maxOldGenerationSizeMb: 512 },
    env: {},
    stdout: false,
    stderr: false,
  });
  // Jobs by id, in the order posted: the worker answers them one at a time, in order.
  const p = { worker, pending: new Map(), nextId: 1 };
  worker.on('message', (m) => {
    const job = p.pending.get(m.id);
    if (!job) return;
    p.pending.delete(m.id);
    if (p.pending.size === 0) worker.unref();
    // Code the worker left unchanged is not sent back: it is the job's own.
    job.settle(
      m.failure ? failureError(m.failure) : null,
      m.failure ? undefined : { code: m.code ?? job.code, map: m.map, ...(m.bareLastExpression === undefined ? {} : { bareLastExpression: m.bareLastExpression }) },
    );
  });
  const died = (message) => {
    // The input in progress (the oldest) is the one that broke it; the others are
    // handed to a fresh worker.
    const first = p.pending.values().next().value;
    if (first) abandon(first, failureError(unparsable(first.recipe, message)));
  };
  worker.on('error', (err) => died(String(err && err.message)));
  worker.on('exit', () => died('the source worker stopped'));
  worker.unref();
  preparer = p;
  return p;
}

function post(job) {
  const p = getPreparer();
  job.preparer = p;
  job.id = p.nextId++;
  p.pending.set(job.id, job);
  p.worker.ref();
  p.worker.postMessage({ id: job.id, code: job.code, recipe: job.recipe });
}

/**
 * Ends `job` with `error`. If the worker is busy with it (or died on it), the worker is
 * ended and the inputs waiting there move to a fresh one: one input that overruns its
 * limit or breaks the parser fails only its own run.
 */
function abandon(job, error) {
  const p = job.preparer;
  const inProgress = p.pending.values().next().value === job;
  p.pending.delete(job.id);
  job.settle(error);
  // Still queued: the worker's answer to it will find no job and be dropped.
  if (!inProgress) return;
  if (preparer === p) preparer = null;
  const rest = [...p.pending.values()];
  p.pending.clear();
  p.worker.terminate();
  for (const other of rest) post(other);
}

function failureError(failure) {
  return new SandboxValidationError(failure.message, failure);
}

/** What the wall-clock limit stopped, for its SandboxTimeoutError. */
function describeWork(recipe) {
  const steps = [];
  if (recipe.language === 'typescript') steps.push('compiling TypeScript');
  if (recipe.rewrite === 'lastExpression') steps.push('finding the last expression');
  if (recipe.rewrite === 'topLevelAwait') steps.push('the top-level await rewrite');
  if (recipe.rewrite === 'bareLastExpression') steps.push('looking for a last expression');
  return steps.length === 0 ? 'Preparing the code' : `Preparing the code (${steps.join(', ')})`;
}

/**
 * `code` prepared as `recipe` says (lib/source-transform.js `transformSource`): resolves
 * with `{ code, map }` (map: lib/positions.js, [] when nothing moved); TypeScript that
 * does not compile rejects with a
 * SandboxValidationError (1-based line and column). Input over `inlineMax` is prepared on
 * the worker thread: past `timeoutMs` the worker is ended (inputs queued behind move to a
 * new one) and the promise rejects with SandboxTimeoutError. `inlineMax` is for tests,
 * which force either path.
 *
 * @param {string} code
 * @param {{ language?: string, asyncBody?: boolean, normalizeCode?: boolean, rewrite?: 'lastExpression' | 'topLevelAwait' }} recipe
 * @param {{ timeoutMs?: number, inlineMax?: number }} [options]
 * @returns {Promise<{ code: string, map: Int32Array[] }>}
 */
function prepareSource(code, recipe, options = {}) {
  const typescript = recipe.language === 'typescript';
  if (!typescript && recipe.normalizeCode !== true && recipe.rewrite === undefined) return Promise.resolve({ code, map: [] });
  const inlineMax = own(options, 'inlineMax') ?? INLINE_MAX;
  // Loading amaro again here would hold the event loop for about 0.1 s, as often as input
  // breaks it: once it has, TypeScript is stripped on the worker.
  if (code.length <= inlineMax && !(typescript && amaroDiscarded())) {
    const out = transformSource(code, recipe);
    return out.failure ? Promise.reject(failureError(out.failure)) : Promise.resolve(out);
  }
  return new Promise((resolve, reject) => {
    let timer = null;
    const job = {
      code,
      recipe,
      preparer: null,
      id: 0,
      settle: (error, out) => {
        if (timer !== null) clearTimeout(timer);
        if (error) reject(error);
        else resolve(out);
      },
    };
    const timeoutMs = own(options, 'timeoutMs');
    if (timeoutMs !== undefined) {
      timer = setTimeout(() => {
        timer = null;
        abandon(job, new SandboxTimeoutError(`${describeWork(recipe)} exceeded the wall-clock limit of ${timeoutMs} ms`));
      }, timeoutMs);
    }
    post(job);
  });
}

/**
 * `code` as JavaScript when `language` is 'typescript' (types erased, positions kept; or
 * transformed, when it needs more), else as it is; `asyncBody`: the code is an async
 * function body.
 *
 * @param {string} code
 * @param {{ language?: 'javascript' | 'typescript', asyncBody?: boolean, timeoutMs?: number }} [options]
 * @returns {Promise<string>}
 */
async function stripTypes(code, options = {}) {
  const recipe = { language: own(options, 'language'), asyncBody: own(options, 'asyncBody') === true };
  return (await prepareSource(code, recipe, { timeoutMs: own(options, 'timeoutMs') })).code;
}

/**
 * Prepares a checked plan in place (natively, the plan says what is TypeScript): its code
 * made JavaScript (as an async body in that mode) and `rewrite` applied, in one pass; and
 * each TypeScript module of its `modules` map, whose errors name the module. Resolves
 * with the position map of the plan's code (lib/positions.js), for the run's errors.
 *
 * @param {object} plan
 * @param {'topLevelAwait'} [rewrite]
 * @returns {Promise<Int32Array[]>}
 */
async function preparePlan(plan, rewrite = undefined) {
  const timeoutMs = plan.wallTimeMs;
  let map = [];
  if (plan.language === 'typescript' || rewrite !== undefined) {
    const code = plan.code;
    const recipe = { language: plan.language, asyncBody: plan.mode === 'asyncBody', rewrite };
    const out = await prepareSource(code, recipe, { timeoutMs });
    if (out.code !== code) plan.code = out.code;
    map = out.map;
  }
  for (const key of plan.typescriptModules) {
    let code;
    try {
      code = await stripTypes(plan.moduleSource(key), { language: 'typescript', asyncBody: false, timeoutMs });
    } catch (err) {
      if (!(err instanceof SandboxValidationError)) throw err;
      throw new SandboxValidationError(`modules['${key}']: ${err.message}`, { line: err.line, column: err.column });
    }
    plan.setModule(key, code);
  }
  return map;
}

/** The hint a run with capabilities gets when its output is undefined and its last statement is an expression. */
const RETURN_HINT = 'the last expression is not returned; add `return` to make it the output (the code runs as the body of an async function)';

/**
 * The warn log entry for a run of async body `code` that answered undefined, when its last
 * statement is a bare expression (the seeds' contract keeps the output undefined); null
 * otherwise. Large code is parsed on the source worker, within `timeoutMs`.
 */
async function returnHint(code, language, timeoutMs) {
  if (typeof code !== 'string') return null;
  try {
    const out = await prepareSource(code, { language, asyncBody: true, rewrite: 'bareLastExpression' }, { timeoutMs });
    return out.bareLastExpression === true ? { level: 'warn', message: RETURN_HINT } : null;
  } catch {
    return null; // code that does not compile has a failure of its own
  }
}

/**
 * What `isolet run` and the MCP tool submit for `code`: JavaScript (TypeScript has its
 * types erased here, positions kept, so the rewrite parses it) with the last-expression
 * rule applied, on a worker thread when the code is large, within `timeoutMs`. Resolves
 * with `{ code, language: 'javascript', edits }`; bad TypeScript rejects with the
 * SandboxValidationError the engine would have given.
 */
async function prepareCode(code, language, timeoutMs) {
  const { code: out, map } = await prepareSource(code, { language, asyncBody: true, rewrite: 'lastExpression' }, { timeoutMs });
  // `edits`: the position map, for remapError.
  return { code: out, language: 'javascript', edits: map };
}

module.exports = { prepareSource, stripTypes, preparePlan, prepareCode, returnHint, RETURN_HINT };
