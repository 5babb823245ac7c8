//! ES modules (`type: 'module'`): how specifiers become keys of the run's module map, the
//! limits on what a run's module graph may hold, and the graph's bookkeeping. The seam
//! only compiles, lists requests, links and evaluates; every choice is made here.
//!
//! Keys are paths relative to the map's root, without a leading `./` (`util.ts`,
//! `lib/a.js`), or bare names (`zod`, `@scope/pkg/x.js`) taken as they are. A specifier
//! starting with `./`, `../` or `/` is joined to its importer's key like a URL path:
//! `./a.js` from `lib/b.js` is `lib/a.js`, `../a.js` is `a.js`, `/a.js` is `a.js`, and
//! `..` never climbs above the root. Any other specifier is its own key.
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// The run's own code, as a module: at the root of the map, so `./util.js` from it is
/// `util.js`; its name shows in stacks.
pub const ROOT_MODULE: &str = "sandbox.mjs";
/// Default `maxModules`: modules a run's graph may hold (given and resolved), and calls
/// to `resolve` it may make.
pub const DEFAULT_MAX_MODULES: u32 = 256;
/// Default `maxModuleBytes`: source bytes of all the modules of a run, given and resolved.
pub const DEFAULT_MAX_MODULE_BYTES: u64 = 16 * 1024 * 1024;
/// Longest specifier or key, in UTF-8 bytes: a name, never a payload.
pub const MAX_SPECIFIER_BYTES: usize = 1024;

/// How many modules and source bytes one run's graph may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModuleLimits {
    pub max_modules: u32,
    pub max_module_bytes: u64,
}

impl Default for ModuleLimits {
    fn default() -> Self {
        ModuleLimits { max_modules: DEFAULT_MAX_MODULES, max_module_bytes: DEFAULT_MAX_MODULE_BYTES }
    }
}

/// Why a module could not be part of the graph; the message the sandbox (or the run's
/// error) shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModuleError {
    /// No module of that key in the map, and no `resolve` (or it found none).
    NotFound {
        specifier: String,
        referrer: String,
    },
    /// An empty or overlong specifier.
    BadSpecifier {
        specifier: String,
        referrer: String,
    },
    TooManyModules {
        max: u32,
    },
    TooManyBytes {
        max: u64,
    },
    /// `resolve` rejected, or answered with something that is not a module.
    Resolve {
        specifier: String,
        referrer: String,
        message: String,
    },
}

impl fmt::Display for ModuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModuleError::NotFound { specifier, referrer } => {
                write!(f, "Cannot find module '{specifier}' imported from '{referrer}'")
            }
            ModuleError::BadSpecifier { specifier, referrer } => {
                let shown: String = specifier.chars().take(80).collect();
                write!(f, "Invalid module specifier '{shown}' imported from '{referrer}': it must be 1 to {MAX_SPECIFIER_BYTES} bytes")
            }
            ModuleError::TooManyModules { max } => {
                write!(f, "The run's module graph is over its limit of {max} modules or resolve calls (maxModules)")
            }
            ModuleError::TooManyBytes { max } => {
                write!(f, "The run's modules are over their limit of {max} source bytes (maxModuleBytes)")
            }
            ModuleError::Resolve { specifier, referrer, message } => {
                write!(f, "resolve('{specifier}', '{referrer}') failed: {message}")
            }
        }
    }
}

/// The directory part of a key: up to and with its last `/`.
fn dir_of(key: &str) -> &str {
    match key.rfind('/') {
        Some(i) => &key[..=i],
        None => "",
    }
}

/// `path` with `.` and empty segments dropped and `..` applied (never above the root).
fn normalize_path(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    out.join("/")
}

fn is_relative(specifier: &str) -> bool {
    specifier.starts_with("./") || specifier.starts_with("../") || specifier.starts_with('/') || specifier == "." || specifier == ".."
}

/// The key `specifier`, imported from the module whose key is `referrer`, names.
pub fn module_key(specifier: &str, referrer: &str) -> Result<String, ModuleError> {
    let bad = || ModuleError::BadSpecifier { specifier: specifier.to_string(), referrer: referrer.to_string() };
    if specifier.is_empty() || specifier.len() > MAX_SPECIFIER_BYTES {
        return Err(bad());
    }
    if !is_relative(specifier) {
        return Ok(specifier.to_string());
    }
    let joined = if specifier.starts_with('/') { specifier.to_string() } else { format!("{}{specifier}", dir_of(referrer)) };
    let key = normalize_path(&joined);
    if key.is_empty() {
        return Err(bad());
    }
    Ok(key)
}

/// A key of the `modules` map as given (`./util.ts`, `zod`) as the graph keeps it.
pub fn map_key(given: &str) -> Result<String, String> {
    module_key(given, "").map_err(|_| format!("must be 1 to {MAX_SPECIFIER_BYTES} bytes naming a module"))
}

/// Whether a module's source is TypeScript to strip: every module of a TypeScript run,
/// and modules whose key ends in `.ts` or `.mts`.
pub fn is_typescript(key: &str, language: &str) -> bool {
    language == "typescript" || key.ends_with(".ts") || key.ends_with(".mts")
}

/// Checks a `modules` map against the limits (given sources count like resolved ones).
pub fn check_map(modules: &BTreeMap<String, String>, limits: ModuleLimits) -> Result<(), ModuleError> {
    // The run's own code is a module of the graph too.
    if modules.len() as u64 + 1 > limits.max_modules as u64 {
        return Err(ModuleError::TooManyModules { max: limits.max_modules });
    }
    let bytes: u64 = modules.values().map(|s| s.len() as u64).sum();
    if bytes > limits.max_module_bytes {
        return Err(ModuleError::TooManyBytes { max: limits.max_module_bytes });
    }
    Ok(())
}

/// `resolve`'s answer as it crosses the bridge: the source, and the module's canonical
/// key when `resolve` named one (its own relative imports are joined to that).
pub fn encode_resolved(source: &str, specifier: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(source.len() + 5 + specifier.map_or(0, str::len));
    match specifier {
        None => out.push(0),
        Some(s) => {
            out.push(1);
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
    out.extend_from_slice(source.as_bytes());
    out
}

/// `resolve` found no module (it returned `undefined` or `null`).
pub fn encode_not_found() -> Vec<u8> {
    vec![2]
}

/// A resolved module: its canonical key (when `resolve` named one) and its source.
pub type Resolved = (Option<String>, String);

/// The module of an encoded answer (`None`: not found); `Err` for bytes no `encode_*` made.
pub fn decode_resolved(bytes: &[u8]) -> Result<Option<Resolved>, &'static str> {
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| "not UTF-8");
    match bytes.first() {
        Some(2) if bytes.len() == 1 => Ok(None),
        Some(0) => Ok(Some((None, text(&bytes[1..])?))),
        Some(1) if bytes.len() >= 5 => {
            let n = u32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
            let rest = &bytes[5..];
            if n > rest.len() {
                return Err("truncated");
            }
            Ok(Some((Some(text(&rest[..n])?), text(&rest[n..])?)))
        }
        _ => Err("not a resolved module"),
    }
}

/// What a key stands for in a graph.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    /// A compiled module (the seam's id).
    Module(u32),
    /// It could not be loaded: asked again, it fails the same way without a new request.
    Failed(ModuleError),
}

/// What the graph keeps of a compiled module.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Compiled {
    key: String,
    bytes: u64,
    /// A hash of its source (a keyed SipHash), to tell a later run's source for the same
    /// key from the one loaded.
    fingerprint: u64,
}

/// One isolate's modules, by key. A module is compiled once and kept as long as the
/// isolate (a one-shot run's, or a persistent sandbox's); the limits are those of the run
/// being served, counted over the graph's life, but for calls to `resolve`, counted per run.
///
/// A persistent sandbox's graph outlives its runs. Between two runs ([`ModuleGraph::end_run`])
/// it forgets what was the run's alone: its own code (a new root module each run), the
/// modules that never got linked (a failed load: a later run may give them anew), and the
/// keys that could not be found (a later run may give them). What stays is the modules that
/// were instantiated, each the same instance for every later run.
#[derive(Debug, Default)]
pub struct ModuleGraph {
    limits: ModuleLimits,
    slots: HashMap<String, Slot>,
    /// Each module, by seam id.
    compiled: HashMap<u32, Compiled>,
    modules: u32,
    bytes: u64,
    requests: u32,
    hasher: std::collections::hash_map::RandomState,
    /// A persistent sandbox's graph: sources are fingerprinted (a one-shot run's graph
    /// never sees a later run, so it skips hashing every source).
    persistent: bool,
}

impl ModuleGraph {
    pub fn new(limits: ModuleLimits) -> Self {
        ModuleGraph { limits, ..Default::default() }
    }

    /// The limits of the run now served.
    pub fn set_limits(&mut self, limits: ModuleLimits) {
        self.limits = limits;
    }

    /// The graph outlives its runs (a persistent sandbox's): later runs' sources are
    /// compared with what was loaded ([`ModuleGraph::loaded_otherwise`]).
    pub fn set_persistent(&mut self) {
        self.persistent = true;
    }

    /// The module of `key`: `None` when the graph has not seen it.
    pub fn get(&self, key: &str) -> Option<Result<u32, ModuleError>> {
        self.slots.get(key).map(|slot| match slot {
            Slot::Module(id) => Ok(*id),
            Slot::Failed(e) => Err(e.clone()),
        })
    }

    /// The key module `id` was compiled under.
    pub fn key_of(&self, id: u32) -> Option<&str> {
        self.compiled.get(&id).map(|c| c.key.as_str())
    }

    /// One more call to `resolve`; refused past `maxModules` calls in this run, or when the
    /// graph is full (the module it answers with could not join it).
    pub fn admit_request(&mut self) -> Result<(), ModuleError> {
        if self.requests >= self.limits.max_modules || self.modules >= self.limits.max_modules {
            return Err(ModuleError::TooManyModules { max: self.limits.max_modules });
        }
        self.requests += 1;
        Ok(())
    }

    /// A module of `bytes` source bytes joins the graph (before it is compiled).
    pub fn admit(&mut self, bytes: usize) -> Result<(), ModuleError> {
        if self.modules >= self.limits.max_modules {
            return Err(ModuleError::TooManyModules { max: self.limits.max_modules });
        }
        let total = self.bytes.saturating_add(bytes as u64);
        if total > self.limits.max_module_bytes {
            return Err(ModuleError::TooManyBytes { max: self.limits.max_module_bytes });
        }
        self.modules += 1;
        self.bytes = total;
        Ok(())
    }

    /// A module admitted with `bytes` did not compile: it does not count.
    pub fn unadmit(&mut self, bytes: usize) {
        self.modules = self.modules.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(bytes as u64);
    }

    fn fingerprint(&self, source: &str) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one(source)
    }

    /// Module `id` is compiled under `key` from `source` (admitted before).
    pub fn insert(&mut self, key: &str, id: u32, source: &str) {
        let fingerprint = if self.persistent { self.fingerprint(source) } else { 0 };
        self.slots.insert(key.to_string(), Slot::Module(id));
        self.compiled.insert(id, Compiled { key: key.to_string(), bytes: source.len() as u64, fingerprint });
    }

    /// `key` names module `id` too (`resolve` gave another canonical key).
    pub fn alias(&mut self, key: &str, id: u32) {
        self.slots.entry(key.to_string()).or_insert(Slot::Module(id));
    }

    /// `key` could not be loaded. Limit errors are not kept: they are about the run, not
    /// the key.
    pub fn fail(&mut self, key: &str, error: ModuleError) {
        if matches!(error, ModuleError::NotFound { .. } | ModuleError::Resolve { .. } | ModuleError::BadSpecifier { .. }) {
            self.slots.insert(key.to_string(), Slot::Failed(error));
        }
    }

    /// Whether `key` is a module loaded from another source than `source` (a persistent
    /// sandbox's later run gave other code for a module an earlier run loaded).
    pub fn loaded_otherwise(&self, key: &str, source: &str) -> bool {
        if !self.persistent {
            return false;
        }
        match self.slots.get(key) {
            Some(Slot::Module(id)) => self.compiled.get(id).is_some_and(|c| c.fingerprint != self.fingerprint(source)),
            _ => false,
        }
    }

    /// Every compiled module's id.
    pub fn ids(&self) -> Vec<u32> {
        self.compiled.keys().copied().collect()
    }

    /// Forgets module `id` (its keys and aliases, and what it counted against the limits);
    /// the seam releases it.
    pub fn release(&mut self, id: u32) {
        if let Some(c) = self.compiled.remove(&id) {
            self.modules = self.modules.saturating_sub(1);
            self.bytes = self.bytes.saturating_sub(c.bytes);
        }
        self.slots.retain(|_, slot| *slot != Slot::Module(id));
    }

    /// Between two runs of a persistent sandbox: forgets the keys that could not be found
    /// and the calls to `resolve` counted (each run has its own). The caller releases the
    /// run's root and the modules never instantiated.
    pub fn end_run(&mut self) {
        self.slots.retain(|_, slot| matches!(slot, Slot::Module(_)));
        self.requests = 0;
    }

    pub fn modules(&self) -> u32 {
        self.modules
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_specifiers_join_like_url_paths() {
        assert_eq!(module_key("./a.js", "lib/b.js").unwrap(), "lib/a.js");
        assert_eq!(module_key("../a.js", "lib/b.js").unwrap(), "a.js");
        assert_eq!(module_key("./x/../y/./z.js", "lib/b.js").unwrap(), "lib/y/z.js");
        assert_eq!(module_key("/a.js", "lib/deep/b.js").unwrap(), "a.js");
        assert_eq!(module_key("./util.ts", ROOT_MODULE).unwrap(), "util.ts");
        // `..` never climbs above the root.
        assert_eq!(module_key("../../../a.js", "lib/b.js").unwrap(), "a.js");
        // Bare specifiers are keys as they are, whoever imports them.
        assert_eq!(module_key("zod", "lib/b.js").unwrap(), "zod");
        assert_eq!(module_key("@scope/pkg/x.js", "lib/b.js").unwrap(), "@scope/pkg/x.js");
        assert_eq!(module_key("node:fs", "a.js").unwrap(), "node:fs");
        // From a canonical key of a package, its relative imports stay inside it.
        assert_eq!(module_key("./lib/x.js", "zod/index.js").unwrap(), "zod/lib/x.js");
    }

    #[test]
    fn bad_specifiers_are_named() {
        let e = module_key("", "a.js").unwrap_err();
        assert!(matches!(e, ModuleError::BadSpecifier { .. }));
        let long = "x".repeat(MAX_SPECIFIER_BYTES + 1);
        assert!(module_key(&long, "a.js").is_err());
        assert!(module_key(&"x".repeat(MAX_SPECIFIER_BYTES), "a.js").is_ok());
        assert!(module_key("./", "a.js").is_err(), "names no module");
    }

    #[test]
    fn map_keys_are_normalized() {
        assert_eq!(map_key("./util.ts").unwrap(), "util.ts");
        assert_eq!(map_key("lib/a.js").unwrap(), "lib/a.js");
        assert_eq!(map_key("zod").unwrap(), "zod");
        assert!(map_key("").is_err());
    }

    #[test]
    fn typescript_modules() {
        assert!(is_typescript("a.ts", "javascript"));
        assert!(is_typescript("a.mts", "javascript"));
        assert!(!is_typescript("a.js", "javascript"));
        assert!(is_typescript("a.js", "typescript"));
    }

    #[test]
    fn map_limits_count_the_root_and_every_byte() {
        let limits = ModuleLimits { max_modules: 3, max_module_bytes: 10 };
        let mut m = BTreeMap::new();
        m.insert("a".to_string(), "12345".to_string());
        m.insert("b".to_string(), "12345".to_string());
        assert_eq!(check_map(&m, limits), Ok(()));
        m.insert("c".to_string(), String::new());
        assert_eq!(check_map(&m, limits), Err(ModuleError::TooManyModules { max: 3 }));
        m.remove("c");
        m.insert("b".to_string(), "123456".to_string());
        assert_eq!(check_map(&m, limits), Err(ModuleError::TooManyBytes { max: 10 }));
    }

    #[test]
    fn graph_counts_modules_bytes_and_requests() {
        let mut g = ModuleGraph::new(ModuleLimits { max_modules: 2, max_module_bytes: 100 });
        g.admit(60).unwrap();
        g.insert("a", 0, &"a".repeat(60));
        assert_eq!(g.admit(41), Err(ModuleError::TooManyBytes { max: 100 }));
        g.admit(40).unwrap();
        g.insert("b", 1, &"b".repeat(40));
        assert_eq!(g.admit(0), Err(ModuleError::TooManyModules { max: 2 }));
        assert_eq!((g.modules(), g.bytes()), (2, 100));
        // The graph is full: no module `resolve` could answer would fit.
        assert_eq!(g.admit_request(), Err(ModuleError::TooManyModules { max: 2 }));
        // Calls that find nothing count too.
        let mut g = ModuleGraph::new(ModuleLimits { max_modules: 2, max_module_bytes: 100 });
        g.admit_request().unwrap();
        g.admit_request().unwrap();
        assert_eq!(g.admit_request(), Err(ModuleError::TooManyModules { max: 2 }));
        g.insert("a", 0, "");
        assert_eq!(g.get("a"), Some(Ok(0)));
        assert_eq!(g.key_of(0), Some("a"));
        assert_eq!(g.get("c"), None);
    }

    #[test]
    fn aliases_and_failures_are_remembered() {
        let mut g = ModuleGraph::new(ModuleLimits::default());
        g.insert("zod/index.js", 4, "export default 1");
        g.alias("zod", 4);
        assert_eq!(g.get("zod"), Some(Ok(4)));
        let missing = ModuleError::NotFound { specifier: "x".into(), referrer: ROOT_MODULE.into() };
        g.fail("x", missing.clone());
        assert_eq!(g.get("x"), Some(Err(missing)));
        // A limit is the run's, not the key's: it is not remembered for the key.
        g.fail("y", ModuleError::TooManyModules { max: 1 });
        assert_eq!(g.get("y"), None);
        // Cycles: a module is in the graph before its imports are loaded, so an import
        // back to it finds it instead of loading it again.
        g.insert("cycle/a.js", 5, "import './b.js'");
        assert_eq!(g.get("cycle/a.js"), Some(Ok(5)));
    }

    #[test]
    fn a_sandboxs_graph_keeps_its_modules_across_runs_and_forgets_each_runs_own() {
        let limits = ModuleLimits { max_modules: 3, max_module_bytes: 100 };
        let mut g = ModuleGraph::new(limits);
        // Run 1: its code (the root) imports a module; a key that is missing is remembered
        // for the run.
        g.admit(10).unwrap();
        g.insert(ROOT_MODULE, 0, "0123456789");
        g.admit(20).unwrap();
        g.insert("counter.js", 1, "export let n = 0; //");
        g.alias("counter", 1);
        let missing = ModuleError::NotFound { specifier: "late.js".into(), referrer: ROOT_MODULE.into() };
        g.fail("late.js", missing.clone());
        g.admit_request().unwrap();
        g.admit_request().unwrap();
        assert_eq!(g.get("late.js"), Some(Err(missing)));
        // Between runs: the root is released, failures and the run's resolve calls forgotten.
        g.release(0);
        g.end_run();
        assert_eq!((g.modules(), g.bytes()), (1, 20));
        assert_eq!(g.get(ROOT_MODULE), None);
        assert_eq!(g.get("late.js"), None);
        assert_eq!(g.get("counter.js"), Some(Ok(1)));
        assert_eq!(g.get("counter"), Some(Ok(1)), "aliases stay with their module");
        // Run 2 may call resolve again (calls are counted per run) ...
        for _ in 0..3 {
            g.admit_request().unwrap();
        }
        assert_eq!(g.admit_request(), Err(ModuleError::TooManyModules { max: 3 }));
        g.end_run();
        // ... and modules and bytes count over the sandbox's life.
        g.admit(10).unwrap();
        g.insert(ROOT_MODULE, 0, "0123456789");
        g.admit(60).unwrap();
        g.insert("big.js", 2, &"x".repeat(60));
        assert_eq!(g.admit(0), Err(ModuleError::TooManyModules { max: 3 }));
        // A module that never got linked is released with its aliases.
        g.alias("big", 2);
        g.release(2);
        assert_eq!((g.get("big.js"), g.get("big")), (None, None));
        assert_eq!((g.modules(), g.bytes()), (2, 30));
        // A module that did not compile does not count.
        g.admit(5).unwrap();
        g.unadmit(5);
        assert_eq!((g.modules(), g.bytes()), (2, 30));
    }

    #[test]
    fn a_loaded_module_tells_another_source_for_its_key() {
        let mut g = ModuleGraph::new(ModuleLimits::default());
        g.set_persistent();
        g.admit(16).unwrap();
        g.insert("lib.js", 7, "export const a=1");
        assert!(!g.loaded_otherwise("lib.js", "export const a=1"));
        assert!(g.loaded_otherwise("lib.js", "export const a=2"));
        assert!(!g.loaded_otherwise("other.js", "anything"), "a key not loaded is free");
    }

    #[test]
    fn resolved_answers_round_trip() {
        assert_eq!(decode_resolved(&encode_resolved("export default 1", None)).unwrap(), Some((None, "export default 1".into())));
        let bytes = encode_resolved("x", Some("zod/index.js"));
        assert_eq!(decode_resolved(&bytes).unwrap(), Some((Some("zod/index.js".into()), "x".into())));
        assert_eq!(decode_resolved(&encode_not_found()).unwrap(), None);
        assert!(decode_resolved(&[2, 0]).is_err());
        assert!(decode_resolved(&[]).is_err());
        assert!(decode_resolved(&[1, 9, 0, 0, 0, b'a']).is_err());
        assert!(decode_resolved(&[0, 0xff]).is_err());
    }

    #[test]
    fn messages_name_the_specifier_and_importer() {
        let e = ModuleError::NotFound { specifier: "zod".into(), referrer: "lib/a.js".into() };
        assert_eq!(e.to_string(), "Cannot find module 'zod' imported from 'lib/a.js'");
        assert!(ModuleError::TooManyModules { max: 3 }.to_string().contains("maxModules"));
        assert!(ModuleError::TooManyBytes { max: 3 }.to_string().contains("maxModuleBytes"));
    }
}
