// A run's result read as success or failure, with the other side's details in the error.
import type { SandboxResult } from '../../index';

/** The output of a run that must have succeeded. */
export function ok<T>(r: SandboxResult<T>): T {
  if (!r.success) throw new Error(`expected success, got ${r.error.name}: ${r.error.message}`);
  return r.output;
}

/** The error of a run that must have failed. */
export function failed(r: SandboxResult) {
  if (r.success) throw new Error(`expected failure, got output ${JSON.stringify(r.output)}`);
  return r.error;
}
