//! The stamp that makes a `{name}.tool.json` cache trustworthy: the SHA-256 of the script's
//! bytes (which version of the script the description was read from) and an HMAC-SHA256, under
//! a key only this user holds, over that hash and the whole description. A cache shipped in a
//! repository (or edited by hand) cannot carry a valid tag, so it is never taken as the script's
//! word: the script is read again. File times play no part (a `git clone` gives the script and
//! its cache the same mtime).
//!
//! The hashing is RustCrypto's maintained `sha2` and `hmac` crates; this file only fixes the
//! stored form (lower-case hex behind a `sha256:` / `hmac-sha256:` prefix) and the canonical
//! text a tag covers. The tests below pin that form to the standard's vectors and RFC 4231.

use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
pub use sha2::{Digest, Sha256};

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// HMAC-SHA256 (RFC 2104) of the concatenation of `parts`.
pub fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // Any key length is valid for HMAC (longer than a block is hashed first), so this never fails.
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What `scriptStamp` records: the script's content hash.
pub fn script_stamp(script: &[u8]) -> String {
    format!("sha256:{}", hex(&sha256(script)))
}

/// The tag over a description (`cacheTag` left out) under `key`: equal for equal documents
/// whatever the order of their keys.
pub fn tag(key: &[u8], doc: &Value) -> String {
    let mut text = String::new();
    canonical(doc, &mut text, true);
    format!("hmac-sha256:{}", hex(&hmac(key, &[text.as_bytes()])))
}

/// Compares two tags in time independent of where they differ.
pub fn same_tag(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// JSON text with object keys sorted at every level (the tagged form), without the top level's
/// `cacheTag`.
fn canonical(v: &Value, out: &mut String, top: bool) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map
                .keys()
                .filter(|k| !(top && k.as_str() == "cacheTag"))
                .collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&map[k], out, false);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out, false);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn sha256_matches_the_standard_vectors() {
        let cases: [(&[u8], &str); 3] = [
            (
                b"",
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            (
                b"abc",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(hex(&sha256(input)), want);
        }
        // a million 'a's, fed in uneven pieces (the buffering path)
        let mut h = Sha256::new();
        let data = vec![b'a'; 1_000_000];
        for piece in data.chunks(997) {
            h.update(piece);
        }
        assert_eq!(
            hex(&h.finalize()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        let key = [0x0b; 20];
        assert_eq!(
            hex(&hmac(&key, &[b"Hi There"])),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hex(&hmac(b"Jefe", &[b"what do ya want ", b"for nothing?"])),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // a key longer than the block is hashed first (case 6)
        let long = [0xaa; 131];
        let msg = unhex(&hex(
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        ));
        assert_eq!(
            hex(&hmac(&long, &[&msg])),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn tags_ignore_key_order_and_the_tag_itself() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":[1,"x"],"x":null}}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a":{"x":null,"y":[1,"x"]},"cacheTag":"t","b":1}"#).unwrap();
        assert_eq!(tag(b"k", &a), tag(b"k", &b));
        assert_ne!(tag(b"k", &a), tag(b"other", &a));
        let c: Value = serde_json::from_str(r#"{"b":2,"a":{"y":[1,"x"],"x":null}}"#).unwrap();
        assert_ne!(tag(b"k", &a), tag(b"k", &c));
        assert!(same_tag(&tag(b"k", &a), &tag(b"k", &b)));
        assert!(!same_tag(&tag(b"k", &a), &tag(b"k", &c)));
        assert!(script_stamp(b"abc").starts_with("sha256:ba7816bf"));
    }
}
