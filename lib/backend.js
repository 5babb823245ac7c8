'use strict';
// The two isolation backends behind one interface (`submit`, `stats`, `shutdown`,
// `waitIdle`, `warmUp`, `setWasmModules`): isolates on threads of this process, or in
// supervised sandbox host processes. runSandbox and SandboxEngine choose here, from a
// config that isolet-core has already checked (`native.EngineSettings`).
const native = require('./native');
const { ProcessEngine } = require('./supervisor/process-engine');

/**
 * @param {object} settings a `native.EngineSettings` (the checked engine config)
 */
function createBackend(settings) {
  const config = settings.config;
  if (config.isolation === 'thread') return new native.NativeEngine(settings);
  return new ProcessEngine(config);
}

module.exports = { createBackend };
