//! HTTP requests and answers as data, and the routing table of the protocol.
//!
//! [`HttpRequest`] is a request as it travels (method, path, query, body bytes);
//! [`parse_request`] turns it into a validated [`Request`] or the rejection the
//! protocol prescribes. The in-memory engine and the conformance checker both start
//! from here, so a malformed request is judged the same way everywhere.

use super::*;

/// A request as sent: the path is percent-encoded, the query is decoded pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequest {
    /// The HTTP method, upper case (`GET`, `POST`, `DELETE`).
    pub method: String,
    /// The path, percent-encoded as sent (WIRE-2).
    pub path: String,
    /// The query string's pairs, already percent-decoded (WIRE-1).
    pub query: Vec<(String, String)>,
    /// The body's bytes as sent; empty for none.
    pub body: Vec<u8>,
    /// The token sent as `Authorization: Bearer` (section 14), if any.
    pub bearer: Option<String>,
}

impl HttpRequest {
    /// A `GET` of `path` with `query`.
    pub fn get(path: impl Into<String>, query: &[(&str, &str)]) -> HttpRequest {
        HttpRequest {
            method: "GET".into(),
            path: path.into(),
            query: query
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: vec![],
            bearer: None,
        }
    }

    /// A `POST` of `path` with `body` as its JSON.
    pub fn post(path: impl Into<String>, body: &Value) -> HttpRequest {
        HttpRequest {
            method: "POST".into(),
            path: path.into(),
            query: vec![],
            body: serde_json::to_vec(body).expect("a Value serializes"),
            bearer: None,
        }
    }

    /// A `POST` of `path` with `body` sent as is, JSON or not.
    pub fn post_raw(path: impl Into<String>, body: impl Into<Vec<u8>>) -> HttpRequest {
        HttpRequest {
            method: "POST".into(),
            path: path.into(),
            query: vec![],
            body: body.into(),
            bearer: None,
        }
    }

    /// The same request sent without any token, on purpose (an empty bearer: a suite
    /// that sends a token by default leaves this one alone).
    pub fn anonymous(mut self) -> HttpRequest {
        self.bearer = Some(String::new());
        self
    }

    /// The same request carrying `token` as its bearer token.
    pub fn with_bearer(mut self, token: impl Into<String>) -> HttpRequest {
        self.bearer = Some(token.into());
        self
    }

    /// A `DELETE` of `path`.
    pub fn delete(path: impl Into<String>) -> HttpRequest {
        HttpRequest {
            method: "DELETE".into(),
            path: path.into(),
            query: vec![],
            body: vec![],
            bearer: None,
        }
    }
}

/// An answer as received: status and body (`None` for an empty body).
#[derive(Clone, Debug, PartialEq)]
pub struct HttpResponse {
    /// The HTTP status code.
    pub status: u16,
    /// The body as JSON; `None` for an empty body.
    pub body: Option<Value>,
}

/// Every request of the protocol, validated, with ids still as strings.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// `POST /api/v1/push` (section 2).
    Push(PushRequest),
    /// One of the three pop routes (section 3).
    Pop {
        /// Which pop route, with its path's names.
        route: PopRoute,
        /// The pop's query, defaults applied.
        query: PopQuery,
    },
    /// `POST /api/v1/ack` (section 4).
    Ack(AckItem),
    /// `POST /api/v1/ack/batch`, each item carrying the batch's `consumerGroup` (section 4).
    AckBatch(Vec<AckItem>),
    /// `POST /api/v1/lease/{leaseId}/extend` (section 5).
    Extend(ExtendRequest),
    /// `POST /api/v1/transaction` (section 7).
    Transaction(TxnRequest),
    /// `POST /api/v1/configure` (section 8).
    Configure(ConfigureRequest),
    /// `DELETE /api/v1/resources/queues/{queue}`, naming the queue (DEL-1).
    DeleteQueue(String),
    /// `GET /api/v1/dlq` (DLQ-2).
    Dlq(DlqQuery),
    /// `POST /api/v1/system/maintenance` with `enabled` (MAINT-1).
    SetPushMaintenance(bool),
    /// `GET /api/v1/system/maintenance` (MAINT-1).
    GetPushMaintenance,
    /// `POST /api/v1/system/maintenance/pop` with `enabled` (MAINT-2).
    SetPopMaintenance(bool),
    /// `GET /api/v1/system/maintenance/pop` (MAINT-2).
    GetPopMaintenance,
    /// `GET /health` (HEALTH-1).
    Health,
    /// Section 17: the management and observability routes.
    Manage(ManageRequest),
}

/// Why a request is not a [`Request`].
#[derive(Clone, Debug, PartialEq)]
pub enum Rejection {
    /// 400 or 413 with `{"error": ...}`.
    Bad(WireError),
    /// The exact 400 of POP-10.
    DiscoveryScope,
    /// No such route: 404 (not part of the protocol's checks).
    NotFound,
}

impl From<WireError> for Rejection {
    fn from(e: WireError) -> Self {
        Rejection::Bad(e)
    }
}

/// Decodes `%XX` escapes of one path segment; invalid UTF-8 is a 400.
pub fn decode_segment(s: &str) -> Result<String, WireError> {
    let s = String::from_utf8(percent_decode(s.as_bytes()))
        .map_err(|_| WireError::bad("path segment is not valid UTF-8"))?;
    if s.contains('\0') {
        return Err(WireError::bad(NUL_ERROR));
    }
    Ok(s)
}

/// Decodes a query string (`a=1&b=x+y`, form encoding: `+` is a space) into its pairs.
/// Escapes that do not decode to UTF-8 are a 400 (WIRE-1), as they are in a path: a
/// name must never become one the client did not send.
pub fn decode_query(q: &str) -> Result<Vec<(String, String)>, WireError> {
    let text = |part: &str| {
        let bytes = percent_decode(part.replace('+', " ").as_bytes());
        String::from_utf8(bytes).map_err(|_| {
            WireError::bad(format!(
                "query parameter {:?} is not valid UTF-8 once decoded",
                part.chars().take(40).collect::<String>()
            ))
            .under(crate::rules::WIRE_1)
        })
    };
    q.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((text(k)?, text(v)?))
        })
        .collect()
}

/// `%XX` escapes decoded to their bytes; a `%` that starts no escape stays as it is.
fn percent_decode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// Routes and validates a request. `body_limit` bytes is the most a body may hold (413).
pub fn parse_request(
    req: &HttpRequest,
    default_timeout_ms: u64,
    body_limit: usize,
) -> Result<Request, Rejection> {
    if req.body.len() > body_limit {
        return Err(Rejection::Bad(WireError {
            rule: None,
            status: 413,
            message: format!(
                "body of {} bytes exceeds the limit of {body_limit} bytes",
                req.body.len()
            ),
        }));
    }
    if req
        .query
        .iter()
        .any(|(k, v)| k.contains('\0') || v.contains('\0'))
    {
        return Err(Rejection::Bad(WireError::bad(NUL_ERROR)));
    }
    let raw: Vec<&str> = req.path.trim_end_matches('/').split('/').skip(1).collect();
    let Some((route, vars)) = find(&req.method, &raw) else {
        return Err(Rejection::NotFound);
    };
    let seg = |i: usize| decode_segment(vars[i]);
    let named = |kind: &str, i: usize| -> Result<String, WireError> {
        let s = seg(i)?;
        check_name(kind, &s)?;
        Ok(s)
    };
    let body = || parse_json(&req.body);
    let pop = |route: PopRoute| -> Result<Request, Rejection> {
        Ok(Request::Pop {
            route,
            query: parse_pop_query(&req.query, default_timeout_ms)?,
        })
    };
    use RouteId as R;
    let r = match route.id {
        R::Push => Request::Push(parse_push_bytes(&req.body)?),
        R::PopDiscovery => {
            pop(discovery_scope(&req.query).map_err(|_| Rejection::DiscoveryScope)?)?
        }
        R::PopQueue => pop(PopRoute::Queue(named("queue", 0)?))?,
        R::PopPartition => {
            let (q, p) = (named("queue", 0)?, named("partition", 1)?);
            pop(PopRoute::Partition(q, p))?
        }
        R::Ack => Request::Ack(parse_ack(&body()?)?),
        R::AckBatch => Request::AckBatch(parse_ack_batch(&body()?)?),
        R::Extend => Request::Extend(parse_extend(&seg(0)?, &req.body)?),
        R::Transaction => Request::Transaction(parse_transaction(&body()?)?),
        R::Configure => Request::Configure(parse_configure(&body()?)?),
        R::DeleteQueue => Request::DeleteQueue(named("queue", 0)?),
        R::Dlq => Request::Dlq(parse_dlq_query(&req.query)?),
        R::GetPushMaintenance => Request::GetPushMaintenance,
        R::SetPushMaintenance => Request::SetPushMaintenance(parse_maintenance(&body()?)?),
        R::GetPopMaintenance => Request::GetPopMaintenance,
        R::SetPopMaintenance => Request::SetPopMaintenance(parse_maintenance(&body()?)?),
        R::Health => Request::Health,
        id => match parse_manage(id, &vars, &req.query, &req.body) {
            Some(r) => Request::Manage(r?),
            None => return Err(Rejection::NotFound),
        },
    };
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_1_query_escapes_that_are_not_utf8_are_400() {
        let e = decode_query("consumerGroup=%ff&batch=1").unwrap_err();
        assert_eq!((e.status, e.rule), (400, Some(crate::rules::WIRE_1)));
        assert_eq!(
            decode_query("a=x+y%20z&b=%C3%A9&&c&d=%zz").unwrap(),
            [("a", "x y z"), ("b", "\u{e9}"), ("c", ""), ("d", "%zz")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }

    #[test]
    fn every_request_has_a_short_name() {
        use serde_json::json;
        const L: &str = "01a3185c-5000-7000-8000-000000000001";
        let ack = json!({"transactionId": "t", "partitionId": L});
        let cases = [
            (
                HttpRequest::post("/api/v1/push", &json!({"items": []})),
                "push",
            ),
            (HttpRequest::get("/api/v1/pop/queue/q", &[]), "pop"),
            (HttpRequest::post("/api/v1/ack", &ack), "ack"),
            (
                HttpRequest::post("/api/v1/ack/batch", &json!({"acknowledgments": [ack]})),
                "ack",
            ),
            (
                HttpRequest::post(format!("/api/v1/lease/{L}/extend"), &json!({})),
                "extend",
            ),
            (
                HttpRequest::post(
                    "/api/v1/transaction",
                    &json!({"operations": [{"type": "ack", "transactionId": "t", "partitionId": L}]}),
                ),
                "txn",
            ),
            (
                HttpRequest::post("/api/v1/configure", &json!({"queue": "q"})),
                "configure",
            ),
            (HttpRequest::delete("/api/v1/resources/queues/q"), "delete"),
            (HttpRequest::get("/api/v1/dlq", &[]), "dlq"),
            (
                HttpRequest::get("/api/v1/system/maintenance", &[]),
                "maintenance",
            ),
            (
                HttpRequest::post("/api/v1/system/maintenance", &json!({"enabled": true})),
                "maintenance",
            ),
            (
                HttpRequest::get("/api/v1/system/maintenance/pop", &[]),
                "pop-maintenance",
            ),
            (
                HttpRequest::post("/api/v1/system/maintenance/pop", &json!({"enabled": true})),
                "pop-maintenance",
            ),
            (HttpRequest::get("/health", &[]), "health"),
        ];
        for (req, name) in cases {
            let parsed = parse_request(&req, 0, usize::MAX);
            assert_eq!(
                parsed.map(|r| r.name()),
                Ok(name),
                "{} {}",
                req.method,
                req.path
            );
        }
    }

    #[test]
    fn a_body_at_the_limit_is_read_and_one_byte_more_is_413() {
        let req = HttpRequest::post("/api/v1/push", &serde_json::json!({"items": []}));
        let n = req.body.len();
        assert!(!matches!(
            parse_request(&req, 0, n),
            Err(Rejection::Bad(WireError { status: 413, .. }))
        ));
        assert!(matches!(
            parse_request(&req, 0, n - 1),
            Err(Rejection::Bad(WireError { status: 413, .. }))
        ));
    }

    #[test]
    fn escapes_decode_and_a_cut_escape_stays_as_written() {
        assert_eq!(decode_segment("a%20b%41").unwrap(), "a bA");
        assert_eq!(decode_segment("a%2").unwrap(), "a%2");
        assert_eq!(decode_segment("a%").unwrap(), "a%");
        assert_eq!(decode_segment("%zz").unwrap(), "%zz");
        assert!(decode_segment("%ff").is_err(), "not UTF-8");
    }
    use serde_json::json;

    #[test]
    fn routes_parse() {
        let r = parse_request(
            &HttpRequest::get("/api/v1/pop/queue/a%20b/partition/p%2F1", &[("batch", "5")]),
            1,
            1 << 20,
        )
        .unwrap();
        match r {
            Request::Pop { route, query } => {
                assert_eq!(route, PopRoute::Partition("a b".into(), "p/1".into()));
                assert_eq!(query.batch, 5);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse_request(&HttpRequest::get("/health", &[]), 1, 10).unwrap(),
            Request::Health
        );
        assert_eq!(
            parse_request(&HttpRequest::get("/nope", &[]), 1, 10),
            Err(Rejection::NotFound)
        );
    }

    #[test]
    fn nul_in_path_or_query_is_400() {
        for req in [
            HttpRequest::get("/api/v1/pop/queue/a%00b", &[]),
            HttpRequest::get("/api/v1/pop/queue/q", &[("consumerGroup", "g\0")]),
        ] {
            match parse_request(&req, 1, 1 << 20) {
                Err(Rejection::Bad(e)) => assert_eq!(e.message, NUL_ERROR),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn push_8_oversized_body_is_413() {
        let big = HttpRequest::post(
            "/api/v1/push",
            &json!({"items": [{"queue": "q", "payload": "x".repeat(100)}]}),
        );
        match parse_request(&big, 1, 50) {
            Err(Rejection::Bad(e)) => assert_eq!(e.status, 413),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pop_10_discovery_without_scope_is_the_exact_rejection() {
        let r = parse_request(
            &HttpRequest::get("/api/v1/pop", &[("namespace", "")]),
            1,
            10,
        );
        assert_eq!(r, Err(Rejection::DiscoveryScope));
    }

    #[test]
    fn non_json_bodies_are_400() {
        for path in [
            "/api/v1/push",
            "/api/v1/ack",
            "/api/v1/ack/batch",
            "/api/v1/transaction",
            "/api/v1/configure",
            "/api/v1/system/maintenance",
        ] {
            match parse_request(&HttpRequest::post_raw(path, "{not json"), 1, 1 << 20) {
                Err(Rejection::Bad(e)) => assert_eq!(e.status, 400, "{path}"),
                other => panic!("{path}: {other:?}"),
            }
        }
    }
}
