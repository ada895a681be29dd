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
    pub(crate) delayed_processing: u32,
    /// Seconds of write silence a partition needs before delivery (POP-14).
    pub(crate) window_buffer: u32,
    /// Milliseconds an under-full batch may wait to fill (POP-15), clamped to 60000.
    pub min_pop_wait_time: u32,
    /// The most unconsumed messages the queue holds; a push past it is refused (RET-5).
    pub max_size: u64,
    /// Seconds after which a message is removable whatever its cursors, when
    /// `retention_enabled` (RET-2).
    pub(crate) retention_seconds: u32,
    /// Seconds after which a message every group has committed is removable, when
    /// `retention_enabled` (RET-2).
    pub(crate) completed_retention_seconds: u32,
    /// Stored; encryption is transparent on the wire (POP-5 `data`).
    pub encryption_enabled: bool,
    /// Stored; discovery ordering is an OPEN choice (POP-4) the model does not fix.
    pub priority: i32,
    /// The gate of both retention options (RET-2); read as false from a broker that omits it.
    #[serde(default)]
    pub(crate) retention_enabled: bool,
    /// Seconds after which a message is removable whatever its cursors, ungated (RET-2);
    /// read as 0 from a broker that omits it.
    #[serde(default)]
    pub(crate) max_wait_time_seconds: u32,
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
            retention_enabled: false,
            max_wait_time_seconds: 0,
        }
    }
}

impl QueueOptions {
    /// The age in milliseconds after which a message is removable whatever its cursors,
    /// and the one after which a committed message is (RET-2); `None` where no limit holds.
    pub(crate) fn retention_ages_ms(&self) -> (Option<i64>, Option<i64>) {
        let secs = |n: u32| (n > 0).then_some(n as i64 * 1000);
        let gated = |n: u32| secs(n).filter(|_| self.retention_enabled);
        let any = match (
            secs(self.max_wait_time_seconds),
            gated(self.retention_seconds),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        (any, gated(self.completed_retention_seconds))
    }

    /// How long a transactionId deduplicates, in milliseconds (PUSH-5); 0: not at all.
    pub fn dedup_window_ms(&self) -> i64 {
        i64::from(self.dedup_window_seconds) * 1000
    }

    /// Whether any retention applies to the queue (RET-2).
    pub(crate) fn retains(&self) -> bool {
        self.retention_ages_ms() != (None, None)
    }

    /// Options of a queue created by a push or a pop: `leaseTime` 60 s (PUSH-2, POP-9).
    pub fn implicit() -> Self {
        QueueOptions {
            lease_time: 60,
            ..QueueOptions::default()
        }
    }
}

/// The most `minPopWaitTime` can be (POP-15); larger values are clamped.
const MAX_MIN_POP_WAIT_MS: u32 = 60_000;

/// Option keys a broker stores without acting on them, with their values (CFG-4).
pub(crate) type ExtraOptions = Map<String, Value>;

/// CFG-4's bounds on the option keys a broker stores without acting on them.
pub const MAX_EXTRA_OPTIONS: usize = 64;
/// The longest stored extra option key, in bytes (CFG-4).
pub const MAX_EXTRA_KEY_BYTES: usize = 255;
/// The most bytes of JSON the stored extra option values may take in all (CFG-4).
pub const MAX_EXTRA_VALUE_BYTES: usize = 16 * 1024;

/// A validated configure call.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigureRequest {
    /// `queue`: the name of the queue configured, created if unknown.
    pub queue: String,
    /// `namespace`: given, or derived from the queue name's first dotted segment (CFG-3).
    pub namespace: String,
    /// `task`: given, or derived from the queue name's second dotted segment (CFG-3).
    pub task: String,
    /// `options`: every known option, the omitted ones at their defaults (CFG-1, CFG-2).
    pub options: QueueOptions,
    /// The option keys this protocol does not act on, kept and echoed (CFG-4).
    pub extra: ExtraOptions,
}

/// The `options` of a configure answer: the effective known options with the stored
/// unknown keys beside them (CFG-4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct EchoedOptions {
    /// The effective known options.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub known: QueueOptions,
    /// The stored unknown keys, beside the known ones.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub extra: ExtraOptions,
}

/// The 200 answer (section 8).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct ConfigureResponse {
    /// `configured`: always true on a 200.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub configured: bool,
    /// `queue`: the name of the queue configured.
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub queue: String,
    /// `namespace`: the queue's namespace, given or derived (CFG-3).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub namespace: String,
    /// `task`: the queue's task, given or derived (CFG-3).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub task: String,
    /// `options`: every effective option with the stored extras (CFG-4).
    #[cfg_attr(feature = "openapi", schemars(description = ""))]
    pub options: EchoedOptions,
}

/// Every option key [`QueueOptions`] reads (the rest are CFG-4's extras).
pub(crate) const KNOWN_OPTIONS: &[&str] = &[
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
    "retentionEnabled",
    "maxWaitTimeSeconds",
];

/// The option keys of `o` that are not known options, within CFG-4's bounds.
fn extras_of(o: &Map<String, Value>) -> Result<ExtraOptions, WireError> {
    let extra: ExtraOptions = o
        .iter()
        .filter(|(k, _)| !KNOWN_OPTIONS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if extra.len() > MAX_EXTRA_OPTIONS {
        return Err(WireError::bad(format!(
            "options has {} keys this broker does not act on; at most {MAX_EXTRA_OPTIONS} are kept",
            extra.len()
        )));
    }
    if let Some(k) = extra.keys().find(|k| k.len() > MAX_EXTRA_KEY_BYTES) {
        return Err(WireError::bad(format!(
            "options key {:?} must be at most {MAX_EXTRA_KEY_BYTES} bytes long",
            k.chars().take(40).collect::<String>()
        )));
    }
    if let Some(n) = extra.values().find_map(out_of_range) {
        return Err(WireError::bad(format!(
            "options holds the number {:.40} , which no broker on PostgreSQL can keep: a \
             number may have at most {MAX_INTEGER_DIGITS} digits before the point and \
             {MAX_FRACTION_DIGITS} after it, its exponent applied (CFG-4)",
            n
        )));
    }
    let bytes: usize = extra.values().map(|v| v.to_string().len()).sum();
    if bytes > MAX_EXTRA_VALUE_BYTES {
        return Err(WireError::bad(format!(
            "options keys this broker does not act on hold {bytes} bytes of JSON; at most \
             {MAX_EXTRA_VALUE_BYTES} are kept"
        )));
    }
    Ok(extra)
}

fn flag(o: &Map<String, Value>, key: &str, default: bool) -> Result<bool, WireError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(WireError::bad(format!(
            "options.{key} must be a boolean, got {other}"
        ))),
    }
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
pub(crate) fn parse_configure(body: &Value) -> Result<ConfigureRequest, WireError> {
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
        encryption_enabled: flag(o, "encryptionEnabled", d.encryption_enabled)?,
        retention_enabled: flag(o, "retentionEnabled", d.retention_enabled)?,
        max_wait_time_seconds: uint(o, "maxWaitTimeSeconds", 0, u32max)?
            .map_or(d.max_wait_time_seconds, |v| v as u32),
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
        extra: extras_of(o)?,
    })
}

/// CFG-4: the most digits a kept number may have before its point and after it, once
/// its exponent is applied (PostgreSQL's `numeric`, which stores option values).
const MAX_INTEGER_DIGITS: i64 = 131_072;
/// The most digits after the point a kept number may have (CFG-4).
const MAX_FRACTION_DIGITS: i64 = 16_383;

/// The first number in `v` (as written) that passes CFG-4's bounds.
fn out_of_range(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => (!number_fits(&n.to_string())).then(|| n.to_string()),
        Value::Array(a) => a.iter().find_map(out_of_range),
        Value::Object(o) => o.values().find_map(out_of_range),
        _ => None,
    }
}

/// Whether the JSON number `text` has at most [`MAX_INTEGER_DIGITS`] digits before its
/// point and [`MAX_FRACTION_DIGITS`] after it, its exponent applied.
fn number_fits(text: &str) -> bool {
    let text = text.trim_start_matches('-');
    let (mantissa, exp) = match text.find(['e', 'E']) {
        Some(i) => (&text[..i], text[i + 1..].parse::<i64>().unwrap_or(i64::MAX)),
        None => (text, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let int = int.trim_start_matches('0');
    let frac_digits = frac.len() as i64;
    // Digits before the point, and after it, once the point moves `exp` places.
    let before = if int.is_empty() {
        let lead = frac.len() - frac.trim_start_matches('0').len();
        exp.saturating_sub(lead as i64)
    } else {
        (int.len() as i64).saturating_add(exp)
    };
    let after = frac_digits.saturating_sub(exp);
    before <= MAX_INTEGER_DIGITS && after <= MAX_FRACTION_DIGITS
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cfg_4_numbers_past_what_postgresql_keeps_are_400_and_the_rest_are_kept() {
        let with = |text: &str| {
            let body: Value =
                serde_json::from_str(&format!(r#"{{"queue":"q","options":{{"x":[{text}]}}}}"#))
                    .unwrap();
            parse_configure(&body)
        };
        // The edges, as PostgreSQL 15's jsonb answered them.
        for fits in [
            "1e131071",
            "1e-16383",
            "123456e-16383",
            "-1e1001",
            "0.5",
            "0",
            "1E+2",
        ] {
            assert!(with(fits).is_ok(), "{fits}");
        }
        for past in [
            "1e1000000",
            "1e-20000",
            "-1e131073",
            "1e131072",
            "1e-16384",
            "0e-20000",
            "1.5e-16383",
        ] {
            let e = with(past).unwrap_err();
            assert_eq!(e.status, 400, "{past}");
            assert!(e.message.contains("digits"), "{past}: {}", e.message);
        }
    }

    #[test]
    fn cfg_4_an_empty_option_key_is_kept() {
        let body = json!({"queue": "q", "options": {"": 1}});
        assert_eq!(parse_configure(&body).unwrap().extra[""], json!(1));
    }

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
        for k in KNOWN_OPTIONS {
            assert!(v.get(k).is_some(), "{k}");
        }
        assert_eq!(v.as_object().unwrap().len(), KNOWN_OPTIONS.len());
    }

    #[test]
    fn cfg_4_unknown_keys_are_kept_and_echoed_beside_the_known_options() {
        let body = json!({"queue": "q", "options": {
            "retryLimit": 5, "deadLetterQueue": true, "ttl": {"s": [1, 2]}}});
        let r = parse_configure(&body).unwrap();
        assert_eq!(r.options.retry_limit, 5);
        assert_eq!(r.extra.len(), 2);
        let echoed = EchoedOptions {
            known: r.options,
            extra: r.extra.clone(),
        };
        let v = serde_json::to_value(&echoed).unwrap();
        assert_eq!(v["deadLetterQueue"], json!(true));
        assert_eq!(v["ttl"], json!({"s": [1, 2]}));
        assert_eq!(v["retryLimit"], json!(5));
        let back: EchoedOptions = serde_json::from_value(v).unwrap();
        assert_eq!(back, echoed);
    }

    #[test]
    fn cfg_4_bounds_on_unknown_keys_are_400() {
        let many: Map<String, Value> = (0..=MAX_EXTRA_OPTIONS)
            .map(|i| (format!("k{i}"), json!(i)))
            .collect();
        let long_key = json!({"k".repeat(MAX_EXTRA_KEY_BYTES + 1): 1});
        let big = json!({"blob": "x".repeat(MAX_EXTRA_VALUE_BYTES)});
        for opts in [Value::Object(many), long_key, big] {
            let e = parse_configure(&json!({"queue": "q", "options": opts})).unwrap_err();
            assert_eq!(e.status, 400);
        }
        let e = parse_configure(&json!({"queue": "q", "options": {"retentionEnabled": 1}}));
        assert_eq!(e.unwrap_err().status, 400);
    }

    #[test]
    fn ret_2_retention_ages_follow_the_gate_and_the_smaller_limit() {
        let mut o = QueueOptions {
            retention_seconds: 10,
            completed_retention_seconds: 5,
            ..QueueOptions::default()
        };
        assert_eq!(o.retention_ages_ms(), (None, None));
        o.retention_enabled = true;
        assert_eq!(o.retention_ages_ms(), (Some(10_000), Some(5_000)));
        o.max_wait_time_seconds = 3;
        assert_eq!(o.retention_ages_ms(), (Some(3_000), Some(5_000)));
        o.retention_enabled = false;
        assert_eq!(o.retention_ages_ms(), (Some(3_000), None));
        assert!(o.retains());
    }
}
