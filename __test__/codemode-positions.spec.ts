// Code Mode runs the user's code inside a wrapper (namespaces, preludes, the function
// normalizeCode makes, TypeScript made JavaScript): the positions it reports are the
// user's own, as runSandbox's are (lib/positions.js) — a logged stack, a syntax error.
import { describe, expect, it } from 'vitest';
import { IsoletExecutor } from '../lib/codemode';

const modes = [
  { language: 'javascript' as const, stateful: false },
  { language: 'typescript' as const, stateful: false },
  { language: 'javascript' as const, stateful: true },
  { language: 'typescript' as const, stateful: true },
];

describe.each(modes)('Code Mode positions ($language, stateful: $stateful)', ({ language, stateful }) => {
  const typed = language === 'typescript';
  const program = [
    typed ? 'enum Level { Low = 1 }' : 'const Level = { Low: 1 };',
    typed ? 'const x: number = Level.Low;' : 'const x = Level.Low;',
    '',
    "console.log(new Error('here').stack);",
    'x',
  ].join('\n');

  it('a stack the code logs names its own line and column', async () => {
    const ex = new IsoletExecutor({ language, stateful });
    try {
      const r = await ex.execute(program, [{ name: 'tools', fns: { ping: async () => 'pong' }, prelude: 'const helper = 1;\nconst other = 2;' }]);
      expect(r.error).toBeUndefined();
      expect(r.result).toBe(1);
      // `new Error` is on line 4, at column 13.
      expect(r.logs?.[0]).toMatch(/^Error: here\n\s+at sandbox\.js:4:13\n/);
    } finally {
      await ex.dispose();
    }
  });

  it('a syntax error in fenced code names its line and column in the text given', async () => {
    const ex = new IsoletExecutor({ language, stateful });
    try {
      const r = await ex.execute('```js\nconst a = 1;\nconst b = ;\n```', []);
      expect(r.result).toBeUndefined();
      expect(r.error).toMatch(/line 3, column 11/);
    } finally {
      await ex.dispose();
    }
  });
});
