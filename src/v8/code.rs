//! An engine's compiled code: its prelude and its compiled-code cache, shared by every
//! isolate thread of the engine (in process mode: of one sandbox host, which keeps its
//! own). The policy (key, admission, budget, eviction) is `isolet_core::code_cache`; this
//! holds it behind a lock, for the sandbox to compile through.
use std::collections::hash_map::RandomState;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use isolet_core::code_cache::{self, CodeCache, CodeCacheStats, Lookup, Unit, UnitKind};
use isolet_core::options::Prelude;
use isolet_core::seam_policy::{self, WrappedSource};

use super::lock;

/// The origin (script name) the prelude compiles under: its frames show as `prelude.js`.
pub(crate) const PRELUDE_NAME: &str = "prelude.js";

pub(crate) struct EngineCode {
    /// The prelude as compiled, with its cache key: made once, not per run (a 1 MB
    /// prelude cost every fresh run a copy and a hash of its whole text).
    pub prelude: Option<(WrappedSource, u64)>,
    /// The prelude's modules (`prelude.modules`), by key: every run may import them.
    pub prelude_modules: BTreeMap<String, String>,
    cache: Mutex<CodeCache>,
    /// The cache's hasher, copied out so a large source is hashed outside the lock.
    hasher: RandomState,
}

impl EngineCode {
    pub(crate) fn new(prelude: Option<Prelude>, cache_budget_bytes: usize) -> Arc<EngineCode> {
        let cache = CodeCache::new(cache_budget_bytes);
        let hasher = cache.hasher();
        let Prelude { source, modules } = prelude.unwrap_or_default();
        let prelude = source.map(|source| {
            let wrapped = seam_policy::script_source_owned(source);
            let key = code_cache::key_with(&hasher, &Unit { kind: UnitKind::Prelude, origin: PRELUDE_NAME, source: &wrapped.source });
            (wrapped, key)
        });
        Arc::new(EngineCode { prelude, prelude_modules: modules, cache: Mutex::new(cache), hasher })
    }

    /// No prelude and no cache (runs planned outside an engine).
    pub(crate) fn none() -> Arc<EngineCode> {
        EngineCode::new(None, 0)
    }

    /// `unit`'s key (a hash of its whole text: computed outside the lock).
    pub(crate) fn key(&self, unit: &Unit) -> u64 {
        code_cache::key_with(&self.hasher, unit)
    }

    pub(crate) fn lookup(&self, key: u64, unit: &Unit) -> Lookup {
        lock(&self.cache).lookup(key, unit)
    }

    pub(crate) fn admit(&self, key: u64, unit: &Unit, data: Vec<u8>) {
        lock(&self.cache).admit(key, unit, data);
    }

    pub(crate) fn rejected(&self, key: u64) {
        lock(&self.cache).rejected(key);
    }

    pub(crate) fn stats(&self) -> CodeCacheStats {
        lock(&self.cache).stats()
    }
}
