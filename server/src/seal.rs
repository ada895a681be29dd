//! Encryption at rest (PROTOCOL.md section 15): the payloads of a queue with
//! `encryptionEnabled` are sealed with AES-256-GCM before they reach the database and
//! opened again on their way out, so the wire never shows the difference (ENC-1) and the
//! database never holds them in clear (ENC-2).
//!
//! A sealed payload is stored as a JSON string, the base64 of a fresh 96-bit nonce
//! followed by the ciphertext and its tag, beside a `sealed` flag on the row; the flag,
//! not the queue's current option, says how to read a row, so turning the option off
//! later leaves earlier messages readable.

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use queen_reference::wire::{deliverable, RawJson, Undeliverable};
use serde_json::Value;

/// Why a sealed payload could not be opened (ENC-3): answered 500, never as garbage.
pub const UNSEALABLE: &str =
    "a stored message cannot be decrypted with this broker's key (QUEEN_ENCRYPTION_KEY): \
     it was encrypted with another key, or the broker has none";

/// The broker's key, ready to seal and open.
pub struct Sealer {
    cipher: Aes256Gcm,
}

const NONCE_BYTES: usize = 12;

impl Sealer {
    /// From `QUEEN_ENCRYPTION_KEY`: 64 hex digits (32 bytes).
    pub fn from_hex(hex_key: &str) -> Result<Sealer, String> {
        let bytes = hex::decode(hex_key.trim())
            .ok()
            .filter(|b| b.len() == 32)
            .ok_or("QUEEN_ENCRYPTION_KEY must be 64 hex digits (a 32-byte AES-256 key)")?;
        Ok(Sealer {
            cipher: Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(&bytes)),
        })
    }

    /// The payload's JSON text sealed, as the JSON string the row stores.
    pub fn seal(&self, json_text: &str) -> String {
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let mut out = nonce.to_vec();
        out.extend(
            self.cipher
                .encrypt(&nonce, json_text.as_bytes())
                .expect("AES-GCM seals any payload that fits in memory"),
        );
        Value::String(B64.encode(out)).to_string()
    }

    /// A sealed row's `data` back to the payload.
    pub fn open(&self, stored: &Value) -> Result<Value, &'static str> {
        let plain = self.open_text(stored.as_str().ok_or(UNSEALABLE)?)?;
        serde_json::from_str(&plain).map_err(|_| UNSEALABLE)
    }

    /// The text a sealed row's string (the base64, without its JSON quotes) was sealed
    /// from.
    fn open_text(&self, sealed: &str) -> Result<String, &'static str> {
        let bytes = B64
            .decode(sealed)
            .ok()
            .filter(|b| b.len() > NONCE_BYTES)
            .ok_or(UNSEALABLE)?;
        let (nonce, sealed) = bytes.split_at(NONCE_BYTES);
        let plain = self
            .cipher
            .decrypt(Nonce::from_slice(nonce), sealed)
            .map_err(|_| UNSEALABLE)?;
        String::from_utf8(plain).map_err(|_| UNSEALABLE)
    }
}

/// Why a stored payload cannot go out as it is.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Unreadable {
    /// ENC-3: sealed under another key, or the broker has none (answered 500).
    #[error("{UNSEALABLE}")]
    Unsealable,
    /// POP-16: the stored text is not a payload a consumer can read (written by an older
    /// version, or damaged); the message is set aside.
    #[error("the stored payload cannot be delivered: it {0}")]
    Undeliverable(#[from] Undeliverable),
}

/// A payload as its row holds it (`data` read as text, `sealed` its flag) opened into the
/// text that goes out, once that text is checked to be one JSON value a consumer can
/// read (PUSH-11's [`deliverable`]). Every read that sends payloads comes through here.
pub fn open_stored(
    sealer: Option<&Sealer>,
    sealed: bool,
    data: String,
) -> Result<RawJson, Unreadable> {
    let text = match (sealed, sealer) {
        (false, _) => data,
        (true, Some(s)) => {
            let Ok(Value::String(inner)) = serde_json::from_str::<Value>(&data) else {
                return Err(Unreadable::Unsealable);
            };
            s.open_text(&inner).map_err(|_| Unreadable::Unsealable)?
        }
        (true, None) => return Err(Unreadable::Unsealable),
    };
    deliverable(&text)?;
    RawJson::parse(text).map_err(|e| Undeliverable::NotJson(e.to_string()).into())
}

/// A stored payload as a management read shows it: the payload, or `null` beside why no
/// consumer could read it (POP-16), so one damaged row never fails a whole listing. A
/// sealed payload this broker cannot open is still ENC-3's error.
pub fn shown(
    sealer: Option<&Sealer>,
    sealed: bool,
    data: String,
) -> Result<(Value, Option<String>), &'static str> {
    match open_stored(sealer, sealed, data) {
        Ok(raw) => Ok((raw.value(), None)),
        Err(Unreadable::Unsealable) => Err(UNSEALABLE),
        Err(why) => Ok((Value::Null, Some(why.to_string()))),
    }
}

/// Opens `data` when the row is `sealed`, with `sealer` if the broker has a key.
pub fn open_row(sealer: Option<&Sealer>, sealed: bool, data: Value) -> Result<Value, &'static str> {
    match (sealed, sealer) {
        (false, _) => Ok(data),
        (true, Some(s)) => s.open(&data),
        (true, None) => Err(UNSEALABLE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn enc_2_a_sealed_payload_opens_only_with_its_key() {
        let s = Sealer::from_hex(KEY).unwrap();
        let text = r#"{"card":"4111 1111 1111 1111","n":18446744073709551616}"#;
        let stored: Value = serde_json::from_str(&s.seal(text)).unwrap();
        assert!(!stored.as_str().unwrap().contains("4111"));
        assert_eq!(
            s.open(&stored).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
        assert_ne!(s.seal(text), s.seal(text), "a fresh nonce each time");
        let other = Sealer::from_hex(&KEY.replace("1f", "ff")).unwrap();
        assert_eq!(other.open(&stored), Err(UNSEALABLE));
        assert_eq!(open_row(None, true, stored.clone()), Err(UNSEALABLE));
        assert_eq!(open_row(None, false, stored.clone()), Ok(stored));
    }

    #[test]
    fn enc_3_keys_that_are_not_64_hex_digits_are_refused() {
        for bad in [
            "",
            "abc",
            &KEY[..62],
            &format!("{KEY}00"),
            &KEY.replace('0', "g"),
        ] {
            assert!(Sealer::from_hex(bad).is_err(), "{bad:?}");
        }
    }
}
