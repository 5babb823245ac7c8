// 12_seam.js: what the seam itself calls (`seam_script` of isolet_sandbox_install_ops), in
// every run, with the web layer or without: makeError, for the DOMExceptions ops throw, and
// uncloneablePath, for a result the structured clone refused. It runs after the run's code,
// in its context and under its limits: code that changed the built-ins it uses only changes
// its own error message.

/** Values walked before giving up (V8's own message then stands). */
const MAX_VALUES = 100000;
/** What lib.cloneKind says of a value the clone copies or walks; any other answer is a refusal. */
const COPIED = new Set(['primitive', 'leaf', 'map', 'set', 'array', 'object']);

const isIndex = (key) => /^(0|[1-9][0-9]{0,9})$/.test(key);

/** A property key as a path segment: `.name`, `[3]` (an array index), `["a b"]`. */
function keySegment(key, inArray) {
  if (isIndex(key) && inArray) return `[${key}]`;
  if (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key)) return `.${key}`;
  if (isIndex(key)) return `[${key}]`;
  const chars = [...key];
  const shown = chars.slice(0, 60).map((c) => (c === '"' || c === '\\' ? `\\${c}` : c < ' ' ? '?' : c));
  return `["${shown.join('')}${chars.length > 60 ? '\u2026' : ''}"]`;
}

/** A Map entry's value: `.get("name")` for a string or number key, else by the entry's place. */
function mapValueSegment(key, entry) {
  if (typeof key === 'number') return `.get(${String(key).slice(0, 60)})`;
  if (typeof key !== 'string') return `${entry}.value`;
  const segment = keySegment(key.slice(0, 256), false);
  return segment[0] === '.' ? `.get("${segment.slice(1)}")` : segment[1] === '"' ? `.get(${segment.slice(1, -1)})` : `.get("${segment.slice(1, -1)}")`;
}

/** The first `max` children of a container, as [value, segment] pairs, in the order the clone copies them. */
function childrenOf(value, kind, max) {
  const children = [];
  if (kind === 'map' || kind === 'set') {
    let i = 0;
    for (const item of (kind === 'map' ? Map.prototype.entries : Set.prototype.values).call(value)) {
      if (children.length >= max) break;
      const entry = `[${kind === 'map' ? 'Map' : 'Set'} entry ${i++}]`;
      if (kind === 'set') children.push([item, entry]);
      else children.push([item[0], `${entry}.key`], [item[1], mapValueSegment(item[0], entry)]);
    }
    return children;
  }
  for (const key of Object.keys(value)) {
    if (children.length >= max) break;
    try {
      children.push([value[key], keySegment(key.slice(0, 256), kind === 'array')]);
    } catch {
      // A getter that throws: that value is left out.
    }
  }
  return children;
}

/**
 * The path of the first value in a result (depth first, in the order the clone copies it)
 * that the clone refuses, with its kind: `result.items[3].onClick: function`; '' when none is
 * found among the first MAX_VALUES values. Reading properties runs getters, as cloning did.
 */
function uncloneablePath(root) {
  const nodes = [{ value: root, parent: -1, segment: 'result' }];
  const pending = [0];
  const seen = new Set();
  while (pending.length > 0) {
    const index = pending.pop();
    const { value } = nodes[index];
    const kind = lib.cloneKind(value);
    if (!COPIED.has(kind)) {
      const segments = [];
      for (let i = index; i >= 0; i = nodes[i].parent) segments.push(nodes[i].segment);
      let path = '';
      for (const segment of segments.reverse()) {
        if (path.length >= 1000) break;
        path += segment;
      }
      return `${path}: ${kind}`;
    }
    if (kind === 'primitive' || kind === 'leaf' || seen.has(value)) continue;
    seen.add(value);
    const first = nodes.length;
    for (const [child, segment] of childrenOf(value, kind, MAX_VALUES - first)) {
      nodes.push({ value: child, parent: index, segment });
    }
    // Children are visited in order: pushed last first.
    for (let i = nodes.length - 1; i >= first; i--) pending.push(i);
    if (nodes.length >= MAX_VALUES) break;
  }
  return '';
}

return {
  makeError: (message, name) => load(SCRIPT.webidl).newDOMException(message, name),
  uncloneablePath,
};
