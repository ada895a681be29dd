//! `POST /api/v1/lease/{leaseId}/extend` (PROTOCOL.md section 5).

use super::{as_object, WireError, WireId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A validated extend: `seconds` is `None` when the body is absent, empty, `{}` or
/// `{"seconds":null}` (LEASE-3: then the lease's own duration).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtendRequest {
    /// The lease id from the path.
    pub lease_id: WireId,
    /// `seconds`: how far past now the new deadline lies; `None` for the lease's own duration
    /// (LEASE-3).
    pub seconds: Option<u32>,
}

/// The 200 answer (LEASE-2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct ExtendResponse {
    /// `leaseId`: the lease id the call named.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub lease_id: String,
    /// `success`: whether some lease was renewed (LEASE-2).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub success: bool,
    /// `renewed`: how many live leases with that id were renewed (LEASE-1).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub renewed: u32,
    /// `expiresAt`: the renewed deadline, ISO-8601 UTC; `null` when nothing was renewed.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub expires_at: Option<String>,
    /// `error`: why nothing was renewed, else `null`.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub error: Option<String>,
}

/// The error text when nothing was renewed.
pub const ERR_LEASE_NOT_FOUND: &str = "lease not found or expired";

/// Parses an extend call from the path's lease id and the raw body (LEASE-3).
pub(crate) fn parse_extend(lease_id: &str, body: &[u8]) -> Result<ExtendRequest, WireError> {
    let lease_id = WireId::parse("leaseId", lease_id)?;
    let seconds = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        let v = super::parse_json(body)?;
        let obj = as_object(&v, "extend body")?;
        match obj.get("seconds") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => match n.as_u64() {
                Some(s) if s > 0 && s <= u32::MAX as u64 => Some(s as u32),
                _ => {
                    return Err(WireError::bad(format!(
                        "seconds must be a positive integer, got {n}"
                    )))
                }
            },
            Some(other) => {
                return Err(WireError::bad(format!(
                    "seconds must be a positive integer, got {other}"
                )))
            }
        }
    };
    Ok(ExtendRequest { lease_id, seconds })
}

#[cfg(test)]
mod tests {
    use super::*;
    const L: &str = "0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90";

    #[test]
    fn lease_3_body_is_optional_and_seconds_must_be_positive() {
        assert_eq!(parse_extend(L, b"").unwrap().seconds, None);
        assert_eq!(parse_extend(L, b"{}").unwrap().seconds, None);
        assert_eq!(
            parse_extend(L, br#"{"seconds":120}"#).unwrap().seconds,
            Some(120)
        );
        for bad in [
            &br#"{"seconds":0}"#[..],
            br#"{"seconds":-1}"#,
            br#"{"seconds":1.5}"#,
            br#"{"seconds":"9"}"#,
            b"nope",
            b"[]",
        ] {
            assert_eq!(parse_extend(L, bad).unwrap_err().status, 400);
        }
        assert_eq!(parse_extend("abc", b"").unwrap_err().status, 400);
    }

    #[test]
    fn lease_2_answer_shape() {
        let lit = r#"{"leaseId":"0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90","success":false,"renewed":0,"expiresAt":null,"error":"lease not found or expired"}"#;
        let r: ExtendResponse = serde_json::from_str(lit).unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), lit);
    }
}
