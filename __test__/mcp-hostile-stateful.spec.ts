// Attack review of `isolet mcp --http` in stateful mode (one persistent sandbox per MCP
// session): a session's concurrent first calls must share one sandbox, and whatever a
// session holds (its sandbox; in process isolation that sandbox's host process; its isolate
// slot) must be released when the session ends (DELETE) or expires (sessionIdleMs).
// Real servers from the programmatic API, driven by the official SDK client.

import { describe, expect, it } from 'vitest';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ISOLATIONS, TOKEN, call, connect, settle } from './support/mcp-server';

const { serveHttp, mcpSettings } = require('../lib/mcp');
const { processStats } = require('..');

const SESSIONS = 50;
const AT_ONCE = 10;
const CALLS = 4;
const MID_OPEN = 5;
const SHARED_COUNTER = 'globalThis.n = (globalThis.n ?? 0) + 1; globalThis.n';

/** What an engine holds that a stateful session could leave behind. */
function held(engine: any) {
  const s = engine.stats();
  const p = processStats();
  return { sandboxes: s.sandboxes.open, busy: s.busy, threads: s.threads, hosts: s.processes?.live ?? 0, hostPids: s.processes?.pids ?? [], liveThreads: p.liveThreads, sandboxProcesses: p.sandboxProcesses };
}

describe('isolet mcp --http stateful: one sandbox per session, released with it', () => {
  for (const isolation of ISOLATIONS) {
    it(`${SESSIONS} sessions of ${CALLS} concurrent first calls each share one sandbox, and nothing stays after DELETE (also mid-open) or the idle timeout (${isolation})`, async () => {
      const settings = mcpSettings({
        stateful: true,
        idleTimeoutMs: 60_000,
        timeoutMs: 5000,
        memoryLimitMb: 32,
        isolation,
        engine: { maxConcurrentIsolates: AT_ONCE, warmPoolSize: 0, processes: 1 },
      });
      // The idle timeout is generous: a loaded machine can keep a client silent a while
      // between its initialize and its next request.
      // One client (one token, one address) opens them all: its own bound is the server's.
      const served = await serveHttp(settings, { token: TOKEN, maxSessions: SESSIONS, maxSessionsPerClient: SESSIONS, sessionIdleMs: 4000, maxRunsPerSession: CALLS });
      try {
        const idle = held(served.engine);
        const released = (h: ReturnType<typeof held>) =>
          h.sandboxes === 0 && h.busy === 0 && h.threads === idle.threads && h.hosts === idle.hosts && h.liveThreads === idle.liveThreads && h.sandboxProcesses === idle.sandboxProcesses;
        // Sessions that end (DELETE) while their first calls are opening their sandbox (process
        // isolation: while its host process starts).
        for (let n = 0; n < MID_OPEN; n++) {
          const client = await connect(served.url);
          const calls = Array.from({ length: CALLS }, () => call(client, SHARED_COUNTER));
          await settle(() => served.engine.stats().sandboxes.open, (open) => open > 0, 10_000);
          await (client.transport as StreamableHTTPClientTransport).terminateSession();
          await client.close();
          await Promise.allSettled(calls);
          // Released at once, not whenever the garbage collector finds the sandbox unreachable.
          expect(await settle(() => served.engine.stats().sandboxes.open, (open) => open === 0, 2000)).toBe(0);
        }
        for (let first = 0; first < SESSIONS; first += AT_ONCE) {
          const batch = Array.from({ length: Math.min(AT_ONCE, SESSIONS - first) }, (_, i) => first + i);
          const answers = await Promise.all(
            batch.map(async (n) => {
              const client = await connect(served.url);
              const transport = client.transport as StreamableHTTPClientTransport;
              const calls = Array.from({ length: CALLS }, () => call(client, SHARED_COUNTER));
              const out = await Promise.all(calls);
              // Half end with DELETE, half go silent until sessionIdleMs.
              if (n % 2 === 0) await transport.terminateSession();
              await client.close();
              return out.map((r) => (r.isError ? r.content[0].text : Number(r.content[0].text))).sort();
            }),
          );
          // One sandbox per session: its calls counted 1, 2, 3, 4 between them (never 1, 1, 1, 1).
          expect(answers).toEqual(batch.map(() => [1, 2, 3, 4]));
        }
        // Ended or expired, no session leaves a sandbox, a slot, a thread or a host behind.
        const after = await settle(() => held(served.engine), released, 15_000);
        expect(after).toEqual(idle);
        expect(served.sessionCount()).toBe(0);
      } finally {
        await served.close();
      }
    });
  }
});
