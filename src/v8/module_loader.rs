//! ES modules: compiling (through the code cache), resolving and linking a run's module
//! graph (`isolet_core::modules` decides what may load); `import()` reaches it from
//! inside V8 through `callbacks::import_cb`.
use std::sync::Arc;

use isolet_core::code_cache::{Lookup, Unit, UnitKind};
use isolet_core::modules::{self, ModuleError, ModuleGraph, ModuleLimits};
use isolet_core::seam_policy;
use isolet_core::Thrown;

use super::values::{empty_error, take_bytes, take_error};
use super::{ffi, lock, DataAnswer, EngineCode, Sandbox, SandboxHost, Step};

/// The module graph's policy (isolet-core) and the modules compiled but not linked yet.
#[derive(Default)]
pub(super) struct ModuleState {
    pub(super) graph: ModuleGraph,
    pub(super) unlinked: Vec<u32>,
    /// The root module of the run being served (a persistent sandbox releases it after).
    pub(super) root: Option<u32>,
    /// Modules whose code cache the engine's cache asked for, made once their code ran.
    pub(super) produce: Vec<PendingCache>,
}

/// A module compiled from source whose code cache is to be made and kept.
pub(super) struct PendingCache {
    pub(super) id: u32,
    pub(super) key: u64,
    pub(super) kind: UnitKind,
    pub(super) origin: String,
    pub(super) source: String,
    pub(super) code: Arc<EngineCode>,
}

/// Why a module graph could not be loaded.
pub(super) enum LoadError {
    Module(ModuleError),
    /// A module did not compile: its error, naming it.
    Syntax(Thrown),
    Terminated,
}

impl LoadError {
    /// As the run's step (a static import of the run's own code).
    fn into_step(self) -> Step {
        match self {
            LoadError::Module(e) => Step::Threw(module_thrown(&e)),
            LoadError::Syntax(thrown) => Step::Syntax(thrown),
            LoadError::Terminated => Step::Terminated,
        }
    }
}

/// The error a module that cannot be loaded throws: a RangeError for a limit.
pub(super) fn module_thrown(e: &ModuleError) -> Thrown {
    let name = match e {
        ModuleError::TooManyModules { .. } | ModuleError::TooManyBytes { .. } => "RangeError",
        _ => "Error",
    };
    Thrown { name: name.into(), message: e.to_string(), ..Default::default() }
}

/// Compiles `source` as module `key` (through the engine's code cache when there is one:
/// `kind` says which units it keeps); a syntax error names the module (unless it is the
/// run's own code, named like a script's).
pub(super) fn compile_module(
    raw: *mut ffi::isolet_sandbox,
    source: &str,
    key: &str,
    cache: Option<(&Arc<EngineCode>, UnitKind)>,
    produce: &mut Vec<PendingCache>,
) -> Result<u32, LoadError> {
    let mut err = empty_error();
    let mut id = 0u32;
    let unit = cache.map(|(code, kind)| (code, Unit { kind, origin: key, source }));
    let looked = unit.as_ref().map(|(code, unit)| {
        let key = code.key(unit);
        (key, code.lookup(key, unit))
    });
    let data: &[u8] = match &looked {
        Some((_, Lookup::Hit(data))) => data,
        _ => &[],
    };
    let mut rejected = 0;
    // SAFETY: live sandbox, valid buffers and out-pointers; `data` outlives the call.
    let rc = unsafe {
        ffi::isolet_module_compile(
            raw,
            source.as_ptr(),
            source.len(),
            key.as_ptr(),
            key.len(),
            data.as_ptr(),
            data.len(),
            &mut rejected,
            &mut id,
            &mut err,
        )
    };
    if let (Some((code, unit)), Some((cache_key, lookup))) = (&unit, &looked) {
        if rejected != 0 {
            code.rejected(*cache_key);
        }
        if *lookup == Lookup::Produce && rc == ffi::ISOLET_OK {
            produce.push(PendingCache {
                id,
                key: *cache_key,
                kind: unit.kind,
                origin: key.to_string(),
                source: source.to_string(),
                code: (*code).clone(),
            });
        }
    }
    let out = match rc {
        ffi::ISOLET_OK => Ok(id),
        ffi::ISOLET_SYNTAX => {
            let mut thrown = take_error(&mut err);
            if key != modules::ROOT_MODULE {
                thrown.message = format!("in module '{key}': {}", thrown.message);
            }
            Err(LoadError::Syntax(thrown))
        }
        ffi::ISOLET_TOO_LARGE => {
            let (name, message) = seam_policy::CODE_TOO_LONG;
            Err(LoadError::Syntax(Thrown { name: name.into(), message: message.into(), ..Default::default() }))
        }
        _ => Err(LoadError::Terminated),
    };
    // SAFETY: frees leftovers, null-safe.
    unsafe { ffi::isolet_error_free(&mut err) };
    out
}

/// Admits, compiles and enters module `name` in the graph (counted back out if it does
/// not compile).
pub(super) fn load_module(
    raw: *mut ffi::isolet_sandbox,
    host: &dyn SandboxHost,
    state: &mut ModuleState,
    name: &str,
    source: &str,
    prelude: bool,
) -> Result<u32, LoadError> {
    state.graph.admit(source.len()).map_err(LoadError::Module)?;
    let code = host.engine_code();
    let kind = if prelude { UnitKind::PreludeModule } else { UnitKind::Module };
    match compile_module(raw, source, name, code.as_ref().map(|c| (c, kind)), &mut state.produce) {
        Ok(id) => {
            state.graph.insert(name, id, source);
            Ok(id)
        }
        Err(e) => {
            state.graph.unadmit(source.len());
            Err(e)
        }
    }
}

pub(super) fn module_requests(raw: *mut ffi::isolet_sandbox, id: u32) -> Result<Vec<String>, LoadError> {
    let mut out = ffi::isolet_bytes { ptr: std::ptr::null_mut(), len: 0 };
    let mut count = 0usize;
    // SAFETY: live sandbox, valid out-pointers.
    if unsafe { ffi::isolet_module_requests(raw, id, &mut out, &mut count) } != ffi::ISOLET_OK {
        take_bytes(&mut out);
        return Err(LoadError::Terminated);
    }
    let joined = take_bytes(&mut out).unwrap_or_default();
    if count == 0 {
        return Ok(Vec::new());
    }
    Ok(joined.split(|b| *b == 0).map(|s| String::from_utf8_lossy(s).into_owned()).collect())
}

/// The module `key` names (imported from `referrer`): from the graph, the run's map, or
/// the host's `resolve`; compiled and queued for linking when new.
pub(super) fn ensure_module(
    raw: *mut ffi::isolet_sandbox,
    host: &dyn SandboxHost,
    state: &mut ModuleState,
    key: &str,
    referrer: &str,
) -> Result<u32, LoadError> {
    match state.graph.get(key) {
        Some(Ok(id)) => return Ok(id),
        Some(Err(e)) => return Err(LoadError::Module(e)),
        None => {}
    }
    let failed = |state: &mut ModuleState, e: ModuleError| {
        state.graph.fail(key, e.clone());
        Err(LoadError::Module(e))
    };
    let not_found = || ModuleError::NotFound { specifier: key.to_string(), referrer: referrer.to_string() };
    let resolve_error = |message: String| ModuleError::Resolve { specifier: key.to_string(), referrer: referrer.to_string(), message };
    let (name, source, prelude) = match host.given_module(key) {
        Some((source, prelude)) => (key.to_string(), source, prelude),
        // Not remembered: a run without `resolve` could otherwise fill the graph (outside
        // V8's heap) with as many missing keys as it can name.
        None if !host.module_resolver() => return Err(LoadError::Module(not_found())),
        None => {
            state.graph.admit_request().map_err(LoadError::Module)?;
            match host.resolve_module(key, referrer) {
                DataAnswer::Terminated => return Err(LoadError::Terminated),
                DataAnswer::Error(message) => return failed(state, resolve_error(message)),
                DataAnswer::Value(bytes) => match modules::decode_resolved(&bytes) {
                    Ok(None) => return failed(state, not_found()),
                    Ok(Some((None, source))) => (key.to_string(), source, false),
                    Ok(Some((Some(canonical), source))) => match modules::map_key(&canonical) {
                        Ok(name) => {
                            if let Some(Ok(id)) = state.graph.get(&name) {
                                state.graph.alias(key, id);
                                return Ok(id);
                            }
                            (name, source, false)
                        }
                        Err(why) => return failed(state, resolve_error(format!("the specifier it returned {why}"))),
                    },
                    Err(why) => return failed(state, resolve_error(format!("its answer is {why}"))),
                },
            }
        }
    };
    let id = load_module(raw, host, state, &name, &source, prelude)?;
    state.graph.alias(key, id);
    state.unlinked.push(id);
    Ok(id)
}

/// Loads what the modules `root` reaches that are compiled but not linked yet import, and
/// links them. A module stays queued until its imports are all there, so a failed load is
/// finished by a later one that reaches the same module; a load that does not reach it
/// leaves it alone (an `import()` that failed must not fail the next, unrelated one).
pub(super) fn link_pending(
    raw: *mut ffi::isolet_sandbox,
    host: &dyn SandboxHost,
    state: &mut ModuleState,
    root: u32,
) -> Result<(), LoadError> {
    let mut work = vec![root];
    let mut seen = std::collections::HashSet::new();
    while let Some(id) = work.pop() {
        if !seen.insert(id) || !state.unlinked.contains(&id) {
            continue;
        }
        let from = state.graph.key_of(id).unwrap_or(modules::ROOT_MODULE).to_string();
        let mut targets = Vec::new();
        for specifier in module_requests(raw, id)? {
            let key = modules::module_key(&specifier, &from).map_err(LoadError::Module)?;
            targets.push(ensure_module(raw, host, state, &key, &from)?);
        }
        // SAFETY: live sandbox; `targets` is valid for the call.
        unsafe { ffi::isolet_module_link(raw, id, targets.as_ptr(), targets.len()) };
        state.unlinked.retain(|queued| *queued != id);
        work.extend(targets);
    }
    Ok(())
}

impl Sandbox {
    /// The limits of the run now served on the isolate's module graph.
    pub(crate) fn set_module_limits(&mut self, limits: ModuleLimits) {
        // SAFETY: the callbacks box lives as long as self.
        lock(unsafe { &(*self.callbacks).modules }).graph.set_limits(limits);
    }

    /// Makes the code caches the engine's cache asked for, of the modules compiled since
    /// the last time (after their code ran, so the functions it compiled are in them).
    pub(crate) fn flush_module_caches(&mut self) {
        // SAFETY: the callbacks box lives as long as self.
        let pending = std::mem::take(&mut lock(unsafe { &(*self.callbacks).modules }).produce);
        for p in pending {
            if self.panicked() {
                return;
            }
            let mut out = ffi::isolet_bytes { ptr: std::ptr::null_mut(), len: 0 };
            // SAFETY: live sandbox, valid out-pointer; a released or unknown id fails.
            let rc = unsafe { ffi::isolet_module_create_code_cache(self.raw, p.id, &mut out) };
            if let (ffi::ISOLET_OK, Some(data)) = (rc, take_bytes(&mut out)) {
                p.code.admit(p.key, &Unit { kind: p.kind, origin: &p.origin, source: &p.source }, data);
            }
        }
    }

    /// Persistent sandboxes: the run's own `modules` that name a module an earlier run
    /// loaded from another source (which cannot be replaced), as the run's error message.
    pub(crate) fn replaced_module(&self, given: &std::collections::BTreeMap<String, String>) -> Option<String> {
        // SAFETY: the callbacks box lives as long as self.
        let state = lock(unsafe { &(*self.callbacks).modules });
        given.iter().find(|(key, source)| state.graph.loaded_otherwise(key, source)).map(|(key, _)| {
            format!("modules['{key}']: module '{key}' was loaded by an earlier run of this sandbox from another source; a loaded module cannot be replaced")
        })
    }

    /// Evaluates the engine's prelude module `key` (its imports among the prelude's
    /// modules) in this fresh context: what is wrong with it, naming it, for `init()`.
    pub(crate) fn check_prelude_module(&mut self, key: &str) -> Result<(), Step> {
        // SAFETY: the callbacks box lives as long as self.
        let callbacks = unsafe { &*self.callbacks };
        let loaded = {
            let mut state = lock(&callbacks.modules);
            let host = callbacks.host.as_ref();
            let mut load = || -> Result<u32, LoadError> {
                let id = ensure_module(self.raw, host, &mut state, key, "prelude")?;
                link_pending(self.raw, host, &mut state, id)?;
                Ok(id)
            };
            load()
        };
        let id = match loaded {
            _ if self.panicked() => return Err(Step::Terminated),
            Ok(id) => id,
            Err(e) => return Err(e.into_step()),
        };
        let mut err = empty_error();
        // SAFETY: live sandbox, valid out-pointer.
        let rc = unsafe { ffi::isolet_module_evaluate(self.raw, id, &mut err) };
        let out = match rc {
            _ if self.panicked() => Err(Step::Terminated),
            ffi::ISOLET_OK | ffi::ISOLET_PENDING => Ok(()),
            ffi::ISOLET_THREW => Err(Step::Threw(take_error(&mut err))),
            _ => Err(Step::Terminated),
        };
        // SAFETY: frees leftovers, null-safe.
        unsafe { ffi::isolet_error_free(&mut err) };
        if out.is_ok() {
            self.flush_module_caches();
        }
        out
    }

    /// Runs `code` as the root module (`modules::ROOT_MODULE`): loads and links what it
    /// imports, then evaluates it.
    pub(super) fn run_module(&mut self, code: &str) -> Step {
        // SAFETY: the callbacks box lives as long as self.
        let callbacks = unsafe { &*self.callbacks };
        let loaded = {
            let mut state = lock(&callbacks.modules);
            let host = callbacks.host.as_ref();
            let mut load = || -> Result<u32, LoadError> {
                let id = load_module(self.raw, host, &mut state, modules::ROOT_MODULE, code, false)?;
                state.root = Some(id);
                state.unlinked.push(id);
                link_pending(self.raw, host, &mut state, id)?;
                Ok(id)
            };
            load()
        };
        let id = match loaded {
            _ if self.panicked() => return Step::Terminated,
            Ok(id) => id,
            Err(e) => return e.into_step(),
        };
        let mut err = empty_error();
        // SAFETY: live sandbox, valid out-pointer.
        let rc = unsafe { ffi::isolet_module_run(self.raw, id, &mut err) };
        let step = match rc {
            _ if self.panicked() => Step::Terminated,
            ffi::ISOLET_OK => Step::Settled,
            ffi::ISOLET_PENDING => Step::Pending,
            ffi::ISOLET_THREW => Step::Threw(take_error(&mut err)),
            _ => Step::Terminated,
        };
        // SAFETY: frees leftovers, null-safe.
        unsafe { ffi::isolet_error_free(&mut err) };
        if matches!(step, Step::Settled | Step::Pending) {
            // Their top levels ran: the caches hold what that compiled too.
            self.flush_module_caches();
        }
        step
    }
}
