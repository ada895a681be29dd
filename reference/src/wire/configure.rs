//! `POST /api/v1/configure` (PROTOCOL.md section 8): queue options, their defaults
//! (CFG-2) and validation (CFG-3).

use super::{
    as_object, check_name, derive_namespace_task, opt_str, req_str, WireError, MAX_NAME_BYTES,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// ENC-2: the 400 of a broker without a key asked to encrypt a queue.
pub const ENCRYPTION_UNAVAILABLE: &str =
    "options.encryptionEnabled: this broker has no encryption key, so it cannot keep the \
     queue's payloads encrypted";

/// Every queue option with its effective value. `Default` gives the configure
/// defaults of CFG-2; a queue created implicitly by a push or a pop differs only in
/// `lease_time` (PUSH-2, POP-9), see [`QueueOptions::implicit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct QueueOptions {
    /// Seconds a pop's lease lives unless the pop says otherwise.
    pub lease_time: u32,
    /// Failure-driven redeliveries allowed per offset and group (DLQ-1).
    pub retry_limit: u32,
    /// Milliseconds before a `failed` span comes back (ACK-6).
    pub retry_delay: u32,
    /// Seconds a transactionId deduplicates within a partition (PUSH-5).
    pub dedup_window_seconds: u32,
    /// Seconds a message must age before delivery (POP-14).
    pub delayed_processing: u32,
    /// Seconds of write silence a partition needs before delivery (POP-14).
    pub window_buffer: u32,
    /// Milliseconds an under-full batch may wait to fill (POP-15), clamped to 60000.
    pub min_pop_wait_time: u32,
    /// Stored, not enforced: the seeds do not say what a full queue does.
    pub max_size: u64,
    /// Stored, not enforced by the model: retention runs on the broker's clock.
    pub retention_seconds: u32,
    /// Stored, not enforced by the model (as `retention_seconds`).
    pub completed_retention_seconds: u32,
    /// Stored; encryption is transparent on the wire (POP-5 `data`).
    pub encryption_enabled: bool,
    /// Stored; discovery ordering is an OPEN choice (POP-4) the model does not fix.
    pub priority: i32,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            lease_time: 300,
            retry_limit: 3,
            retry_delay: 1000,
            dedup_window_seconds: 3600,
            delayed_processing: 0,
            window_buffer: 0,
            min_pop_wait_time: 0,
            max_size: 0,
            retention_seconds: 0,
            completed_retention_seconds: 0,
            encryption_enabled: false,
            priority: 0,
        }
    }
}

impl QueueOptions {
    /// Options of a queue created by a push or a pop: `leaseTime` 60 s (PUSH-2, POP-9).
    pub fn implicit() -> Self {
        QueueOptions {
            lease_time: 60,
            ..QueueOptions::default()
        }
    }
}

/// The most `minPopWaitTime` can be (POP-15); larger values are clamped.
pub const MAX_MIN_POP_WAIT_MS: u32 = 60_000;

/// A validated configure call.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigureRequest {
    pub queue: String,
    pub namespace: String,
    pub task: String,
    pub options: QueueOptions,
}

/// The 200 answer (section 8).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct ConfigureResponse {
    pub configured: bool,
    pub queue: String,
    pub namespace: String,
    pub task: String,
    pub options: QueueOptions,
}

fn uint(obj: &Map<String, Value>, key: &str, min: u64, max: u64) -> Result<Option<u64>, WireError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(v) if v >= min && v <= max => Ok(Some(v)),
            _ => Err(WireError::bad(format!(
                "options.{key} must be an integer from {min} to {max}, got {n}"
            ))),
        },
        Some(other) => Err(WireError::bad(format!(
            "options.{key} must be an integer, got {other}"
        ))),
    }
}

/// Parses a configure body. Full replace (CFG-1): every omitted option takes its
/// default. Wrong types or out-of-range values are 400 (CFG-3).
pub fn parse_configure(body: &Value) -> Result<ConfigureRequest, WireError> {
    let obj = as_object(body, "configure body")?;
    let queue = req_str(obj, "queue", "")?;
    check_name("queue", &queue)?;
    let (dns, dtask) = derive_namespace_task(&queue);
    let namespace = opt_str(obj, "namespace", "")?.unwrap_or(dns);
    let task = opt_str(obj, "task", "")?.unwrap_or(dtask);
    // CFG-3: bounded like names; an empty one is allowed (a derived task often is).
    for (key, v) in [("namespace", &namespace), ("task", &task)] {
        if v.len() > MAX_NAME_BYTES {
            return Err(WireError::bad(format!(
                "{key} is {} bytes long; at most {MAX_NAME_BYTES} are allowed",
                v.len()
            )));
        }
    }
    let empty = Map::new();
    let o = match obj.get("options") {
        None | Some(Value::Null) => &empty,
        Some(v) => as_object(v, "options")?,
    };
    let d = QueueOptions::default();
    let u32max = u32::MAX as u64;
    let options = QueueOptions {
        lease_time: uint(o, "leaseTime", 1, u32max)?.map_or(d.lease_time, |v| v as u32),
        retry_limit: uint(o, "retryLimit", 0, u32max)?.map_or(d.retry_limit, |v| v as u32),
        retry_delay: uint(o, "retryDelay", 0, u32max)?.map_or(d.retry_delay, |v| v as u32),
        dedup_window_seconds: uint(o, "dedupWindowSeconds", 0, u32max)?
            .map_or(d.dedup_window_seconds, |v| v as u32),
        delayed_processing: uint(o, "delayedProcessing", 0, u32max)?
            .map_or(d.delayed_processing, |v| v as u32),
        window_buffer: uint(o, "windowBuffer", 0, u32max)?.map_or(d.window_buffer, |v| v as u32),
        min_pop_wait_time: uint(o, "minPopWaitTime", 0, u32max)?.map_or(d.min_pop_wait_time, |v| {
            v.min(MAX_MIN_POP_WAIT_MS as u64) as u32
        }),
        max_size: uint(o, "maxSize", 0, i64::MAX as u64)?.unwrap_or(d.max_size),
        retention_seconds: uint(o, "retentionSeconds", 0, u32max)?
            .map_or(d.retention_seconds, |v| v as u32),
        completed_retention_seconds: uint(o, "completedRetentionSeconds", 0, u32max)?
            .map_or(d.completed_retention_seconds, |v| v as u32),
        encryption_enabled: match o.get("encryptionEnabled") {
            None | Some(Value::Null) => d.encryption_enabled,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(WireError::bad(format!(
                    "options.encryptionEnabled must be a boolean, got {other}"
                )))
            }
        },
        priority: match o.get("priority") {
            None | Some(Value::Null) => d.priority,
            Some(Value::Number(n)) => match n.as_i64() {
                Some(p) if p >= i32::MIN as i64 && p <= i32::MAX as i64 => p as i32,
                _ => {
                    return Err(WireError::bad(format!(
                        "options.priority must be an integer, got {n}"
                    )))
                }
            },
            Some(other) => {
                return Err(WireError::bad(format!(
                    "options.priority must be an integer, got {other}"
                )))
            }
        },
    };
    Ok(ConfigureRequest {
        queue,
        namespace,
        task,
        options,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cfg_3_bounds_of_namespace_task_and_priority() {
        let at = |key: &str, v: Value| {
            let mut body = json!({"queue": "q", "options": {}});
            if key == "priority" {
                body["options"][key] = v;
            } else {
                body[key] = v;
            }
            parse_configure(&body)
        };
        for key in ["namespace", "task"] {
            assert!(at(key, json!("n".repeat(MAX_NAME_BYTES))).is_ok(), "{key}");
            assert!(
                at(key, json!("n".repeat(MAX_NAME_BYTES + 1))).is_err(),
                "{key}"
            );
        }
        for (p, ok) in [
            (i32::MAX as i64, true),
            (i32::MIN as i64, true),
            (i32::MAX as i64 + 1, false),
            (i32::MIN as i64 - 1, false),
        ] {
            let r = at("priority", json!(p));
            assert_eq!(r.is_ok(), ok, "priority {p}");
            if ok {
                assert_eq!(r.unwrap().options.priority as i64, p);
            }
        }
    }

    #[test]
    fn cfg_2_defaults() {
        let r = parse_configure(&json!({"queue": "orders.created"})).unwrap();
        assert_eq!(r.options, QueueOptions::default());
        assert_eq!(r.options.lease_time, 300);
        assert_eq!(r.options.retry_limit, 3);
        assert_eq!(r.options.retry_delay, 1000);
        assert_eq!(r.options.dedup_window_seconds, 3600);
        assert_eq!(
            (r.namespace.as_str(), r.task.as_str()),
            ("orders", "created")
        );
        assert_eq!(QueueOptions::implicit().lease_time, 60);
    }

    #[test]
    fn cfg_1_full_replace_resets_omitted_options() {
        let r = parse_configure(&json!({"queue": "q", "options": {"retryLimit": 0}})).unwrap();
        assert_eq!(r.options.retry_limit, 0);
        assert_eq!(r.options.dedup_window_seconds, 3600);
    }

    #[test]
    fn cfg_3_wrong_types_and_ranges_are_400() {
        for opts in [
            json!({"leaseTime": 0}),
            json!({"leaseTime": "60"}),
            json!({"retryLimit": -1}),
            json!({"retryDelay": 1.5}),
            json!({"encryptionEnabled": "yes"}),
            json!({"priority": "high"}),
            json!([]),
        ] {
            let e = parse_configure(&json!({"queue": "q", "options": opts})).unwrap_err();
            assert_eq!(e.status, 400, "{opts}");
        }
        assert!(parse_configure(&json!({"options": {}})).is_err());
        assert!(parse_configure(&json!({"queue": ""})).is_err());
    }

    #[test]
    fn pop_15_min_pop_wait_time_is_clamped() {
        let r =
            parse_configure(&json!({"queue": "q", "options": {"minPopWaitTime": 90000}})).unwrap();
        assert_eq!(r.options.min_pop_wait_time, 60_000);
    }

    #[test]
    fn configure_answer_lists_every_option_in_camel_case() {
        let v = serde_json::to_value(QueueOptions::default()).unwrap();
        for k in [
            "leaseTime",
            "retryLimit",
            "retryDelay",
            "dedupWindowSeconds",
            "delayedProcessing",
            "windowBuffer",
            "minPopWaitTime",
            "maxSize",
            "retentionSeconds",
            "completedRetentionSeconds",
            "encryptionEnabled",
            "priority",
        ] {
            assert!(v.get(k).is_some(), "{k}");
        }
    }
}
