//! The tokens the suite sends to a broker with authentication on (PROTOCOL.md section
//! 14), and what each stands for.
//!
//! A broker author either gives the suite the broker's HS256 secret (`--jwt-secret`),
//! and the suite mints a token per level, or gives it one token per level
//! (`--token-admin`, `--token-rw`, `--token-ro`) when the suite cannot know the key. The
//! checker is told which [`Principal`] each token stands for (a [`TokenBook`]); the
//! invalid tokens the cases make on purpose (a forged signature, `alg: none`, expired)
//! are not in it, so the model predicts a 401 for them.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use queen_reference::wire::{Access, Principal, TokenBook, DEFAULT_PUBLIC_PATHS};
use serde_json::{json, Value};

/// The `sub` of each token the suite mints, so a case can tell whose push it was.
pub const SUB_ADMIN: &str = "queen-conformance-admin";
/// The `sub` of the read-write token the suite mints.
const SUB_RW: &str = "queen-conformance-rw";
/// The `sub` of the read-only token the suite mints.
const SUB_RO: &str = "queen-conformance-ro";

/// How long a minted token lives: longer than any run.
const MINTED_LIFETIME_S: u64 = 24 * 3600;

/// What the suite may mint with: the broker's secret and the claims it checks.
#[derive(Clone, Debug)]
pub struct Minter {
    secret: String,
    issuer: Option<String>,
    audience: Option<String>,
}

/// The suite's tokens, one per level, and the minter when it has the secret.
#[derive(Clone, Debug)]
pub struct Tokens {
    /// Bearer token with the admin role (section 14).
    pub admin: String,
    /// Bearer token with the read-write role (section 14).
    pub(crate) rw: String,
    /// Bearer token with the read-only role (section 14).
    pub(crate) ro: String,
    /// Mints further tokens (expired, wrong role, ...) when the suite holds the JWT secret; `None` with given tokens only.
    pub(crate) minter: Option<Minter>,
}

impl Tokens {
    /// Tokens minted with the broker's HS256 secret, with the default role claim.
    pub fn minted(secret: &str, issuer: Option<String>, audience: Option<String>) -> Tokens {
        let minter = Minter {
            secret: secret.to_string(),
            issuer,
            audience,
        };
        let exp = now_s() + MINTED_LIFETIME_S;
        Tokens {
            admin: minter.sign(&minter.claims(SUB_ADMIN, "admin", exp)),
            rw: minter.sign(&minter.claims(SUB_RW, "read-write", exp)),
            ro: minter.sign(&minter.claims(SUB_RO, "read-only", exp)),
            minter: Some(minter),
        }
    }

    /// Tokens the broker author gave, one per level.
    pub fn given(admin: String, rw: String, ro: String) -> Tokens {
        Tokens {
            admin,
            rw,
            ro,
            minter: None,
        }
    }

    /// What the checker is told: each token's level and its `sub` (read from the
    /// token's payload, which the suite trusts since it was given or minted the token).
    pub fn book(&self) -> TokenBook {
        let mut book = TokenBook {
            public: DEFAULT_PUBLIC_PATHS.map(String::from).to_vec(),
            ..TokenBook::default()
        };
        for (t, access) in [
            (&self.admin, Access::Admin),
            (&self.rw, Access::ReadWrite),
            (&self.ro, Access::ReadOnly),
        ] {
            let sub =
                claims_of(t).and_then(|c| c.get("sub").and_then(Value::as_str).map(str::to_string));
            book.principals.insert(t.clone(), Principal { access, sub });
        }
        book
    }

    /// A token whose signature no longer matches its payload (the last signature
    /// character changed).
    pub fn forged(&self) -> String {
        let mut t = self.rw.clone();
        let last = t.pop().unwrap_or('A');
        t.push(if last == 'A' { 'B' } else { 'A' });
        t
    }

    /// The read-write token's header and payload with `alg: none` and no signature.
    pub(crate) fn unsigned(&self) -> String {
        let payload = self.rw.split('.').nth(1).unwrap_or("e30");
        format!(
            "{}.{payload}.",
            B64.encode(br#"{"alg":"none","typ":"JWT"}"#)
        )
    }

    /// A read-write token that expired an hour ago (only with the secret).
    pub fn expired(&self) -> Option<String> {
        let m = self.minter.as_ref()?;
        Some(m.sign(&m.claims(SUB_RW, "read-write", now_s() - 3600)))
    }

    /// A token signed with another secret (only with the secret: otherwise the suite
    /// cannot tell it from the broker's own key).
    pub(crate) fn wrong_key(&self) -> Option<String> {
        let m = self.minter.as_ref()?;
        let other = Minter {
            secret: format!("{}-not-the-broker's", m.secret),
            ..m.clone()
        };
        Some(other.sign(&m.claims(SUB_RW, "read-write", now_s() + 3600)))
    }
}

impl Minter {
    /// The secret tokens are signed with (for a server the suite starts itself).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    fn claims(&self, sub: &str, role: &str, exp: u64) -> Value {
        let mut c = json!({"sub": sub, "role": role, "iat": now_s(), "exp": exp});
        if let Some(i) = &self.issuer {
            c["iss"] = json!(i);
        }
        if let Some(a) = &self.audience {
            c["aud"] = json!(a);
        }
        c
    }

    fn sign(&self, claims: &Value) -> String {
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            claims,
            &EncodingKey::from_secret(self.secret.as_bytes()),
        )
        .expect("HS256 signs any JSON claims")
    }
}

/// A token's payload, without checking its signature.
fn claims_of(token: &str) -> Option<Value> {
    let payload = token.split('.').nth(1)?;
    serde_json::from_slice(&B64.decode(payload).ok()?).ok()
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_tokens_carry_their_sub_and_level_in_the_book() {
        let t = Tokens::minted("s3cret", None, None);
        let book = t.book();
        assert_eq!(book.principals[&t.rw].access, Access::ReadWrite);
        assert_eq!(book.principals[&t.ro].sub.as_deref(), Some(SUB_RO));
        assert!(!book.principals.contains_key(&t.forged()));
        assert!(!book.principals.contains_key(&t.unsigned()));
        assert!(t.unsigned().ends_with('.'));
    }
}
