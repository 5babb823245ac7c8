// Every entry point a spec may drive the same program through, in both isolation modes:
// an engine per mode (made before the spec's tests, shut down after), the MCP tool over the
// SDK's in-memory transport, and `isolet run` in-process on a file of a temp folder. What a
// test opens it hands to `later`, and it is closed after the spec.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { afterAll, beforeAll } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { SandboxEngine } from '../../index';
import { createMcpServer, mcpSettings } from '../../lib/mcp';

export const MODES = ['thread', 'process'] as const;
export type Mode = (typeof MODES)[number];

const load = createRequire(__filename);
const { runCommand } = load('../../lib/cli/run') as {
  runCommand(argv: string[], io: { stdout: { write(s: string): void }; stderr: { write(s: string): void } }): Promise<number>;
};

export interface EntryPoints {
  /** The spec's engine of this isolation mode (two slots). */
  engine(isolation: Mode): SandboxEngine;
  /** Closes `close` after the spec. */
  later(...close: Array<() => unknown>): void;
  /** An SDK client of a run_code server with these settings (mcpSettings' keys). */
  mcpClient(config: Record<string, unknown>): Promise<Client>;
  /** run_code's answer: isError and its text parts joined. */
  callTool(client: Client, code: string, language?: string): Promise<{ isError?: boolean; text: string }>;
  /** `isolet run <file> ...args` on `source` written to a file named `name`. */
  isoletRun(name: string, source: string, args?: string[]): Promise<{ exit: number; stdout: string; stderr: string; file: string }>;
}

/** Sets up the spec's engines and temp folder (`label` names it) and returns the entry points. */
export function entryPoints(label: string): EntryPoints {
  let dir = '';
  const engines = new Map<Mode, SandboxEngine>();
  const closers: Array<() => unknown> = [];
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), `isolet-${label}-`));
    for (const isolation of MODES) {
      const engine = new SandboxEngine({ isolation, maxConcurrentIsolates: 2 });
      await engine.init();
      engines.set(isolation, engine);
      closers.push(() => engine.shutdown());
    }
  }, 60_000);
  afterAll(async () => {
    for (const close of closers) await close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return {
    engine: (isolation) => engines.get(isolation)!,
    later: (...close) => void closers.push(...close),
    async mcpClient(config) {
      const server = createMcpServer(mcpSettings(config as never));
      const [serverSide, clientSide] = InMemoryTransport.createLinkedPair();
      await (server.server as { connect(transport: unknown): Promise<void> }).connect(serverSide);
      const client = new Client({ name: label, version: '1.0.0' });
      await client.connect(clientSide);
      closers.push(() => server.close());
      return client;
    },
    async callTool(client, code, language) {
      const r = (await client.callTool({ name: 'run_code', arguments: language === undefined ? { code } : { code, language } })) as {
        isError?: boolean;
        content: Array<{ text: string }>;
      };
      return { isError: r.isError, text: r.content.map((c) => c.text).join('\n') };
    },
    async isoletRun(name, source, args = []) {
      const file = path.join(dir, name);
      fs.writeFileSync(file, source);
      let stdout = '';
      let stderr = '';
      const io = { stdout: { write: (s: string) => void (stdout += s) }, stderr: { write: (s: string) => void (stderr += s) } };
      const exit = await runCommand([file, ...args], io);
      return { exit, stdout, stderr, file };
    },
  };
}
