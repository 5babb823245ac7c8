//! Counts the values in V8 ValueSerializer bytes without materializing them.
//!
//! A byte limit does not bound what a value costs once built: 16 MiB of two-character
//! strings are 4 M strings, ~165 MB of JS objects in the parent and a 1-2 s stall of its
//! event loop, and a 17-byte sparse array `a.length = 3e7` is 240 MB. So results and
//! host-call arguments are also bounded by their count of values, read from the bytes
//! before anything is deserialized: on the isolate's side, and again in the parent for
//! bytes a sandbox host process sent.
//!
//! What counts as one value: every value the deserializer reads (primitives, strings,
//! objects, property keys, array elements, Map and Set entries, references to values
//! already read, an Error's message and stack), every hole of a dense array, every slot
//! of a sparse array's length (the deserializer may allocate all of them), a typed
//! array or DataView besides its ArrayBuffer, and the element slots that index keys
//! (`{ 1023: 0 }`, `a[5000] = 1`) make V8 allocate: 8 bytes of `{ 1023: 0 }` are 12 KB
//! once built. See [`Elements`].
//!
//! The walk follows the reader in V8's `value-serializer.cc` (format versions 13-15,
//! V8 11.3 to 14.x), iteratively (no recursion, whatever the nesting), and never reads
//! past the input. Tags the bridge never writes (shared and transferred objects, host
//! objects, WebAssembly) are refused as unreadable.
use std::collections::{HashMap, HashSet};

use thiserror::Error;

/// Why bytes were not counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CountError {
    /// The bytes hold more than `max` values (counting stopped there).
    #[error("more than {max} values")]
    TooMany { max: u64 },
    /// Built, the value would cost the parent's heap more than `max` bytes.
    #[error("more than {max} bytes once built")]
    TooCostly { max: u64 },
    /// Not V8 serializer bytes the bridge writes: truncated, an unknown tag, or a
    /// shared, transferred or host object. The reason names the part.
    #[error("unreadable serialized value ({0})")]
    Unreadable(&'static str),
}

/// An open container and what closes it.
#[derive(Debug)]
enum Frame {
    /// Elements of a dense array still to read (then its properties, ended by `$`).
    Dense { left: u32, length: u32 },
    /// Properties or entries up to the tag `end`, then `trailer` varints. `pairs`: keys
    /// and values alternate, and the end tag may come only where a key would.
    /// `elements`: an object or array, whose index keys may allocate element slots.
    /// `slot`: what each of its values costs in it; `shape`: an object's or array's shape
    /// so far (see `Shapes`).
    /// `named`: its named keys so far (past `cost::FAST_PROPERTIES` V8 makes it a dictionary).
    Entries { end: u8, trailer: u8, pairs: bool, at_key: bool, elements: Option<Elements>, slot: u64, shape: u32, named: u32 },
    /// An Error's cause is being read (`read`: it has been); `.` ends the error.
    ErrorCause { read: bool },
}

/// The element slots V8 may allocate for an object's or array's index keys, bounded as
/// its elements policy does (objects.cc `ShouldConvertToSlowElements`, stable across
/// V8 11-14): an index within `kMaxGap` (1024) of the capacity grows the backing store to
/// 1.5 x (index + 1) + 16; a farther one makes the elements a dictionary (no slots), which
/// V8 turns back into slots only when they would be at least half used.
#[derive(Debug, Clone, Copy)]
struct Elements {
    /// Slots possibly allocated so far.
    capacity: u64,
    /// Slots already counted (a dense array's elements, a sparse array's length).
    counted: u64,
    /// Index keys and dense elements: what a dictionary turned back into slots holds.
    used: u64,
    dictionary: bool,
}

impl Elements {
    fn new(slots: u64) -> Self {
        Elements { capacity: slots, counted: slots, used: slots, dictionary: false }
    }

    fn index(&mut self, index: u64) {
        self.used += 1;
        if index >= self.capacity {
            if index - self.capacity < MAX_GAP {
                self.capacity = index + 1 + index.div_ceil(2) + 16;
            } else {
                self.dictionary = true;
            }
        }
    }

    /// Slots to count beyond those counted already.
    fn extra(&self) -> u64 {
        let back_to_slots = if self.dictionary { 2 * self.used + 16 } else { 0 };
        self.capacity.max(back_to_slots).saturating_sub(self.counted)
    }
}

const MAX_GAP: u64 = 1024;

/// The array index a property key stands for (V8 turns `"7"`, `7` and `7.0` into the
/// same element), if any.
fn index_key(r: &Cursor) -> Option<u64> {
    let mut c = Cursor { b: r.b, at: r.at, version: r.version };
    const MAX_INDEX: u64 = u32::MAX as u64 - 1;
    match c.tag().ok()? {
        b'I' => {
            let zz = c.varint().ok()?;
            (zz & 1 == 0).then_some((zz >> 1) as u64)
        }
        b'U' => Some(c.varint().ok()? as u64).filter(|&v| v <= MAX_INDEX),
        b'N' => {
            let d = f64::from_le_bytes(c.b.get(c.at..c.at + 8)?.try_into().ok()?);
            (d >= 0.0 && d <= MAX_INDEX as f64 && d.fract() == 0.0).then_some(d as u64)
        }
        tag @ (ONE_BYTE_STRING | UTF8_STRING | TWO_BYTE_STRING) => {
            let n = c.varint().ok()? as usize;
            let raw = c.b.get(c.at..c.at.checked_add(n)?)?;
            // Characters of a canonical index: one or two bytes each (little endian).
            let width = if tag == TWO_BYTE_STRING { 2 } else { 1 };
            let len = raw.len() / width;
            if len == 0 || len > 10 || raw.len() % width != 0 {
                return None;
            }
            let mut v: u64 = 0;
            for i in 0..len {
                let d = raw[i * width];
                if !d.is_ascii_digit() || (width == 2 && raw[i * 2 + 1] != 0) || (i == 0 && d == b'0' && len > 1) {
                    return None;
                }
                v = v * 10 + (d - b'0') as u64;
            }
            (v <= MAX_INDEX).then_some(v)
        }
        _ => None,
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
    version: u32,
}

impl<'a> Cursor<'a> {
    fn byte(&mut self) -> Result<u8, CountError> {
        let v = *self.b.get(self.at).ok_or(CountError::Unreadable("truncated"))?;
        self.at += 1;
        Ok(v)
    }

    /// The next tag, after any padding (V8 skips padding before every tag).
    fn tag(&mut self) -> Result<u8, CountError> {
        loop {
            let t = self.byte()?;
            if t != PADDING {
                return Ok(t);
            }
        }
    }

    /// The next tag without consuming it (padding before it is consumed).
    fn peek(&mut self) -> Option<u8> {
        while self.b.get(self.at) == Some(&PADDING) {
            self.at += 1;
        }
        self.b.get(self.at).copied()
    }

    /// A varint as V8 reads a `uint32_t` one: any number of bytes, bits past 32 dropped.
    fn varint(&mut self) -> Result<u32, CountError> {
        let mut value: u32 = 0;
        let mut shift = 0u32;
        loop {
            let b = self.byte()?;
            if shift < 32 {
                value |= ((b & 0x7f) as u32).wrapping_shl(shift);
                shift += 7;
            }
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
    }

    /// A one-byte sub-tag V8 reads as a `uint8_t` varint (always one byte in practice).
    fn small(&mut self) -> Result<u8, CountError> {
        let b = self.byte()?;
        if b & 0x80 != 0 {
            return Err(CountError::Unreadable("sub-tag"));
        }
        Ok(b)
    }

    fn skip(&mut self, n: usize) -> Result<(), CountError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or(CountError::Unreadable("truncated"))?;
        self.at = end;
        Ok(())
    }

    /// A string value where only a string may stand (a RegExp's source, a String
    /// object's value, an Error's message or stack).
    fn string(&mut self) -> Result<(), CountError> {
        match self.tag()? {
            ONE_BYTE_STRING | TWO_BYTE_STRING | UTF8_STRING => {
                let n = self.varint()? as usize;
                self.skip(n)
            }
            _ => Err(CountError::Unreadable("string expected")),
        }
    }

    fn bigint(&mut self) -> Result<(), CountError> {
        // Bit 0 is the sign, bits 1-30 the digits' byte length.
        let bitfield = self.varint()?;
        self.skip(((bitfield >> 1) & ((1 << 30) - 1)) as usize)
    }
}

const PADDING: u8 = 0x00;
const VERSION: u8 = 0xff;
const ONE_BYTE_STRING: u8 = b'"';
const TWO_BYTE_STRING: u8 = b'c';
const UTF8_STRING: u8 = b'S';
const ARRAY_BUFFER_VIEW: u8 = b'V';
const THE_HOLE: u8 = b'-';

/// The number of values in `bytes` (a header and one value, as `v8.Serializer` and the
/// seam write them), or `TooMany` as soon as there are more than `max`.
pub fn count_values(bytes: &[u8], max: u64) -> Result<u64, CountError> {
    walk(bytes, Bounds { values: max, cost: u64::MAX }, None).map(|t| t.values)
}

/// What serialized bytes hold: their values (see the module's documentation) and what
/// they would cost the parent's heap once built, in bytes (see [`cost`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    pub values: u64,
    pub cost: u64,
}

/// The most values and cost bytes a tally may reach before it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub values: u64,
    pub cost: u64,
}

/// Counts `bytes` within `bounds`: `TooMany` or `TooCostly` as soon as one is passed,
/// `Unreadable` for bytes the bridge does not write.
pub fn tally(bytes: &[u8], bounds: Bounds) -> Result<Tally, CountError> {
    walk(bytes, bounds, None)
}

/// `bytes` with every resizable ArrayBuffer written as a fixed-length one of its current
/// length (and its views as fixed-length views), or `None` when it holds none. A buffer
/// the host hands in can then never grow past the run's memory budget: a resizable
/// buffer's maximum (up to 4 GiB) is reserved by V8 outside the heap and its allocator.
pub fn fixed_length_buffers(bytes: &[u8]) -> Result<Option<Vec<u8>>, CountError> {
    // Most messages hold no '~' byte at all: nothing to walk.
    if !bytes.contains(&RESIZABLE_ARRAY_BUFFER) {
        return Ok(None);
    }
    let mut edits = Vec::new();
    walk(bytes, Bounds { values: u64::MAX, cost: u64::MAX }, Some(&mut edits))?;
    if edits.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    for edit in edits {
        match edit {
            Edit::Resizable { tag, max } => {
                out.extend_from_slice(&bytes[at..tag]);
                out.push(b'B');
                out.extend_from_slice(&bytes[tag + 1..max.start]);
                at = max.end;
            }
            Edit::View { length_and_flags, length, flags } => {
                out.extend_from_slice(&bytes[at..length_and_flags.start]);
                push_varint(&mut out, length);
                push_varint(&mut out, flags & !VIEW_RESIZABLE_FLAGS);
                at = length_and_flags.end;
            }
        }
    }
    out.extend_from_slice(&bytes[at..]);
    Ok(Some(out))
}

/// A change `fixed_length_buffers` makes, at byte positions of the input (in order).
#[derive(Debug)]
enum Edit {
    /// `~` at `tag`; `max` the varint of its maximum length.
    Resizable { tag: usize, max: std::ops::Range<usize> },
    /// A view on a resizable buffer: its byte length and flags varints (length-tracking,
    /// backed by a resizable buffer), rewritten as a fixed-length view of `length` bytes
    /// (a length-tracking view's is written as 0: it is what the buffer has past its offset).
    View { length_and_flags: std::ops::Range<usize>, length: u32, flags: u32 },
}

/// Object ids as V8's deserializer gives them (every object, array, Map, Set, Date,
/// wrapper, RegExp, Error, ArrayBuffer and view, in the order read), with the byte length
/// of each ArrayBuffer: a view after a reference to a buffer read earlier is on that one.
/// Kept only when bytes are rewritten (`fixed_length_buffers`).
struct Ids {
    next: u32,
    buffers: HashMap<u32, u32, FxBuild>,
    /// The byte length of the buffer a view here would be on (the value just read).
    last_buffer: Option<u32>,
    track: bool,
}

impl Ids {
    /// A value with tag `tag` starts at `r` (just after its tag).
    fn read(&mut self, tag: u8, r: &Cursor) {
        if !self.track {
            return;
        }
        self.last_buffer = None;
        match tag {
            b'o' | b'a' | b'A' | b';' | b'\'' | b'D' | b'y' | b'x' | b'n' | b'z' | b's' | b'R' | b'r' => self.next += 1,
            b'^' => {
                let mut c = Cursor { b: r.b, at: r.at, version: r.version };
                if let Ok(id) = c.varint() {
                    self.last_buffer = self.buffers.get(&id).copied();
                }
            }
            _ => {}
        }
    }

    /// An ArrayBuffer of `len` bytes was read (its id is the next one).
    fn buffer(&mut self, len: u32) {
        if !self.track {
            return;
        }
        self.buffers.insert(self.next, len);
        self.next += 1;
        self.last_buffer = Some(len);
    }
}

/// The element size of a view's sub-tag (a DataView's, and unknown ones, 1).
fn view_element_size(sub: u8) -> u32 {
    match sub {
        b'w' | b'W' | b'h' => 2,
        b'd' | b'D' | b'f' => 4,
        b'F' | b'q' | b'Q' => 8,
        _ => 1,
    }
}

/// A view's flags: bit 0 length-tracking, bit 1 backed by a resizable buffer.
const VIEW_RESIZABLE_FLAGS: u32 = 0b11;
const RESIZABLE_ARRAY_BUFFER: u8 = b'~';

fn push_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// What built values cost the parent's V8 heap, in bytes: upper estimates for a 64-bit V8
/// without pointer compression (Node's official builds), as V8's deserializer or the
/// bridge's reader (`lib/codec.js`) builds them, measured on Node 20 and 26
/// (`bench/probes/materialize.js`, docs/budgets.md). Every value also costs its slot in
/// its container.
pub mod cost {
    /// A slot of an array's elements or an object's properties.
    pub const SLOT: u64 = 8;
    /// The longest dense array the bridge's reader makes at its length up front; longer
    /// ones grow as they are read, with up to half their length again in slack.
    pub const PREALLOCATED_MAX: u32 = 1 << 16;
    /// A slot of such a grown array.
    pub const GROWN_SLOT: u64 = 12;
    /// A key and a value of a Map: its table entry (3 slots, buckets, doubling slack).
    pub const MAP_SLOT: u64 = 32;
    /// A value of a Set.
    pub const SET_SLOT: u64 = 40;
    /// A boxed number (a double, or an integer past a small integer's 31 bits).
    pub const HEAP_NUMBER: u64 = 16;
    /// A string's header; its characters come on top, rounded up to 8 bytes.
    pub const STRING: u64 = 16;
    /// An object with its first in-object properties.
    pub const OBJECT: u64 = 56;
    /// An array and its elements' header.
    pub const ARRAY: u64 = 48;
    /// A property key never seen at that place of an object's shape: a hidden class and
    /// its descriptor (and, for a new name, the name's internalized string on top).
    pub const SHAPE: u64 = 104;
    /// Named properties an object keeps in fields; past them it is a dictionary.
    pub const FAST_PROPERTIES: u32 = 128;
    /// A dictionary's entry (key, value, details, at most half used) beyond the slot.
    pub const DICTIONARY_ENTRY: u64 = 40;
    /// A Map or Set and its table's header.
    pub const COLLECTION: u64 = 104;
    /// A Date (its fields and its time value).
    pub const DATE: u64 = 112;
    /// A Boolean, Number, String or BigInt object (its primitive comes on top).
    pub const WRAPPER: u64 = 48;
    /// A RegExp (its data; its source comes on top).
    pub const REGEXP: u64 = 256;
    /// An ArrayBuffer and its backing store's record (its bytes come on top).
    pub const ARRAY_BUFFER: u64 = 192;
    /// A typed array or DataView.
    pub const VIEW: u64 = 128;
    /// An Error (its message and stack come on top).
    pub const ERROR: u64 = 128;
}

/// The characters of a string of `n` serialized bytes, rounded up to 8 bytes; UTF-8 may
/// become two bytes per character.
fn string_cost(tag: u8, n: usize) -> u64 {
    let chars = if tag == UTF8_STRING { 2 * n as u64 } else { n as u64 };
    cost::STRING + chars.div_ceil(8) * 8
}

/// Shapes (hidden classes) the property keys of the objects read so far make V8 create:
/// a transition from a shape by a key, as V8's transition tree, up to `MAX_SHAPES`; past
/// that every named key counts as a new shape.
struct Shapes<'a> {
    next: HashMap<(u32, &'a [u8]), u32, FxBuild>,
    names: HashSet<&'a [u8], FxBuild>,
    /// Per shape, the transition taken from it last: objects of one shape repeat their
    /// keys in order, so most keys are found here with one comparison (V8's deserializer
    /// does the same with its expected transition).
    expected: Vec<(&'a [u8], u32)>,
}

const MAX_SHAPES: usize = 1 << 16;
/// The shape every object starts from; arrays' named properties start from their own.
const OBJECT_SHAPE: u32 = 0;
const ARRAY_SHAPE: u32 = 1;
/// A shape past `MAX_SHAPES`: every key from it is new.
const UNTRACKED_SHAPE: u32 = u32::MAX;

impl<'a> Shapes<'a> {
    fn new() -> Self {
        Shapes { next: HashMap::default(), names: HashSet::default(), expected: Vec::new() }
    }

    /// The cost of adding named key `key` (its serialized bytes) to an object of shape
    /// `shape`, and the shape that makes.
    fn add(&mut self, shape: u32, key: &'a [u8]) -> (u32, u64) {
        if shape != UNTRACKED_SHAPE {
            if let Some(&(k, to)) = self.expected.get(shape as usize) {
                if k == key {
                    return (to, 0);
                }
            }
            if let Some(&to) = self.next.get(&(shape, key)) {
                self.expect(shape, key, to);
                return (to, 0);
            }
        }
        // A new transition; and, if never seen, a new name to intern.
        let name = if self.names.len() < MAX_SHAPES {
            if self.names.insert(key) {
                string_cost(key[0], key.len().saturating_sub(2))
            } else {
                0
            }
        } else if self.names.contains(key) {
            0
        } else {
            string_cost(key[0], key.len().saturating_sub(2))
        };
        if shape == UNTRACKED_SHAPE || self.next.len() >= MAX_SHAPES {
            return (UNTRACKED_SHAPE, cost::SHAPE + name);
        }
        let to = self.next.len() as u32 + 2;
        self.next.insert((shape, key), to);
        self.expect(shape, key, to);
        (to, cost::SHAPE + name)
    }

    fn expect(&mut self, shape: u32, key: &'a [u8], to: u32) {
        let at = shape as usize;
        if self.expected.len() <= at {
            self.expected.resize(at + 1, (&[], 0));
        }
        self.expected[at] = (key, to);
    }
}

/// FxHash (rustc's): keys here are short byte strings, hashed once per property.
#[derive(Default, Clone, Copy)]
struct FxBuild;
#[derive(Default)]
struct Fx(u64);
impl std::hash::BuildHasher for FxBuild {
    type Hasher = Fx;
    fn build_hasher(&self) -> Fx {
        Fx(0)
    }
}
impl std::hash::Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(c.try_into().expect("8 bytes"))).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(K);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (self.0.rotate_left(5) ^ v as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_usize(&mut self, v: usize) {
        self.0 = (self.0.rotate_left(5) ^ v as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The values and cost read so far, against their bounds.
struct Counter {
    values: u64,
    cost: u64,
    bounds: Bounds,
}

impl Counter {
    fn add(&mut self, values: u64, cost: u64) -> Result<(), CountError> {
        self.values = self.values.saturating_add(values);
        self.cost = self.cost.saturating_add(cost);
        if self.values > self.bounds.values {
            return Err(CountError::TooMany { max: self.bounds.values });
        }
        if self.cost > self.bounds.cost {
            return Err(CountError::TooCostly { max: self.bounds.cost });
        }
        Ok(())
    }
}

/// Reads the property key at `r` if it is one V8 takes as a key (a string or a number):
/// the array index it stands for, if any, and its serialized bytes (tag to end). Anything
/// else is left unread.
fn read_key<'a>(r: &mut Cursor<'a>) -> Option<(Option<u64>, &'a [u8])> {
    let index = index_key(r);
    let mut c = Cursor { b: r.b, at: r.at, version: r.version };
    match c.tag().ok()? {
        ONE_BYTE_STRING | TWO_BYTE_STRING | UTF8_STRING => {
            let n = c.varint().ok()? as usize;
            c.skip(n).ok()?;
        }
        b'N' => c.skip(8).ok()?,
        b'I' | b'U' => {
            c.varint().ok()?;
        }
        _ => return None,
    }
    // Padding before the tag is not part of the key.
    let mut from = r.at;
    while r.b[from] == PADDING {
        from += 1;
    }
    let key = &r.b[from..c.at];
    r.at = c.at;
    Some((index, key))
}

fn walk(bytes: &[u8], bounds: Bounds, mut edits: Option<&mut Vec<Edit>>) -> Result<Tally, CountError> {
    let mut r = Cursor { b: bytes, at: 0, version: 0 };
    if r.byte()? != VERSION {
        return Err(CountError::Unreadable("header"));
    }
    r.version = r.varint()?;
    if r.version < 13 {
        // Before 13, unknown tags were host objects: nothing the bridge writes.
        return Err(CountError::Unreadable("format version"));
    }
    let mut n = Counter { values: 0, cost: 0, bounds };
    let mut shapes = Shapes::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut ids = Ids { next: 0, buffers: HashMap::default(), last_buffer: None, track: edits.is_some() };
    'value: loop {
        // Read one value; containers push a frame and are continued below.
        let tag = r.tag()?;
        let tag_at = r.at - 1;
        ids.read(tag, &r);
        let mut opened = true;
        // The value's own cost (its slot in its container is charged when it is done).
        let mut own = 0u64;
        match tag {
            b'?' => {
                // An object count V8 ignores; a value follows.
                r.varint()?;
                continue 'value;
            }
            b'_' | b'0' | b'T' | b'F' => opened = false,
            b'y' | b'x' => {
                own = cost::WRAPPER;
                opened = false;
            }
            THE_HOLE if matches!(stack.last(), Some(Frame::Dense { .. })) => opened = false,
            b'I' => {
                let zz = r.varint()?;
                // A small integer has 31 bits where V8 compresses pointers.
                own = if zz >= 1 << 31 { cost::HEAP_NUMBER } else { 0 };
                opened = false;
            }
            b'U' => {
                own = if r.varint()? >= 1 << 30 { cost::HEAP_NUMBER } else { 0 };
                opened = false;
            }
            b'^' => {
                r.varint()?;
                opened = false;
            }
            b'N' => {
                r.skip(8)?;
                own = cost::HEAP_NUMBER;
                opened = false;
            }
            b'D' => {
                r.skip(8)?;
                own = cost::DATE;
                opened = false;
            }
            b'n' => {
                r.skip(8)?;
                own = cost::WRAPPER + cost::HEAP_NUMBER;
                opened = false;
            }
            b'Z' | b'z' => {
                let before = r.at;
                r.bigint()?;
                own = cost::STRING + (r.at - before) as u64 + if tag == b'z' { cost::WRAPPER } else { 0 };
                opened = false;
            }
            ONE_BYTE_STRING | TWO_BYTE_STRING | UTF8_STRING => {
                let len = r.varint()? as usize;
                r.skip(len)?;
                own = string_cost(tag, len);
                opened = false;
            }
            b's' => {
                n.add(1, 0)?; // the wrapper and its string
                own = cost::WRAPPER + string_at(&mut r)?;
                opened = false;
            }
            b'R' => {
                n.add(1, 0)?; // the RegExp and its source
                own = cost::REGEXP + string_at(&mut r)?;
                r.varint()?;
                opened = false;
            }
            b'B' => {
                let len = r.varint()? as usize;
                ids.buffer(len as u32);
                r.skip(len)?;
                own = cost::ARRAY_BUFFER + len as u64;
                opened = false;
            }
            b'~' => {
                let len = r.varint()? as usize;
                ids.buffer(len as u32);
                let max_at = r.at;
                r.varint()?;
                if let Some(e) = edits.as_deref_mut() {
                    e.push(Edit::Resizable { tag: tag_at, max: max_at..r.at });
                }
                r.skip(len)?;
                own = cost::ARRAY_BUFFER + len as u64;
                opened = false;
            }
            b'o' => {
                own = cost::OBJECT;
                stack.push(Frame::Entries {
                    end: b'{',
                    trailer: 1,
                    pairs: true,
                    at_key: true,
                    elements: Some(Elements::new(0)),
                    slot: cost::SLOT,
                    shape: OBJECT_SHAPE,
                    named: 0,
                });
            }
            b'a' => {
                // The deserializer sets the length first: every slot may be allocated.
                let len = r.varint()?;
                n.add(len as u64, cost::SLOT.saturating_mul(len as u64))?;
                own = cost::ARRAY;
                stack.push(Frame::Entries {
                    end: b'@',
                    trailer: 2,
                    pairs: true,
                    at_key: true,
                    elements: Some(Elements { used: 0, ..Elements::new(len as u64) }),
                    slot: cost::SLOT,
                    shape: ARRAY_SHAPE,
                    named: 0,
                });
            }
            b'A' => {
                let len = r.varint()?;
                if len as usize > bytes.len() - r.at {
                    return Err(CountError::Unreadable("dense array length"));
                }
                own = cost::ARRAY;
                stack.push(Frame::Dense { left: len, length: len });
            }
            b';' => {
                own = cost::COLLECTION;
                stack.push(Frame::Entries {
                    end: b':',
                    trailer: 1,
                    pairs: true,
                    at_key: true,
                    elements: None,
                    slot: cost::MAP_SLOT,
                    shape: UNTRACKED_SHAPE,
                    named: 0,
                });
            }
            b'\'' => {
                own = cost::COLLECTION;
                stack.push(Frame::Entries {
                    end: b',',
                    trailer: 1,
                    pairs: false,
                    at_key: true,
                    elements: None,
                    slot: cost::SET_SLOT,
                    shape: UNTRACKED_SHAPE,
                    named: 0,
                });
            }
            b'r' => {
                // An optional prototype, then the parts.
                if !matches!(r.small()?, b'E' | b'R' | b'F' | b'S' | b'T' | b'U') {
                    r.at -= 1;
                }
                own = cost::ERROR;
                if error_parts(&mut r, &mut n)? {
                    stack.push(Frame::ErrorCause { read: false });
                } else {
                    opened = false;
                }
            }
            b'u' | b't' | b'p' | b'w' | b'm' | b'\\' => {
                return Err(CountError::Unreadable("shared, transferred or host object"));
            }
            _ => return Err(CountError::Unreadable("unknown tag")),
        }
        n.add(1, own)?;
        if !opened {
            // An ArrayBuffer (or a reference to one) may be followed by a view on it.
            if r.peek() == Some(ARRAY_BUFFER_VIEW) {
                r.at += 1;
                let sub = r.small()?;
                let offset = r.varint()?;
                let length_at = r.at;
                let length = r.varint()?;
                if r.version >= 14 {
                    let flags = r.varint()?;
                    if let Some(e) = edits.as_deref_mut() {
                        if flags & VIEW_RESIZABLE_FLAGS != 0 {
                            // Length-tracking: all the buffer has past the offset, in whole elements.
                            let size = view_element_size(sub);
                            let length = if flags & 1 != 0 {
                                let left = ids.last_buffer.unwrap_or(0).saturating_sub(offset);
                                left - left % size
                            } else {
                                length
                            };
                            e.push(Edit::View { length_and_flags: length_at..r.at, length, flags });
                        }
                    }
                }
                ids.next += 1;
                n.add(1, cost::VIEW)?;
            }
            let slot = child_done(&mut stack);
            n.add(0, slot)?;
        }
        // Close what is complete; stop where the next value is needed.
        loop {
            match stack.last_mut() {
                None => return Ok(Tally { values: n.values, cost: n.cost }),
                Some(Frame::Dense { left: 0, length }) => {
                    let elements = Some(Elements::new(*length as u64));
                    *stack.last_mut().expect("top") = Frame::Entries {
                        end: b'$',
                        trailer: 2,
                        pairs: true,
                        at_key: true,
                        elements,
                        slot: cost::SLOT,
                        shape: ARRAY_SHAPE,
                        named: 0,
                    };
                }
                Some(Frame::Dense { .. }) => continue 'value,
                Some(Frame::Entries { end, trailer, pairs, at_key, elements, shape, named, .. }) => {
                    if (*at_key || !*pairs) && r.peek() == Some(*end) {
                        r.at += 1;
                        for _ in 0..*trailer {
                            r.varint()?;
                        }
                        if let Some(e) = elements {
                            let extra = e.extra();
                            n.add(extra, cost::SLOT.saturating_mul(extra))?;
                        }
                        stack.pop();
                        let slot = child_done(&mut stack);
                        n.add(0, slot)?;
                    } else {
                        if *at_key && *pairs {
                            if let Some(e) = elements.as_mut() {
                                // An object's or array's key: an index takes element slots, a
                                // name a place in the shape (and, if new, an interned string).
                                if let Some((index, key)) = read_key(&mut r) {
                                    match index {
                                        Some(index) => e.index(index),
                                        None => {
                                            let (to, c) = shapes.add(*shape, key);
                                            *shape = to;
                                            *named += 1;
                                            let dictionary = if *named > cost::FAST_PROPERTIES { cost::DICTIONARY_ENTRY } else { 0 };
                                            n.add(0, c + dictionary)?;
                                        }
                                    }
                                    // The key is one value.
                                    n.add(1, 0)?;
                                    *at_key = false;
                                }
                            }
                        }
                        continue 'value;
                    }
                }
                Some(Frame::ErrorCause { read: false }) => continue 'value,
                Some(Frame::ErrorCause { read: true }) => {
                    if error_parts(&mut r, &mut n)? {
                        return Err(CountError::Unreadable("error with two causes"));
                    }
                    stack.pop();
                    let slot = child_done(&mut stack);
                    n.add(0, slot)?;
                }
            }
        }
    }
}

/// Reads a string where only a string may stand; its cost.
fn string_at(r: &mut Cursor) -> Result<u64, CountError> {
    let before = r.at;
    r.string()?;
    // Tag (after any padding) and the varint length come before the characters.
    let mut c = Cursor { b: r.b, at: before, version: r.version };
    let tag = c.tag()?;
    let len = c.varint()? as usize;
    Ok(string_cost(tag, len))
}

/// Reads an Error's parts up to its end (`.`, true: false) or its cause (`c`, true: the
/// cause value follows). V8 11 writes message, cause, stack; later ones message, stack,
/// cause: both orders are read.
fn error_parts(r: &mut Cursor, n: &mut Counter) -> Result<bool, CountError> {
    loop {
        match r.small()? {
            b'm' | b's' => {
                let c = string_at(r)?;
                n.add(1, c)?;
            }
            b'c' => return Ok(true),
            b'.' => return Ok(false),
            _ => return Err(CountError::Unreadable("error")),
        }
    }
}

/// One value inside the top frame is complete: the cost of its slot there.
fn child_done(stack: &mut [Frame]) -> u64 {
    match stack.last_mut() {
        Some(Frame::Dense { left, length }) => {
            *left -= 1;
            if *length > cost::PREALLOCATED_MAX {
                cost::GROWN_SLOT
            } else {
                cost::SLOT
            }
        }
        Some(Frame::Entries { pairs, at_key, slot, .. }) => {
            if *pairs {
                *at_key = !*at_key;
            }
            *slot
        }
        Some(Frame::ErrorCause { read }) => {
            *read = true;
            cost::SLOT
        }
        None => 0,
    }
}

#[cfg(test)]
mod tests;
