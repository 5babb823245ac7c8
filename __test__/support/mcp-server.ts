// What the hostile MCP specs share: a real `isolet mcp --http` child process, the SDK
// client, and what /proc says about the server process.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const BIN = path.resolve(__dirname, '..', '..', 'bin', 'isolet.js');
export const TOKEN = 'hostile-test-token-7d2e';
export const ISOLATIONS = ['process', 'thread'] as const;

export type Content = Array<{ type: string; text: string }>;
export type Server = { child: ChildProcess; url: string; port: number; stderr: () => string; stop: () => void };

/** Starts `isolet mcp --http 127.0.0.1:0 --config <config> ...args` with the test token; resolves once it serves. */
export function startServer(config: object, args: string[] = []): Promise<Server> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-mcp-hostile-'));
  const file = path.join(dir, 'isolet.json');
  fs.writeFileSync(file, JSON.stringify(config));
  const child = spawn(process.execPath, [BIN, 'mcp', '--http', '127.0.0.1:0', '--config', file, '--token-env', 'ISOLET_HOSTILE_TOKEN', ...args], {
    env: { ...process.env, ISOLET_HOSTILE_TOKEN: TOKEN },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  const stop = () => {
    child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  };
  return new Promise((resolve, reject) => {
    child.stderr!.on('data', (d) => {
      stderr += d;
      const m = /serving run_code on (\S+)/.exec(stderr);
      if (m) resolve({ child, url: m[1], port: Number(new URL(m[1]).port), stderr: () => stderr, stop });
    });
    child.once('exit', (code) => reject(new Error(`server exited ${code}: ${stderr}`)));
  });
}

export async function connect(url: string): Promise<Client> {
  const client = new Client({ name: 'isolet-hostile-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }));
  return client;
}

export async function call(client: Client, code: string): Promise<{ isError?: boolean; content: Content }> {
  return (await client.callTool({ name: 'run_code', arguments: { code } })) as any;
}

/** VmRSS and VmHWM (peak) of a process, in MB. */
export function memoryOf(pid: number): { rssMb: number; peakMb: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'latin1');
  const mb = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+) kB`).exec(status)![1]) / 1024;
  return { rssMb: mb('VmRSS'), peakMb: mb('VmHWM') };
}

/** Open descriptors of a process. */
export function descriptorsOf(pid: number): number {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `read` until `done(value)` or `ms` pass; returns the last value read. */
export async function settle<T>(read: () => T, done: (value: T) => boolean, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  let value = read();
  while (!done(value) && Date.now() < deadline) {
    await sleep(50);
    value = read();
  }
  return value;
}
