//! The table language: what the user wrote (`Raw`), what an option accepts (`Kind`), the
//! tables of `Opt` and `Flag`, an object checked against a table (`Fields`), and the errors,
//! suggestions and deprecation warnings every entry point shares.
use std::fmt;

/// A JS value as the user gave it, after JS's type shaping.
#[derive(Debug, Clone, PartialEq)]
pub enum Raw {
    Undefined,
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    /// A Uint8Array, Buffer or ArrayBuffer (serialized `data` values, WASM sources), by
    /// its length: only its type is checked here, so its bytes are never copied for that.
    Bytes(usize),
    Array(Vec<Raw>),
    /// Own enumerable string-keyed properties, in order.
    Object(Vec<(String, Raw)>),
    Function,
    /// Anything else (symbol, bigint, ...), by its `typeof`.
    Other(&'static str),
    /// A value whose read threw (a getter, a Proxy trap), with what it threw: an option
    /// that cannot be read is a bad option, named like any other.
    Unreadable(String),
}

impl Raw {
    /// The value as a message shows it: `-5`, `'vm'`, `null`, `an object`.
    pub fn describe(&self) -> String {
        match self {
            Raw::Undefined => "undefined".into(),
            Raw::Null => "null".into(),
            Raw::Bool(b) => b.to_string(),
            Raw::Number(n) => js_number(*n),
            Raw::String(s) => {
                let mut short: String = s.chars().take(60).collect();
                if short.len() < s.len() {
                    short.push('…');
                }
                format!("'{short}'")
            }
            Raw::Bytes(_) => "a Uint8Array".into(),
            Raw::Array(_) => "an array".into(),
            Raw::Object(_) => "an object".into(),
            Raw::Function => "a function".into(),
            Raw::Other(t) => format!("a {t}"),
            Raw::Unreadable(why) => format!("a value that could not be read ({why})"),
        }
    }

    pub(super) fn is_undefined(&self) -> bool {
        matches!(self, Raw::Undefined)
    }
}

fn js_number(n: f64) -> String {
    if n.is_nan() {
        "NaN".into()
    } else if n.is_infinite() {
        if n > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else if n.fract() == 0.0 && n.abs() < 1e21 {
        format!("{}", n as i128)
    } else {
        format!("{n}")
    }
}

/// What an option accepts.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A whole number in `min..=max`.
    Whole { min: u64, max: u64 },
    /// One of these strings.
    OneOf(&'static [&'static str]),
    /// A string.
    Text,
    /// A non-empty string of at most `max_bytes` UTF-8 bytes.
    Label { max_bytes: usize },
    /// An array of strings.
    Names,
    /// An object of host functions by name (`capabilities`, `tools`): JS hands over their
    /// names, which are checked as an array of names.
    Tools,
    /// A plain object with these options.
    Object(&'static [Opt]),
    /// An object of whole numbers in `0..=max`, keyed by tool name.
    CountMap { max: u64 },
    /// An object of serialized values (`data`), keyed by property name.
    BytesMap,
    /// An array of `{ name, source }` WebAssembly modules.
    WasmModules,
    /// Shaped and checked in JS, accepted as given; what it is, for docs (`an AbortSignal`).
    Shaped(&'static str),
    /// `true` or `false`.
    Bool,
    /// A function (a callback the entry point calls).
    Function,
    /// An object of module sources (strings), keyed by module key (`modules`).
    ModuleMap,
    /// An engine's prelude: a source string, or `{ source?, modules? }` ([`PRELUDE`](super::PRELUDE)).
    Prelude,
}

/// One public option: its name, kind, default (for whole numbers), the other spellings
/// it is accepted under, and the names it is known by elsewhere, for suggestions.
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    pub name: &'static str,
    pub kind: Kind,
    pub default: Option<u64>,
    /// A seed's own name for it (SandboxEngine's `memoryMb`): accepted for good, no warning.
    pub seed_names: &'static [&'static str],
    /// Old spellings: accepted this release as the option, each with a one-time warning
    /// naming `name` ([`take_deprecations`]).
    pub deprecated: &'static [&'static str],
    /// Names it is known by elsewhere (other option sets): never accepted, only suggested.
    pub aliases: &'static [&'static str],
}

pub(super) const fn opt(name: &'static str, kind: Kind) -> Opt {
    Opt { name, kind, default: None, seed_names: &[], deprecated: &[], aliases: &[] }
}

pub(super) const fn whole(name: &'static str, min: u64, max: u64, default: Option<u64>, aliases: &'static [&'static str]) -> Opt {
    Opt { default, aliases, ..opt(name, Kind::Whole { min, max }) }
}

impl Opt {
    pub(super) const fn aliases(self, aliases: &'static [&'static str]) -> Opt {
        Opt { aliases, ..self }
    }

    pub(super) const fn seed_names(self, seed_names: &'static [&'static str]) -> Opt {
        Opt { seed_names, ..self }
    }

    pub(super) const fn deprecated(self, deprecated: &'static [&'static str]) -> Opt {
        Opt { deprecated, ..self }
    }

    /// A declared limit under an entry point's own name (a seed's), with the other
    /// spellings suggested for it there.
    pub(super) const fn called(self, name: &'static str, aliases: &'static [&'static str]) -> Opt {
        Opt { name, aliases, ..self }
    }

    /// A declared limit with an entry point's own default.
    pub(super) const fn default_of(self, default: Option<u64>) -> Opt {
        Opt { default, ..self }
    }

    /// How `key` spells this option, if it does.
    pub(super) fn spelling(&self, key: &str) -> Option<Spelling> {
        if self.name == key {
            Some(Spelling::Name)
        } else if self.seed_names.contains(&key) {
            Some(Spelling::Seed)
        } else if self.deprecated.contains(&key) {
            Some(Spelling::Deprecated)
        } else {
            None
        }
    }
}

/// How a given key spells its option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Spelling {
    Name,
    Seed,
    Deprecated,
}

/// An option was not acceptable. `path` is the option as the user wrote it
/// (`timeoutMs`, `request.isolateLimits.wallTimeMs`, `wasmModules[1].name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionsError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for OptionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for OptionsError {}

pub(super) fn err(path: &str, message: String) -> OptionsError {
    OptionsError { path: path.to_string(), message }
}

/// The first value under `raw` (at `path`) that could not be read, as the error that
/// names it: a throwing getter deep in an option is reported under its own path, before
/// any check that would describe its parent instead.
pub fn unreadable(path: &str, raw: &Raw) -> Option<OptionsError> {
    match raw {
        Raw::Unreadable(why) => {
            let name = if path.is_empty() { "options" } else { path };
            Some(err(name, format!("{name} could not be read: {why}")))
        }
        Raw::Array(items) => items.iter().enumerate().find_map(|(i, v)| unreadable(&format!("{path}[{i}]"), v)),
        Raw::Object(entries) => entries.iter().find_map(|(k, v)| unreadable(&join(path, k), v)),
        _ => None,
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// The nearest known name to `given`, if one is close: same letters in another case, a
/// common stem (`maxConcurrency` -> `maxConcurrentIsolates`), a small edit distance, or a
/// known alias (`wallTimeMs` -> `timeoutMs` in runSandbox).
pub fn suggest(given: &str, table: &[Opt]) -> Option<&'static str> {
    if let Some(o) = table.iter().find(|o| o.aliases.iter().any(|a| a.eq_ignore_ascii_case(given))) {
        return Some(o.name);
    }
    nearest(given, table.iter().map(|o| o.name))
}

/// The nearest of `names` to `given` by spelling alone (no aliases), if one is close.
pub fn nearest<'n>(given: &str, names: impl IntoIterator<Item = &'n str>) -> Option<&'n str> {
    let g = given.to_ascii_lowercase();
    let mut best: Option<(usize, &'n str)> = None;
    for name in names {
        let k = name.to_ascii_lowercase();
        let distance = edit_distance(&g, &k);
        let prefix = g.bytes().zip(k.bytes()).take_while(|(a, b)| a == b).count();
        let shorter = g.len().min(k.len());
        let close = distance <= (k.len() / 3).max(2) || (prefix >= 4 && prefix * 5 >= shorter * 3);
        if close && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, name));
        }
    }
    best.map(|(_, name)| name)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<u8> = b.bytes().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The code of the warning an old spelling gets.
pub const DEPRECATED_NAME_CODE: &str = "ISOLET_DEP_OPTION_NAME";

thread_local! {
    /// What this thread's checks met of old spellings since `take_deprecations`.
    static MET: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The warnings reported so far in this process: each is reported once.
#[derive(Debug, Default)]
pub(crate) struct Reported(std::collections::HashSet<String>);

static REPORTED: std::sync::Mutex<Option<Reported>> = std::sync::Mutex::new(None);

/// Records an old spelling's warning for `take_deprecations`.
pub(super) fn meet_deprecated(message: String) {
    MET.with(|met| met.borrow_mut().push(message));
}

/// `isolet: <old> ... is deprecated; use <new>`: the warning of an old option spelling.
fn deprecation(old: &str, what: &str, new: &str) -> String {
    format!("isolet: `{old}` of {what} is deprecated; use `{new}`")
}

/// The warnings (DeprecationWarning, code [`DEPRECATED_NAME_CODE`]) for the old spellings
/// this thread's checks met since the last call, each only the first time in the process:
/// the binding emits them after every check.
pub fn take_deprecations() -> Vec<String> {
    if MET.with(|met| met.borrow().is_empty()) {
        return Vec::new();
    }
    let mut reported = REPORTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    take_deprecations_into(reported.get_or_insert_with(Reported::default))
}

/// `take_deprecations` against `reported`.
pub(crate) fn take_deprecations_into(reported: &mut Reported) -> Vec<String> {
    let met = MET.with(|met| std::mem::take(&mut *met.borrow_mut()));
    met.into_iter().filter(|m| reported.0.insert(m.clone())).collect()
}

/// The checked fields of one options object: each option with the key it was given under.
#[derive(Debug)]
pub(super) struct Fields<'a> {
    prefix: String,
    table: &'static [Opt],
    pub(super) values: Vec<(&'static Opt, &'a str, &'a Raw)>,
}

/// Checks that `raw` is an object (or absent) holding only options of `table`.
/// `what` names the object in messages when it is not one (`options`, `request`).
pub(super) fn fields<'a>(prefix: &str, what: &str, raw: &'a Raw, table: &'static [Opt]) -> Result<Fields<'a>, OptionsError> {
    if let Raw::Unreadable(why) = raw {
        let name = if prefix.is_empty() { what } else { prefix };
        return Err(err(name, format!("{name} could not be read: {why}")));
    }
    let entries: &[(String, Raw)] = match raw {
        Raw::Undefined => &[],
        Raw::Object(entries) => entries,
        other => return Err(err(prefix, format!("{what} must be an object, got {}", other.describe()))),
    };
    let mut values: Vec<(&'static Opt, &'a str, &'a Raw)> = Vec::new();
    let mut deprecated = Vec::new();
    for (key, value) in entries {
        let Some((o, spelling)) = table.iter().find_map(|o| Some((o, o.spelling(key)?))) else {
            let path = join(prefix, key);
            let hint = match suggest(key, table) {
                Some(near) => format!("did you mean {}?", join(prefix, near)),
                None => format!("known options: {}", table.iter().map(|o| o.name).collect::<Vec<_>>().join(", ")),
            };
            return Err(err(&path, format!("{path} is not a known option of {what}; {hint}")));
        };
        if let Some(e) = unreadable(&join(prefix, key), value) {
            return Err(e);
        }
        if value.is_undefined() {
            continue;
        }
        if let Some((_, other, _)) = values.iter().find(|(seen, other, _)| std::ptr::eq(*seen, o) && *other != key) {
            return Err(both_given(&join(prefix, other), &join(prefix, key), &join(prefix, o.name), what));
        }
        if spelling == Spelling::Deprecated {
            deprecated.push(deprecation(&join(prefix, key), what, &join(prefix, o.name)));
        }
        values.push((o, key, value));
    }
    // Met once the names are right: two spellings of one option are an error, not a warning.
    deprecated.into_iter().for_each(meet_deprecated);
    Ok(Fields { prefix: prefix.to_string(), table, values })
}

/// Two spellings of one option given together (`first` and `second`, as given).
fn both_given(first: &str, second: &str, name: &str, what: &str) -> OptionsError {
    err(second, format!("{first} and {second} are the same option of {what}: give only {name}"))
}

impl<'a> Fields<'a> {
    pub(super) fn get(&self, name: &str) -> Option<&'a Raw> {
        debug_assert!(self.table.iter().any(|o| o.name == name), "{name} is not in the table");
        self.values.iter().find(|(o, _, _)| o.name == name).map(|(_, _, v)| *v)
    }

    /// The key option `name` was given under, if given.
    pub(super) fn key(&self, name: &str) -> Option<&'a str> {
        self.values.iter().find(|(o, _, _)| o.name == name).map(|(_, key, _)| *key)
    }

    /// The option's path as the user wrote it (its name if not given).
    pub(super) fn path(&self, name: &str) -> String {
        join(&self.prefix, self.key(name).unwrap_or(name))
    }

    pub(super) fn opt(&self, name: &str) -> &'static Opt {
        self.table.iter().find(|o| o.name == name).expect("option in table")
    }

    /// A whole number in the option's range, or `None` if absent.
    pub(super) fn whole(&self, name: &str) -> Result<Option<u64>, OptionsError> {
        let Kind::Whole { min, max } = self.opt(name).kind else { unreachable!("{name} is not a number") };
        let Some(v) = self.get(name) else { return Ok(None) };
        match v {
            Raw::Number(n) if n.is_finite() && n.fract() == 0.0 && *n >= min as f64 && *n <= max as f64 => Ok(Some(*n as u64)),
            _ => {
                let path = self.path(name);
                Err(err(&path, format!("{path} must be a whole number from {min} to {max}, got {}", v.describe())))
            }
        }
    }

    /// A whole number, or the table's default.
    pub(super) fn whole_or_default(&self, name: &str) -> Result<u64, OptionsError> {
        Ok(self.whole(name)?.or(self.opt(name).default).expect("option has a default"))
    }

    pub(super) fn one_of(&self, name: &str) -> Result<Option<&'static str>, OptionsError> {
        let Kind::OneOf(choices) = self.opt(name).kind else { unreachable!("{name} is not a choice") };
        let Some(v) = self.get(name) else { return Ok(None) };
        if let Raw::String(s) = v {
            if let Some(c) = choices.iter().find(|c| **c == s) {
                return Ok(Some(c));
            }
        }
        let path = self.path(name);
        let list = choices.iter().map(|c| format!("'{c}'")).collect::<Vec<_>>();
        let list = match list.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => list.join(""),
        };
        Err(err(&path, format!("{path} must be {list}, got {}", v.describe())))
    }

    pub(super) fn text(&self, name: &str) -> Result<Option<&'a str>, OptionsError> {
        match self.get(name) {
            None => Ok(None),
            Some(Raw::String(s)) => Ok(Some(s)),
            Some(v) => {
                let path = self.path(name);
                Err(err(&path, format!("{path} must be a string, got {}", v.describe())))
            }
        }
    }

    pub(super) fn label(&self, name: &str) -> Result<Option<String>, OptionsError> {
        let Kind::Label { max_bytes } = self.opt(name).kind else { unreachable!("{name} is not a label") };
        let got = match self.get(name) {
            None => return Ok(None),
            Some(Raw::String(s)) if !s.is_empty() && s.len() <= max_bytes => return Ok(Some(s.clone())),
            // The length is what is wrong, not the (cut) text.
            Some(Raw::String(s)) if !s.is_empty() => format!("{} bytes", s.len()),
            Some(v) => v.describe(),
        };
        let path = self.path(name);
        Err(err(&path, format!("{path} must be a non-empty string of at most {max_bytes} bytes, got {got}")))
    }

    pub(super) fn names(&self, name: &str) -> Result<Option<Vec<String>>, OptionsError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        let path = self.path(name);
        let bad = || err(&path, format!("{path} must be an array of names, got {}", v.describe()));
        let Raw::Array(items) = v else { return Err(bad()) };
        items
            .iter()
            .map(|i| match i {
                Raw::String(s) => Ok(s.clone()),
                _ => Err(bad()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    pub(super) fn object(&self, name: &str) -> Result<Fields<'a>, OptionsError> {
        let Kind::Object(table) = self.opt(name).kind else { unreachable!("{name} is not an object") };
        let path = self.path(name);
        fields(&path, &path, self.get(name).unwrap_or(&Raw::Undefined), table)
    }
}

impl<'a> Fields<'a> {
    pub(super) fn bool(&self, name: &str) -> Result<Option<bool>, OptionsError> {
        match self.get(name) {
            None => Ok(None),
            Some(Raw::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong(name, "a boolean", v)),
        }
    }

    pub(super) fn function(&self, name: &str) -> Result<bool, OptionsError> {
        match self.get(name) {
            None => Ok(false),
            Some(Raw::Function) => Ok(true),
            Some(v) => Err(self.wrong(name, "a function", v)),
        }
    }

    /// A string that must be given and not be empty.
    pub(super) fn required_text(&self, name: &str) -> Result<&'a str, OptionsError> {
        match self.get(name) {
            Some(Raw::String(s)) if !s.is_empty() => Ok(s),
            v => Err(self.wrong(name, "a non-empty string", v.unwrap_or(&Raw::Undefined))),
        }
    }

    /// An array of strings, non-empty unless `may_be_empty` (`what` names an entry in the message).
    pub(super) fn strings(&self, name: &str, what: &str, may_be_empty: bool) -> Result<Option<Vec<String>>, OptionsError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        match v {
            Raw::Array(items) if (may_be_empty || !items.is_empty()) && items.iter().all(|i| matches!(i, Raw::String(_))) => {
                Ok(Some(items.iter().filter_map(|i| if let Raw::String(s) = i { Some(s.clone()) } else { None }).collect()))
            }
            _ => Err(self.wrong(name, &format!("{} of {what}", if may_be_empty { "an array" } else { "a non-empty array" }), v)),
        }
    }

    pub(super) fn wrong(&self, name: &str, expected: &str, got: &Raw) -> OptionsError {
        let path = self.path(name);
        err(&path, format!("{path} must be {expected}, got {}", got.describe()))
    }
}

/// A command-line flag and the option of its command's table that it sets: the flag is
/// the option's name in kebab-case (`--timeout-ms`), but for `--no-web` and the `http-`
/// of `isolet mcp`'s HTTP flags, which set the config file's `http` object.
#[derive(Debug, Clone, Copy)]
pub struct Flag {
    /// Without the leading `--`.
    pub flag: &'static str,
    pub option: &'static str,
    /// Old spellings of the flag: accepted this release, each with a one-time warning.
    pub deprecated: &'static [&'static str],
}

pub(super) const fn flag(flag: &'static str, option: &'static str) -> Flag {
    Flag { flag, option, deprecated: &[] }
}

impl Flag {
    pub(super) const fn deprecated(self, deprecated: &'static [&'static str]) -> Flag {
        Flag { deprecated, ..self }
    }
}

/// Flag values as the options they set, with the flag each was given as.
#[derive(Debug)]
pub(super) struct FlagOptions {
    pub(super) options: Raw,
    /// (option, flag as given), in the order given.
    pub(super) given: Vec<(&'static str, String)>,
}

impl FlagOptions {
    /// `e` about an option a flag set, told under the flag as given: `--timeout-ms must be ...`.
    pub(super) fn blame(&self, e: OptionsError) -> OptionsError {
        let Some((_, flag)) = self.given.iter().find(|(option, _)| *option == e.path) else { return e };
        let path = format!("--{flag}");
        let message = match e.message.strip_prefix(e.path.as_str()) {
            Some(rest) => format!("{path}{rest}"),
            None => e.message,
        };
        OptionsError { path, message }
    }
}

/// Flag values (strings, arrays for a repeated flag) as the options they set: digits
/// become numbers for number options; anything else stays as given, for the message.
/// Flags that set no option of `table` (`--config`, `--help`) are left out. An old
/// spelling of a flag is met as deprecated; two spellings of one flag are an error.
pub(super) fn options_of_flags(flags: &Raw, maps: &[&'static [Flag]], table: &[Opt]) -> Result<FlagOptions, OptionsError> {
    let mut out = FlagOptions { options: Raw::Undefined, given: Vec::new() };
    let Raw::Object(entries) = flags else { return Ok(out) };
    let mut options = Vec::new();
    let mut deprecated = Vec::new();
    for (name, value) in entries.iter().filter(|(_, v)| !v.is_undefined()) {
        let Some(set) = maps.iter().flat_map(|m| m.iter()).find(|f| f.flag == name || f.deprecated.contains(&name.as_str())) else {
            continue;
        };
        let Some(o) = table.iter().find(|o| o.name == set.option) else { continue };
        if let Some((_, other)) = out.given.iter().find(|(option, _)| *option == set.option) {
            let message = format!("--{other} and --{name} are the same option: give only --{}", set.flag);
            return Err(err(&format!("--{name}"), message));
        }
        if name != set.flag {
            deprecated.push(format!("isolet: the flag `--{name}` is deprecated; use `--{}`", set.flag));
        }
        let value = match value {
            Raw::String(s) if matches!(o.kind, Kind::Whole { .. }) && !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
                s.parse::<f64>().map_or_else(|_| value.clone(), Raw::Number)
            }
            // `--no-web`: the option `web`, false.
            Raw::Bool(given) if matches!(o.kind, Kind::Bool) && set.flag.starts_with("no-") => Raw::Bool(!given),
            _ => value.clone(),
        };
        options.push((set.option.to_string(), value));
        out.given.push((set.option, name.clone()));
    }
    deprecated.into_iter().for_each(meet_deprecated);
    out.options = Raw::Object(options);
    Ok(out)
}

/// `e` about a part of something bigger: `engine.processes` of the CLI's config.
pub(super) fn within(prefix: &str, e: OptionsError) -> OptionsError {
    let path = join(prefix, &e.path);
    let message = match e.message.strip_prefix(e.path.as_str()) {
        Some(rest) if !e.path.is_empty() => format!("{path}{rest}"),
        _ => format!("{prefix}: {}", e.message),
    };
    OptionsError { path, message }
}

/// The defaults of `table`'s numbers, by name (for help texts and exported constants).
pub fn defaults_of(table: &[Opt]) -> Vec<(&'static str, u64)> {
    table.iter().filter_map(|o| Some((o.name, o.default?))).collect()
}
