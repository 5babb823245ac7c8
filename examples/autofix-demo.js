'use strict';

// autoFix end to end, offline: a local stub of the OpenAI chat-completions API answers with
// a fix, the real `openai` client asks it, the fix runs in a fresh V8 isolate together with
// a test, and only then is it written to a throwaway project.
//
//   node examples/autofix-demo.js

const http = require('node:http');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { autoFix } = require('../lib/autofix');

const BUGGY = `'use strict'

/** Sum of the numbers in a list. */
function sum(list) {
  let total = 0
  for (let i = 1; i < list.length; i++) total += list[i]
  return total
}

module.exports = { sum }
`;

const FIXED = BUGGY.replace('let i = 1;', 'let i = 0;');

const TEST = `
if (sum([1, 2, 3]) !== 6) throw new Error('sum([1, 2, 3]) should be 6, got ' + sum([1, 2, 3]))
if (module.exports.sum([]) !== 0) throw new Error('sum([]) should be 0')
`;

/** Enough of POST /v1/chat/completions for the openai client. */
function startStub(answer) {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.stringify({
        id: 'chatcmpl-demo',
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: 'demo-model',
        choices: [{ index: 0, message: { role: 'assistant', content: answer }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
      });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

async function main() {
  const server = await startStub('The loop skipped the first element:\n\n```js\n' + FIXED + '```\n');
  const project = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-autofix-demo-'));
  try {
    fs.mkdirSync(path.join(project, 'src'));
    fs.writeFileSync(path.join(project, 'src', 'sum.js'), BUGGY);

    const result = await autoFix({
      root: project,
      filePath: 'src/sum.js',
      instruction: 'sum([1, 2, 3]) returns 5 instead of 6',
      test: TEST,
      apiKey: 'demo-key-not-secret',
      baseURL: `http://127.0.0.1:${server.address().port}/v1`,
      model: 'demo-model',
      autoApprove: true, // a demo; in real use review the diff with approve()
    });

    console.log(
      `autoFix: ${result.status}${result.status === 'failed' ? ` (${result.reason}): ${result.message}` : ''}`,
    );
    if (result.diff) process.stdout.write(result.diff);
    const audit = fs.readFileSync(result.auditLog, 'utf8').trim();
    console.log(`audit line: ${audit}`);
    if (result.status !== 'applied') process.exitCode = 1;
  } finally {
    fs.rmSync(project, { recursive: true, force: true });
    await new Promise((resolve) => server.close(resolve));
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
