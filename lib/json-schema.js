'use strict';
// Input checks for described tools, and the TypeScript rendering of a schema for
// describeTools. A tool's input schema is one of:
//   - a zod schema (anything with `safeParse`), or any Standard Schema (`~standard`): its
//     own check runs;
//   - an AI SDK Schema from `jsonSchema()` / `zodSchema()` (`{ jsonSchema, validate? }`): its
//     `validate` runs, or without one its JSON Schema is checked as below;
//   - a plain JSON Schema (or `true` / `false`), checked by ajv (https://ajv.js.org).
//
// A JSON Schema is compiled once, when the tool is defined (inputChecker), and the
// validator is kept for that schema object (a WeakMap): a schema ajv cannot compile (an
// invalid keyword value, a `$ref` that does not resolve, an unknown `$schema`) is a
// SandboxValidationError naming the tool's option, not a failure at call time. ajv builds
// each validator as a function (`new Function`) here, in Node's main realm on the host;
// nothing of it reaches the sandbox, which only sees the error message.
//
// Who supplies what: the schema comes from the host developer or an MCP server's tool list
// (semi-trusted), the value from sandboxed code (hostile). Hence the options below:
// unknown keywords and formats are accepted (real MCP schemas carry `title`, `examples`,
// `x-...`), remote `$ref`s are never fetched (no `loadSchema`), the first error stops the
// check (`allErrors: false`: a hostile value cannot make a long error list), only own
// properties count (`__proto__` and `constructor` keys of the value are checked as any
// key), and the message the sandbox gets names the path and is at most MAX_MESSAGE long.
// A mismatch is a TypeError naming the tool and the field (`input.owner`); it reaches the
// sandbox as a catchable TypeError.

const { SandboxValidationError } = require('./errors');
const { describeThrown } = require('./own');

/** Longest message a refused call gives the sandbox, and its longest path. */
const MAX_MESSAGE = 500;
const MAX_PATH = 200;
/** Longest key of the value (the sandbox's) a message quotes. */
const MAX_KEY = 64;
/** Longest reason a refused schema's message quotes from ajv. */
const MAX_REASON = 300;
/** How deep describeTools renders a schema. */
const MAX_DEPTH = 64;

// ajv's options, the same for every dialect. No `loadSchema`: a `$ref` that is not in the
// schema does not compile, and nothing is ever fetched.
const AJV_OPTIONS = {
  // Unknown keywords (`title`, `examples`, `x-...`), unknown formats, loose tuples: accepted,
  // neither thrown on nor logged. A schema ajv finds invalid is still refused.
  strict: false,
  logger: false,
  // NaN and Infinity (the bridge carries them) are not numbers: JSON has neither.
  strictNumbers: true,
  // The first problem ends the check: a hostile value cannot make a long error list.
  allErrors: false,
  // Only the value's own properties count: a `__proto__` or `constructor` key is checked
  // as any other, and an inherited one is not there.
  ownProperties: true,
  // `format` is an annotation (2020-12's default); ajv itself knows no formats.
  validateFormats: false,
  // A schema's `$id` is not registered in the shared instance: one tool's schema cannot
  // resolve (or clash with) another's.
  addUsedSchema: false,
};

// The dialect a `$schema` names (a trailing `#` aside). Without `$schema`, draft-07.
const DIALECTS = new Map([
  ['http://json-schema.org/draft-06/schema', 'draft-07'],
  ['http://json-schema.org/draft-07/schema', 'draft-07'],
  ['https://json-schema.org/draft/2019-09/schema', '2019-09'],
  ['https://json-schema.org/draft/2020-12/schema', '2020-12'],
]);

// One ajv instance per dialect, made (and ajv loaded) when a JSON Schema first needs it.
const instances = new Map();

function ajvFor(dialect) {
  let ajv = instances.get(dialect);
  if (ajv === undefined) {
    if (dialect === '2020-12') ajv = new (require('ajv/dist/2020').default)(AJV_OPTIONS);
    else if (dialect === '2019-09') ajv = new (require('ajv/dist/2019').default)(AJV_OPTIONS);
    else {
      ajv = new (require('ajv').default)(AJV_OPTIONS);
      ajv.addMetaSchema(require('ajv/dist/refs/json-schema-draft-06.json'));
    }
    // ajv compares objects in an array pairwise for `uniqueItems`: an array the sandbox
    // sends could keep the host's thread for minutes. Not enforced (docs/capabilities.md).
    ajv.removeKeyword('uniqueItems');
    instances.set(dialect, ajv);
  }
  return ajv;
}

// A JSON Schema object's validator, compiled once.
const validators = new WeakMap();

/** `schema`'s ajv validator; throws SandboxValidationError naming `where` if it has none. */
function compile(schema, where) {
  let validate = validators.get(schema);
  if (validate !== undefined) return validate;
  const named = schema.$schema;
  const dialect = named === undefined ? 'draft-07' : DIALECTS.get(typeof named === 'string' ? named.replace(/#$/, '') : '');
  if (dialect === undefined) {
    const given = typeof named === 'string' ? JSON.stringify(cap(named, MAX_KEY)) : `a value of type ${typeof named}`;
    throw new SandboxValidationError(`${where}.$schema names ${given}, a dialect isolet does not check (it checks draft-06, draft-07, 2019-09 and 2020-12)`);
  }
  const ajv = ajvFor(dialect);
  const refs = new Set(Object.keys(ajv.refs));
  try {
    validate = ajv.compile(schema);
  } catch (err) {
    throw new SandboxValidationError(`${where} is not a JSON Schema isolet can check: ${reason(err)}`);
  } finally {
    // What compiling left in the shared instance (the schema, the `$id`s inside it) goes:
    // the validator holds all it needs.
    try {
      ajv.removeSchema(schema);
    } catch {}
    for (const key of Object.keys(ajv.refs)) if (!refs.has(key)) delete ajv.refs[key];
  }
  validators.set(schema, validate);
  return validate;
}

function reason(err) {
  if (!(err instanceof Error)) return describeThrown(err);
  const text = cap(String(err.message), MAX_REASON);
  return typeof err.missingRef === 'string' && !err.missingRef.startsWith('#') ? `${text} (isolet fetches no $ref: put the definition under $defs)` : text;
}

/**
 * The check of a tool's input, made when the tool is defined: a function that resolves
 * with the input `execute` gets (a zod schema's parsed value) or rejects with a TypeError
 * for the sandbox. Throws SandboxValidationError naming `where` (the tool's option) for a
 * JSON Schema that cannot be checked.
 */
function inputChecker(schema, toolName, where) {
  if (schema === undefined || schema === true) return async (value) => value;
  if (schema === false) {
    return async () => {
      throw new TypeError(`${toolName}: this tool accepts no input`);
    };
  }
  if (typeof schema.safeParse === 'function') {
    return async (value) => {
      const r = typeof schema.safeParseAsync === 'function' ? await schema.safeParseAsync(value) : schema.safeParse(value);
      if (r.success) return r.data;
      throw refused(toolName, describeIssues(r.error && r.error.issues));
    };
  }
  if (schema['~standard'] && typeof schema['~standard'].validate === 'function') {
    return async (value) => {
      const r = await schema['~standard'].validate(value);
      if (!r.issues) return r.value;
      throw refused(toolName, describeIssues(r.issues));
    };
  }
  if (isSdkSchema(schema)) {
    if (typeof schema.validate === 'function') {
      return async (value) => {
        const r = await schema.validate(value);
        if (r.success) return r.value;
        throw refused(toolName, r.error && r.error.message ? String(r.error.message) : 'input does not match the schema');
      };
    }
    let json;
    try {
      json = schema.jsonSchema;
    } catch (err) {
      throw new SandboxValidationError(`${where}.jsonSchema could not be read: ${describeThrown(err)}`);
    }
    return inputChecker(json, toolName, `${where}.jsonSchema`);
  }
  const validate = compile(schema, where);
  return async (value) => {
    let valid;
    try {
      valid = validate(value);
    } catch (err) {
      // A recursive schema follows the value down: past the host's stack, it is refused.
      if (err instanceof RangeError) throw refused(toolName, 'input is nested too deeply to check');
      throw err;
    }
    if (valid) return value;
    const errors = validate.errors;
    if (!Array.isArray(errors) || errors.length === 0) throw refused(toolName, 'input does not match the schema');
    // The last error is the keyword that failed; an earlier one (a branch of anyOf, say) is why.
    const last = explain(errors[errors.length - 1], value);
    throw refused(toolName, errors.length > 1 ? `${last} (${explain(errors[0], value)})` : last);
  };
}

function refused(toolName, problem) {
  return new TypeError(cap(`${toolName}: ${problem}`, MAX_MESSAGE));
}

function cap(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function isSdkSchema(s) {
  return s !== null && typeof s === 'object' && s.jsonSchema !== undefined && s.type === undefined && s.properties === undefined;
}

function describeIssues(issues) {
  if (!Array.isArray(issues) || issues.length === 0) return 'input does not match the schema';
  const first = issues[0];
  const path = ['input', ...(first.path || []).map((p) => (typeof p === 'object' && p !== null ? p.key : p))];
  const where = path.reduce((acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc === '' ? String(p) : `${acc}.${String(p)}`), '');
  return `${where}: ${first.message}`;
}

/** One ajv error as "<path> must ...", the path in JavaScript (`input.labels[1]`). */
function explain(e, value) {
  const { path, data } = locate(value, typeof e.instancePath === 'string' ? e.instancePath : '');
  const p = e.params || {};
  switch (e.keyword) {
    case 'type':
      return `${path} must be ${String(p.type).split(',').map(typeName).join(' or ')}, got ${kind(data)}`;
    case 'required':
      return `${path}${member(p.missingProperty)} is required`;
    case 'dependencies':
    case 'dependentRequired':
      return `${path}${member(p.missingProperty)} is required when ${path}${member(p.property)} is present`;
    case 'additionalProperties':
      return `${path}${member(p.additionalProperty)} is not an allowed property`;
    case 'unevaluatedProperties':
      return `${path}${member(p.unevaluatedProperty)} is not an allowed property`;
    case 'false schema':
      return `${path} is not allowed`;
    case 'const':
      return `${path} must be ${JSON.stringify(p.allowedValue)}`;
    case 'enum':
      return `${path} must be one of ${cap((p.allowedValues || []).map((v) => JSON.stringify(v)).join(', '), MAX_MESSAGE)}`;
    case 'minLength':
      return `${path} must be at least ${p.limit} characters long`;
    case 'maxLength':
      return `${path} must be at most ${p.limit} characters long`;
    case 'minItems':
      return `${path} must have at least ${p.limit} items`;
    case 'maxItems':
      return `${path} must have at most ${p.limit} items`;
    case 'minProperties':
      return `${path} must have at least ${p.limit} properties`;
    case 'maxProperties':
      return `${path} must have at most ${p.limit} properties`;
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      return `${path} must be ${p.comparison} ${p.limit}`;
    case 'multipleOf':
      return `${path} must be a multiple of ${p.multipleOf}`;
    case 'pattern':
      return `${path} must match /${cap(String(p.pattern), MAX_PATH)}/`;
    case 'anyOf':
      return `${path} matches none of the allowed shapes`;
    case 'oneOf':
      return `${path} must match exactly one of the allowed shapes`;
    default:
      return `${path} ${cap(String(e.message), MAX_PATH)}`;
  }
}

/** The JavaScript path of a JSON Pointer into `value` (at most MAX_PATH long), and what is there. */
function locate(value, pointer) {
  const parts = ['input'];
  let data = value;
  if (pointer !== '') {
    for (const raw of pointer.slice(1).split('/')) {
      const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
      parts.push(Array.isArray(data) ? `[${key}]` : member(key));
      data = data !== null && typeof data === 'object' && Object.hasOwn(data, key) ? data[key] : undefined;
    }
  }
  return { path: shorten(parts), data };
}

/** `parts` joined; past MAX_PATH, its start and end around a `…`, cut between parts. */
function shorten(parts) {
  const whole = parts.join('');
  if (whole.length <= MAX_PATH) return whole;
  let head = '';
  let i = 0;
  while (i < parts.length && head.length + parts[i].length <= MAX_PATH / 3) head += parts[i++];
  let tail = '';
  let j = parts.length;
  while (j > i && head.length + tail.length + parts[j - 1].length < MAX_PATH) tail = parts[--j] + tail;
  return `${head}…${tail}`;
}

function member(key) {
  const k = cap(String(key), MAX_KEY);
  return /^[A-Za-z_$][\w$]*$/.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`;
}

function typeName(t) {
  return t === 'null' ? 'null' : article(t);
}

function kind(v) {
  if (v === null || v === undefined) return String(v);
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'number' && !Number.isFinite(v)) return String(v);
  return article(typeof v);
}

function article(t) {
  return /^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`;
}

/** A JSON Schema (or zod / AI SDK schema) as a TypeScript type; JSDoc from descriptions. */
function schemaToTypeScript(schema, indent) {
  return render(plainJsonSchema(schema), indent, 0);
}

function plainJsonSchema(schema) {
  if (schema && typeof schema === 'object') {
    if (typeof schema.toJSONSchema === 'function') {
      try {
        return schema.toJSONSchema();
      } catch {
        return true;
      }
    }
    if (isSdkSchema(schema)) return schema.jsonSchema;
  }
  return schema;
}

function render(s, indent, depth) {
  if (s === true || s === undefined || s === null || typeof s !== 'object' || depth > MAX_DEPTH) return 'unknown';
  if (s === false) return 'never';
  let t = renderBase(s, indent, depth);
  if (s.nullable === true) t = `${t} | null`;
  return t;
}

function renderBase(s, indent, depth) {
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (Array.isArray(s.enum)) return s.enum.map((e) => JSON.stringify(e)).join(' | ') || 'never';
  const union = s.anyOf || s.oneOf;
  if (Array.isArray(union)) return union.map((sub) => render(sub, indent, depth + 1)).join(' | ') || 'never';
  if (Array.isArray(s.allOf)) return s.allOf.map((sub) => render(sub, indent, depth + 1)).join(' & ') || 'unknown';
  if (Array.isArray(s.type)) return s.type.map((type) => renderBase({ ...s, type }, indent, depth)).join(' | ');
  switch (s.type) {
    case 'string':
      return 'string';
    case 'number':
    case 'integer':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'null':
      return 'null';
    case 'array': {
      const item = render(s.items, indent, depth + 1);
      return /^[\w.]+$/.test(item) ? `${item}[]` : `Array<${item}>`;
    }
    case 'object':
      return renderObject(s, indent, depth);
    default:
      return s.properties ? renderObject(s, indent, depth) : 'unknown';
  }
}

function renderObject(s, indent, depth) {
  const props = s.properties && typeof s.properties === 'object' ? Object.entries(s.properties) : [];
  const required = new Set(Array.isArray(s.required) ? s.required : []);
  const inner = `${indent}  `;
  const lines = [];
  for (const [key, sub] of props) {
    const description = sub && typeof sub === 'object' && typeof sub.description === 'string' ? sub.description : undefined;
    if (description) lines.push(`${inner}/** ${description.replace(/\*\//g, '*\\/').replace(/\s*\r?\n\s*/g, ' ')} */`);
    const key2 = /^[A-Za-z_$][\w$]*$/.test(key) ? key : JSON.stringify(key);
    lines.push(`${inner}${key2}${required.has(key) ? '' : '?'}: ${render(sub, inner, depth + 1)};`);
  }
  if (s.additionalProperties && typeof s.additionalProperties === 'object') {
    lines.push(`${inner}[key: string]: ${render(s.additionalProperties, inner, depth + 1)};`);
  } else if (props.length === 0 && s.additionalProperties !== false) {
    return 'Record<string, unknown>';
  }
  if (lines.length === 0) return '{}';
  return `{\n${lines.join('\n')}\n${indent}}`;
}

module.exports = { inputChecker, schemaToTypeScript };
