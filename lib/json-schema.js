'use strict';
// Input checks for described tools, on the host, before a tool's `execute` runs, and the
// TypeScript rendering of a schema for describeTools. A schema is one of:
//   - a zod schema (anything with `safeParse`), or any Standard Schema (`~standard`);
//   - an AI SDK Schema from `jsonSchema()` / `zodSchema()` (`{ jsonSchema, validate? }`);
//   - a plain JSON Schema object, checked here for the keywords tools use: type, enum,
//     const, properties, required, additionalProperties, items, minItems, maxItems,
//     minLength, maxLength, pattern, minimum, maximum, exclusiveMinimum,
//     exclusiveMaximum, anyOf, oneOf, allOf, nullable. Other keywords are not enforced.
// A failure is a TypeError naming the tool and the field (`input.owner`); it reaches the
// sandbox as a catchable TypeError.

const MAX_DEPTH = 64;

/** Resolves with the input `execute` gets (a zod schema's parsed value), or throws a TypeError. */
async function checkInput(schema, value, toolName) {
  if (schema === undefined || schema === true) return value;
  if (schema === false) throw new TypeError(`${toolName}: this tool accepts no input`);
  if (typeof schema.safeParse === 'function') {
    const r = typeof schema.safeParseAsync === 'function' ? await schema.safeParseAsync(value) : schema.safeParse(value);
    if (r.success) return r.data;
    throw new TypeError(`${toolName}: ${describeIssues(r.error && r.error.issues)}`);
  }
  if (schema['~standard'] && typeof schema['~standard'].validate === 'function') {
    const r = await schema['~standard'].validate(value);
    if (!r.issues) return r.value;
    throw new TypeError(`${toolName}: ${describeIssues(r.issues)}`);
  }
  if (isSdkSchema(schema)) {
    if (typeof schema.validate === 'function') {
      const r = await schema.validate(value);
      if (r.success) return r.value;
      throw new TypeError(`${toolName}: ${r.error && r.error.message ? r.error.message : 'input does not match the schema'}`);
    }
    schema = schema.jsonSchema;
  }
  const problem = check(schema, value, 'input', 0);
  if (problem) throw new TypeError(`${toolName}: ${problem}`);
  return value;
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

function typeOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function matchesType(type, v) {
  const t = typeOf(v);
  return type === t || (type === 'number' && t === 'integer');
}

/** The first problem with `v` under `s`, as "<path> must ...", or null. */
function check(s, v, path, depth) {
  if (s === true || s === undefined || s === null || typeof s !== 'object') return null;
  if (s === false) return `${path} is not allowed`;
  if (depth > MAX_DEPTH) return `${path} is nested too deeply`;
  if (v === null && s.nullable === true) return null;
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    if (!types.some((t) => matchesType(t, v))) return `${path} must be ${types.map(article).join(' or ')}, got ${article(typeOf(v) === 'integer' ? 'number' : typeOf(v))}`;
  }
  if (s.const !== undefined && !sameValue(s.const, v)) return `${path} must be ${JSON.stringify(s.const)}`;
  if (Array.isArray(s.enum) && !s.enum.some((e) => sameValue(e, v))) {
    return `${path} must be one of ${s.enum.map((e) => JSON.stringify(e)).join(', ')}`;
  }
  if (typeof v === 'string') {
    if (s.minLength !== undefined && v.length < s.minLength) return `${path} must be at least ${s.minLength} characters long`;
    if (s.maxLength !== undefined && v.length > s.maxLength) return `${path} must be at most ${s.maxLength} characters long`;
    if (typeof s.pattern === 'string' && !safeRegExp(s.pattern).test(v)) return `${path} must match /${s.pattern}/`;
  }
  if (typeof v === 'number') {
    if (s.minimum !== undefined && v < s.minimum) return `${path} must be >= ${s.minimum}`;
    if (s.maximum !== undefined && v > s.maximum) return `${path} must be <= ${s.maximum}`;
    if (typeof s.exclusiveMinimum === 'number' && v <= s.exclusiveMinimum) return `${path} must be > ${s.exclusiveMinimum}`;
    if (typeof s.exclusiveMaximum === 'number' && v >= s.exclusiveMaximum) return `${path} must be < ${s.exclusiveMaximum}`;
  }
  if (Array.isArray(v)) {
    if (s.minItems !== undefined && v.length < s.minItems) return `${path} must have at least ${s.minItems} items`;
    if (s.maxItems !== undefined && v.length > s.maxItems) return `${path} must have at most ${s.maxItems} items`;
    if (s.items && typeof s.items === 'object' && !Array.isArray(s.items)) {
      for (let i = 0; i < v.length; i++) {
        const p = check(s.items, v[i], `${path}[${i}]`, depth + 1);
        if (p) return p;
      }
    }
  }
  if (typeOf(v) === 'object') {
    const props = s.properties && typeof s.properties === 'object' ? s.properties : {};
    for (const key of Array.isArray(s.required) ? s.required : []) {
      if (!Object.hasOwn(v, key)) return `${path}.${key} is required`;
    }
    for (const [key, value] of Object.entries(v)) {
      if (Object.hasOwn(props, key)) {
        const p = check(props[key], value, `${path}.${key}`, depth + 1);
        if (p) return p;
      } else if (s.additionalProperties === false) {
        return `${path}.${key} is not an allowed property`;
      } else if (s.additionalProperties && typeof s.additionalProperties === 'object') {
        const p = check(s.additionalProperties, value, `${path}.${key}`, depth + 1);
        if (p) return p;
      }
    }
  }
  if (Array.isArray(s.allOf)) {
    for (const sub of s.allOf) {
      const p = check(sub, v, path, depth + 1);
      if (p) return p;
    }
  }
  if (Array.isArray(s.anyOf) && !s.anyOf.some((sub) => check(sub, v, path, depth + 1) === null)) {
    return `${path} matches none of the allowed shapes (${check(s.anyOf[0], v, path, depth + 1)})`;
  }
  if (Array.isArray(s.oneOf) && s.oneOf.filter((sub) => check(sub, v, path, depth + 1) === null).length !== 1) {
    return `${path} must match exactly one of the allowed shapes`;
  }
  return null;
}

function article(t) {
  return /^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`;
}

function sameValue(a, b) {
  return a === b || (typeof a === 'object' && a !== null && JSON.stringify(a) === JSON.stringify(b));
}

const regexpCache = new Map();
function safeRegExp(pattern) {
  let r = regexpCache.get(pattern);
  if (!r) {
    r = new RegExp(pattern, 'u');
    regexpCache.set(pattern, r);
  }
  return r;
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

module.exports = { checkInput, schemaToTypeScript };
