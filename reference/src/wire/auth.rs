//! Who may call which route (PROTOCOL.md section 14): the levels, what a verified token
//! stands for, and the one admission decision that the server and the checker both make.
//!
//! Verifying a token is the broker's business (it holds the key); the protocol only
//! cares what a valid token *means*, its level and its `sub`. So the server verifies a
//! token into a [`Principal`] and asks [`admit`]; the checker, told by the suite which
//! principal each of its tokens stands for, asks the same [`admit`] to predict the 401 or
//! 403, and [`parse_as`] puts the `sub` on the pushed messages (AUTH-2) for both.

use super::{parse_request, HttpRequest, Rejection, Request, TxnOp, WireError};

/// How much a route asks of its caller (AUTH-3), weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    /// No token needed.
    Public,
    /// Any valid token.
    ReadOnly,
    /// Role `read-write` or `admin`.
    ReadWrite,
    /// Role `admin`.
    Admin,
}

impl Access {
    /// The level's name as AUTH-3's table spells it (`public`, `read-only`, `read-write`, `admin`).
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Public => "public",
            Access::ReadOnly => "read-only",
            Access::ReadWrite => "read-write",
            Access::Admin => "admin",
        }
    }
}

/// The error of a missing or invalid token (AUTH-4, 401).
const UNAUTHENTICATED: &str = "Authentication required";
/// The error of a valid token below the route's level (AUTH-4, 403).
const FORBIDDEN: &str = "Insufficient permissions";

/// The paths a broker serves without a token unless told otherwise (AUTH-5).
pub const DEFAULT_PUBLIC_PATHS: [&str; 3] = ["/health", "/metrics", "/metrics/prometheus"];

/// What a valid token stands for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal {
    /// The highest level its roles grant (any valid token grants read-only).
    pub access: Access,
    /// Its `sub` claim: what the messages it pushes carry as `producerSub` (AUTH-2).
    pub sub: Option<String>,
}

/// The names of the three roles in a token's role claims (AUTH-5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleNames {
    /// The role granting admin (`JWT_ROLE_ADMIN`, default `admin`).
    pub admin: String,
    /// The role granting read-write (`JWT_ROLE_READ_WRITE`, default `read-write`).
    pub read_write: String,
    /// The role granting read-only (`JWT_ROLE_READ_ONLY`, default `read-only`).
    pub read_only: String,
}

impl Default for RoleNames {
    fn default() -> Self {
        RoleNames {
            admin: "admin".into(),
            read_write: "read-write".into(),
            read_only: "read-only".into(),
        }
    }
}

impl RoleNames {
    /// The level a token with these roles reaches: the highest any of them grants, and
    /// read-only for a token with none of them (it is valid all the same).
    pub fn access<'a>(&self, roles: impl IntoIterator<Item = &'a str>) -> Access {
        roles
            .into_iter()
            .map(|r| match r {
                r if r == self.admin => Access::Admin,
                r if r == self.read_write => Access::ReadWrite,
                _ => Access::ReadOnly,
            })
            .max()
            .unwrap_or(Access::ReadOnly)
    }
}

/// How a request's caller stands once its token, if any, has been checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller<'a> {
    /// Authentication is off: every route is open and nothing is stamped.
    Open,
    /// Authentication is on and the request has no valid token.
    Anonymous,
    /// Authentication is on and the token is valid.
    Token(&'a Principal),
}

/// What a checker knows of a broker's authentication: the principal each token the
/// suite sends stands for, and the paths the broker serves without one. A token not in
/// the book is one the suite made invalid on purpose.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenBook {
    /// The principal of every valid token the suite sends, by token.
    pub principals: std::collections::HashMap<String, Principal>,
    /// The paths the broker serves without a token (AUTH-3).
    pub public: Vec<String>,
}

impl TokenBook {
    /// How a request carrying `bearer` stands with a broker that has authentication on.
    pub(crate) fn caller(&self, bearer: Option<&str>) -> Caller<'_> {
        match bearer.and_then(|t| self.principals.get(t)) {
            Some(p) => Caller::Token(p),
            None => Caller::Anonymous,
        }
    }
}

/// AUTH-3: the level `method` on `path` needs, where `public` lists the paths served
/// without a token.
pub fn required<S: AsRef<str>>(method: &str, path: &str, public: &[S]) -> Access {
    let trimmed = match path.trim_end_matches('/') {
        "" => "/",
        p => p,
    };
    if public
        .iter()
        .any(|p| p.as_ref().trim_end_matches('/') == trimmed)
    {
        return Access::Public;
    }
    let segs: Vec<&str> = trimmed.split('/').skip(1).collect();
    if let Some((route, _)) = super::find(method, &segs) {
        return route.access;
    }
    // A path of no route answers 404; what it takes to learn that follows its method.
    match method {
        "DELETE" => Access::Admin,
        "GET" | "HEAD" => Access::ReadOnly,
        _ => Access::ReadWrite,
    }
}

/// AUTH-1, AUTH-4: whether `caller` may call a route that needs `need`; else the 401 or
/// 403 to answer, before the body is read.
pub fn admit(need: Access, caller: Caller) -> Result<(), WireError> {
    match caller {
        Caller::Open => Ok(()),
        _ if need == Access::Public => Ok(()),
        Caller::Anonymous => Err(WireError {
            rule: None,
            status: 401,
            message: UNAUTHENTICATED.into(),
        }),
        Caller::Token(p) if p.access < need => Err(WireError {
            rule: None,
            status: 403,
            message: FORBIDDEN.into(),
        }),
        Caller::Token(_) => Ok(()),
    }
}

impl Request {
    /// AUTH-2: every message this request pushes carries `sub` as its `producerSub`.
    pub fn stamp_producer(&mut self, sub: Option<&str>) {
        let items = match self {
            Request::Push(p) => p.items.iter_mut().collect::<Vec<_>>(),
            Request::Transaction(t) => t
                .operations
                .iter_mut()
                .flat_map(|op| match op {
                    TxnOp::Push(items) => items.iter_mut().collect(),
                    TxnOp::Ack(_) => Vec::new(),
                })
                .collect(),
            _ => return,
        };
        for item in items {
            item.producer_sub = sub.map(str::to_string);
        }
    }
}

/// Admits the caller (AUTH-4 comes before any 400 or 413), parses the request, and
/// stamps the caller's `sub` on what it pushes: a request as the broker sees it.
pub(crate) fn parse_as<S: AsRef<str>>(
    req: &HttpRequest,
    caller: Caller,
    public: &[S],
    default_timeout_ms: u64,
    body_limit: usize,
) -> Result<Request, Rejection> {
    admit(required(&req.method, &req.path, public), caller)?;
    let mut parsed = parse_request(req, default_timeout_ms, body_limit)?;
    if let Caller::Token(p) = caller {
        parsed.stamp_producer(p.sub.as_deref());
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PUBLIC: [&str; 3] = DEFAULT_PUBLIC_PATHS;

    #[test]
    fn auth_3_every_route_family_has_its_level() {
        let cases = [
            ("GET", "/health", Access::Public),
            ("GET", "/health/", Access::Public),
            ("GET", "/metrics/prometheus", Access::Public),
            ("GET", "/api/v1/dlq", Access::ReadOnly),
            ("GET", "/openapi.json", Access::ReadOnly),
            ("GET", "/api/v1/resources/queues", Access::ReadOnly),
            ("GET", "/api/v1/pop", Access::ReadWrite),
            ("GET", "/api/v1/pop/queue/q", Access::ReadWrite),
            ("GET", "/api/v1/pop/queue/q/partition/p", Access::ReadWrite),
            ("POST", "/api/v1/push", Access::ReadWrite),
            ("POST", "/api/v1/ack", Access::ReadWrite),
            ("POST", "/api/v1/ack/batch", Access::ReadWrite),
            ("POST", "/api/v1/lease/x/extend", Access::ReadWrite),
            ("POST", "/api/v1/transaction", Access::ReadWrite),
            ("POST", "/api/v1/configure", Access::ReadWrite),
            ("GET", "/api/v1/system/maintenance", Access::Admin),
            ("POST", "/api/v1/system/maintenance", Access::Admin),
            ("GET", "/api/v1/system/maintenance/pop", Access::Admin),
            ("POST", "/api/v1/system/maintenance/pop", Access::Admin),
            ("DELETE", "/api/v1/resources/queues/q", Access::Admin),
            ("DELETE", "/anything", Access::Admin),
            ("PUT", "/api/v1/push", Access::ReadWrite),
            ("GET", "/nope", Access::ReadOnly),
            ("GET", "/api/v1/popular", Access::ReadOnly),
        ];
        for (m, p, want) in cases {
            assert_eq!(required(m, p, &PUBLIC), want, "{m} {p}");
        }
        let none: [&str; 0] = [];
        assert_eq!(required("GET", "/health", &none), Access::ReadOnly);
    }

    #[test]
    fn auth_4_missing_token_is_401_low_level_is_403() {
        let ro = Principal {
            access: Access::ReadOnly,
            sub: None,
        };
        let err = admit(Access::ReadWrite, Caller::Anonymous).unwrap_err();
        assert_eq!((err.status, err.message.as_str()), (401, UNAUTHENTICATED));
        let err = admit(Access::ReadWrite, Caller::Token(&ro)).unwrap_err();
        assert_eq!((err.status, err.message.as_str()), (403, FORBIDDEN));
        assert!(admit(Access::ReadOnly, Caller::Token(&ro)).is_ok());
        assert!(admit(Access::Public, Caller::Anonymous).is_ok());
        assert!(admit(Access::Admin, Caller::Open).is_ok());
    }

    #[test]
    fn auth_5_roles_grant_their_highest_level() {
        let names = RoleNames::default();
        assert_eq!(names.access(["read-only"]), Access::ReadOnly);
        assert_eq!(names.access(["read-write"]), Access::ReadWrite);
        assert_eq!(names.access(["read-only", "admin"]), Access::Admin);
        assert_eq!(names.access(["whatever"]), Access::ReadOnly);
        assert_eq!(names.access([]), Access::ReadOnly);
    }

    #[test]
    fn auth_2_the_sub_is_stamped_on_every_pushed_item_and_a_body_cannot_set_it() {
        let p = Principal {
            access: Access::ReadWrite,
            sub: Some("svc-a".into()),
        };
        let push = HttpRequest::post(
            "/api/v1/push",
            &json!({"items": [{"queue": "q", "producerSub": "forged"}, {"queue": "q"}]}),
        );
        let Request::Push(r) = parse_as(&push, Caller::Token(&p), &PUBLIC, 1, 1 << 20).unwrap()
        else {
            panic!("a push")
        };
        assert!(r
            .items
            .iter()
            .all(|i| i.producer_sub.as_deref() == Some("svc-a")));
        let Request::Push(r) = parse_as(&push, Caller::Open, &PUBLIC, 1, 1 << 20).unwrap() else {
            panic!("a push")
        };
        assert!(r.items.iter().all(|i| i.producer_sub.is_none()));
        let txn = HttpRequest::post(
            "/api/v1/transaction",
            &json!({"operations": [{"type": "push", "items": [{"queue": "q"}]}]}),
        );
        let Request::Transaction(t) =
            parse_as(&txn, Caller::Token(&p), &PUBLIC, 1, 1 << 20).unwrap()
        else {
            panic!("a transaction")
        };
        let TxnOp::Push(items) = &t.operations[0] else {
            panic!("a push operation")
        };
        assert_eq!(items[0].producer_sub.as_deref(), Some("svc-a"));
    }

    #[test]
    fn auth_4_comes_before_bad_input_and_the_body_limit() {
        let bad = HttpRequest::post_raw("/api/v1/push", "not json");
        match parse_as(&bad, Caller::Anonymous, &PUBLIC, 1, 2) {
            Err(Rejection::Bad(e)) => assert_eq!(e.status, 401),
            other => panic!("{other:?}"),
        }
        match parse_as(&bad, Caller::Open, &PUBLIC, 1, 1 << 20) {
            Err(Rejection::Bad(e)) => assert_eq!(e.status, 400),
            other => panic!("{other:?}"),
        }
    }
}
