// A real HTTP server on 127.0.0.1 (port 0) that speaks enough of the OpenAI
// chat-completions protocol for the official `openai` client: POST /v1/chat/completions.
// Each request takes the next queued behaviour, else the default one.

import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export type ChatBehaviour =
  /** 200 with a chat.completion whose message content is `answer`. */
  | { answer: string; finishReason?: string; delayMs?: number }
  /** An HTTP error with an OpenAI-style error body (or `body` verbatim). */
  | { status: number; message?: string; body?: string }
  /** Accept the request and never answer (until the server closes). */
  | { hang: true }
  /** 200, content-type application/json, body that is not JSON. */
  | { malformed: true }
  /** 200 with this JSON value as the body (for wrong-shaped responses). */
  | { json: unknown };

export interface RecordedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: any;
}

export interface ChatServer {
  /** Base URL for the openai client, ending in /v1. */
  readonly baseURL: string;
  readonly requests: RecordedRequest[];
  /** Behaviours for the next requests, in order. */
  enqueue(...behaviours: ChatBehaviour[]): void;
  /** Behaviour when the queue is empty. */
  setDefault(behaviour: ChatBehaviour): void;
  /** Forget queued behaviours and recorded requests; back to the default default. */
  reset(): void;
  close(): Promise<void>;
}

const DEFAULT: ChatBehaviour = { answer: 'I have no suggestion.' };

export function completion(model: string, content: string, finishReason = 'stop') {
  return {
    id: `chatcmpl-stub-${Math.random().toString(36).slice(2, 10)}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: finishReason }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  };
}

export async function startChatServer(): Promise<ChatServer> {
  const queue: ChatBehaviour[] = [];
  const requests: RecordedRequest[] = [];
  let fallback: ChatBehaviour = DEFAULT;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: any = raw;
      try {
        body = JSON.parse(raw);
      } catch {
        // keep the raw text
      }
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });

      if (req.method !== 'POST' || !req.url || !req.url.startsWith('/v1/chat/completions')) {
        send(res, 404, { error: { message: `no route for ${req.method} ${req.url}`, type: 'invalid_request_error' } });
        return;
      }
      const behaviour = queue.length > 0 ? queue.shift()! : fallback;
      const model = typeof body?.model === 'string' ? body.model : 'stub-model';
      if ('hang' in behaviour) return;
      if ('malformed' in behaviour) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"id": "chatcmpl-broken", "choices": [ {"index": 0, "message": ');
        return;
      }
      if ('json' in behaviour) {
        send(res, 200, behaviour.json);
        return;
      }
      if ('status' in behaviour) {
        if (behaviour.body !== undefined) {
          res.writeHead(behaviour.status, { 'content-type': 'application/json' });
          res.end(behaviour.body);
        } else {
          send(res, behaviour.status, {
            error: { message: behaviour.message ?? 'stub server error', type: 'server_error', param: null, code: null },
          });
        }
        return;
      }
      const reply = () => send(res, 200, completion(model, behaviour.answer, behaviour.finishReason));
      if (behaviour.delayMs) setTimeout(reply, behaviour.delayMs);
      else reply();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    enqueue: (...b) => void queue.push(...b),
    setDefault: (b) => {
      fallback = b;
    },
    reset: () => {
      queue.length = 0;
      requests.length = 0;
      fallback = DEFAULT;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function send(res: http.ServerResponse, status: number, value: unknown) {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
