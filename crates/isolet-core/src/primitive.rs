//! Reads V8 ValueSerializer bytes that hold one primitive (a run's result is most often
//! one): the value, so it can be handed to JS as is, without a Buffer and a deserializer.
//! Anything else (objects, long strings, two-byte strings, BigInts, other versions) is
//! `None` and goes the usual way. The rule is the same as `decodeFast` in `lib/bridge.js`
//! for one primitive.

/// Longest one-byte string read here (longer ones go to the deserializer).
pub const MAX_STRING_BYTES: usize = 256;

/// One primitive value, as V8 wrote it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Primitive<'a> {
    Int32(i32),
    Double(f64),
    Bool(bool),
    Null,
    Undefined,
    /// Latin-1 bytes.
    OneByteString(&'a [u8]),
}

/// Format versions whose primitives are written as read here (V8 11.3 to 14.x).
const VERSIONS: std::ops::RangeInclusive<u8> = 13..=15;

fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut result: u64 = 0;
    for i in 0..5 {
        let b = *bytes.get(*at)?;
        *at += 1;
        result |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some(result);
        }
    }
    None
}

/// The value of `bytes` if they are exactly one primitive; `None` otherwise.
pub fn single_primitive(bytes: &[u8]) -> Option<Primitive<'_>> {
    if bytes.len() < 3 || bytes[0] != 0xff || !VERSIONS.contains(&bytes[1]) {
        return None;
    }
    let mut at = 3;
    let value = match bytes[2] {
        b'I' => {
            let zz = varint(bytes, &mut at)?;
            if zz > u64::from(u32::MAX) {
                return None;
            }
            let zz = zz as u32;
            Primitive::Int32(((zz >> 1) as i32) ^ -((zz & 1) as i32))
        }
        b'N' => {
            let raw: [u8; 8] = bytes.get(3..11)?.try_into().ok()?;
            at = 11;
            Primitive::Double(f64::from_le_bytes(raw))
        }
        b'T' => Primitive::Bool(true),
        b'F' => Primitive::Bool(false),
        b'0' => Primitive::Null,
        b'_' => Primitive::Undefined,
        b'"' => {
            let n = varint(bytes, &mut at)? as usize;
            if n > MAX_STRING_BYTES {
                return None;
            }
            let s = bytes.get(at..at.checked_add(n)?)?;
            at += n;
            Primitive::OneByteString(s)
        }
        _ => return None,
    };
    (at == bytes.len()).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(tail: &[u8]) -> Vec<u8> {
        let mut b = vec![0xff, 15];
        b.extend_from_slice(tail);
        b
    }

    #[test]
    fn reads_each_primitive() {
        assert_eq!(single_primitive(&v(b"I\x04")), Some(Primitive::Int32(2)));
        assert_eq!(single_primitive(&v(b"I\x03")), Some(Primitive::Int32(-2)));
        assert_eq!(single_primitive(&v(&[b'I', 0xfe, 0xff, 0xff, 0xff, 0x0f])), Some(Primitive::Int32(i32::MAX)));
        assert_eq!(single_primitive(&v(&[b'I', 0xff, 0xff, 0xff, 0xff, 0x0f])), Some(Primitive::Int32(i32::MIN)));
        let mut d = vec![b'N'];
        d.extend_from_slice(&1.5f64.to_le_bytes());
        assert_eq!(single_primitive(&v(&d)), Some(Primitive::Double(1.5)));
        assert_eq!(single_primitive(&v(b"T")), Some(Primitive::Bool(true)));
        assert_eq!(single_primitive(&v(b"F")), Some(Primitive::Bool(false)));
        assert_eq!(single_primitive(&v(b"0")), Some(Primitive::Null));
        assert_eq!(single_primitive(&v(b"_")), Some(Primitive::Undefined));
        assert_eq!(single_primitive(&v(b"\"\x02hi")), Some(Primitive::OneByteString(b"hi")));
        assert_eq!(single_primitive(&v(b"\"\x00")), Some(Primitive::OneByteString(b"")));
    }

    #[test]
    fn refuses_what_it_does_not_read_exactly() {
        // Trailing bytes, truncation, other tags, other versions, a varint too long.
        assert_eq!(single_primitive(&v(b"I\x04\x00")), None);
        assert_eq!(single_primitive(&v(b"I")), None);
        assert_eq!(single_primitive(&v(b"I\x80")), None);
        assert_eq!(single_primitive(&v(&[b'I', 0x80, 0x80, 0x80, 0x80, 0x10])), None);
        assert_eq!(single_primitive(&v(&[b'I', 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])), None);
        assert_eq!(single_primitive(&v(b"N\x00\x00")), None);
        assert_eq!(single_primitive(&v(b"\"\x05hi")), None);
        assert_eq!(single_primitive(&v(b"c\x02h\x00")), None);
        assert_eq!(single_primitive(&v(b"o{\x00")), None);
        assert_eq!(single_primitive(&v(b"Z\x02")), None);
        assert_eq!(single_primitive(&[0xff, 12, b'T']), None);
        assert_eq!(single_primitive(&[0xfe, 15, b'T']), None);
        assert_eq!(single_primitive(&[0xff, 15]), None);
        let mut long = vec![b'"', 0x81, 0x02];
        long.extend(std::iter::repeat_n(b'a', 257));
        assert_eq!(single_primitive(&v(&long)), None);
        let mut max = vec![b'"', 0x80, 0x02];
        max.extend(std::iter::repeat_n(b'a', 256));
        assert!(matches!(single_primitive(&v(&max)), Some(Primitive::OneByteString(s)) if s.len() == 256));
    }
}
