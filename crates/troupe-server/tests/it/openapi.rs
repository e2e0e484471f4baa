//! `/api/openapi.json`: an OpenAPI 3.1 document generated from the routes,
//! which lists every endpoint that is served, and nothing that is not.

use serde_json::json;

use crate::support::{Server, agent, answer};

#[test]
fn the_document_is_openapi_3_1_and_matches_the_routes() {
    let s = Server::start();
    let (status, doc) = s.get("/api/openapi.json");
    assert_eq!(status, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"), "{}", doc["openapi"]);
    assert_eq!(doc, serde_json::to_value(troupe_server::openapi::document()).unwrap());
    assert!(doc["components"]["schemas"]["ErrorBody"].is_object());
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
    let http = agent();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        if path == "/events" {
            continue; // an endless stream: covered by the events tests
        }
        for method in ops.as_object().unwrap().keys() {
            let url = format!("{}{}", s.url, crate::support::fill(path, "1"));
            let res = match method.as_str() {
                "get" => http.get(&url).call(),
                "post" => http.post(&url).send_json(json!({})),
                "put" => http.put(&url).send_json(json!({})),
                other => panic!("{other} {path}: add the method to this test"),
            };
            let (status, body) = answer(res);
            assert!(
                status != 405 && body["error"]["message"] != "no such endpoint",
                "{method} {path} is documented but not served: {status} {body}"
            );
        }
    }
}
