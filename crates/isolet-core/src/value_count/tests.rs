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
fn resizable_buffers_and_their_views_are_rewritten_fixed_length() {
    // new ArrayBuffer(4, { maxByteLength: 1 << 20 }) with bytes 1..4.
    let rab = v(&[b"~\x04\x80\x80\x40\x01\x02\x03\x04"]);
    assert_eq!(fixed_length_buffers(&rab), Ok(Some(v(&[b"B\x04\x01\x02\x03\x04"]))));
    // A length-tracking Uint16Array at offset 2 on it (written with length 0, flags 3):
    // fixed at what the buffer has past its offset.
    let tracking = v(&[b"~\x04\x80\x80\x40\x01\x02\x03\x04VW\x02\x00\x03"]);
    assert_eq!(fixed_length_buffers(&tracking), Ok(Some(v(&[b"B\x04\x01\x02\x03\x04VW\x02\x02\x00"]))));
    // A fixed-length view on it (flags 2): its length kept, the flag cleared.
    let fixed = v(&[b"~\x04\x08\x01\x02\x03\x04VB\x01\x02\x02"]);
    assert_eq!(fixed_length_buffers(&fixed), Ok(Some(v(&[b"B\x04\x01\x02\x03\x04VB\x01\x02\x00"]))));
    // A second view on the same buffer, by reference (id 1: the array is 0).
    let shared = v(&[b"A\x02~\x04\x08\x01\x02\x03\x04VB\x00\x00\x03^\x01VB\x01\x00\x03$\x00\x02"]);
    assert_eq!(fixed_length_buffers(&shared), Ok(Some(v(&[b"A\x02B\x04\x01\x02\x03\x04VB\x00\x04\x00^\x01VB\x01\x03\x00$\x00\x02"]))));
    // Nothing to change: no '~' at all, or only inside a string.
    assert_eq!(fixed_length_buffers(&v(&[b"B\x01\x07"])), Ok(None));
    assert_eq!(fixed_length_buffers(&v(&[b"\"\x01~"])), Ok(None));
    // A '~' in bytes that do not read is refused, not trusted.
    assert!(fixed_length_buffers(&v(&[b"~\x05"])).is_err());
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
