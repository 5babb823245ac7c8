// Global types isolet's declarations rely on, for projects whose `lib` and `types` do not
// provide them (a strict ES2020/ES2022 project without @types/node or the DOM library).
// Each declaration only adds members identical to those of TypeScript's own libraries and
// @types/node, so it merges with them when they are present (as @types/node's own
// compatibility declarations do).

interface SymbolConstructor {
  readonly asyncDispose: unique symbol;
}

/** The part of the WHATWG AbortSignal isolet reads: `aborted`, and the `abort` event. */
interface AbortSignal {
  readonly aborted: boolean;
}
