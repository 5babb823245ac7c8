// Stand-in for the Workers runtime's `cloudflare:workers` under Node (see register.mjs):
// only the base classes @cloudflare/codemode extends when it loads; nothing here runs code.
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
