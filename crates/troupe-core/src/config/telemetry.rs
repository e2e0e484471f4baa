//! `[telemetry]`: OpenTelemetry export of a run, off unless an endpoint is set.

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

/// `[telemetry]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// An OTLP/HTTP collector (`http://127.0.0.1:4318`): each Lead run sends
    /// its spans to `<endpoint>/v1/traces` and its metrics to
    /// `<endpoint>/v1/metrics` as OTLP JSON. Unset: nothing is exported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub otlp_endpoint: Option<String>,
    /// The `service.name` of the exported resource.
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig { otlp_endpoint: None, service_name: "troupe".into() }
    }
}

impl TelemetryConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if let Some(e) = &self.otlp_endpoint
            && !e.starts_with("http://")
        {
            return Err(invalid(format!(
                "telemetry.otlp_endpoint `{e}` must be an http:// address of an OTLP/HTTP collector \
                 (troupe exports to a local collector in plain HTTP; let it forward over TLS)"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn off_by_default_and_only_plain_http() {
        assert_eq!(Config::from_toml("").unwrap().telemetry.otlp_endpoint, None);
        let c = Config::from_toml("[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\n").unwrap();
        assert_eq!(c.telemetry.otlp_endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        let err = Config::from_toml("[telemetry]\notlp_endpoint = \"https://x\"\n").unwrap_err();
        assert!(err.message.contains("telemetry.otlp_endpoint"), "{err}");
    }
}
