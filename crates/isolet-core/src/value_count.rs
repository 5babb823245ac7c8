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
use thiserror::Error;

/// Why bytes were not counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CountError {
    /// The bytes hold more than `max` values (counting stopped there).
    #[error("more than {max} values")]
    TooMany { max: u64 },
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
    Entries { end: u8, trailer: u8, pairs: bool, at_key: bool, elements: Option<Elements> },
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
                self.capacity = index + 1 + (index + 1) / 2 + 16;
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
    let mut r = Cursor { b: bytes, at: 0, version: 0 };
    if r.byte()? != VERSION {
        return Err(CountError::Unreadable("header"));
    }
    r.version = r.varint()?;
    if r.version < 13 {
        // Before 13, unknown tags were host objects: nothing the bridge writes.
        return Err(CountError::Unreadable("format version"));
    }
    let mut n: u64 = 0;
    let mut stack: Vec<Frame> = Vec::new();
    let add = |n: &mut u64, k: u64| -> Result<(), CountError> {
        *n = n.saturating_add(k);
        if *n > max { Err(CountError::TooMany { max }) } else { Ok(()) }
    };
    'value: loop {
        // Read one value; containers push a frame and are continued below.
        let tag = r.tag()?;
        let mut opened = true;
        match tag {
            b'?' => {
                // An object count V8 ignores; a value follows.
                r.varint()?;
                continue 'value;
            }
            b'_' | b'0' | b'T' | b'F' | b'y' | b'x' => opened = false,
            THE_HOLE if matches!(stack.last(), Some(Frame::Dense { .. })) => opened = false,
            b'I' | b'U' | b'^' => {
                r.varint()?;
                opened = false;
            }
            b'N' | b'D' | b'n' => {
                r.skip(8)?;
                opened = false;
            }
            b'Z' | b'z' => {
                r.bigint()?;
                opened = false;
            }
            ONE_BYTE_STRING | TWO_BYTE_STRING | UTF8_STRING => {
                let len = r.varint()? as usize;
                r.skip(len)?;
                opened = false;
            }
            b's' => {
                add(&mut n, 1)?; // the wrapper and its string
                r.string()?;
                opened = false;
            }
            b'R' => {
                add(&mut n, 1)?; // the RegExp and its source
                r.string()?;
                r.varint()?;
                opened = false;
            }
            b'B' => {
                let len = r.varint()? as usize;
                r.skip(len)?;
                opened = false;
            }
            b'~' => {
                let len = r.varint()? as usize;
                r.varint()?;
                r.skip(len)?;
                opened = false;
            }
            b'o' => stack.push(Frame::Entries { end: b'{', trailer: 1, pairs: true, at_key: true, elements: Some(Elements::new(0)) }),
            b'a' => {
                // The deserializer sets the length first: every slot may be allocated.
                let len = r.varint()?;
                add(&mut n, len as u64)?;
                stack.push(Frame::Entries {
                    end: b'@',
                    trailer: 2,
                    pairs: true,
                    at_key: true,
                    elements: Some(Elements { used: 0, ..Elements::new(len as u64) }),
                });
            }
            b'A' => {
                let len = r.varint()?;
                if len as usize > bytes.len() - r.at {
                    return Err(CountError::Unreadable("dense array length"));
                }
                stack.push(Frame::Dense { left: len, length: len });
            }
            b';' => stack.push(Frame::Entries { end: b':', trailer: 1, pairs: true, at_key: true, elements: None }),
            b'\'' => stack.push(Frame::Entries { end: b',', trailer: 1, pairs: false, at_key: true, elements: None }),
            b'r' => {
                // An optional prototype, then the parts.
                if !matches!(r.small()?, b'E' | b'R' | b'F' | b'S' | b'T' | b'U') {
                    r.at -= 1;
                }
                if error_parts(&mut r, &mut n, &add)? {
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
        add(&mut n, 1)?;
        if !opened {
            // An ArrayBuffer (or a reference to one) may be followed by a view on it.
            if r.peek() == Some(ARRAY_BUFFER_VIEW) {
                r.at += 1;
                r.small()?;
                r.varint()?;
                r.varint()?;
                if r.version >= 14 {
                    r.varint()?;
                }
                add(&mut n, 1)?;
            }
            child_done(&mut stack);
        }
        // Close what is complete; stop where the next value is needed.
        loop {
            match stack.last_mut() {
                None => return Ok(n),
                Some(Frame::Dense { left: 0, length }) => {
                    let elements = Some(Elements::new(*length as u64));
                    *stack.last_mut().expect("top") = Frame::Entries { end: b'$', trailer: 2, pairs: true, at_key: true, elements };
                }
                Some(Frame::Dense { .. }) => continue 'value,
                Some(Frame::Entries { end, trailer, pairs, at_key, elements }) => {
                    if (*at_key || !*pairs) && r.peek() == Some(*end) {
                        r.at += 1;
                        for _ in 0..*trailer {
                            r.varint()?;
                        }
                        if let Some(e) = elements {
                            add(&mut n, e.extra())?;
                        }
                        stack.pop();
                        child_done(&mut stack);
                    } else {
                        if *at_key {
                            if let (Some(e), Some(index)) = (elements.as_mut(), index_key(&r)) {
                                e.index(index);
                            }
                        }
                        continue 'value;
                    }
                }
                Some(Frame::ErrorCause { read: false }) => continue 'value,
                Some(Frame::ErrorCause { read: true }) => {
                    if error_parts(&mut r, &mut n, &add)? {
                        return Err(CountError::Unreadable("error with two causes"));
                    }
                    stack.pop();
                    child_done(&mut stack);
                }
            }
        }
    }
}

/// Reads an Error's parts up to its end (`.`, true: false) or its cause (`c`, true: the
/// cause value follows). V8 11 writes message, cause, stack; later ones message, stack,
/// cause: both orders are read.
fn error_parts(r: &mut Cursor, n: &mut u64, add: &impl Fn(&mut u64, u64) -> Result<(), CountError>) -> Result<bool, CountError> {
    loop {
        match r.small()? {
            b'm' | b's' => {
                add(n, 1)?;
                r.string()?;
            }
            b'c' => return Ok(true),
            b'.' => return Ok(false),
            _ => return Err(CountError::Unreadable("error")),
        }
    }
}

/// One value inside the top frame is complete.
fn child_done(stack: &mut [Frame]) {
    match stack.last_mut() {
        Some(Frame::Dense { left, .. }) => *left -= 1,
        Some(Frame::Entries { pairs: true, at_key, .. }) => *at_key = !*at_key,
        Some(Frame::ErrorCause { read }) => *read = true,
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(parts: &[&[u8]]) -> Vec<u8> {
        let mut out = vec![0xff, 15];
        for p in parts {
            out.extend_from_slice(p);
        }
        out
    }

    #[test]
    fn primitives_are_one_value_each() {
        assert_eq!(count_values(&v(&[b"I\x02"]), 10), Ok(1));
        assert_eq!(count_values(&v(&[b"\"\x02ab"]), 10), Ok(1));
        assert_eq!(count_values(&v(&[b"N", &[0; 8]]), 10), Ok(1));
        assert_eq!(count_values(&v(&[b"\x00\x00c\x02ab"]), 10), Ok(1), "padding before a two-byte string");
        assert_eq!(count_values(&v(&[b"Z\x10", &[1; 8]]), 10), Ok(1));
    }

    #[test]
    fn containers_count_their_keys_elements_and_holes() {
        // ['ab', 'ab', <hole>]: the array, two strings, one hole.
        let dense = v(&[b"A\x03\"\x02ab\"\x02ab-$\x00\x03"]);
        assert_eq!(count_values(&dense, 100), Ok(4));
        // { a: 1, b: {} }: object, key, value, key, object.
        let obj = v(&[b"o\"\x01aI\x02\"\x01bo{\x00{\x02"]);
        assert_eq!(count_values(&obj, 100), Ok(5));
        // new Map([[1, 2]]) and new Set([1]).
        assert_eq!(count_values(&v(&[b";I\x02I\x04:\x02"]), 100), Ok(3));
        assert_eq!(count_values(&v(&[b"'I\x02,\x01"]), 100), Ok(2));
        // A Uint8Array: its ArrayBuffer, then the view.
        assert_eq!(count_values(&v(&[b"B\x03abcVB\x00\x03\x00"]), 100), Ok(2));
        // A RegExp, a String object, an Error with message, stack and a cause.
        assert_eq!(count_values(&v(&[b"R\"\x01a\x01"]), 100), Ok(2));
        assert_eq!(count_values(&v(&[b"s\"\x01a"]), 100), Ok(2));
        assert_eq!(count_values(&v(&[b"rRm\"\x01xs\"\x01ycI\x02."]), 100), Ok(4));
        // V8 11 writes the cause before the stack.
        assert_eq!(count_values(&v(&[b"rm\"\x01xcI\x02s\"\x01y."]), 100), Ok(4));
    }

    #[test]
    fn a_sparse_array_counts_every_slot_of_its_length() {
        // [] with length 3e7 and a[0] = 1: 17 bytes, 240 MB once deserialized.
        let mut b = v(&[b"a"]);
        let mut len = 30_000_000u32;
        while len >= 0x80 {
            b.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        b.push(len as u8);
        b.extend_from_slice(b"I\x00I\x02@\x01\x00");
        assert_eq!(count_values(&b, 1 << 20), Err(CountError::TooMany { max: 1 << 20 }));
        assert!(count_values(&b, u32::MAX as u64).unwrap() > 30_000_000);
    }

    #[test]
    fn index_keys_count_the_element_slots_they_make_v8_allocate() {
        // { 1023: 0 }: 8 bytes, a backing store of 1552 slots (12 KB) once built.
        let near = v(&[b"oI\xfe\x0fI\x00{\x01"]);
        assert_eq!(count_values(&near, u64::MAX), Ok(3 + 1024 + 512 + 16));
        // The same index as a string key.
        assert_eq!(count_values(&v(&[b"o\"\x041023I\x00{\x01"]), u64::MAX), Ok(3 + 1552));
        // { 1024: 0 }: past the gap, dictionary elements: no slots, but what turning back
        // into slots could take.
        let far = v(&[b"oI\x80\x10I\x00{\x01"]);
        assert_eq!(count_values(&far, u64::MAX), Ok(3 + 18));
        // A big id as a key costs no slots either; a non-canonical one is a name.
        assert_eq!(count_values(&v(&[b"o\"\x0a1700000000I\x00{\x01"]), u64::MAX), Ok(3 + 18));
        assert_eq!(count_values(&v(&[b"o\"\x0201I\x00{\x01"]), u64::MAX), Ok(3));
        // [1, 2] with a[500] = 3: the dense slots, then growth to 1.5 x 501 + 16.
        let grown = v(&[b"A\x02I\x02I\x04I\xe8\x07I\x06$\x01\x02"]);
        assert_eq!(count_values(&grown, u64::MAX), Ok(5 + (501 + 250 + 16 - 2)));
    }

    #[test]
    fn counting_stops_past_the_limit() {
        let mut b = v(&[b"A\x80\x01"]);
        for _ in 0..128 {
            b.extend_from_slice(b"\"\x02ab");
        }
        b.extend_from_slice(b"$\x00\x80\x01");
        assert_eq!(count_values(&b, 129), Ok(129));
        assert_eq!(count_values(&b, 128), Err(CountError::TooMany { max: 128 }));
    }

    #[test]
    fn deep_nesting_needs_no_recursion() {
        let depth = 200_000;
        let mut b = v(&[]);
        for _ in 0..depth {
            b.extend_from_slice(b"A\x01");
        }
        b.extend_from_slice(b"_");
        for _ in 0..depth {
            b.extend_from_slice(b"$\x00\x01");
        }
        assert_eq!(count_values(&b, u64::MAX), Ok(depth + 1));
    }

    #[test]
    fn malformed_or_foreign_bytes_are_unreadable() {
        let bad = |b: &[u8]| matches!(count_values(b, 1000), Err(CountError::Unreadable(_)));
        assert!(bad(b""));
        assert!(bad(&[0xff]));
        assert!(bad(&[0xff, 12, b'I', 0]), "format before 13");
        assert!(bad(&v(&[b"\"\x05ab"])), "string past the end");
        assert!(bad(&v(&[b"A\x05I\x00"])), "dense length past the end");
        assert!(bad(&v(&[b"o\"\x01a"])), "unterminated object");
        assert!(bad(&v(&[b"u\x00"])), "shared array buffer");
        assert!(bad(&v(&[b"\\"])), "host object");
        assert!(bad(&v(&[b"-"])), "a hole outside an array");
        assert!(bad(&v(&[b"rX"])), "unknown error part");
        assert!(bad(&v(&[b"Q"])), "unknown tag");
    }
}
