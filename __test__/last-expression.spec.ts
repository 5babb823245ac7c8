// The last-expression rule of `isolet run` and the MCP tool (lib/last-expression.js): the
// rewrite itself, and positions mapped back to the user's code.

import { describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';

type PositionMap = Int32Array[];
const load = createRequire(__filename);
const { withLastExpressionResult, remapError } = load('../lib/last-expression') as {
  withLastExpressionResult(code: string): { code: string; map: PositionMap };
  remapError(error: any, map: PositionMap): any;
};
const { mapPosition } = load('../lib/positions') as { mapPosition(map: PositionMap, line: number, column: number): { line: number; column: number } };
const columnOf = (map: PositionMap, line: number, column: number) => mapPosition(map, line, column).column;

const rewrite = (code: string) => withLastExpressionResult(code).code;

describe('the last-expression rewrite', () => {
  it('returns the last statement when it is an expression; a return that runs comes first', () => {
    expect(rewrite('const x = 20; x + 22')).toBe('const x = 20; return (x + 22)');
    expect(rewrite('if (a) return 1\n42; // the answer')).toBe('if (a) return 1\nreturn (42); // the answer');
    expect(rewrite('(a, b)')).toBe('return ((a, b))');
    expect(rewrite('await p')).toBe('return (await p)');
    expect(rewrite('"just a string"')).toBe('return ("just a string")');
  });

  it('keeps the value of an expression followed by other statements', () => {
    expect(rewrite('x + 1; let y = 2')).toBe('var __isoletLastValue = (x + 1); let y = 2\n;return __isoletLastValue;');
    // A directive followed by code stays a directive.
    expect(rewrite('"use strict"; let y = 2')).toBe('"use strict"; let y = 2');
  });

  it('leaves code without such a statement, or that does not parse, as it is', () => {
    for (const code of ['return 5', 'const a = 1', 'function f() { return 1 }', 'for (;;) break', 'const = ;', 'x +']) {
      expect(withLastExpressionResult(code)).toEqual({ code, map: [] });
    }
  });

  it('maps positions in and after the inserted text back to the user\'s columns', () => {
    const { code, map } = withLastExpressionResult('const o = {};\n  o.a.b');
    expect(code).toBe('const o = {};\n  return (o.a.b)');
    expect(columnOf(map, 2, 15)).toBe(7); // the `b` of `o.a.b`
    expect(columnOf(map, 2, 5)).toBe(3); // inside `return (`: the user's next character
    expect(columnOf(map, 2, 2)).toBe(2); // before it
    expect(columnOf(map, 1, 9)).toBe(9); // another line
    const error = remapError({ message: 'x', thrown: { stack: 'TypeError: x\n    at sandbox.js:2:15\n    at sandbox.js:1:3' } }, map);
    expect(error.thrown.stack).toBe('TypeError: x\n    at sandbox.js:2:7\n    at sandbox.js:1:3');
  });
});
