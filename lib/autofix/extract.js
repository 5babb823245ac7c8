'use strict';

// Step 3b, extract: the code in a model's answer, in the original file's conventions, and
// within maxSuggestionBytes. The answer is untrusted text of any size and shape.

const { StepFailure } = require('./errors');

const CODE_LANGS = new Set(['', 'js', 'javascript', 'jsx', 'mjs', 'cjs', 'ts', 'typescript', 'tsx', 'node']);

/**
 * Returns the code of the first fenced block whose language is JavaScript/TypeScript (or
 * unlabelled); without any fence, the whole answer if it looks like code; else null.
 */
function extractCode(answer) {
  const lines = answer.split(/\r?\n/);
  let sawFence = false;
  for (let i = 0; i < lines.length; i++) {
    const open = /^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)[^`]*$/.exec(lines[i]);
    if (!open) continue;
    sawFence = true;
    const fence = open[1];
    const lang = open[2].toLowerCase();
    let end = -1;
    for (let j = i + 1; j < lines.length; j++) {
      const close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(lines[j]);
      if (close && close[1][0] === fence[0] && close[1].length >= fence.length) {
        end = j;
        break;
      }
    }
    if (end === -1) return { code: null, why: 'the answer has an unterminated code block' };
    if (CODE_LANGS.has(lang)) {
      const code = lines.slice(i + 1, end).join('\n');
      if (code.trim() === '') return { code: null, why: 'the code block in the answer is empty' };
      return { code, why: 'fenced' };
    }
    i = end;
  }
  if (sawFence) return { code: null, why: 'the answer has no JavaScript code block' };
  const trimmed = answer.trim();
  if (trimmed !== '' && looksLikeCode(trimmed)) return { code: trimmed, why: 'whole answer' };
  return { code: null, why: 'the answer contains no code' };
}

const CODE_START =
  /^(?:const|let|var|function|async|class|return|if|else|for|while|do|switch|case|try|catch|finally|throw|import|export|module\.exports|exports\.|'use strict'|"use strict"|\/\/|\/\*|\*|#!|\}|\)|\]|[\w$.]+\s*(?:=|\())/;
const CODE_END = /[;{}()[\],]$|\*\/$/;

function looksLikeCode(text) {
  const lines = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '');
  if (lines.length === 0) return false;
  let codeish = 0;
  let strong = 0;
  for (const line of lines) {
    const start = CODE_START.test(line);
    const end = CODE_END.test(line);
    if (start || end) codeish++;
    if (/[;{}]|=>/.test(line)) strong++;
  }
  return strong > 0 && codeish / lines.length >= 0.6;
}

/** Keeps the original file's conventions: line endings and trailing newline. */
function normaliseSuggestion(code, original) {
  let out = code.replace(/\r\n/g, '\n');
  if (original.endsWith('\n') && !out.endsWith('\n')) out += '\n';
  const crlf = (original.match(/\r\n/g) || []).length;
  const lf = (original.match(/\n/g) || []).length;
  if (crlf > 0 && crlf * 2 >= lf) out = out.replace(/\n/g, '\r\n');
  if (original.charCodeAt(0) === 0xfeff && out.charCodeAt(0) !== 0xfeff) out = '\ufeff' + out;
  return out;
}

/**
 * The suggestion autoFix would write, from the provider's answer: text and UTF-8 bytes.
 * Throws StepFailure('no-code') for an answer far too large to scan, no usable code,
 * code over maxSuggestionBytes, or code identical to the file.
 */
function suggestionFrom(answer, original, originalBytes, maxSuggestionBytes) {
  const answerBytes = Buffer.byteLength(answer, 'utf8');
  // Prose and fences around the code are allowed, within reason, before the code is measured.
  if (answerBytes > maxSuggestionBytes * 4 + 65536) {
    throw new StepFailure(
      'no-code',
      `the answer is ${answerBytes} bytes, far over maxSuggestionBytes (${maxSuggestionBytes})`,
    );
  }
  const extracted = extractCode(answer);
  if (extracted.code === null) throw new StepFailure('no-code', extracted.why);
  const text = normaliseSuggestion(extracted.code, original);
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length > maxSuggestionBytes) {
    throw new StepFailure(
      'no-code',
      `the suggested code is ${bytes.length} bytes, over maxSuggestionBytes (${maxSuggestionBytes})`,
    );
  }
  if (bytes.equals(originalBytes)) {
    throw new StepFailure('no-code', 'the suggestion is identical to the current file; nothing to apply');
  }
  return { text, bytes };
}

module.exports = { extractCode, suggestionFrom };
