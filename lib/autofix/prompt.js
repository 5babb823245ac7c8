'use strict';

// What the model is told: the system prompt and the user prompt (file, instruction, test).

const SYSTEM_PROMPT = [
  'You fix bugs in JavaScript source files.',
  'You receive one file and a description of what is wrong with it.',
  'Reply with the complete corrected file in a single ```js fenced code block and nothing else.',
  'Change only what the fix needs; keep the rest of the file as it is.',
  'The file is checked by running it as a classic script (not an ES module) in a bare JavaScript engine:',
  'there is no require() of other modules, no Node.js API, no file system, no network and no timers;',
  '`module.exports` and `exports` are available.',
].join(' ');

/** A backtick fence longer than any backtick run in `text`, so the text cannot close it. */
function fenceFor(text) {
  let longest = 0;
  for (const m of text.matchAll(/`+/g)) longest = Math.max(longest, m[0].length);
  return '`'.repeat(Math.max(3, longest + 1));
}

/** The system prompt, naming TypeScript when the file is TypeScript. */
function systemPromptFor(language) {
  if (language !== 'typescript') return SYSTEM_PROMPT;
  return SYSTEM_PROMPT.replace('JavaScript source files', 'TypeScript source files')
    .replace('```js fenced', '```ts fenced')
    .replace('in a bare JavaScript engine:', 'in a bare JavaScript engine once compiled to JavaScript (no decorators, no `import x = require()`):');
}

function buildPrompt(rel, instruction, test, content, language = 'javascript') {
  const tag = language === 'typescript' ? 'ts' : 'js';
  const parts = [`File: ${rel}`, '', 'What is wrong:', instruction.trim(), ''];
  if (test !== undefined && test.trim() !== '') {
    const f = fenceFor(test);
    parts.push(
      'After the file, this check runs in the same script and must complete without throwing:',
      `${f}${tag}`,
      test,
      f,
      '',
    );
  }
  const f = fenceFor(content);
  parts.push('Current content of the file:', `${f}${tag}`, content.endsWith('\n') ? content.slice(0, -1) : content, f);
  return parts.join('\n');
}

module.exports = { systemPromptFor, buildPrompt };
