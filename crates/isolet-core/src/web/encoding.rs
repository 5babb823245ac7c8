//! `TextDecoder`'s decoding (the Encoding standard, by encoding_rs): label lookup, and a
//! decode that streams by leaving an incomplete sequence at the end of a chunk to the next
//! one (`stream: true`), so no decoder state outlives a call.
use encoding_rs::{Encoding, UTF_16BE, UTF_16LE, UTF_8};

use super::WebError;

/// The encoding a label names, by its lower-case name (`TextDecoder.prototype.encoding`).
/// Only UTF-8, UTF-16LE/BE and the single-byte encodings are supported: a stream of those
/// can be cut anywhere and resumed from bytes alone.
pub fn lookup(label: &str) -> Result<String, WebError> {
    let unknown = || WebError::Range(format!("The \"{label}\" encoding is not supported"));
    let encoding = Encoding::for_label(label.as_bytes()).ok_or_else(unknown)?;
    if encoding == encoding_rs::REPLACEMENT {
        return Err(unknown());
    }
    if !(encoding == UTF_8 || encoding == UTF_16LE || encoding == UTF_16BE || encoding.is_single_byte()) {
        return Err(WebError::Range(format!(
            "The \"{label}\" encoding is not supported here: TextDecoder decodes UTF-8, UTF-16LE, UTF-16BE and the single-byte encodings"
        )));
    }
    Ok(encoding.name().to_ascii_lowercase())
}

/// Bytes at the end of `bytes` that begin a sequence the next chunk may complete.
fn incomplete_tail(encoding: &'static Encoding, bytes: &[u8]) -> usize {
    if encoding == UTF_8 {
        return utf8_tail(bytes);
    }
    if encoding == UTF_16LE || encoding == UTF_16BE {
        let odd = bytes.len() % 2;
        let whole = &bytes[..bytes.len() - odd];
        let high_surrogate = whole.len() >= 2 && {
            let (a, b) = (whole[whole.len() - 2], whole[whole.len() - 1]);
            let unit = if encoding == UTF_16LE { u16::from_le_bytes([a, b]) } else { u16::from_be_bytes([a, b]) };
            (0xd800..0xdc00).contains(&unit)
        };
        return odd + if high_surrogate { 2 } else { 0 };
    }
    0
}

/// The UTF-8 decoder's pending bytes at the end of `bytes`: a lead byte and the
/// continuation bytes its sequence allows so far (the Encoding standard's bounds).
fn utf8_tail(bytes: &[u8]) -> usize {
    let n = bytes.len();
    for back in 1..=3.min(n) {
        let lead = bytes[n - back];
        if (0x80..0xc0).contains(&lead) {
            continue;
        }
        let need = match lead {
            0xc2..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            _ => return 0,
        };
        if back >= need {
            return 0;
        }
        let (low, high) = match lead {
            0xe0 => (0xa0, 0xbf),
            0xed => (0x80, 0x9f),
            0xf0 => (0x90, 0xbf),
            0xf4 => (0x80, 0x8f),
            _ => (0x80, 0xbf),
        };
        let second_ok = back < 2 || (low..=high).contains(&bytes[n - back + 1]);
        return if second_ok { back } else { 0 };
    }
    0
}

/// Decodes `bytes` as `encoding` (a name from `lookup`): the text and, with `stream`, how
/// many bytes at the end were left for the next chunk. `strip_bom`: a leading byte order
/// mark of the encoding is dropped (the decoder's first output, unless `ignoreBOM`).
/// `fatal`: malformed input is a TypeError instead of U+FFFD.
pub fn decode(name: &str, bytes: &[u8], fatal: bool, stream: bool, strip_bom: bool) -> Result<(String, usize), WebError> {
    let encoding = Encoding::for_label(name.as_bytes()).ok_or_else(|| WebError::Range(format!("unknown encoding {name}")))?;
    let tail = if stream { incomplete_tail(encoding, bytes) } else { 0 };
    let mut body = &bytes[..bytes.len() - tail];
    if strip_bom {
        let bom: &[u8] = if encoding == UTF_8 {
            b"\xef\xbb\xbf"
        } else if encoding == UTF_16LE {
            b"\xff\xfe"
        } else if encoding == UTF_16BE {
            b"\xfe\xff"
        } else {
            b""
        };
        if !bom.is_empty() {
            body = body.strip_prefix(bom).unwrap_or(body);
        }
    }
    let text = if fatal {
        encoding.decode_without_bom_handling_and_without_replacement(body).ok_or_else(|| {
            WebError::Type(format!("The encoded data was not valid for encoding {}", encoding.name().to_ascii_lowercase()))
        })?
    } else {
        encoding.decode_without_bom_handling(body).0
    };
    Ok((text.into_owned(), tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_the_encoding_standard() {
        assert_eq!(lookup("utf8").unwrap(), "utf-8");
        assert_eq!(lookup(" UTF-16 ").unwrap(), "utf-16le");
        assert_eq!(lookup("unicodefffe").unwrap(), "utf-16be");
        assert_eq!(lookup("latin1").unwrap(), "windows-1252");
        assert_eq!(lookup("ascii").unwrap(), "windows-1252");
        assert_eq!(lookup("koi8-r").unwrap(), "koi8-r");
        assert!(matches!(lookup("replacement"), Err(WebError::Range(_))));
        assert!(matches!(lookup("iso-2022-kr"), Err(WebError::Range(_))));
        assert!(matches!(lookup("utf-7"), Err(WebError::Range(_))));
        assert!(matches!(lookup("shift_jis"), Err(WebError::Range(m)) if m.contains("not supported here")));
    }

    #[test]
    fn streams_resume_from_the_bytes_left() {
        let euro = "€".as_bytes(); // e2 82 ac
        assert_eq!(decode("utf-8", &euro[..2], false, true, true).unwrap(), (String::new(), 2));
        assert_eq!(decode("utf-8", euro, false, true, true).unwrap(), ("€".into(), 0));
        assert_eq!(decode("utf-8", &euro[..2], false, false, true).unwrap().0, "\u{fffd}");
        // A lead whose next byte it cannot take is not pending: it is an error now.
        assert_eq!(decode("utf-8", b"\xe0\x80", false, true, true).unwrap(), ("\u{fffd}\u{fffd}".into(), 0));
        assert_eq!(decode("utf-8", b"a\xf0\x9f\x98", false, true, true).unwrap(), ("a".into(), 3));
        assert_eq!(decode("utf-8", b"\xef\xbb\xbfx", false, false, true).unwrap().0, "x");
        assert_eq!(decode("utf-8", b"\xef\xbb\xbfx", false, false, false).unwrap().0, "\u{feff}x");
        assert!(matches!(decode("utf-8", b"\xff", true, false, true), Err(WebError::Type(_))));
        // UTF-16: an odd byte and a high surrogate wait for the rest of their pair.
        let pair = "😀".encode_utf16().flat_map(u16::to_le_bytes).collect::<Vec<_>>();
        assert_eq!(decode("utf-16le", &pair[..3], false, true, true).unwrap(), (String::new(), 3));
        assert_eq!(decode("utf-16le", &pair, false, true, true).unwrap(), ("😀".into(), 0));
        assert_eq!(decode("utf-16le", &pair[..2], false, false, true).unwrap().0, "\u{fffd}");
        assert_eq!(decode("utf-16be", b"\xfe\xff\x00A", false, false, true).unwrap().0, "A");
        assert_eq!(decode("windows-1252", b"\x80", false, true, true).unwrap(), ("€".into(), 0));
    }
}
