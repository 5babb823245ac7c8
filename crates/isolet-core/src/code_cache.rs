//! The compiled-code cache of one engine: which compiled scripts (V8 code caches) are
//! kept, under which key, within which byte budget, and which one goes first.
//!
//! Every run gets a fresh isolate, so V8's own in-isolate compilation cache never helps;
//! V8's code cache (bytecode serialized by `ScriptCompiler::CreateCodeCache`, consumed with
//! `kConsumeCodeCache`) lets a fresh isolate skip parsing and compiling a source seen
//! before. It holds no heap state: a run consuming it starts as pristine as one compiling
//! from source.
//!
//! - **Key**: the wrapper mode (a script, an async function body, the prelude, an ES
//!   module, a prelude module), the origin name (a module's key) and the whole source text. Lookups go through a hash with a per-cache random
//!   key (SipHash, so sandboxed code cannot aim collisions), and a hit also compares the
//!   stored source: V8 itself checks only the source's *length* (plus its version and
//!   flags), so data for another source of the same length would be accepted and run.
//!   V8's version and flags are not in the key: the cache lives in memory for one process,
//!   and a data V8 refuses is dropped (`rejected`) and the source compiled again.
//! - **Admission**: the prelude and its modules (declared by the engine's owner) at once
//!   and kept for the engine's life; any other source only on its second sighting, and only if it is at
//!   least [`MIN_CACHED_SOURCE_BYTES`] long (below that compiling costs about what
//!   deserializing does) and its entry fits in a quarter of the budget. Sources seen once
//!   are remembered by hash only, at most [`MAX_SEEN_SOURCES`] of them (oldest forgotten
//!   first), so a stream of distinct sources costs a bounded set of numbers.
//! - **Budget**: entries (data + source + [`ENTRY_OVERHEAD_BYTES`]) add up to at most the
//!   budget (`codeCacheMb`); the prelude is counted but never evicted. Admitting an entry
//!   evicts the least recently used ones first.
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

/// Sources shorter than this are never cached (compiling them is about as fast as
/// deserializing their cache, and the lookup hashes the whole source).
pub const MIN_CACHED_SOURCE_BYTES: usize = 1024;
/// How many sources seen once are remembered (as 64-bit hashes) for admission.
pub const MAX_SEEN_SOURCES: usize = 4096;
/// Bookkeeping counted for each entry on top of its data and source.
pub const ENTRY_OVERHEAD_BYTES: usize = 128;

/// How the source is compiled: part of the key (the same text wrapped otherwise is other code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnitKind {
    /// A classic script (runSandbox without capabilities).
    Script,
    /// The body of an async function (capabilities, engine requests).
    AsyncBody,
    /// The engine's prelude: admitted at once and never evicted.
    Prelude,
    /// An ES module (a run's, a sandbox's or one `resolve` answered with), its origin the
    /// module's key: the same text under another key is another module (its stacks and
    /// relative imports differ).
    Module,
    /// A module of the engine's prelude (`prelude.modules`): admitted at once and never
    /// evicted, like the prelude.
    PreludeModule,
}

impl UnitKind {
    /// Declared by the engine's owner: cached at once and kept for the engine's life.
    pub fn pinned(self) -> bool {
        matches!(self, UnitKind::Prelude | UnitKind::PreludeModule)
    }
}

/// One compilation unit as the seam compiles it (after wrapping).
#[derive(Debug, Clone, Copy)]
pub struct Unit<'a> {
    pub kind: UnitKind,
    pub origin: &'a str,
    pub source: &'a str,
}

/// What to do for a compilation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Compile with this cached data.
    Hit(Arc<[u8]>),
    /// Compile from source, then produce the code cache and `admit` it.
    Produce,
    /// Compile from source; nothing to keep.
    Skip,
}

/// Counters of `engine.stats().codeCache`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodeCacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Cached data V8 refused (the source was compiled again and the entry dropped).
    pub rejected: u64,
    pub evictions: u64,
    pub entries: u64,
    pub bytes: u64,
    pub budget_bytes: u64,
}

impl CodeCacheStats {
    /// Counts of several caches (one per sandbox host) as one.
    pub fn add(&mut self, other: &CodeCacheStats) {
        self.hits = self.hits.saturating_add(other.hits);
        self.misses = self.misses.saturating_add(other.misses);
        self.rejected = self.rejected.saturating_add(other.rejected);
        self.evictions = self.evictions.saturating_add(other.evictions);
        self.entries = self.entries.saturating_add(other.entries);
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.budget_bytes = self.budget_bytes.saturating_add(other.budget_bytes);
    }
}

struct Entry {
    kind: UnitKind,
    origin: Box<str>,
    source: Box<str>,
    data: Arc<[u8]>,
    bytes: usize,
    last_used: u64,
    pinned: bool,
}

impl Entry {
    fn is(&self, unit: &Unit) -> bool {
        self.kind == unit.kind && *self.origin == *unit.origin && *self.source == *unit.source
    }
}

/// An engine's cache (or one sandbox host's).
pub struct CodeCache {
    budget: usize,
    hasher: RandomState,
    entries: HashMap<u64, Entry>,
    seen: HashSet<u64>,
    seen_order: VecDeque<u64>,
    tick: u64,
    stats: CodeCacheStats,
}

/// The bytes an entry is charged.
pub fn entry_bytes(unit: &Unit, data_len: usize) -> usize {
    data_len + unit.source.len() + unit.origin.len() + ENTRY_OVERHEAD_BYTES
}

impl CodeCache {
    /// A cache of at most `budget_bytes` (0: only the prelude is kept).
    pub fn new(budget_bytes: usize) -> CodeCache {
        CodeCache {
            budget: budget_bytes,
            hasher: RandomState::new(),
            entries: HashMap::new(),
            seen: HashSet::new(),
            seen_order: VecDeque::new(),
            tick: 0,
            stats: CodeCacheStats { budget_bytes: budget_bytes as u64, ..Default::default() },
        }
    }

    /// The unit's key. Needs no lock on a shared cache beyond reading the hasher: hash a
    /// large source before taking it (see [`CodeCache::hasher`]).
    pub fn key(&self, unit: &Unit) -> u64 {
        key_with(&self.hasher, unit)
    }

    /// The hasher keys are made with (copy it to hash outside a lock).
    pub fn hasher(&self) -> RandomState {
        self.hasher.clone()
    }

    /// Largest entry admitted (the prelude excepted).
    pub fn max_entry_bytes(&self) -> usize {
        self.budget / 4
    }

    pub fn lookup(&mut self, key: u64, unit: &Unit) -> Lookup {
        self.tick += 1;
        if let Some(entry) = self.entries.get_mut(&key) {
            if entry.is(unit) {
                entry.last_used = self.tick;
                self.stats.hits += 1;
                return Lookup::Hit(entry.data.clone());
            }
        }
        if unit.kind.pinned() {
            self.stats.misses += 1;
            return Lookup::Produce;
        }
        // An entry holds its source too: a unit whose source alone cannot fit is not
        // worth remembering.
        if self.budget == 0 || unit.source.len() < MIN_CACHED_SOURCE_BYTES || entry_bytes(unit, 0) > self.max_entry_bytes() {
            return Lookup::Skip;
        }
        self.stats.misses += 1;
        if self.seen.remove(&key) {
            return Lookup::Produce;
        }
        if self.seen_order.len() >= MAX_SEEN_SOURCES {
            // FIFO: an entry already admitted (removed from `seen`) is skipped here.
            while let Some(old) = self.seen_order.pop_front() {
                if self.seen.remove(&old) {
                    break;
                }
            }
        }
        self.seen.insert(key);
        self.seen_order.push_back(key);
        // Keep the order queue from growing with keys `seen` no longer holds.
        if self.seen_order.len() > 2 * MAX_SEEN_SOURCES {
            let seen = &self.seen;
            self.seen_order.retain(|k| seen.contains(k));
        }
        Lookup::Skip
    }

    /// Keeps `data` (produced after a `Produce`) for `unit`, evicting the least recently
    /// used entries to make room. Returns whether it was kept.
    pub fn admit(&mut self, key: u64, unit: &Unit, data: Vec<u8>) -> bool {
        let pinned = unit.kind.pinned();
        let bytes = entry_bytes(unit, data.len());
        if !pinned && bytes > self.max_entry_bytes() {
            return false;
        }
        self.remove(key);
        if !pinned {
            while self.stats.bytes as usize + bytes > self.budget {
                let victim = self.entries.iter().filter(|(_, e)| !e.pinned).min_by_key(|(_, e)| e.last_used).map(|(k, _)| *k);
                match victim {
                    Some(k) => {
                        self.remove(k);
                        self.stats.evictions += 1;
                    }
                    None => return false,
                }
            }
        }
        self.tick += 1;
        self.entries.insert(
            key,
            Entry {
                kind: unit.kind,
                origin: unit.origin.into(),
                source: unit.source.into(),
                data: data.into(),
                bytes,
                last_used: self.tick,
                pinned,
            },
        );
        self.stats.bytes += bytes as u64;
        self.stats.entries += 1;
        true
    }

    /// V8 refused the data served for `key`: drop it, so the next compile produces anew.
    pub fn rejected(&mut self, key: u64) {
        self.stats.rejected += 1;
        self.remove(key);
    }

    fn remove(&mut self, key: u64) {
        if let Some(old) = self.entries.remove(&key) {
            self.stats.bytes -= old.bytes as u64;
            self.stats.entries -= 1;
        }
    }

    pub fn stats(&self) -> CodeCacheStats {
        self.stats
    }
}

/// The key of `unit` under `hasher` (a cache's, see [`CodeCache::hasher`]).
pub fn key_with(hasher: &RandomState, unit: &Unit) -> u64 {
    let mut h = hasher.build_hasher();
    unit.kind.hash(&mut h);
    unit.origin.hash(&mut h);
    unit.source.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(n: usize, tag: usize) -> String {
        let mut s = format!("/* {tag} */");
        while s.len() < n {
            s.push_str(" x;");
        }
        s
    }

    fn unit<'a>(kind: UnitKind, source: &'a str) -> Unit<'a> {
        Unit { kind, origin: "sandbox.js", source }
    }

    #[test]
    fn a_source_is_admitted_on_its_second_sighting_and_then_served() {
        let mut c = CodeCache::new(1 << 20);
        let s = src(2000, 1);
        let u = unit(UnitKind::Script, &s);
        let k = c.key(&u);
        assert_eq!(c.lookup(k, &u), Lookup::Skip);
        assert_eq!(c.lookup(k, &u), Lookup::Produce);
        assert!(c.admit(k, &u, vec![7; 3000]));
        assert_eq!(c.lookup(k, &u), Lookup::Hit(vec![7u8; 3000].into()));
        let st = c.stats();
        assert_eq!((st.hits, st.misses, st.entries), (1, 2, 1));
        assert_eq!(st.bytes as usize, 3000 + s.len() + "sandbox.js".len() + ENTRY_OVERHEAD_BYTES);
    }

    #[test]
    fn the_wrapper_mode_and_origin_are_part_of_the_key() {
        let mut c = CodeCache::new(1 << 20);
        let s = src(2000, 1);
        let script = unit(UnitKind::Script, &s);
        let body = unit(UnitKind::AsyncBody, &s);
        let other_origin = Unit { origin: "other.js", ..script };
        assert_ne!(c.key(&script), c.key(&body));
        assert_ne!(c.key(&script), c.key(&other_origin));
        let k = c.key(&script);
        c.lookup(k, &script);
        c.lookup(k, &script);
        assert!(c.admit(k, &script, vec![1; 10]));
        let kb = c.key(&body);
        assert_eq!(c.lookup(kb, &body), Lookup::Skip);
    }

    #[test]
    fn a_colliding_key_never_serves_another_sources_data() {
        let mut c = CodeCache::new(1 << 20);
        let (a, b) = (src(2000, 1), src(2000, 2));
        let (ua, ub) = (unit(UnitKind::Script, &a), unit(UnitKind::Script, &b));
        let k = c.key(&ua);
        c.lookup(k, &ua);
        c.lookup(k, &ua);
        assert!(c.admit(k, &ua, vec![1; 10]));
        // Same key, same length, another text: compiled from source.
        assert_ne!(c.lookup(k, &ub), Lookup::Hit(vec![1u8; 10].into()));
    }

    #[test]
    fn short_sources_and_a_zero_budget_are_not_cached() {
        let mut c = CodeCache::new(1 << 20);
        let s = "1 + 1";
        let u = unit(UnitKind::Script, s);
        let k = c.key(&u);
        for _ in 0..3 {
            assert_eq!(c.lookup(k, &u), Lookup::Skip);
        }
        let mut off = CodeCache::new(0);
        let long = src(5000, 1);
        let u = unit(UnitKind::Script, &long);
        let k = off.key(&u);
        for _ in 0..3 {
            assert_eq!(off.lookup(k, &u), Lookup::Skip);
        }
        assert_eq!(off.stats().misses, 0);
    }

    #[test]
    fn distinct_sources_never_grow_the_cache_past_its_budget() {
        let budget = 64 * 1024;
        let mut c = CodeCache::new(budget);
        for i in 0..5000 {
            let s = src(1500 + i % 500, i);
            let u = unit(UnitKind::AsyncBody, &s);
            let k = c.key(&u);
            for _ in 0..2 {
                if c.lookup(k, &u) == Lookup::Produce {
                    c.admit(k, &u, vec![0; s.len() * 2]);
                }
            }
            assert!(c.stats().bytes as usize <= budget);
            assert!(c.seen.len() <= MAX_SEEN_SOURCES && c.seen_order.len() <= 2 * MAX_SEEN_SOURCES);
        }
        assert!(c.stats().evictions > 0);
        assert!(c.stats().entries >= 1);
    }

    #[test]
    fn sources_seen_once_are_remembered_in_bounded_number() {
        let mut c = CodeCache::new(1 << 20);
        for i in 0..(3 * MAX_SEEN_SOURCES) {
            let s = src(1100, i);
            let u = unit(UnitKind::Script, &s);
            let k = c.key(&u);
            assert_eq!(c.lookup(k, &u), Lookup::Skip);
            assert!(c.seen.len() <= MAX_SEEN_SOURCES);
        }
        assert_eq!(c.stats().entries, 0);
    }

    #[test]
    fn least_recently_used_goes_first_and_an_oversized_entry_is_refused() {
        let budget = 4 * (2000 + 1200 + 10 + ENTRY_OVERHEAD_BYTES);
        let mut c = CodeCache::new(budget);
        let sources: Vec<String> = (0..5).map(|i| src(1100, i)).collect();
        let keys: Vec<u64> = sources.iter().map(|s| c.key(&unit(UnitKind::Script, s))).collect();
        for (s, &k) in sources.iter().zip(&keys).take(4) {
            let u = unit(UnitKind::Script, s);
            c.lookup(k, &u);
            c.lookup(k, &u);
            assert!(c.admit(k, &u, vec![0; 2000]));
        }
        // Touch the first: the second is now the least recently used.
        assert!(matches!(c.lookup(keys[0], &unit(UnitKind::Script, &sources[0])), Lookup::Hit(_)));
        let u4 = unit(UnitKind::Script, &sources[4]);
        c.lookup(keys[4], &u4);
        c.lookup(keys[4], &u4);
        assert!(c.admit(keys[4], &u4, vec![0; 2000]));
        assert!(matches!(c.lookup(keys[0], &unit(UnitKind::Script, &sources[0])), Lookup::Hit(_)));
        assert!(!matches!(c.lookup(keys[1], &unit(UnitKind::Script, &sources[1])), Lookup::Hit(_)));
        assert_eq!(c.stats().evictions, 1);
        // More than a quarter of the budget: refused.
        assert!(!c.admit(keys[1], &unit(UnitKind::Script, &sources[1]), vec![0; budget / 4]));
    }

    #[test]
    fn the_prelude_is_admitted_at_once_and_never_evicted() {
        let mut c = CodeCache::new(16 * 1024);
        let p = src(3000, 0);
        let up = unit(UnitKind::Prelude, &p);
        let kp = c.key(&up);
        assert_eq!(c.lookup(kp, &up), Lookup::Produce);
        assert!(c.admit(kp, &up, vec![0; 6000]));
        for i in 1..200 {
            let s = src(1100, i);
            let u = unit(UnitKind::Script, &s);
            let k = c.key(&u);
            c.lookup(k, &u);
            if c.lookup(k, &u) == Lookup::Produce {
                c.admit(k, &u, vec![0; 1500]);
            }
        }
        assert!(matches!(c.lookup(kp, &up), Lookup::Hit(_)));
        assert!(c.stats().bytes as usize <= 16 * 1024);
        // Even with no budget at all.
        let mut off = CodeCache::new(0);
        let kp = off.key(&up);
        assert_eq!(off.lookup(kp, &up), Lookup::Produce);
        assert!(off.admit(kp, &up, vec![0; 6000]));
        assert!(matches!(off.lookup(kp, &up), Lookup::Hit(_)));
    }

    #[test]
    fn modules_are_keyed_by_their_key_and_source_and_kept_apart_from_scripts() {
        let mut c = CodeCache::new(1 << 20);
        let s = src(2000, 1);
        let a = Unit { kind: UnitKind::Module, origin: "lib/a.js", source: &s };
        let b = Unit { origin: "lib/b.js", ..a };
        let script = Unit { kind: UnitKind::Script, origin: "lib/a.js", source: &s };
        assert_ne!(c.key(&a), c.key(&b));
        assert_ne!(c.key(&a), c.key(&script));
        let k = c.key(&a);
        // A module is admitted like a script: on its second sighting.
        assert_eq!(c.lookup(k, &a), Lookup::Skip);
        assert_eq!(c.lookup(k, &a), Lookup::Produce);
        assert!(c.admit(k, &a, vec![3; 100]));
        assert_eq!(c.lookup(k, &a), Lookup::Hit(vec![3u8; 100].into()));
        // The same text under another key, or as a script, is not served this data.
        let kb = c.key(&b);
        assert_eq!(c.lookup(kb, &b), Lookup::Skip);
        let ks = c.key(&script);
        assert_eq!(c.lookup(ks, &script), Lookup::Skip);
        // Another source under the same key (a colliding hash) is never served it either.
        let other = src(2000, 2);
        let changed = Unit { source: &other, ..a };
        assert_ne!(c.lookup(k, &changed), Lookup::Hit(vec![3u8; 100].into()));
    }

    #[test]
    fn prelude_modules_are_produced_at_once_and_pinned() {
        let mut c = CodeCache::new(0);
        let short = "export const x = 1;";
        let m = Unit { kind: UnitKind::PreludeModule, origin: "lib.js", source: short };
        let k = c.key(&m);
        assert_eq!(c.lookup(k, &m), Lookup::Produce);
        assert!(c.admit(k, &m, vec![1; 50]));
        assert!(matches!(c.lookup(k, &m), Lookup::Hit(_)));
        // A run's module of the same key and text is another unit.
        let run = Unit { kind: UnitKind::Module, ..m };
        let kr = c.key(&run);
        assert_eq!(c.lookup(kr, &run), Lookup::Skip);
    }

    #[test]
    fn rejected_data_is_dropped_and_produced_again() {
        let mut c = CodeCache::new(1 << 20);
        let p = src(3000, 0);
        let up = unit(UnitKind::Prelude, &p);
        let k = c.key(&up);
        c.lookup(k, &up);
        c.admit(k, &up, vec![1; 100]);
        c.rejected(k);
        assert_eq!(c.stats().entries, 0);
        assert_eq!(c.stats().bytes, 0);
        assert_eq!(c.stats().rejected, 1);
        assert_eq!(c.lookup(k, &up), Lookup::Produce);
    }
}
