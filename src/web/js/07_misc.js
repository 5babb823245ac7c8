// 07_misc.js: structuredClone, queueMicrotask and performance.
// (A function body: `src/web/mod.rs` wraps it as `(function (lib) { ... })` with `op`,
// `clone`, `load`, `OP` and `SCRIPT` in scope.)
const { TOKEN, illegalConstructor, requiredArguments, toDOMString, toUSVString, toBoolean, toDictionary, bufferSourceBytes, webidlClass, reportException, newDOMException } = load(SCRIPT.webidl);

const then = Promise.prototype.then;
const resolved = Promise.resolve();
class Performance extends load(SCRIPT.events).EventTarget {
  #origin = op(OP.timeOrigin);
  constructor(token) {
    if (token !== TOKEN) illegalConstructor();
    super();
  }
  now() {
    return op(OP.now);
  }
  get timeOrigin() {
    return this.#origin;
  }
  toJSON() {
    return { timeOrigin: this.#origin };
  }
}
return {
  structuredClone(value, options = undefined) {
    requiredArguments(arguments.length, 1, "Failed to execute 'structuredClone'");
    options = toDictionary(options, "Failed to execute 'structuredClone'");
    if (options.transfer !== undefined && [...options.transfer].length > 0) {
      throw newDOMException("Failed to execute 'structuredClone': transferring objects is not supported in this sandbox", 'DataCloneError');
    }
    return clone(value);
  },
  queueMicrotask(callback) {
    requiredArguments(arguments.length, 1, "Failed to execute 'queueMicrotask'");
    if (typeof callback !== 'function') {
      throw new TypeError("Failed to execute 'queueMicrotask': parameter 1 is not of type 'Function'.");
    }
    then.call(resolved, () => {
      try {
        callback();
      } catch (e) {
        reportException(e);
      }
    });
  },
  performance: new Performance(TOKEN),
  Performance: webidlClass(Performance),
};
