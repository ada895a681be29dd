//! The OpenAPI document of the protocol (`spec/openapi.json`, served at `/openapi.json`)
//! is the one the wire types generate, our broker serves exactly it, and every wire
//! snapshot in `snapshots/` fits it: each answer's body validates against the schema the
//! document gives for its route and status, and each accepted request's body against
//! the route's request schema. A new answer shape or route therefore cannot reach the
//! snapshots without the document describing it.

use queen_tests::memory_server;
use serde_json::{json, Value};
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn document() -> Value {
    queen_reference::wire::openapi::document(queen_reference::SPEC_VERSION)
}

/// `spec/openapi.json` is what the wire types generate; `QUEEN_UPDATE_SCHEMA=1`
/// rewrites it.
#[test]
fn the_checked_in_document_is_the_one_the_wire_types_generate() {
    let path = root().join("spec/openapi.json");
    let now = queen_reference::wire::openapi::text(queen_reference::SPEC_VERSION);
    if std::env::var("QUEEN_UPDATE_SCHEMA").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &now).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == now,
        "spec/openapi.json is out of date: run `QUEEN_UPDATE_SCHEMA=1 cargo test --test openapi`"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_broker_serves_the_document() {
    let server = memory_server().await;
    let r = reqwest::get(format!("{}/openapi.json", server.url()))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let served: Value = r.json().await.unwrap();
    assert_eq!(served, document());
    assert_eq!(served["info"]["version"], queen_reference::SPEC_VERSION);
}

/// The operation of `method` on the document path template matching `path`.
fn operation<'a>(doc: &'a Value, method: &str, path: &str) -> Option<&'a Value> {
    let segs: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    doc["paths"]
        .as_object()?
        .iter()
        .find_map(|(template, ops)| {
            let t: Vec<&str> = template.split('/').collect();
            let fits = t.len() == segs.len()
                && t.iter()
                    .zip(&segs)
                    .all(|(a, b)| a.starts_with('{') || a == b);
            fits.then(|| ops.get(method.to_ascii_lowercase())).flatten()
        })
}

/// What `schema` (with the document's components in reach) finds wrong with `value`.
fn errors(doc: &Value, schema: &Value, value: &Value) -> Vec<String> {
    let wrapped = json!({"components": doc["components"], "allOf": [schema]});
    let validator = jsonschema::validator_for(&wrapped).expect("the schema compiles");
    validator
        .iter_errors(value)
        .map(|e| format!("{e} (at {})", e.instance_path()))
        .collect()
}

#[test]
fn every_wire_snapshot_fits_the_document() {
    let doc = document();
    let mut checked = 0;
    let mut files: Vec<_> = std::fs::read_dir(root().join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "snap"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let json_text = text.splitn(3, "---\n").nth(2).expect("an insta snapshot");
        let mut shot: Value = serde_json::from_str(json_text).unwrap();
        unredact_seconds(&mut shot);
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let (method, path) = (
            shot["request"]["method"].as_str().unwrap(),
            shot["request"]["path"].as_str().unwrap(),
        );
        let status = shot["status"].as_u64().unwrap();
        let Some(op) = operation(&doc, method, path) else {
            assert_eq!(
                status, 404,
                "{name}: {method} {path} is not in the document"
            );
            continue;
        };
        let response = &op["responses"][status.to_string()];
        assert!(
            response.is_object(),
            "{name}: status {status} of {method} {path} is not documented"
        );
        match &response["content"]["application/json"]["schema"] {
            Value::Null => assert!(
                shot["body"].is_null(),
                "{name}: a body where none is documented"
            ),
            schema => {
                let e = errors(&doc, schema, &shot["body"]);
                assert!(
                    e.is_empty(),
                    "{name}: the answer breaks the document:\n{}",
                    e.join("\n")
                );
            }
        }
        let body = &shot["request"]["body"];
        if (200..300).contains(&status) && !body.is_null() {
            let schema = &op["requestBody"]["content"]["application/json"]["schema"];
            assert!(
                !schema.is_null(),
                "{name}: an accepted body the document does not describe"
            );
            let e = errors(&doc, schema, body);
            assert!(
                e.is_empty(),
                "{name}: the request breaks the document:\n{}",
                e.join("\n")
            );
        }
        checked += 1;
    }
    assert!(checked >= 40, "{checked} snapshots checked");
}

/// The validation is strict enough to notice a wrong answer.
#[test]
fn an_answer_of_the_wrong_shape_does_not_fit() {
    let doc = document();
    let op = operation(&doc, "POST", "/api/v1/ack").unwrap();
    let schema = &op["responses"]["200"]["content"]["application/json"]["schema"];
    let good = json!([{"index": 0, "transactionId": "t", "success": true, "error": null,
                       "leaseReleased": true, "dlq": false, "noop": false}]);
    assert!(
        errors(&doc, schema, &good).is_empty(),
        "{:?}",
        errors(&doc, schema, &good)
    );
    let bad = json!({"index": 0, "success": "yes"});
    assert!(!errors(&doc, schema, &bad).is_empty());
}

/// The document is valid OpenAPI 3.1 (checked by `openapi-spec-validator`), so OpenAPI
/// tooling can load it.
#[test]
fn the_document_is_valid_openapi_3_1() {
    let Some(python) = queen_tests::python::python_or_skip(Path::new(env!("CARGO_TARGET_TMPDIR")))
    else {
        return;
    };
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import json, sys\n\
             from openapi_spec_validator import validate\n\
             validate(json.load(open(sys.argv[1])))\n\
             print('valid')",
        ])
        .arg(root().join("spec/openapi.json"))
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("valid"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The snapshots redact clock-dependent seconds to a string; the document types them as
/// integers, so any integer stands in for them here.
fn unredact_seconds(v: &mut Value) {
    match v {
        Value::String(s) if s == "[seconds]" => *v = Value::from(0),
        Value::Array(a) => a.iter_mut().for_each(unredact_seconds),
        Value::Object(o) => o.values_mut().for_each(unredact_seconds),
        _ => {}
    }
}

/// The document's operations are the route table's (`wire::ROUTES`), no more and no
/// fewer, besides the routes the server answers outside the protocol's requests.
#[test]
fn the_operations_are_the_route_table() {
    use std::collections::BTreeSet;
    let doc = document();
    let outside = ["/metrics", "/metrics/prometheus", "/openapi.json"];
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(path, _)| !outside.contains(&path.as_str()))
        .flat_map(|(path, ops)| {
            ops.as_object()
                .unwrap()
                .keys()
                .filter(|m| ["get", "post", "delete"].contains(&m.as_str()))
                .map(|m| (m.to_uppercase(), path.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    let table: BTreeSet<(String, String)> = queen_reference::wire::ROUTES
        .iter()
        .map(|r| (r.method.to_string(), r.path.to_string()))
        .collect();
    assert_eq!(documented, table);
}
