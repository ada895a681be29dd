//! Connection-URL helpers.
//!
//! Exists because every source ends in the same place, a `postgres://` URL, and tests need the
//! same URL pointed at another database (their own) or printed without a password.

#[cfg(feature = "test-sources")]
use url::Url;

#[cfg(feature = "test-sources")]
use crate::error::{Error, Result};

/// `postgres://postgres@127.0.0.1:PORT/postgres`: the superuser URL of a cluster we started
/// ourselves (trust authentication on loopback).
pub(crate) fn loopback(port: u16) -> String {
    format!("postgres://postgres@127.0.0.1:{port}/postgres")
}

#[cfg(feature = "test-sources")]
/// The same server and credentials as `url`, but database `name`.
pub(crate) fn with_database(url: &str, name: &str) -> Result<String> {
    let mut parsed = parse(url)?;
    parsed.set_path(&format!("/{name}"));
    Ok(parsed.into())
}

#[cfg(feature = "test-sources")]
/// `url` with any password replaced by `***`, for messages.
pub(crate) fn redact(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.into()
        }
        Ok(parsed) => parsed.into(),
        Err(_) => "<unparsable URL>".to_owned(),
    }
}

#[cfg(feature = "test-sources")]
fn parse(url: &str) -> Result<Url> {
    let parsed = Url::parse(url).map_err(|e| Error::BadUrl {
        url: redact(url),
        reason: e.to_string(),
    })?;
    if !matches!(parsed.scheme(), "postgres" | "postgresql") {
        return Err(Error::BadUrl {
            url: redact(url),
            reason: "expected a postgres:// or postgresql:// URL".into(),
        });
    }
    Ok(parsed)
}

#[cfg(all(test, feature = "test-sources"))]
mod tests {
    use super::*;

    #[test]
    fn swaps_database_and_keeps_credentials_and_query() {
        let u = with_database("postgres://u:p@h:5/old?sslmode=disable", "new_db").unwrap();
        assert_eq!(u, "postgres://u:p@h:5/new_db?sslmode=disable");
        let u = with_database("postgresql://h", "x").unwrap();
        assert_eq!(u, "postgresql://h/x");
    }

    #[test]
    fn redacts_passwords_and_rejects_other_schemes() {
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert!(with_database("mysql://h/db", "x").is_err());
        assert!(with_database("host=h dbname=x", "x").is_err());
    }
}
