'use strict';
// Capabilities (runSandbox) and tools (SandboxEngine) in every accepted shape, turned into
// one flat list of host functions keyed by the name the sandbox sees: `readFile`, or
// `github.listIssues` for a namespace. A capability is
//   - a function;
//   - a described tool in the AI SDK's shape `{ description?, inputSchema?, execute }`,
//     whose input is checked against its schema on the host before `execute` runs;
//   - or (top level only) a namespace: an object of functions and described tools.
// An object counts as a described tool when `execute` is a function and it has a
// `description` or an `inputSchema` (or the older `parameters`); any other object is a
// namespace. Every field is read as an own property (lib/own.js): an `execute` or a
// `description` on Object.prototype makes no object a tool. Each is read once, and a
// getter or Proxy trap that throws is a SandboxValidationError naming the entry.
const { SandboxValidationError } = require('./errors');
const { inputChecker, schemaToTypeScript } = require('./json-schema');
const { isPlainObject, describeThrown } = require('./own');
const { readOwn, readEntries } = require('./read-options');

// The AI SDK also takes a lazy schema: a function returning the schema.
function isSchemaLike(v) {
  return typeof v === 'boolean' || typeof v === 'function' || (v !== null && typeof v === 'object');
}

/** `v`'s own fields a tool may have, each read once (`path` names `v` in errors). */
function toolFields(v, path) {
  return {
    execute: readOwn(v, 'execute', `${path}.execute`),
    description: readOwn(v, 'description', `${path}.description`),
    inputSchema: readOwn(v, 'inputSchema', `${path}.inputSchema`),
    parameters: readOwn(v, 'parameters', `${path}.parameters`),
    outputSchema: readOwn(v, 'outputSchema', `${path}.outputSchema`),
  };
}

function describes(f) {
  return typeof f.description === 'string' || isSchemaLike(f.inputSchema) || isSchemaLike(f.parameters);
}

function isDescribedTool(v, path = 'tool') {
  if (!isPlainObject(v)) return false;
  const f = toolFields(v, path);
  return typeof f.execute === 'function' && describes(f);
}

/**
 * @typedef {object} ToolEntry
 * @property {string} name the name the sandbox calls (`fn` or `ns.fn`)
 * @property {string | undefined} namespace
 * @property {string} member
 * @property {string | undefined} description
 * @property {unknown} inputSchema JSON Schema, AI SDK Schema or zod / Standard Schema
 * @property {unknown} outputSchema
 * @property {Function} handler the host function served for calls to `name`
 * @property {Function | undefined} webFetch a top-level `fetch` that is a fetch capability
 *   (createFetchCapability): its handler of the web layer's protocol (lib/capabilities/fetch.js)
 */

/**
 * Flattens capabilities. Throws SandboxValidationError naming the bad entry. Names are
 * checked again natively (identifiers, no built-ins) when a run is submitted.
 *
 * @param {unknown} capabilities
 * @param {string} where the option's name, for messages
 * @returns {{ names: string[], handlers: Record<string, Function>, entries: ToolEntry[],
 *   webFetch: Function | undefined }} `webFetch`: see ToolEntry; with `web`, the run's plan
 *   takes it (`plan.useWebFetch()`) and it serves `fetch` (useWebFetch below)
 */
function normalizeTools(capabilities, where = 'capabilities') {
  const entries = [];
  if (capabilities === undefined) return finish(entries);
  if (!isPlainObject(capabilities)) {
    throw new SandboxValidationError(`${where} must be an object of functions, described tools or namespaces`);
  }
  for (const [key, value] of readEntries(capabilities, where)) {
    const path = `${where}.${key}`;
    const fields = isPlainObject(value) ? toolFields(value, path) : undefined;
    if (typeof value === 'function' || (fields && typeof fields.execute === 'function' && describes(fields))) {
      entries.push(entry(undefined, key, value, path, fields));
    } else if (fields && typeof fields.execute !== 'function' && (typeof fields.description === 'string' || isSchemaLike(fields.inputSchema))) {
      throw new SandboxValidationError(`${path} looks like a described tool but has no execute function`);
    } else if (fields) {
      const members = readEntries(value, path);
      if (members.length === 0) throw new SandboxValidationError(`${path} is an empty namespace`);
      for (const [member, tool] of members) {
        const memberPath = `${path}.${member}`;
        const toolF = isPlainObject(tool) ? toolFields(tool, memberPath) : undefined;
        if (typeof tool !== 'function' && !(toolF && typeof toolF.execute === 'function' && describes(toolF))) {
          throw new SandboxValidationError(
            `${memberPath} must be a function or a described tool { description, inputSchema, execute } (namespaces nest one level)`,
          );
        }
        entries.push(entry(key, member, tool, memberPath, toolF));
      }
    } else {
      throw new SandboxValidationError(
        `${path} must be a function, a described tool { description, inputSchema, execute } or a namespace object, got ${value === null ? 'null' : typeof value}`,
      );
    }
  }
  return finish(entries);
}

/** `fields`: the tool's own fields, read once by the caller (none for a function). */
function entry(namespace, member, value, path, fields) {
  if (member.includes('.')) throw new SandboxValidationError(`${path}: a name may not contain "."`);
  const name = namespace === undefined ? member : `${namespace}.${member}`;
  // A fetch capability as the global `fetch` backs the web layer's WHATWG fetch (web: true).
  const webFetch = name === 'fetch' ? require('./capabilities/fetch').webFetchOf(typeof value === 'function' ? value : fields.execute) : undefined;
  if (typeof value === 'function') {
    return { name, namespace, member, description: undefined, inputSchema: undefined, outputSchema: undefined, handler: value, webFetch };
  }
  const { description, execute, outputSchema } = fields;
  if (description !== undefined && typeof description !== 'string') {
    throw new SandboxValidationError(`${path}.description must be a string`);
  }
  let inputSchema = fields.inputSchema ?? fields.parameters;
  if (typeof inputSchema === 'function') {
    try {
      inputSchema = inputSchema();
    } catch (err) {
      throw new SandboxValidationError(`${path}.inputSchema could not be read: calling it threw ${describeThrown(err)}`);
    }
  }
  if (inputSchema !== undefined && !isPlainObject(inputSchema) && typeof inputSchema !== 'boolean') {
    throw new SandboxValidationError(`${path}.inputSchema must be a JSON Schema object or a zod schema`);
  }
  // The schema is compiled now (once per schema object): a bad one fails the definition.
  const schemaPath = `${path}.${(fields.inputSchema === undefined || fields.inputSchema === null) && fields.parameters !== undefined ? 'parameters' : 'inputSchema'}`;
  let checkInput;
  try {
    checkInput = inputChecker(inputSchema, name, schemaPath);
  } catch (err) {
    if (err instanceof SandboxValidationError) throw err;
    throw new SandboxValidationError(`${schemaPath} could not be read: ${describeThrown(err)}`);
  }
  const tool = value;
  let calls = 0;
  const handler = async (...args) => {
    const input = await checkInput(args[0]);
    calls += 1;
    // The AI SDK passes an options object as the second argument; give tools one too.
    return execute.call(tool, input, { toolCallId: `isolet-${name}-${calls}`, messages: [] });
  };
  return { name, namespace, member, description, inputSchema, outputSchema, handler, webFetch };
}

function finish(entries) {
  const handlers = Object.create(null);
  let webFetch;
  for (const e of entries) {
    handlers[e.name] = e.handler;
    if (e.webFetch !== undefined) webFetch = e.webFetch;
  }
  return { names: entries.map((e) => e.name), handlers, entries, webFetch };
}

/**
 * With `web`, a fetch capability given as `fetch` is the sandbox's WHATWG fetch:
 * `planned` (a native RunPlan or SandboxSettings) takes it when it has the web APIs and
 * the tool, and `handlers.fetch` then speaks the web layer's protocol. Returns `handlers`.
 */
function useWebFetch(planned, handlers, webFetch) {
  if (webFetch === undefined || !planned.useWebFetch()) return handlers;
  const out = Object.assign(Object.create(null), handlers);
  out.fetch = webFetch;
  return out;
}

/**
 * TypeScript declarations of the capabilities, with JSDoc from their descriptions, for a
 * model's prompt. Every tool returns a Promise inside the sandbox.
 *
 * @param {unknown} capabilities the same object runSandbox or SandboxEngine takes
 * @returns {string}
 */
function describeTools(capabilities) {
  const { entries } = normalizeTools(capabilities, 'describeTools(capabilities)');
  const out = [];
  const namespaces = new Map();
  for (const e of entries) {
    if (e.namespace === undefined) {
      out.push(...doc(e.description, ''), `declare function ${e.member}${signature(e)};`, '');
    } else {
      if (!namespaces.has(e.namespace)) namespaces.set(e.namespace, []);
      namespaces.get(e.namespace).push(e);
    }
  }
  for (const [ns, members] of namespaces) {
    out.push(`declare const ${ns}: {`);
    for (const e of members) out.push(...doc(e.description, '  '), `  ${propertyKey(e.member)}${signature(e, '  ')};`);
    out.push('};', '');
  }
  return out.join('\n').trimEnd() + '\n';
}

function signature(e, indent = '') {
  const output = e.outputSchema === undefined ? 'unknown' : schemaToTypeScript(e.outputSchema, indent);
  if (e.inputSchema === undefined) return `(...args: unknown[]): Promise<${output}>`;
  return `(input: ${schemaToTypeScript(e.inputSchema, indent)}): Promise<${output}>`;
}

function doc(text, indent) {
  if (!text) return [];
  const lines = String(text).replace(/\*\//g, '*\\/').split(/\r?\n/);
  if (lines.length === 1) return [`${indent}/** ${lines[0]} */`];
  return [`${indent}/**`, ...lines.map((l) => `${indent} * ${l}`.trimEnd()), `${indent} */`];
}

function propertyKey(name) {
  return /^[A-Za-z_$][\w$]*$/.test(name) ? name : JSON.stringify(name);
}

module.exports = { normalizeTools, describeTools, isDescribedTool, useWebFetch };
