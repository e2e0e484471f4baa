//! What the gateway accepts on the wire, checked before rmcp sees a message,
//! so that every malformed message gets a JSON-RPC error answer (rmcp drops
//! oversized lines and non-JSON without a word, and answers a tool name that
//! is not a string with "method not found"). One check for stdio and HTTP.

use serde_json::{Value, json};

/// The largest message accepted (16 MiB, rmcp's own line limit), on both transports.
pub const MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// JSON-RPC's "Parse error".
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's "Invalid Request".
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's "Invalid params".
pub const INVALID_PARAMS: i64 = -32602;

/// A JSON-RPC error answer for request `id` (`null` when it has none or it is unknown).
pub fn error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// The answer to a message longer than [`MAX_MESSAGE`].
pub fn too_large() -> Value {
    error(Value::Null, PARSE_ERROR, format!("Parse error: message larger than {MAX_MESSAGE} bytes"))
}

/// Checks one message (a stdio line or an HTTP body): `Ok` to hand it to
/// rmcp, or the error answer to send back instead.
pub fn check(message: &[u8]) -> Result<(), Value> {
    let message = message.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(message);
    if message.len() > MAX_MESSAGE {
        return Err(too_large());
    }
    // serde_json stops at 128 levels of nesting with an error, so a deeply
    // nested message is a parse error, never a stack overflow.
    let value: Value =
        serde_json::from_slice(message).map_err(|e| error(Value::Null, PARSE_ERROR, format!("Parse error: {e}")))?;
    let Value::Object(object) = value else {
        let what = if value.is_array() { "batches are not supported" } else { "a message is a JSON object" };
        return Err(error(Value::Null, INVALID_REQUEST, format!("Invalid Request: {what}")));
    };
    let id = match object.get("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id.clone()),
        Some(_) => return Err(error(Value::Null, INVALID_REQUEST, "Invalid Request: id must be a string or number")),
    };
    let invalid =
        |what: &str| error(id.clone().unwrap_or(Value::Null), INVALID_REQUEST, format!("Invalid Request: {what}"));
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("jsonrpc must be \"2.0\""));
    }
    let Some(method) = object.get("method") else {
        // A response to a request of ours (ping, sampling, elicitation).
        return if id.is_some() && (object.contains_key("result") || object.contains_key("error")) {
            Ok(())
        } else {
            Err(invalid("neither a request, a notification nor a response"))
        };
    };
    let Some(method) = method.as_str() else { return Err(invalid("method must be a string")) };
    if method == "tools/call" {
        let Some(id) = id else { return Err(invalid("tools/call is a request and needs an id")) };
        let params = object.get("params");
        let bad = |what: &str| Err(error(id.clone(), INVALID_PARAMS, format!("Invalid params: {what}")));
        match params.and_then(|p| p.get("name")) {
            Some(Value::String(_)) => {}
            Some(_) => return bad("the tool name must be a string"),
            None => return bad("tools/call needs a tool name"),
        }
        if !params.and_then(|p| p.get("arguments")).is_none_or(|a| a.is_object() || a.is_null()) {
            return bad("arguments must be an object");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(message: &[u8]) -> Option<(Value, i64)> {
        check(message).err().map(|e| (e["id"].clone(), e["error"]["code"].as_i64().unwrap()))
    }

    #[test]
    fn every_malformed_message_has_an_answer() {
        assert_eq!(code(b"not json"), Some((Value::Null, PARSE_ERROR)));
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(code(deep.as_bytes()), Some((Value::Null, PARSE_ERROR)));
        let deep_in_params =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{}1{}}}"#, "[".repeat(200), "]".repeat(200));
        assert_eq!(code(deep_in_params.as_bytes()), Some((Value::Null, PARSE_ERROR)));
        assert_eq!(code(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#), Some((Value::Null, INVALID_REQUEST)));
        assert_eq!(code(b"42"), Some((Value::Null, INVALID_REQUEST)));
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#), Some((Value::Null, INVALID_REQUEST)));
        assert_eq!(code(br#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#), Some((json!(3), INVALID_REQUEST)));
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":3,"method":7}"#), Some((json!(3), INVALID_REQUEST)));
        let numeric = br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":5}}"#;
        assert_eq!(code(numeric), Some((json!("a"), INVALID_PARAMS)));
        let args = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#;
        assert_eq!(code(args), Some((json!(2), INVALID_PARAMS)));
        assert_eq!(code(&vec![b' '; MAX_MESSAGE + 1]), Some((Value::Null, PARSE_ERROR)));
    }

    #[test]
    fn well_formed_messages_pass() {
        for ok in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":1}}}"#[..],
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            br#"{"jsonrpc":"2.0","id":9,"result":{}}"#,
            b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
        ] {
            assert_eq!(check(ok), Ok(()), "{}", String::from_utf8_lossy(ok));
        }
    }
}
