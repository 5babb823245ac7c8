// 08_timers.js: setTimeout, setInterval, clearTimeout and clearInterval (HTML's timer
// initialization steps: integer ids, nesting clamp, ordering by deadline then creation,
// arguments). The run loop waits for the earliest deadline (`OP.timerArm` gives a promise
// Rust settles when it is due), and fires one timer per wake-up, so microtasks queued by a
// callback run before the next timer, as between two tasks. Timers belong to the run: when
// its result settles, those still pending are dropped (as Cloudflare Workers do), and a
// persistent sandbox's next run starts with none (`OP.timerEpoch` changes).
// (A function body: `src/web/mod.rs` wraps it as `(function (lib) { ... })` with `op`,
// `clone`, `load`, `OP`, `SCRIPT` and `LIMITS` in scope.)
const { requiredArguments, reportException } = load(SCRIPT.webidl);
const then = Promise.prototype.then;
const apply = Reflect.apply;

/** id -> timer: { id, callback, args, deadline, seq, interval (ms or -1), nesting } */
const timers = new Map();
/** Pending timers as a binary min-heap by (deadline, seq); cleared ones are skipped. */
let heap = [];
let nextId = 1;
let seq = 0;
let nesting = 0;
let epoch = -1;
let armedAt = Infinity;
let armGeneration = 0;

const before = (a, b) => a.deadline < b.deadline || (a.deadline === b.deadline && a.seq < b.seq);

function heapPush(t) {
  heap.push(t);
  let i = heap.length - 1;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (!before(heap[i], heap[parent])) break;
    [heap[i], heap[parent]] = [heap[parent], heap[i]];
    i = parent;
  }
}

function heapPop() {
  const top = heap[0];
  const last = heap.pop();
  if (heap.length > 0) {
    heap[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1, r = l + 1;
      let m = i;
      if (l < heap.length && before(heap[l], heap[m])) m = l;
      if (r < heap.length && before(heap[r], heap[m])) m = r;
      if (m === i) break;
      [heap[i], heap[m]] = [heap[m], heap[i]];
      i = m;
    }
  }
  return top;
}

/** The earliest timer still pending. */
function earliest() {
  while (heap.length > 0 && timers.get(heap[0].id) !== heap[0]) heapPop();
  return heap[0];
}

/** A new run of a persistent sandbox: what earlier runs left is gone. */
function sync() {
  const current = op(OP.timerEpoch);
  if (current !== epoch) {
    epoch = current;
    timers.clear();
    heap = [];
    armedAt = Infinity;
    armGeneration++;
  }
}

/** Asks the run loop to wake at the earliest deadline (unless it already will by then). */
function arm() {
  const t = earliest();
  if (t === undefined || t.deadline >= armedAt) return;
  armedAt = t.deadline;
  const generation = ++armGeneration;
  const at = t.deadline;
  apply(then, op(OP.timerArm, at), [(fired) => wake(generation, fired, at)]);
}

function wake(generation, fired, at) {
  if (generation !== armGeneration) return;
  armedAt = Infinity;
  if (!fired) return;
  const t = earliest();
  if (t !== undefined && t.deadline <= at) fire(t);
  arm();
}

function fire(t) {
  heapPop();
  nesting = t.nesting;
  try {
    apply(t.callback, globalThis, t.args);
  } catch (e) {
    reportException(e);
  } finally {
    nesting = 0;
  }
  if (t.interval < 0) {
    if (timers.get(t.id) === t) timers.delete(t.id);
  } else if (timers.get(t.id) === t) {
    // Repeats run the timer initialization steps again, one nesting level deeper.
    t.deadline = op(OP.now) + clamp(t.interval, t.nesting);
    t.nesting++;
    t.seq = seq++;
    heapPush(t);
  }
}

/** WebIDL `long`, then the HTML standard's floor of 0 and its 4 ms clamp past 5 levels. */
function clamp(timeout, level) {
  let ms = timeout | 0;
  if (ms < 0) ms = 0;
  if (level > 5 && ms < 4) ms = 4;
  return ms;
}

function schedule(what, handler, timeout, args, repeat) {
  if (typeof handler !== 'function') {
    throw new TypeError(`Failed to execute '${what}': parameter 1 is not a function (a string of code is not run in this sandbox).`);
  }
  sync();
  if (timers.size >= LIMITS.maxTimers) {
    throw new RangeError(`Failed to execute '${what}': ${LIMITS.maxTimers} timers are already pending, the sandbox's limit; clear some first.`);
  }
  const ms = clamp(timeout === undefined ? 0 : Number(timeout), nesting);
  const t = {
    id: nextId++,
    callback: handler,
    args,
    deadline: op(OP.now) + ms,
    seq: seq++,
    interval: repeat ? ms : -1,
    nesting: nesting + 1,
  };
  timers.set(t.id, t);
  heapPush(t);
  arm();
  return t.id;
}

function clear(id) {
  sync();
  timers.delete(id | 0);
}

return {
  setTimeout(handler, timeout = 0, ...args) {
    requiredArguments(arguments.length, 1, "Failed to execute 'setTimeout'");
    return schedule('setTimeout', handler, timeout, args, false);
  },
  setInterval(handler, timeout = 0, ...args) {
    requiredArguments(arguments.length, 1, "Failed to execute 'setInterval'");
    return schedule('setInterval', handler, timeout, args, true);
  },
  clearTimeout(id = 0) {
    clear(id);
  },
  clearInterval(id = 0) {
    clear(id);
  },
};
