//! Authentication as an operator configures it (PROTOCOL.md section 14, AUTH-5): the
//! three algorithms, issuer and audience, the clock-skew leeway, role claims and names,
//! public paths, and the settings refused at start-up. The route levels and the 401/403
//! answers are checked against the model by the conformance suite's `auth` cases; these
//! tests are about what only the server's settings decide. Every refusal here is
//! followed by a look at the queue: nothing was written.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use queen_server::app::spawn;
use queen_server::config::Config;
use queen_server::memory::MemoryBroker;
use serde_json::{json, Value};
use std::sync::Arc;

const SECRET: &str = "test-secret-of-at-least-thirty-two-bytes";

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("a test key")
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A token signed with `alg`'s test key, with `claims` (an `exp` an hour ahead unless
/// given).
fn token(alg: Algorithm, mut claims: Value) -> String {
    if claims.get("exp").is_none() {
        claims["exp"] = json!(now() + 3600);
    }
    let key = match alg {
        Algorithm::HS256 => EncodingKey::from_secret(SECRET.as_bytes()),
        Algorithm::RS256 => {
            EncodingKey::from_rsa_pem(fixture("rsa-private.pem").as_bytes()).unwrap()
        }
        Algorithm::EdDSA => {
            EncodingKey::from_ed_pem(fixture("ed25519-private.pem").as_bytes()).unwrap()
        }
        other => panic!("no test key for {other:?}"),
    };
    jsonwebtoken::encode(&Header::new(alg), &claims, &key).unwrap()
}

fn hs256(claims: Value) -> String {
    token(Algorithm::HS256, claims)
}

/// A memory-engine server with authentication on, `tweak` applied to its settings.
async fn server(tweak: impl FnOnce(&mut Config)) -> queen_server::app::Running {
    let mut c = Config::defaults();
    c.auth.jwt_enabled = true;
    c.auth.jwt_secret = Some(SECRET.into());
    tweak(&mut c);
    let broker = MemoryBroker::new(c.pop_timeout_ms(), c.body_limit);
    spawn(Arc::new(broker), &c, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("the server starts")
}

/// Pushes one message to `queue` with `token` (none: no header): the status.
async fn push(base: &str, queue: &str, token: Option<&str>) -> u16 {
    let mut rb = reqwest::Client::new()
        .post(format!("{base}/api/v1/push"))
        .json(&json!({"items": [{"queue": queue, "payload": 1}]}));
    if let Some(t) = token {
        rb = rb.bearer_auth(t);
    }
    rb.send().await.unwrap().status().as_u16()
}

/// Pops `queue` with `token`: the status and the body.
async fn pop(base: &str, queue: &str, token: &str) -> (u16, Option<Value>) {
    let r = reqwest::Client::new()
        .get(format!("{base}/api/v1/pop/queue/{queue}?autoAck=true"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.ok())
}

fn rw(extra: Value) -> Value {
    let mut c = json!({"sub": "svc", "role": "read-write"});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

/// A refused push wrote nothing: a valid pop of the queue finds it empty.
async fn nothing_written(base: &str, queue: &str, admin: &str) {
    assert_eq!(
        pop(base, queue, admin).await.0,
        204,
        "a refused push was written"
    );
}

#[tokio::test]
async fn auth_5_each_algorithm_verifies_with_its_key_and_refuses_the_others() {
    let rsa = server(|c| {
        c.auth.jwt_algorithm = "RS256".into();
        c.auth.jwt_public_key = Some(fixture("rsa-public.pem"));
    })
    .await;
    let path = format!(
        "{}/tests/fixtures/ed25519-public.pem",
        env!("CARGO_MANIFEST_DIR")
    );
    let ed = server(|c| {
        c.auth.jwt_algorithm = "EdDSA".into();
        c.auth.jwt_public_key = Some(path); // a file path works as well as PEM text
    })
    .await;
    let hs = server(|_| {}).await;
    for (srv, good) in [
        (&rsa, Algorithm::RS256),
        (&ed, Algorithm::EdDSA),
        (&hs, Algorithm::HS256),
    ] {
        let base = srv.url();
        let admin = token(good, json!({"role": "admin"}));
        for alg in [Algorithm::RS256, Algorithm::EdDSA, Algorithm::HS256] {
            let want = if alg == good { 201 } else { 401 };
            let t = token(alg, rw(json!({})));
            assert_eq!(
                push(&base, "q", Some(&t)).await,
                want,
                "{alg:?} token on a {good:?} broker"
            );
        }
        // The pushes that were let in are the only ones there.
        let (status, body) = pop(&base, "q", &admin).await;
        assert_eq!(status, 200);
        assert_eq!(body.unwrap()["messages"].as_array().unwrap().len(), 1);
    }
}

#[tokio::test]
async fn auth_5_expiry_honours_the_clock_skew_leeway() {
    let srv = server(|c| c.auth.jwt_clock_skew = 30).await;
    let base = srv.url();
    let admin = hs256(json!({"role": "admin"}));
    let within = hs256(rw(json!({"exp": now() - 10})));
    let past = hs256(rw(json!({"exp": now() - 120})));
    let early = hs256(rw(json!({"nbf": now() + 600})));
    let no_exp = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &rw(json!({})),
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap();
    assert_eq!(
        push(&base, "ok", Some(&within)).await,
        201,
        "expired within the leeway"
    );
    for (t, what) in [
        (&past, "expired"),
        (&early, "not yet valid"),
        (&no_exp, "without exp"),
    ] {
        assert_eq!(push(&base, "bad", Some(t)).await, 401, "{what}");
    }
    nothing_written(&base, "bad", &admin).await;
}

#[tokio::test]
async fn auth_5_issuer_and_audience_are_checked_when_set() {
    let srv = server(|c| {
        c.auth.jwt_issuer = Some("https://issuer.example".into());
        c.auth.jwt_audience = Some("queen".into());
    })
    .await;
    let base = srv.url();
    let ok = json!({"iss": "https://issuer.example", "aud": "queen"});
    let admin = hs256(json!({"role": "admin", "iss": "https://issuer.example", "aud": "queen"}));
    assert_eq!(push(&base, "ok", Some(&hs256(rw(ok)))).await, 201);
    for claims in [
        json!({"iss": "https://other.example", "aud": "queen"}),
        json!({"iss": "https://issuer.example", "aud": "other"}),
        json!({"aud": "queen"}),
        json!({"iss": "https://issuer.example"}),
    ] {
        assert_eq!(
            push(&base, "bad", Some(&hs256(rw(claims.clone())))).await,
            401,
            "{claims}"
        );
    }
    nothing_written(&base, "bad", &admin).await;
}

#[tokio::test]
async fn auth_5_role_claims_and_names_are_configurable() {
    let srv = server(|c| {
        c.auth.jwt_roles_claim = "scope".into();
        c.auth.jwt_roles_array_claim = "groups".into();
        c.auth.jwt_role_read_write = "writer".into();
        c.auth.jwt_role_admin = "boss".into();
    })
    .await;
    let base = srv.url();
    let admin = hs256(json!({"groups": ["x", "boss"]}));
    assert_eq!(
        push(&base, "q", Some(&hs256(json!({"scope": "writer"})))).await,
        201
    );
    assert_eq!(
        push(&base, "q", Some(&hs256(json!({"groups": ["writer"]})))).await,
        201
    );
    // The default names mean nothing here: a valid token, so read-only, so 403.
    assert_eq!(
        push(&base, "q", Some(&hs256(json!({"role": "read-write"})))).await,
        403
    );
    let (status, body) = pop(&base, "q", &admin).await;
    assert_eq!(status, 200);
    assert_eq!(body.unwrap()["messages"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn auth_4_refusals_are_counted_and_public_paths_are_configurable() {
    let srv = server(|c| c.auth.jwt_skip_paths = vec!["/health".into()]).await;
    let base = srv.url();
    let admin = hs256(json!({"role": "admin"}));
    let c = reqwest::Client::new();
    assert_eq!(
        c.get(format!("{base}/health"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // Metrics are no longer public: they need a token.
    let r = c
        .get(format!("{base}/metrics/prometheus"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body, json!({"error": "Authentication required"}));
    let ro = hs256(json!({"role": "read-only"}));
    assert_eq!(push(&base, "q", Some(&ro)).await, 403);
    let text = c
        .get(format!("{base}/metrics/prometheus"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("queen_requests_unauthenticated_total 1"),
        "{text}"
    );
    assert!(text.contains("queen_requests_forbidden_total 1"), "{text}");
}

#[tokio::test]
async fn auth_2_producer_sub_round_trips_and_is_null_without_a_sub() {
    let srv = server(|_| {}).await;
    let base = srv.url();
    let admin = hs256(json!({"role": "admin"}));
    push(&base, "q", Some(&hs256(rw(json!({}))))).await;
    push(&base, "q", Some(&hs256(json!({"role": "read-write"})))).await;
    let (_, body) = pop(&base, "q", &admin).await;
    let subs: Vec<Value> = body.unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["producerSub"].clone())
        .collect();
    assert_eq!(subs, [json!("svc"), Value::Null]);
}

#[tokio::test]
async fn auth_5_settings_that_cannot_work_stop_the_start() {
    type Tweak = fn(&mut Config);
    let cases: [(&str, Tweak); 7] = [
        ("no secret", |c| c.auth.jwt_secret = None),
        ("empty secret", |c| c.auth.jwt_secret = Some(String::new())),
        ("a 1-byte secret", |c| c.auth.jwt_secret = Some("k".into())),
        ("a 31-byte secret", |c| {
            c.auth.jwt_secret = Some("k".repeat(31))
        }),
        ("unknown algorithm", |c| {
            c.auth.jwt_algorithm = "HS512".into()
        }),
        ("RS256 without a key", |c| {
            c.auth.jwt_algorithm = "RS256".into()
        }),
        ("RS256 with a bad key", |c| {
            c.auth.jwt_algorithm = "RS256".into();
            c.auth.jwt_public_key =
                Some("-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----".into());
        }),
    ];
    for (what, tweak) in cases {
        let mut c = Config::defaults();
        c.auth.jwt_enabled = true;
        c.auth.jwt_secret = Some(SECRET.into());
        tweak(&mut c);
        let err = queen_server::auth::Authenticator::from_config(&c.auth)
            .err()
            .unwrap_or_else(|| panic!("{what}: the settings were accepted"));
        assert!(err.contains("JWT_"), "{what}: {err}");
        let broker = MemoryBroker::new(c.pop_timeout_ms(), c.body_limit);
        // The server itself refuses to serve with them, rather than serve open.
        let running = spawn(Arc::new(broker), &c, "127.0.0.1:0".parse().unwrap()).await;
        let served = match running {
            Ok(r) => reqwest::get(format!("{}/api/v1/dlq", r.url()))
                .await
                .is_ok(),
            Err(_) => false,
        };
        assert!(!served, "{what}: the server answered");
    }
}
