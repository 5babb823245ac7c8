// Test-only Node module hook: @cloudflare/codemode imports `cloudflare:workers` at load,
// a module only the Workers runtime has. Resolve it to a small stand-in so the real
// package (and its real createCodeTool) can be loaded under Node.
const STUB = new URL('./cloudflare-workers-stub.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (specifier === 'cloudflare:workers') return { url: STUB, shortCircuit: true };
  return next(specifier, context);
}
