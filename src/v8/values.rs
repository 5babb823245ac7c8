//! Taking what the seam hands back (serialized values, bytes, errors) into Rust's own
//! types, freeing the seam's side.
use isolet_core::seam_policy::{self, ThrownKind};
use isolet_core::Thrown;

use super::ffi;

/// The serialized value as a `Vec` over the seam's block itself (no copy); `v` is left empty.
pub(super) fn take_value(v: &mut ffi::isolet_value) -> Vec<u8> {
    let (ptr, len, cap) = (v.ptr, v.len, v.cap);
    *v = ffi::isolet_value { ptr: std::ptr::null_mut(), len: 0, cap: 0 };
    if ptr.is_null() || cap == 0 {
        return Vec::new();
    }
    // SAFETY: `ptr` is a block of `cap` bytes from Rust's global allocator with align 1
    // (isolet_value_realloc), of which the first `len <= cap` are initialized.
    let mut bytes = unsafe { Vec::from_raw_parts(ptr, len.min(cap), cap) };
    // V8 grows its buffer by doubling: give back a large unused tail (the allocator
    // shrinks in place, no copy), as the result may be held for a while.
    if bytes.capacity() - bytes.len() > (bytes.len() / 8).max(4096) {
        bytes.shrink_to_fit();
    }
    bytes
}

/// Host bytes as they enter the sandbox (a reply, a data answer, call arguments): every
/// resizable ArrayBuffer in them made a fixed-length one of its current length
/// (isolet-core `fixed_length_buffers`), so a buffer from the host never grows the run past
/// its memory limit (V8 reserves a resizable buffer's maximum outside the heap and the
/// ArrayBuffer budget). `Ok(None)`: nothing to change. Bytes holding a `~` that cannot be
/// read as the bridge writes them are refused rather than trusted.
pub(super) fn fixed_input(bytes: &[u8]) -> Result<Option<Vec<u8>>, String> {
    isolet_core::fixed_length_buffers(bytes).map_err(|e| format!("a value from the host could not be read: {e}"))
}

pub(super) fn take_bytes(b: &mut ffi::isolet_bytes) -> Option<Vec<u8>> {
    if b.ptr.is_null() {
        return None;
    }
    // SAFETY: the seam filled `b`; we copy, then free with its allocator.
    let v = unsafe { bytes(b.ptr, b.len) }.to_vec();
    unsafe { ffi::isolet_bytes_free(b) };
    Some(v)
}

pub(super) fn empty_error() -> ffi::isolet_error {
    let e = || ffi::isolet_bytes { ptr: std::ptr::null_mut(), len: 0 };
    ffi::isolet_error {
        name: e(),
        constructor: e(),
        message: e(),
        stack: e(),
        value_kind: 0,
        line: 0,
        column: 0,
        position: -1,
        fields: e(),
    }
}

/// The thrown value's parts, named by `seam_policy::thrown_name`.
pub(super) fn take_error(e: &mut ffi::isolet_error) -> Thrown {
    let text = |b: &mut ffi::isolet_bytes| take_bytes(b).map(|v| String::from_utf8_lossy(&v).into_owned());
    let name = text(&mut e.name);
    let constructor = text(&mut e.constructor);
    let stack = text(&mut e.stack).filter(|s| !s.is_empty());
    Thrown {
        name: seam_policy::thrown_name(ThrownKind::from_seam(e.value_kind), name.as_deref(), constructor.as_deref()),
        message: text(&mut e.message).unwrap_or_default(),
        stack,
        line: (e.line > 0).then_some(e.line as u32),
        column: (e.column > 0).then_some(e.column as u32),
        fields: take_bytes(&mut e.fields),
    }
}

/// A syntax error with its offset in the compiled source.
pub(super) fn take_syntax(e: &mut ffi::isolet_error) -> seam_policy::SyntaxAt {
    let position = u32::try_from(e.position).ok();
    seam_policy::SyntaxAt { thrown: take_error(e), position }
}

/// Joins names with NUL for the seam; names are checked identifiers or fixed words.
pub(super) fn nul_joined(names: &[&str]) -> String {
    names.join("\0")
}

/// # Safety
/// `ptr` must be valid for `len` bytes (or `len == 0`).
pub(super) unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 || ptr.is_null() {
        &[]
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}
