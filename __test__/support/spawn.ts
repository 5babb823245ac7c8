// A child process run to its end, with what it printed: the CLI and README tests judge
// programs from outside.
import { spawn, type StdioOptions } from 'node:child_process';

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runToEnd(command: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; stdin?: string } = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(options.stdin ?? '');
  });
}

/** What spawnSync returns with `encoding: 'utf8'`. */
export interface ChildResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** The spawn failure, or ETIMEDOUT when `timeout` killed the child. */
  error?: Error;
}

export interface ChildOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Written to the child's stdin, which is then closed (closed at once without it). */
  input?: string;
  /** Milliseconds after which the child is sent `killSignal` (default SIGTERM). */
  timeout?: number;
  killSignal?: NodeJS.Signals | number;
  stdio?: StdioOptions;
}

/**
 * spawnSync(command, args, { encoding: 'utf8', ...options }) without blocking the event loop:
 * a vitest worker blocked past 60 s in all misses its RPC timeout to the main process
 * ("Timeout calling onTaskUpdate") and fails the run.
 */
export function runChild(command: string, args: readonly string[], options: ChildOptions = {}): Promise<ChildResult> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: options.stdio ?? 'pipe' });
    let stdout = '';
    let stderr = '';
    let error: Error | undefined;
    child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.stdin?.on('error', () => {}); // EPIPE: the child ended without reading its input
    child.stdin?.end(options.input ?? '');
    const timer =
      options.timeout && options.timeout > 0
        ? setTimeout(() => {
            error = Object.assign(new Error(`spawn ${command} ETIMEDOUT`), { code: 'ETIMEDOUT' });
            child.kill(options.killSignal ?? 'SIGTERM');
            // As spawnSync does: close the pipes too, in case a grandchild holds them open.
            child.stdout?.destroy();
            child.stderr?.destroy();
          }, options.timeout)
        : undefined;
    child.on('error', (e) => {
      error ??= e;
    });
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status: child.pid === undefined ? null : status, signal, stdout, stderr, error });
    });
  });
}
