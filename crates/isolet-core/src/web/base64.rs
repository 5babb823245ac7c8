//! `atob` and `btoa`: the HTML standard's forgiving-base64 decode and base64 encode
//! (https://infra.spec.whatwg.org/#forgiving-base64).
use super::WebError;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn sextet(c: u8) -> Option<u32> {
    match c {
        b'A'..=b'Z' => Some(u32::from(c - b'A')),
        b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
        b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

fn invalid() -> WebError {
    WebError::dom("InvalidCharacterError", "The string to be decoded is not correctly encoded.")
}

/// Forgiving-base64 decode of `input` (the string's UTF-8: any non-ASCII character is
/// outside the alphabet anyway): the bytes, or `InvalidCharacterError`.
pub fn decode(input: &str) -> Result<Vec<u8>, WebError> {
    // ASCII whitespace is removed first (TAB, LF, FF, CR, SPACE).
    let data: Vec<u8> = input.bytes().filter(|b| !matches!(b, b'\t' | b'\n' | 0x0c | b'\r' | b' ')).collect();
    let mut data = &data[..];
    if data.len().is_multiple_of(4) {
        if let Some(rest) = data.strip_suffix(b"==").or_else(|| data.strip_suffix(b"=")) {
            data = rest;
        }
    }
    if data.len() % 4 == 1 {
        return Err(invalid());
    }
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &c in data {
        buffer = (buffer << 6) | sextet(c).ok_or_else(invalid)?;
        bits += 6;
        if bits == 24 {
            out.extend_from_slice(&[(buffer >> 16) as u8, (buffer >> 8) as u8, buffer as u8]);
            (buffer, bits) = (0, 0);
        }
    }
    // 12 bits left: one byte (4 padding bits dropped); 18: two bytes (2 dropped).
    match bits {
        12 => out.push((buffer >> 4) as u8),
        18 => out.extend_from_slice(&[(buffer >> 10) as u8, (buffer >> 2) as u8]),
        _ => {}
    }
    Ok(out)
}

/// `btoa`: the base64 of `input`'s code points as bytes; one above U+00FF is an
/// `InvalidCharacterError`.
pub fn encode_latin1(input: &str) -> Result<String, WebError> {
    let mut bytes = Vec::with_capacity(input.len());
    for c in input.chars() {
        let b = u8::try_from(u32::from(c)).map_err(|_| {
            WebError::dom("InvalidCharacterError", "The string to be encoded contains characters outside of the Latin1 range.")
        })?;
        bytes.push(b);
    }
    Ok(encode(&bytes))
}

/// Base64 with padding.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_is_forgiving_as_the_standard_says() {
        assert_eq!(decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(decode(" aGVs bG8 ").unwrap(), b"hello");
        assert_eq!(decode("aGVsbG8").unwrap(), b"hello");
        assert_eq!(decode("").unwrap(), b"");
        assert_eq!(decode("ab").unwrap(), [0x69]);
        assert!(decode("a").is_err());
        assert!(decode("ab=").is_err(), "padding only when the length is a multiple of 4");
        assert!(decode("ab===").is_err());
        assert!(decode("a=b=").is_err());
        assert!(decode("é").is_err());
        assert_eq!(decode("ab==").unwrap(), [0x69]);
    }

    #[test]
    fn encode_pads_and_refuses_what_latin1_cannot_hold() {
        assert_eq!(encode(b""), "");
        assert_eq!(encode(b"h"), "aA==");
        assert_eq!(encode(b"he"), "aGU=");
        assert_eq!(encode(b"hel"), "aGVs");
        assert_eq!(encode_latin1("\u{ff}\u{0}").unwrap(), "/wA=");
        assert_eq!(
            encode_latin1("€").unwrap_err(),
            WebError::dom("InvalidCharacterError", "The string to be encoded contains characters outside of the Latin1 range.")
        );
        for bytes in [&b"\x00\x01\xfe\xff"[..], b"any carnal pleasure."] {
            assert_eq!(decode(&encode(bytes)).unwrap(), bytes);
        }
    }
}
