// Module resolve hook for module.register (Node 20 to 22.14; see register.mjs).
const STAND_IN = new URL('./cloudflare-workers.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (specifier === 'cloudflare:workers') return { url: STAND_IN, shortCircuit: true };
  return next(specifier, context);
}
