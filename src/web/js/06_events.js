// 06_events.js: Event, EventTarget, CustomEvent, AbortController and AbortSignal (the DOM
// standard's event dispatch, without a tree: a target is its only path).
// (A function body: `src/web/mod.rs` wraps it as `(function (lib) { ... })` with `op`,
// `clone`, `load`, `OP` and `SCRIPT` in scope.)
const { TOKEN, illegalConstructor, requiredArguments, toDOMString, toUSVString, toBoolean, toDictionary, bufferSourceBytes, webidlClass, reportException, newDOMException } = load(SCRIPT.webidl);

const NONE = 0, CAPTURING_PHASE = 1, AT_TARGET = 2, BUBBLING_PHASE = 3;
let internals; // (Event) -> its state, for dispatch
const started = op(OP.now);

class Event {
  #s;
  constructor(type, eventInitDict = undefined) {
    requiredArguments(arguments.length, 1, "Failed to construct 'Event'");
    const init = toDictionary(eventInitDict, "Failed to construct 'Event'");
    this.#s = {
      type: toDOMString(type),
      bubbles: toBoolean(init.bubbles),
      cancelable: toBoolean(init.cancelable),
      composed: toBoolean(init.composed),
      canceled: false,
      stop: false,
      stopImmediate: false,
      passive: false,
      dispatching: false,
      initialized: true,
      target: null,
      currentTarget: null,
      phase: NONE,
      timeStamp: op(OP.now) - started,
    };
  }
  get type() { return this.#s.type; }
  get target() { return this.#s.target; }
  get srcElement() { return this.#s.target; }
  get currentTarget() { return this.#s.currentTarget; }
  composedPath() { return this.#s.currentTarget === null ? [] : [this.#s.currentTarget]; }
  get eventPhase() { return this.#s.phase; }
  stopPropagation() { this.#s.stop = true; }
  get cancelBubble() { return this.#s.stop; }
  set cancelBubble(value) { if (toBoolean(value)) this.#s.stop = true; }
  stopImmediatePropagation() { this.#s.stop = true; this.#s.stopImmediate = true; }
  get bubbles() { return this.#s.bubbles; }
  get cancelable() { return this.#s.cancelable; }
  get returnValue() { return !this.#s.canceled; }
  set returnValue(value) { if (!toBoolean(value)) this.preventDefault(); }
  preventDefault() { if (this.#s.cancelable && !this.#s.passive) this.#s.canceled = true; }
  get defaultPrevented() { return this.#s.canceled; }
  get composed() { return this.#s.composed; }
  get isTrusted() { return false; }
  get timeStamp() { return this.#s.timeStamp; }
  initEvent(type, bubbles = false, cancelable = false) {
    requiredArguments(arguments.length, 1, "Failed to execute 'initEvent' on 'Event'");
    const s = this.#s;
    if (s.dispatching) return;
    Object.assign(s, { type: toDOMString(type), bubbles: toBoolean(bubbles), cancelable: toBoolean(cancelable), stop: false, stopImmediate: false, canceled: false, target: null });
  }
  static {
    internals = (event) => event.#s;
  }
}
for (const [name, value] of Object.entries({ NONE, CAPTURING_PHASE, AT_TARGET, BUBBLING_PHASE })) {
  Object.defineProperty(Event, name, { value, enumerable: true });
  Object.defineProperty(Event.prototype, name, { value, enumerable: true });
}

class CustomEvent extends Event {
  #detail;
  constructor(type, eventInitDict = undefined) {
    requiredArguments(arguments.length, 1, "Failed to construct 'CustomEvent'");
    super(type, eventInitDict);
    this.#detail = toDictionary(eventInitDict, "Failed to construct 'CustomEvent'").detail ?? null;
  }
  get detail() { return this.#detail; }
  initCustomEvent(type, bubbles = false, cancelable = false, detail = null) {
    requiredArguments(arguments.length, 1, "Failed to execute 'initCustomEvent' on 'CustomEvent'");
    if (internals(this).dispatching) return;
    this.initEvent(type, bubbles, cancelable);
    this.#detail = detail;
  }
}

function flatten(options) {
  if (options !== null && typeof options === 'object') return toBoolean(options.capture);
  return toBoolean(options);
}

let listenersOf; // (EventTarget) -> Map of type -> listener records
class EventTarget {
  #listeners = new Map();
  addEventListener(type, callback, options = undefined) {
    requiredArguments(arguments.length, 2, "Failed to execute 'addEventListener' on 'EventTarget'");
    type = toDOMString(type);
    const capture = flatten(options);
    let once = false, passive = false, signal = null;
    if (options !== null && typeof options === 'object') {
      once = toBoolean(options.once);
      passive = toBoolean(options.passive);
      if (options.signal !== undefined) {
        signal = options.signal;
        if (!(signal instanceof AbortSignal)) {
          throw new TypeError("Failed to execute 'addEventListener' on 'EventTarget': member signal is not of type AbortSignal.");
        }
      }
    }
    if (callback === null) return;
    if (typeof callback !== 'function' && typeof callback !== 'object') {
      throw new TypeError("Failed to execute 'addEventListener' on 'EventTarget': The callback provided as parameter 2 is not an object.");
    }
    if (signal !== null && signal.aborted) return;
    let list = this.#listeners.get(type);
    if (list === undefined) this.#listeners.set(type, (list = []));
    if (list.some((l) => l.callback === callback && l.capture === capture)) return;
    const listener = { callback, capture, once, passive, removed: false };
    list.push(listener);
    if (signal !== null) {
      signal.addEventListener('abort', () => this.removeEventListener(type, callback, { capture }));
    }
  }
  removeEventListener(type, callback, options = undefined) {
    requiredArguments(arguments.length, 2, "Failed to execute 'removeEventListener' on 'EventTarget'");
    type = toDOMString(type);
    const capture = flatten(options);
    const list = this.#listeners.get(type);
    if (list === undefined) return;
    const at = list.findIndex((l) => l.callback === callback && l.capture === capture);
    if (at === -1) return;
    list[at].removed = true;
    list.splice(at, 1);
  }
  dispatchEvent(event) {
    requiredArguments(arguments.length, 1, "Failed to execute 'dispatchEvent' on 'EventTarget'");
    if (!(event instanceof Event)) {
      throw new TypeError("Failed to execute 'dispatchEvent' on 'EventTarget': parameter 1 is not of type 'Event'.");
    }
    const s = internals(event);
    if (s.dispatching || !s.initialized) {
      throw newDOMException("Failed to execute 'dispatchEvent' on 'EventTarget': The event is already being dispatched.", 'InvalidStateError');
    }
    s.dispatching = true;
    s.target = this;
    s.currentTarget = this;
    s.phase = AT_TARGET;
    // At the target, capturing listeners run first, then the others (the DOM's order).
    const list = this.#listeners.get(s.type);
    if (list !== undefined) {
      const snapshot = list.slice();
      for (const capturing of [true, false]) {
        for (const l of snapshot) {
          if (s.stopImmediate) break;
          if (l.removed || l.capture !== capturing) continue;
          if (l.once) this.removeEventListener(s.type, l.callback, { capture: l.capture });
          s.passive = l.passive;
          try {
            if (typeof l.callback === 'function') l.callback.call(this, event);
            else {
              const handle = l.callback.handleEvent;
              if (typeof handle !== 'function') throw new TypeError("'handleEvent' is not a function");
              handle.call(l.callback, event);
            }
          } catch (e) {
            reportException(e);
          }
          s.passive = false;
        }
      }
    }
    s.dispatching = false;
    s.phase = NONE;
    s.currentTarget = null;
    s.stop = false;
    s.stopImmediate = false;
    return !s.canceled;
  }
  static {
    listenersOf = (target) => target.#listeners;
  }
}

/** An `on<type>` event handler attribute on `proto`. */
function eventHandler(proto, type) {
  const handlers = new WeakMap();
  Object.defineProperty(proto, `on${type}`, {
    get() {
      return handlers.get(this)?.value ?? null;
    },
    set(value) {
      let slot = handlers.get(this);
      if (slot === undefined) {
        slot = { value: null };
        handlers.set(this, slot);
        // Registered at the first set, so it keeps its place among the listeners.
        this.addEventListener(type, (event) => {
          if (typeof slot.value === 'function') slot.value.call(this, event);
        });
      }
      slot.value = typeof value === 'function' || (value !== null && typeof value === 'object') ? value : null;
    },
    enumerable: true,
    configurable: true,
  });
}

let signalAbort; // (AbortSignal, reason) -> void
let followSignal; // (AbortSignal, source AbortSignal) -> void
class AbortSignal extends EventTarget {
  #aborted = false;
  #reason = undefined;
  #dependents = [];
  constructor(token) {
    if (token !== TOKEN) illegalConstructor();
    super();
  }
  static abort(reason = undefined) {
    const signal = new AbortSignal(TOKEN);
    signal.#aborted = true;
    signal.#reason = reason === undefined ? newDOMException('This operation was aborted', 'AbortError') : reason;
    return signal;
  }
  static timeout(milliseconds) {
    requiredArguments(arguments.length, 1, "Failed to execute 'timeout' on 'AbortSignal'");
    const ms = Number(milliseconds);
    if (!Number.isFinite(ms) || ms < 0 || ms > Number.MAX_SAFE_INTEGER) {
      throw new TypeError("Failed to execute 'timeout' on 'AbortSignal': Value is outside the 'unsigned long long' value range.");
    }
    const signal = new AbortSignal(TOKEN);
    load(SCRIPT.timers).setTimeout(() => signalAbort(signal, newDOMException('The operation was aborted due to timeout', 'TimeoutError')), ms);
    return signal;
  }
  static any(signals) {
    requiredArguments(arguments.length, 1, "Failed to execute 'any' on 'AbortSignal'");
    const list = [...signals];
    for (const s of list) {
      if (!(s instanceof AbortSignal)) throw new TypeError("Failed to execute 'any' on 'AbortSignal': Failed to convert value to 'AbortSignal'.");
    }
    const result = new AbortSignal(TOKEN);
    for (const s of list) {
      if (s.#aborted) {
        result.#aborted = true;
        result.#reason = s.#reason;
        return result;
      }
    }
    for (const s of list) followSignal(result, s);
    return result;
  }
  get aborted() {
    return this.#aborted;
  }
  get reason() {
    return this.#reason;
  }
  throwIfAborted() {
    if (this.#aborted) throw this.#reason;
  }
  static {
    signalAbort = (signal, reason) => {
      if (signal.#aborted) return;
      signal.#aborted = true;
      signal.#reason = reason === undefined ? newDOMException('This operation was aborted', 'AbortError') : reason;
      const dependents = signal.#dependents;
      signal.#dependents = [];
      signal.dispatchEvent(new Event('abort'));
      for (const d of dependents) signalAbort(d, signal.#reason);
    };
    followSignal = (dependent, source) => {
      source.#dependents.push(dependent);
    };
  }
}
eventHandler(AbortSignal.prototype, 'abort');

class AbortController {
  #signal = new AbortSignal(TOKEN);
  get signal() {
    return this.#signal;
  }
  abort(reason = undefined) {
    signalAbort(this.#signal, reason);
  }
}

return {
  Event: webidlClass(Event),
  CustomEvent: webidlClass(CustomEvent),
  EventTarget: webidlClass(EventTarget),
  AbortSignal: webidlClass(AbortSignal),
  AbortController: webidlClass(AbortController),
};
