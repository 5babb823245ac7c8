// 02_base64.js: atob and btoa (HTML's forgiving-base64; the work is Rust's).
// (A function body: `src/web/mod.rs` wraps it as `(function (lib) { ... })` with `op`,
// `clone`, `load`, `OP` and `SCRIPT` in scope.)
const { requiredArguments, toDOMString } = load(SCRIPT.webidl);

return {
  atob(data) {
    requiredArguments(arguments.length, 1, "Failed to execute 'atob'");
    return op(OP.atob, toDOMString(data));
  },
  btoa(data) {
    requiredArguments(arguments.length, 1, "Failed to execute 'btoa'");
    return op(OP.btoa, toDOMString(data));
  },
};
