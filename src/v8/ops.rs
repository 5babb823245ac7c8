//! Native ops: what the web platform's JavaScript (`src/web/js/`) calls into Rust with,
//! their arguments and results as the seam carries them, and the scripts it embeds.
use super::ffi;
use super::values::bytes;

/// A script the seam compiles by index (`isolet_script`): ASCII source for the process's
/// life, its name in stacks, and its code cache when there is one.
pub(crate) struct EmbeddedScript {
    pub code: &'static str,
    pub origin: &'static str,
    pub cache: Option<&'static [u8]>,
}

/// A native op's argument as the seam converted it (`ISOLET_OP_*` in `native/isolet_v8.h`).
pub(crate) enum OpArg<'a> {
    Undefined,
    Number(f64),
    Bool(bool),
    /// A string's UTF-8 (lone surrogates already replaced by U+FFFD).
    Str(&'a str),
    /// The bytes of an ArrayBuffer or view, in place.
    Bytes(ByteView<'a>),
    /// Any other value (null, an object, ...), not converted.
    Other,
}

/// The bytes of a sandbox ArrayBuffer (or view) for the length of one op call. Two
/// arguments may be views of the same buffer, so an op holds a mutable borrow of one view
/// only while it reads no other.
pub(crate) struct ByteView<'a> {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
    pub(super) _call: std::marker::PhantomData<&'a mut [u8]>,
}

impl ByteView<'_> {
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the seam passes the view's memory, alive and unmoved for the call (no
        // sandbox code or allocation runs while an op runs); null only when empty.
        unsafe { bytes(self.ptr, self.len) }
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        if self.len == 0 || self.ptr.is_null() {
            return &mut [];
        }
        // SAFETY: as `bytes`; `&mut self` keeps this view's other borrows out meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

/// A value a native op gives back.
#[derive(Debug, PartialEq)]
pub(crate) enum OpValue {
    Null,
    Number(f64),
    Bool(bool),
    String(String),
    /// A string whose characters are these bytes (`atob`'s "binary string").
    Latin1(Vec<u8>),
    /// A new Uint8Array over these bytes (no copy), charged to the run's ArrayBuffer budget.
    Bytes(Vec<u8>),
    /// A new promise, settled later by `Sandbox::settle_op` with this id (an async op).
    Promise(u32),
}

/// Why a native op did not give values back.
#[derive(Debug, PartialEq)]
pub(crate) enum OpError {
    /// Throw an error: a built-in class (`TypeError`, `RangeError`, `Error`) by name, or,
    /// with `installed`, the one the web layer's error maker makes (a DOMException).
    Threw { name: &'static str, message: String, installed: bool },
    /// The run is being stopped.
    Terminated,
}

pub(crate) type OpResult = Result<Vec<OpValue>, OpError>;

/// Moves `bytes` into a seam value (the seam frees or adopts the block).
pub(super) fn op_block(kind: u32, bytes: Vec<u8>) -> ffi::isolet_op_value {
    let mut bytes = std::mem::ManuallyDrop::new(bytes);
    ffi::isolet_op_value { kind, number: 0.0, ptr: bytes.as_mut_ptr(), len: bytes.len(), cap: bytes.capacity() }
}

pub(super) fn op_value(value: OpValue) -> ffi::isolet_op_value {
    let scalar = |kind, number| ffi::isolet_op_value { kind, number, ptr: std::ptr::null_mut(), len: 0, cap: 0 };
    match value {
        OpValue::Null => scalar(ffi::ISOLET_OP_NULL, 0.0),
        OpValue::Number(n) => scalar(ffi::ISOLET_OP_NUMBER, n),
        OpValue::Bool(b) => scalar(ffi::ISOLET_OP_BOOL, f64::from(u8::from(b))),
        OpValue::String(s) => op_block(ffi::ISOLET_OP_STRING, s.into_bytes()),
        OpValue::Latin1(b) => op_block(ffi::ISOLET_OP_LATIN1, b),
        OpValue::Bytes(b) => op_block(ffi::ISOLET_OP_BYTES, b),
        OpValue::Promise(id) => scalar(ffi::ISOLET_OP_PROMISE, f64::from(id)),
    }
}
