//! Directory-scoped, read-only file access for `createFileReadCapability(dir)`.
//!
//! The directory is opened once, when the capability is created, as a
//! `cap_std::fs::Dir`: that is the only use of ambient authority. Every read then
//! resolves the sandbox-supplied relative path *through that handle* (on Linux,
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, with cap-std's own
//! component-by-component walk as the fallback), so neither `..`, absolute paths nor
//! symlinks can reach anything outside the directory, and renaming or replacing the
//! directory's path on the host afterwards does not redirect the capability.
//!
//! On top of that:
//! - a lexical pre-check gives stable error codes for empty paths, NUL bytes, overlong
//!   paths, absolute paths and `..` that climbs above the root;
//! - the target's type and size are checked *before* it is opened (a FIFO, device or
//!   socket is never opened at all) and again on the opened descriptor (so a swap
//!   between the two checks is caught);
//! - the open itself uses `O_NONBLOCK | O_NOCTTY`, so even a FIFO swapped in at the last
//!   moment cannot block the thread;
//! - the read is bounded by `take(max_bytes + 1)` whatever the metadata said.
//!
//! Error messages never contain a host path or the sandbox-supplied path: they are
//! fixed strings, each with a stable code (`ERR_ISOLET_*`).
use std::io::{self, Read};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, FileType, FileTypeExt, OpenOptions, OpenOptionsExt};
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// Longest relative path accepted, in UTF-8 bytes (Linux `PATH_MAX`).
const MAX_PATH_BYTES: usize = 4096;

/// Why a read was refused. `Display` is the message the sandbox sees: it must never
/// contain a path.
#[derive(Debug, thiserror::Error)]
pub enum FileReadError {
    #[error("readFile: invalid path: {0}")]
    InvalidPath(&'static str),
    #[error("readFile: path leads outside the allowed directory")]
    Outside,
    #[error("readFile: no such file in the allowed directory")]
    NotFound,
    #[error("readFile: not a regular file ({0})")]
    NotAFile(&'static str),
    #[error("readFile: file is larger than the limit of {max} bytes")]
    TooLarge { max: u64 },
    #[error("readFile: permission denied")]
    AccessDenied,
    #[error("readFile: read failed ({0})")]
    Io(&'static str),
    #[error("readFile: reads in flight for this run would hold more than {limit} bytes; await some before reading more")]
    BudgetExceeded { limit: u64 },
}

impl FileReadError {
    /// Stable machine-readable code, set as `error.code` by the JS wrapper.
    pub fn code(&self) -> &'static str {
        match self {
            FileReadError::InvalidPath(_) => "ERR_ISOLET_INVALID_PATH",
            FileReadError::Outside => "ERR_ISOLET_PATH_OUTSIDE",
            FileReadError::NotFound => "ERR_ISOLET_NOT_FOUND",
            FileReadError::NotAFile(_) => "ERR_ISOLET_NOT_A_FILE",
            FileReadError::TooLarge { .. } => "ERR_ISOLET_TOO_LARGE",
            FileReadError::AccessDenied => "ERR_ISOLET_ACCESS_DENIED",
            FileReadError::Io(_) => "ERR_ISOLET_READ_FAILED",
            FileReadError::BudgetExceeded { .. } => "ERR_ISOLET_READ_BUDGET",
        }
    }
}

/// Lexical rules, checked before the file system is touched. They are not the
/// security boundary (the `Dir` handle is); they make the common refusals
/// deterministic and independent of what exists on disk.
pub fn check_relative_path(path: &str) -> std::result::Result<(), FileReadError> {
    if path.is_empty() {
        return Err(FileReadError::InvalidPath("path is empty"));
    }
    if path.as_bytes().contains(&0) {
        return Err(FileReadError::InvalidPath("path contains a NUL byte"));
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(FileReadError::InvalidPath("path is too long"));
    }
    let mut depth: usize = 0;
    for component in Path::new(path).components() {
        match component {
            Component::Prefix(_) | Component::RootDir => return Err(FileReadError::Outside),
            Component::CurDir => {}
            Component::ParentDir => {
                depth = depth.checked_sub(1).ok_or(FileReadError::Outside)?;
            }
            Component::Normal(_) => depth += 1,
        }
    }
    if depth == 0 {
        // ".", "a/..": the directory itself.
        return Err(FileReadError::NotAFile("directory"));
    }
    Ok(())
}

fn kind_of(file_type: &FileType) -> Option<&'static str> {
    if file_type.is_file() {
        None
    } else if file_type.is_dir() {
        Some("directory")
    } else if file_type.is_fifo() {
        Some("FIFO")
    } else if file_type.is_char_device() || file_type.is_block_device() {
        Some("device")
    } else if file_type.is_socket() {
        Some("socket")
    } else if file_type.is_symlink() {
        Some("symbolic link")
    } else {
        Some("special file")
    }
}

fn map_io(err: io::Error) -> FileReadError {
    match err.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => FileReadError::NotFound,
        Some(libc::EXDEV) => FileReadError::Outside,
        Some(libc::EACCES) | Some(libc::EPERM) => FileReadError::AccessDenied,
        Some(libc::ELOOP) => FileReadError::InvalidPath("too many levels of symbolic links"),
        Some(libc::ENAMETOOLONG) => FileReadError::InvalidPath("path is too long"),
        Some(libc::EISDIR) => FileReadError::NotAFile("directory"),
        Some(libc::ENXIO) | Some(libc::ENODEV) => FileReadError::NotAFile("special file"),
        Some(libc::EINVAL) => FileReadError::InvalidPath("rejected by the file system"),
        Some(_) => FileReadError::Io("I/O error"),
        // Errors cap-std makes itself carry no errno. The one that matters is its
        // sandbox-escape refusal, reported as `PermissionDenied`.
        None => match err.kind() {
            io::ErrorKind::PermissionDenied => FileReadError::Outside,
            io::ErrorKind::NotFound => FileReadError::NotFound,
            io::ErrorKind::InvalidInput => FileReadError::InvalidPath("rejected by the file system"),
            _ => FileReadError::Io("I/O error"),
        },
    }
}

/// Bytes of file contents held for reads in flight, shared by the reads of one run:
/// each read reserves its file's size before allocating a buffer for it.
#[derive(Debug)]
pub struct BytesInFlight {
    limit: u64,
    used: AtomicU64,
}

impl BytesInFlight {
    pub fn new(limit: u64) -> Self {
        BytesInFlight { limit, used: AtomicU64::new(0) }
    }

    fn reserve(&self, bytes: u64) -> std::result::Result<(), FileReadError> {
        self.used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| used.checked_add(bytes).filter(|&total| total <= self.limit))
            .map(|_| ())
            .map_err(|_| FileReadError::BudgetExceeded { limit: self.limit })
    }

    fn release(&self, bytes: u64) {
        let _ = self.used.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| Some(used.saturating_sub(bytes)));
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::SeqCst)
    }
}

/// Reads `path` (relative, resolved beneath `dir`) if it is a regular file of at most
/// `max_bytes` bytes, holding its contents against `budget`: on success the returned
/// buffer's length stays reserved until the caller releases it.
pub fn read_beneath(dir: &Dir, path: &str, max_bytes: u64, budget: &BytesInFlight) -> std::result::Result<Vec<u8>, FileReadError> {
    check_relative_path(path)?;

    // Look before opening, following symlinks but only beneath `dir`: devices, FIFOs
    // and sockets are refused without ever being opened, and an oversized file without
    // being read.
    let meta = dir.metadata(path).map_err(map_io)?;
    if let Some(kind) = kind_of(&meta.file_type()) {
        return Err(FileReadError::NotAFile(kind));
    }
    if meta.len() > max_bytes {
        return Err(FileReadError::TooLarge { max: max_bytes });
    }

    // O_NONBLOCK: opening a FIFO swapped in since the check above returns at once
    // instead of waiting for a writer. O_NOCTTY: a terminal never becomes ours.
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    let file = dir.open_with(path, &options).map_err(map_io)?;

    // Re-check what was actually opened.
    let meta = file.metadata().map_err(map_io)?;
    if let Some(kind) = kind_of(&meta.file_type()) {
        return Err(FileReadError::NotAFile(kind));
    }
    let len = meta.len();
    if len > max_bytes {
        return Err(FileReadError::TooLarge { max: max_bytes });
    }

    // Reserved before the buffer exists, so a storm of reads cannot allocate first.
    budget.reserve(len)?;
    let mut reserved = len;
    let result = (|| {
        // Bounded whatever the metadata claims (files can grow, /proc-like files report 0).
        let mut buf = Vec::with_capacity(len as usize);
        file.take(max_bytes.saturating_add(1)).read_to_end(&mut buf).map_err(map_io)?;
        if buf.len() as u64 > max_bytes {
            return Err(FileReadError::TooLarge { max: max_bytes });
        }
        let grown = (buf.len() as u64).saturating_sub(reserved);
        if grown > 0 {
            budget.reserve(grown)?;
            reserved += grown;
        }
        Ok(buf)
    })();
    match result {
        Ok(buf) => {
            // Keep exactly the buffer's length reserved.
            budget.release(reserved - buf.len() as u64);
            Ok(buf)
        }
        Err(e) => {
            budget.release(reserved);
            Err(e)
        }
    }
}

const BASE64_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (RFC 4648 section 4), as `Buffer#toString('base64')`.
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b0 = chunk[0] as u32;
        let b1 = chunk.get(1).copied().unwrap_or(0) as u32;
        let b2 = chunk.get(2).copied().unwrap_or(0) as u32;
        let n = (b0 << 16) | (b1 << 8) | b2;
        out.push(BASE64_ALPHABET[(n >> 18) as usize & 63] as char);
        out.push(BASE64_ALPHABET[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 { BASE64_ALPHABET[(n >> 6) as usize & 63] as char } else { '=' });
        out.push(if chunk.len() > 2 { BASE64_ALPHABET[n as usize & 63] as char } else { '=' });
    }
    out
}

fn encode(bytes: Vec<u8>, base64: bool) -> String {
    if base64 {
        base64_encode(&bytes)
    } else {
        match String::from_utf8(bytes) {
            Ok(s) => s,
            // Same as Node's `buffer.toString('utf8')`: invalid sequences become U+FFFD.
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }
    }
}

/// The outcome of one read, as a plain object: `{ content }` on success, or
/// `{ code, message }`. Errors travel as data (not as a rejected promise) so that the
/// JS wrapper can raise them with their stable `ERR_ISOLET_*` code.
#[napi(object)]
pub struct FileReadOutcome {
    pub content: Option<String>,
    /// Bytes still reserved in the read budget for this content; the caller releases them.
    pub reserved: Option<f64>,
    pub code: Option<String>,
    pub message: Option<String>,
}

/// One read, run on the libuv thread pool.
pub struct ReadFile {
    dir: Arc<Dir>,
    path: String,
    max_bytes: u64,
    base64: bool,
    budget: Arc<BytesInFlight>,
}

impl Task for ReadFile {
    type Output = std::result::Result<(String, u64), FileReadError>;
    type JsValue = FileReadOutcome;

    fn compute(&mut self) -> Result<Self::Output> {
        Ok(read_beneath(&self.dir, &self.path, self.max_bytes, &self.budget).map(|b| {
            let reserved = b.len() as u64;
            (encode(b, self.base64), reserved)
        }))
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(match output {
            Ok((content, reserved)) => {
                FileReadOutcome { content: Some(content), reserved: Some(reserved as f64), code: None, message: None }
            }
            Err(err) => {
                FileReadOutcome { content: None, reserved: None, code: Some(err.code().to_string()), message: Some(err.to_string()) }
            }
        })
    }
}

/// A byte budget shared by the reads of one run (see `BytesInFlight`).
#[napi]
pub struct ReadBudget {
    inner: Arc<BytesInFlight>,
}

#[napi]
impl ReadBudget {
    #[napi(constructor)]
    pub fn new(limit_bytes: f64) -> Result<Self> {
        if !(limit_bytes.is_finite() && limit_bytes >= 0.0 && limit_bytes.fract() == 0.0) {
            return Err(Error::new(Status::InvalidArg, "limitBytes must be a non-negative integer"));
        }
        Ok(ReadBudget { inner: Arc::new(BytesInFlight::new(limit_bytes as u64)) })
    }

    /// Gives back bytes a finished read reserved.
    #[napi]
    pub fn release(&self, bytes: f64) {
        if bytes.is_finite() && bytes > 0.0 {
            self.inner.release(bytes as u64);
        }
    }

    /// Bytes currently reserved.
    #[napi(getter)]
    pub fn used(&self) -> f64 {
        self.inner.used() as f64
    }
}

/// A directory opened once, at capability creation; reads resolve beneath it.
#[napi]
pub struct FileReadRoot {
    dir: Arc<Dir>,
}

#[napi]
impl FileReadRoot {
    /// Opens `dir` (the one use of ambient authority). Throws if it is not an existing
    /// directory. This runs on the host at creation time, so its message may name `dir`.
    #[napi(constructor)]
    pub fn new(dir: String) -> Result<Self> {
        if dir.is_empty() || dir.as_bytes().contains(&0) {
            return Err(Error::new(Status::InvalidArg, "directory must be a non-empty path without NUL bytes"));
        }
        let handle = Dir::open_ambient_dir(&dir, ambient_authority())
            .map_err(|e| Error::new(Status::InvalidArg, format!("cannot open directory {dir:?}: {e}")))?;
        Ok(FileReadRoot { dir: Arc::new(handle) })
    }

    /// Reads `path` beneath the directory, off the JS thread. Resolves to a
    /// `FileReadOutcome`; never rejects for a refused path.
    #[napi]
    pub fn read(&self, path: String, max_bytes: f64, base64: bool, budget: &ReadBudget) -> Result<AsyncTask<ReadFile>> {
        if !(max_bytes.is_finite() && max_bytes >= 0.0 && max_bytes.fract() == 0.0) {
            return Err(Error::new(Status::InvalidArg, "maxBytes must be a non-negative integer"));
        }
        Ok(AsyncTask::new(ReadFile {
            dir: Arc::clone(&self.dir),
            path,
            max_bytes: max_bytes as u64,
            base64,
            budget: Arc::clone(&budget.inner),
        }))
    }
}
