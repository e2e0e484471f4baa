//! Push notifications: where troupe may deliver (a loopback address, or a
//! target that authenticates troupe's calls with a token) and the delivery of
//! each task change to every target of the task, in order, with the SDK's
//! sender.

use std::net::IpAddr;
use std::time::Duration;

use a2a::{A2AError, StreamResponse, TaskPushNotificationConfig};
use a2a_server::{HttpPushSender, HttpPushSenderConfig};
use axum::http::Uri;
use troupe_store::A2aPushConfig;

use super::A2a;
use super::tasks::blocking;

/// How long one delivery may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The sender. The SDK's SSRF guard refuses loopback addresses, which troupe
/// allows on purpose; [`check_target`] is troupe's guard instead, applied when
/// a target is registered.
pub fn sender() -> HttpPushSender {
    HttpPushSender::new(Some(HttpPushSenderConfig { timeout: TIMEOUT, fail_on_error: false, validate_urls: false }))
}

/// Refuse a target troupe must not call: not http(s), or neither on a
/// loopback address nor authenticated with a token.
pub fn check_target(config: &TaskPushNotificationConfig) -> Result<(), A2AError> {
    let uri: Uri = config
        .url
        .parse()
        .map_err(|_| A2AError::invalid_params(format!("push notification url `{}` is not a URL", config.url)))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(A2AError::invalid_params("a push notification url must be http:// or https://"));
    }
    let host = uri.host().unwrap_or("").trim_start_matches('[').trim_end_matches(']');
    let loopback = host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    let has_token = config.token.as_deref().is_some_and(|t| !t.trim().is_empty())
        || config.authentication.as_ref().and_then(|a| a.credentials.as_deref()).is_some_and(|c| !c.trim().is_empty());
    if loopback || has_token {
        Ok(())
    } else {
        Err(A2AError::invalid_params(format!(
            "troupe delivers push notifications only to loopback addresses or to targets that authenticate it with \
             a token: `{host}` is neither (set `token` or `authentication.credentials`)"
        )))
    }
}

/// The stored form of a target.
pub fn stored(config: &TaskPushNotificationConfig) -> Result<A2aPushConfig, A2AError> {
    Ok(A2aPushConfig {
        task_id: config.task_id.clone(),
        id: config.id.clone().unwrap_or_default(),
        body: serde_json::to_value(config).map_err(|e| super::tasks::internal("cannot encode a push config", &e))?,
    })
}

/// A target as stored.
pub fn config_of(stored: A2aPushConfig) -> Result<TaskPushNotificationConfig, A2AError> {
    serde_json::from_value(stored.body).map_err(|e| super::tasks::internal("a stored push config is unreadable", &e))
}

impl A2a {
    /// Deliver one change of task `id` to each of its targets. A target that
    /// fails is logged and skipped: a webhook never holds up the task.
    pub async fn deliver(&self, id: &str, event: &StreamResponse) {
        let key = id.to_string();
        let Ok(targets) = blocking(&self.store, move |s| s.a2a_pushes(&key)).await else { return };
        for target in targets {
            match config_of(target) {
                Ok(config) => {
                    if let Err(e) = self.push.send_push(&config, event.clone()).await {
                        tracing::warn!(task = id, url = %config.url, error = %e, "push notification failed");
                    }
                }
                Err(e) => tracing::warn!(task = id, error = %e, "unreadable push config"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str, token: Option<&str>) -> TaskPushNotificationConfig {
        TaskPushNotificationConfig {
            url: url.into(),
            id: None,
            task_id: "t".into(),
            token: token.map(str::to_string),
            authentication: None,
            tenant: None,
        }
    }

    #[test]
    fn loopback_or_token_only() {
        for ok in ["http://127.0.0.1:9/hook", "http://localhost/x", "http://[::1]:80/", "http://127.9.9.9/"] {
            assert!(check_target(&target(ok, None)).is_ok(), "{ok}");
        }
        for bad in ["http://10.0.0.1/hook", "http://example.invalid/", "http://192.168.1.1/"] {
            let e = check_target(&target(bad, None)).unwrap_err();
            assert_eq!(e.code, a2a::error_code::INVALID_PARAMS, "{bad}");
            assert!(check_target(&target(bad, Some("secret"))).is_ok(), "{bad} with a token");
            assert!(check_target(&target(bad, Some("  "))).is_err(), "{bad} with a blank token");
        }
        assert!(check_target(&target("ftp://127.0.0.1/", None)).is_err());
        assert!(check_target(&target("not a url", None)).is_err());
    }
}
