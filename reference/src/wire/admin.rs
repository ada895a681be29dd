//! Queue delete, health and maintenance (PROTOCOL.md sections 9–11).

use super::{as_object, WireError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `DELETE /api/v1/resources/queues/{queue}` answer (DEL-1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct DeleteResponse {
    /// `deleted`: always true on a 200.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub deleted: bool,
    /// `queue`: the name of the queue deleted.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queue: String,
    /// `existed`: whether there was such a queue.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub existed: bool,
}

/// `GET /health` answer (HEALTH-1), with what a broker adds for its operators: the
/// spool (HEALTH-2) and what it recovered from (HEALTH-3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct HealthResponse {
    /// `status`: `healthy`, or `unhealthy` with a 503.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub status: String,
    /// `database`: `connected`, or what a broker says of an unreachable database.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub database: String,
    /// Why the database is not connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// HEALTH-2: the spool's items, bytes, capacity and replay state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spool: Option<Value>,
    /// How often a push writer died and was started again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_writer_restarts: Option<u64>,
    /// HEALTH-3: the components recovered from a failure within the last minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<Vec<Value>>,
    /// HEALTH-4: the broker's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// HEALTH-4: seconds since the broker started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_seconds: Option<u64>,
}

impl HealthResponse {
    /// The two fields of HEALTH-1, nothing else.
    pub fn new(status: &str, database: &str) -> HealthResponse {
        HealthResponse {
            status: status.to_string(),
            database: database.to_string(),
            error: None,
            spool: None,
            push_writer_restarts: None,
            degraded: None,
            version: None,
            uptime_seconds: None,
        }
    }
}

/// Push maintenance answer (MAINT-1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct MaintenanceResponse {
    /// `maintenanceMode`: whether push maintenance is on.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub maintenance_mode: bool,
    /// `bufferedMessages`: the items in the answering broker's spool (CLUSTER-1).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub buffered_messages: u64,
}

/// Pop maintenance answer (MAINT-2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct PopMaintenanceResponse {
    /// `popMaintenanceMode`: whether pop maintenance is on.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub pop_maintenance_mode: bool,
}

/// Parses `{"enabled": bool}` for both maintenance switches.
pub(crate) fn parse_maintenance(body: &Value) -> Result<bool, WireError> {
    let obj = as_object(body, "maintenance body")?;
    match obj.get("enabled") {
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(WireError::bad("enabled must be a boolean")),
        None => Err(WireError::bad("enabled is required")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maint_1_body_is_checked() {
        assert_eq!(parse_maintenance(&json!({"enabled": true})), Ok(true));
        assert!(parse_maintenance(&json!({"enabled": "yes"})).is_err());
        assert!(parse_maintenance(&json!({})).is_err());
        assert!(parse_maintenance(&json!([])).is_err());
        let lit = r#"{"maintenanceMode":true,"bufferedMessages":3}"#;
        let r: MaintenanceResponse = serde_json::from_str(lit).unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), lit);
    }
}
