#!/usr/bin/env node
// No import circles (issue 36): in the addon (src/), in isolet-core (crates/isolet-core/src/)
// and in lib/, no file may reach itself through what it imports. A circle hides which of two
// files is the lower layer; docs/architecture.md ("Direction of imports") says which is.
//
// What counts as an import, per file:
//   Rust  every `crate::`, `super::` and `self::` path (in `use` and inline), to the file of
//         the longest module prefix that has one; a module's file naming its own submodules
//         (`mod x;`, `pub use x::Y`) is composition, not an import, and is left out.
//   JS    every `require('./x')` or `require('../x')`, lazy ones too.
//
//   node scripts/check-imports.js     (run by `npm run lint`)
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');

function walk(dir, ext, out = []) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(p, ext, out);
    else if (entry.name.endsWith(ext)) out.push(p);
  }
  return out;
}

/** Source without comments (strings are kept: a path inside one is rare and harmless here). */
function withoutComments(text) {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/[^\n]*/g, '');
}

/** The module path of Rust file `file` under crate root `src` (`a/b.rs`, `a/b/mod.rs`: [a, b]). */
function rustModule(src, file) {
  const rel = path.relative(src, file).replace(/\.rs$/, '').split(path.sep);
  if (rel.at(-1) === 'mod' || (rel.length === 1 && (rel[0] === 'lib' || rel[0] === 'main'))) rel.pop();
  return rel;
}

/** Every path a `use` tree or an inline path names, as segment lists (braces expanded). */
function rustPaths(text) {
  const out = [];
  const expand = (prefix, body) => {
    let depth = 0;
    let start = 0;
    const parts = [];
    for (let i = 0; i < body.length; i++) {
      if (body[i] === '{') depth++;
      else if (body[i] === '}') depth--;
      else if (body[i] === ',' && depth === 0) {
        parts.push(body.slice(start, i));
        start = i + 1;
      }
    }
    parts.push(body.slice(start));
    for (const raw of parts) {
      const part = raw.trim();
      if (part === '' || part === 'self' || part === '*') {
        out.push(prefix);
        continue;
      }
      const brace = part.indexOf('{');
      if (brace !== -1) {
        const head = part.slice(0, brace).replace(/::$/, '').split('::').filter(Boolean);
        expand([...prefix, ...head], part.slice(brace + 1, part.lastIndexOf('}')));
      } else {
        out.push([...prefix, ...part.split(/\s+as\s+/)[0].split('::').filter(Boolean)]);
      }
    }
  };
  const re = /\b((?:crate|super|self)(?:::(?:super|\w+))*)::(\{|\w+)/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const prefix = m[1].split('::');
    if (m[2] === '{') {
      let depth = 1;
      let i = m.index + m[0].length;
      const from = i;
      for (; i < text.length && depth > 0; i++) {
        if (text[i] === '{') depth++;
        else if (text[i] === '}') depth--;
      }
      expand(prefix, text.slice(from, i - 1));
      re.lastIndex = i;
    } else {
      out.push([...prefix, m[2]]);
    }
  }
  return out;
}

function rustGraph(src) {
  const files = walk(src, '.rs');
  const byModule = new Map(files.map((f) => [rustModule(src, f).join('::'), f]));
  const graph = new Map();
  for (const file of files) {
    const here = rustModule(src, file);
    // `super` of a module file (a/b.rs) is a; of a/mod.rs also a's parent.
    const edges = new Set();
    for (const p of rustPaths(withoutComments(fs.readFileSync(file, 'utf8')))) {
      let segs;
      if (p[0] === 'crate') segs = p.slice(1);
      else {
        segs = [...here];
        let i = 0;
        for (; i < p.length && (p[i] === 'super' || p[i] === 'self'); i++) if (p[i] === 'super') segs.pop();
        segs = [...segs, ...p.slice(i)];
      }
      // The longest prefix with a file of its own.
      let target = null;
      for (let n = segs.length; n >= 0 && target === null; n--) target = byModule.get(segs.slice(0, n).join('::')) ?? null;
      if (target === null || target === file) continue;
      const there = rustModule(src, target);
      const isOwnSubmodule = there.length > here.length && here.every((s, k) => s === there[k]);
      if (!isOwnSubmodule) edges.add(target);
    }
    graph.set(file, edges);
  }
  return graph;
}

function jsGraph(dir) {
  const files = walk(dir, '.js');
  const graph = new Map();
  for (const file of files) {
    const edges = new Set();
    const re = /require\(\s*['"](\.{1,2}\/[^'"]*)['"]\s*\)/g;
    const text = withoutComments(fs.readFileSync(file, 'utf8'));
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      const base = path.resolve(path.dirname(file), m[1]);
      const target = [base, `${base}.js`, path.join(base, 'index.js')].find((p) => files.includes(p));
      if (target !== undefined && target !== file) edges.add(target);
    }
    graph.set(file, edges);
  }
  return graph;
}

/** The strongly connected components of more than one file (Tarjan). */
function circles(graph) {
  let index = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const found = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const scc = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1) found.push(scc);
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return found;
}

const trees = [
  ['src/', rustGraph(path.join(root, 'src'))],
  ['crates/isolet-core/src/', rustGraph(path.join(root, 'crates', 'isolet-core', 'src'))],
  ['lib/', jsGraph(path.join(root, 'lib'))],
];
let failed = false;
for (const [name, graph] of trees) {
  const found = circles(graph);
  const edges = [...graph.values()].reduce((n, e) => n + e.size, 0);
  if (found.length === 0) {
    console.log(`check-imports: ${name} ${graph.size} files, ${edges} imports, no circle`);
    continue;
  }
  failed = true;
  for (const scc of found) {
    const files = scc.map((f) => path.relative(root, f));
    console.error(`check-imports: a circle in ${name}: ${files.join(' <-> ')}`);
    for (const f of scc) {
      const back = [...graph.get(f)].filter((t) => scc.includes(t)).map((t) => path.relative(root, t));
      console.error(`  ${path.relative(root, f)} imports ${back.join(', ')}`);
    }
  }
}
process.exit(failed ? 1 : 0);
