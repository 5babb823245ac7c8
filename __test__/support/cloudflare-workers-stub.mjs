// Stand-in for the Workers runtime's `cloudflare:workers` (see cloudflare-workers-hook.mjs):
// only the base classes codemode extends at load; nothing here runs code.
export class RpcTarget {}
export class WorkerEntrypoint {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
  }
}
export class DurableObject {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
  }
}
export const env = {};
