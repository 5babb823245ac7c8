// `node --import isolet/codemode/register app.js`: @cloudflare/codemode imports
// `cloudflare:workers` when it loads, a module only the Workers runtime has. This resolves
// it to a stand-in of the base classes it extends, so the real package loads under Node.
// It must run before the first import of @cloudflare/codemode (hence --import: a static
// import in the same module graph is resolved before any of it runs).
import * as nodeModule from 'node:module';

const STAND_IN = new URL('./cloudflare-workers.mjs', import.meta.url).href;

if (typeof nodeModule.registerHooks === 'function') {
  // In-thread hooks (Node 22.15+); Node 26 deprecates module.register.
  nodeModule.registerHooks({
    resolve: (specifier, context, next) =>
      specifier === 'cloudflare:workers' ? { url: STAND_IN, shortCircuit: true } : next(specifier, context),
  });
} else {
  nodeModule.register(new URL('./hooks.mjs', import.meta.url));
}
