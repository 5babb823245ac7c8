// WPT conformance data (../shared/wpt/, read where it lies, never copied) and harnesses
// that run its cases in any realm with the web globals: inside the sandbox (as the code of
// a run) and in this Node process, so the two can be compared case by case.
import fs from 'node:fs';
import path from 'node:path';

/** The WPT data directory: `shared/wpt` beside the checkout. */
export const WPT_DIR = path.resolve(__dirname, '../../../shared/wpt');

export function wptData(file: string): unknown {
  return JSON.parse(fs.readFileSync(path.join(WPT_DIR, file), 'utf8'));
}

/**
 * `(data) => { passed, failures }` as source: each harness mirrors the WPT test that uses
 * the file (url-constructor.any.js, url-setters.any.js, toascii.window.js,
 * urlencoded-parser.any.js, base64.any.js) and names a failing case by its input.
 */
export const HARNESSES: Record<string, string> = {
  'urltestdata.json': String.raw`(data) => {
    const attrs = ['href', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'hash'];
    let passed = 0;
    const failures = [];
    for (const c of data) {
      if (typeof c === 'string') continue;
      const base = c.base === null ? undefined : c.base;
      const id = JSON.stringify([c.input, c.base]);
      const why = [];
      let url = null;
      try { url = base === undefined ? new URL(c.input) : new URL(c.input, base); } catch (e) { if (!(e instanceof TypeError)) why.push('threw ' + e); }
      if (c.failure) {
        if (url !== null) why.push('parsed as ' + url.href);
        if (URL.canParse(c.input, base)) why.push('canParse true');
        if (URL.parse(c.input, base) !== null) why.push('parse not null');
      } else if (url === null) {
        why.push('did not parse');
      } else {
        for (const a of attrs) if (url[a] !== c[a]) why.push(a + ' ' + JSON.stringify(url[a]) + ' != ' + JSON.stringify(c[a]));
        if ('origin' in c && url.origin !== c.origin) why.push('origin ' + url.origin);
        if ('searchParams' in c && url.searchParams.toString() !== c.searchParams) why.push('searchParams ' + url.searchParams);
        if (!URL.canParse(c.input, base)) why.push('canParse false');
        if (URL.parse(c.input, base)?.href !== c.href) why.push('parse differs');
      }
      if (why.length === 0) passed++;
      else failures.push(id + ': ' + why.join('; '));
    }
    return { passed, failures };
  }`,
  'setters_tests.json': String.raw`(data) => {
    let passed = 0;
    const failures = [];
    for (const [setter, cases] of Object.entries(data)) {
      if (setter === 'comment') continue;
      for (const c of cases) {
        const id = JSON.stringify([setter, c.href, c.new_value]);
        const why = [];
        try {
          const url = new URL(c.href);
          url[setter] = c.new_value;
          for (const [a, want] of Object.entries(c.expected)) if (url[a] !== want) why.push(a + ' ' + JSON.stringify(url[a]) + ' != ' + JSON.stringify(want));
        } catch (e) { why.push('threw ' + e); }
        if (why.length === 0) passed++;
        else failures.push(id + ': ' + why.join('; '));
      }
    }
    return { passed, failures };
  }`,
  'toascii.json': String.raw`(data) => {
    let passed = 0;
    const failures = [];
    for (const c of data) {
      if (typeof c === 'string') continue;
      const id = JSON.stringify(c.input);
      const why = [];
      let url = null;
      try { url = new URL('https://' + c.input + '/x'); } catch {}
      if (c.output === null) {
        if (url !== null) why.push('parsed as ' + url.host);
      } else if (url === null || url.host !== c.output || url.hostname !== c.output || url.pathname !== '/x' || url.href !== 'https://' + c.output + '/x') {
        why.push('host ' + (url && url.host));
      }
      for (const attr of ['host', 'hostname']) {
        const u = new URL('https://x/x');
        try { u[attr] = c.input; } catch (e) { why.push(attr + ' setter threw ' + e); }
        const want = c.output === null ? 'x' : c.output;
        if (u[attr] !== want) why.push(attr + ' setter gave ' + u[attr]);
      }
      if (why.length === 0) passed++;
      else failures.push(id + ': ' + why.join('; '));
    }
    return { passed, failures };
  }`,
  'urlencoded-parser-data.json': String.raw`(data) => {
    let passed = 0;
    const failures = [];
    for (const c of data) {
      const got = [...new URLSearchParams(c.input)];
      if (JSON.stringify(got) === JSON.stringify(c.output)) passed++;
      else failures.push(JSON.stringify(c.input) + ': ' + JSON.stringify(got));
    }
    return { passed, failures };
  }`,
  'base64.json': String.raw`(data) => {
    let passed = 0;
    const failures = [];
    for (const [input, output] of data) {
      let why = '';
      try {
        const got = atob(input);
        if (output === null) why = 'decoded to ' + JSON.stringify(got);
        else if (got !== String.fromCharCode(...output)) why = 'got ' + JSON.stringify(got);
        else if (btoa(got) !== btoa(String.fromCharCode(...output))) why = 'btoa differs';
      } catch (e) {
        if (output !== null || !(e instanceof DOMException) || e.name !== 'InvalidCharacterError' || e.code !== 5) why = 'threw ' + e;
      }
      if (why === '') passed++;
      else failures.push(JSON.stringify(input) + ': ' + why);
    }
    return { passed, failures };
  }`,
};

HARNESSES['urltestdata-javascript-only.json'] = HARNESSES['urltestdata.json'];

export interface WptOutcome {
  passed: number;
  failures: string[];
}

/** The harness for `file` run in this Node process, on Node's own web globals. */
export function runInNode(file: string): WptOutcome {
  // eslint-disable-next-line no-new-func
  const harness = new Function(`return (${HARNESSES[file]})`)() as (data: unknown) => WptOutcome;
  return harness(wptData(file));
}

/** The code of a run that runs the harness for `file` inside the sandbox. */
export function sandboxCode(file: string): string {
  return `(${HARNESSES[file]})(${JSON.stringify(wptData(file))})`;
}
