'use strict';
// Entry script of a sandbox host process (isolation: 'process'). The parent starts it
// with `process.execPath`; it loads the same addon, which then serves runs over the run
// channel on descriptor 3 for the rest of the process's life (src/sandbox_host/channel.rs):
// it reads the engine's configuration, compiles its WebAssembly modules, locks the
// process down, and runs isolates in thread mode. Nothing here runs after this call.
// The addon is required before lock-down: afterwards no file can be opened.
require('../native').serveSandboxHost();
