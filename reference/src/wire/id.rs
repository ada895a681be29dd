//! A UUID named by a request (a partition, a lease), parsed once by the wire layer.
//!
//! Engines that store UUIDs take the parsed value and never parse again; the model and
//! the answers keep the text as the client spelled it, because an answer echoes an id
//! as it was given (LEASE-2) and the model knows ids as the strings brokers sent.

use super::WireError;
use uuid::Uuid;

/// A validated UUID from a request, with its spelling.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WireId {
    uuid: Uuid,
    text: String,
}

impl WireId {
    /// Parses `text` as a hyphenated UUID; `kind` names the field in the 400's message.
    pub(crate) fn parse(kind: &str, text: &str) -> Result<WireId, WireError> {
        super::check_uuid(kind, text)?;
        Ok(WireId {
            uuid: Uuid::try_parse(text).expect("check_uuid accepted it"),
            text: text.to_string(),
        })
    }

    /// The parsed UUID, for storage.
    pub fn uuid(&self) -> Uuid {
        self.uuid
    }

    /// The id as the client spelled it.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl std::ops::Deref for WireId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for WireId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_keeps_its_spelling_and_parses_once() {
        let id = WireId::parse("leaseId", "0198F2C1-9A7B-7D20-8E31-4C5D6E7F8A90").unwrap();
        assert_eq!(id.as_str(), "0198F2C1-9A7B-7D20-8E31-4C5D6E7F8A90");
        assert_eq!(
            id.uuid().to_string(),
            "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90"
        );
        let bad = WireId::parse("leaseId", "not-a-uuid").unwrap_err();
        assert_eq!(bad.status, 400);
        assert!(bad.message.contains("leaseId"), "{}", bad.message);
    }
}
