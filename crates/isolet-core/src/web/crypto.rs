//! `crypto`: random values from the OS CSPRNG (getrandom), `randomUUID`, and
//! `crypto.subtle`'s digests and HMAC by RustCrypto.
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha384, Sha512};

use super::WebError;

/// Most bytes one `getRandomValues` call may fill (the Web Crypto standard's quota).
pub const MAX_RANDOM_BYTES: usize = 65_536;

/// Fills `out` from the OS CSPRNG; more than `MAX_RANDOM_BYTES` is a `QuotaExceededError`.
pub fn fill_random(out: &mut [u8]) -> Result<(), WebError> {
    if out.len() > MAX_RANDOM_BYTES {
        return Err(WebError::dom(
            "QuotaExceededError",
            format!(
                "Failed to execute 'getRandomValues' on 'Crypto': The ArrayBufferView's byte length ({}) exceeds the number of bytes of entropy available via this API ({MAX_RANDOM_BYTES}).",
                out.len()
            ),
        ));
    }
    getrandom::fill(out).map_err(|e| WebError::dom("OperationError", format!("no randomness from the operating system: {e}")))
}

/// A version 4 UUID (RFC 9562) from the OS CSPRNG, in lower-case hex.
pub fn random_uuid() -> Result<String, WebError> {
    let mut b = [0u8; 16];
    fill_random(&mut b)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32]))
}

/// The digest algorithms `crypto.subtle` knows, by their normalized names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hash {
    Sha1,
    Sha256,
    Sha384,
    Sha512,
}

impl Hash {
    /// The algorithm a name names, case-insensitively (WebCrypto's normalization).
    pub fn named(name: &str) -> Result<Hash, WebError> {
        Ok(match name.to_ascii_uppercase().as_str() {
            "SHA-1" => Hash::Sha1,
            "SHA-256" => Hash::Sha256,
            "SHA-384" => Hash::Sha384,
            "SHA-512" => Hash::Sha512,
            _ => return Err(WebError::dom("NotSupportedError", format!("Unrecognized algorithm name: {name}"))),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Hash::Sha1 => "SHA-1",
            Hash::Sha256 => "SHA-256",
            Hash::Sha384 => "SHA-384",
            Hash::Sha512 => "SHA-512",
        }
    }

    /// The block size in bits: an HMAC key's default length.
    pub fn block_bits(self) -> u32 {
        match self {
            Hash::Sha1 | Hash::Sha256 => 512,
            Hash::Sha384 | Hash::Sha512 => 1024,
        }
    }
}

pub fn digest(hash: Hash, data: &[u8]) -> Vec<u8> {
    match hash {
        Hash::Sha1 => Sha1::digest(data).to_vec(),
        Hash::Sha256 => Sha256::digest(data).to_vec(),
        Hash::Sha384 => Sha384::digest(data).to_vec(),
        Hash::Sha512 => Sha512::digest(data).to_vec(),
    }
}

fn mac<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = <M as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// HMAC of `data` under `key` (any length) with `hash`.
pub fn hmac_sign(hash: Hash, key: &[u8], data: &[u8]) -> Vec<u8> {
    match hash {
        Hash::Sha1 => mac::<Hmac<Sha1>>(key, data),
        Hash::Sha256 => mac::<Hmac<Sha256>>(key, data),
        Hash::Sha384 => mac::<Hmac<Sha384>>(key, data),
        Hash::Sha512 => mac::<Hmac<Sha512>>(key, data),
    }
}

/// Whether `signature` is the HMAC of `data`, compared in constant time.
pub fn hmac_verify(hash: Hash, key: &[u8], data: &[u8], signature: &[u8]) -> bool {
    let expected = hmac_sign(hash, key, data);
    expected.len() == signature.len() && expected.iter().zip(signature).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn digests_and_hmac_match_the_standards_vectors() {
        assert_eq!(hex(&digest(Hash::Sha1, b"abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(hex(&digest(Hash::Sha256, b"abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert!(hex(&digest(Hash::Sha384, b"")).starts_with("38b060a751ac9638"));
        assert!(hex(&digest(Hash::Sha512, b"abc")).starts_with("ddaf35a193617aba"));
        // RFC 4231 test case 2.
        let sig = hmac_sign(Hash::Sha256, b"Jefe", b"what do ya want for nothing?");
        assert_eq!(hex(&sig), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        assert!(hmac_verify(Hash::Sha256, b"Jefe", b"what do ya want for nothing?", &sig));
        assert!(!hmac_verify(Hash::Sha256, b"Jefe", b"what do ya want for nothing!", &sig));
        assert!(!hmac_verify(Hash::Sha256, b"Jefe", b"what do ya want for nothing?", &sig[..31]));
        assert_eq!(Hash::named("sha-256").unwrap(), Hash::Sha256);
        assert!(matches!(Hash::named("MD5"), Err(WebError::Dom { name: "NotSupportedError", .. })));
    }

    #[test]
    fn randomness_has_a_quota_and_uuids_their_version() {
        let mut ok = vec![0u8; MAX_RANDOM_BYTES];
        fill_random(&mut ok).unwrap();
        assert!(ok.iter().any(|b| *b != 0));
        let mut over = vec![0u8; MAX_RANDOM_BYTES + 1];
        assert!(matches!(fill_random(&mut over), Err(WebError::Dom { name: "QuotaExceededError", .. })));
        let u = random_uuid().unwrap();
        assert_eq!((u.len(), &u[14..15], u.as_bytes()[8]), (36, "4", b'-'));
        assert!(matches!(u.as_bytes()[19], b'8' | b'9' | b'a' | b'b'));
        assert_ne!(u, random_uuid().unwrap());
    }
}
