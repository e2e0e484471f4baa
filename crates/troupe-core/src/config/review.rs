//! `[review]`: the reviews `troupe run` and `troupe resume` include, and their
//! consensus defaults.

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

/// `[review]`: whether `troupe run` reviews the design after design and the
/// implementation after implementation (seed 000 Spec 7), and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReviewConfig {
    /// `troupe run` and `troupe resume` include the design and impl reviews
    /// (`--no-review` skips them for one run, `--review` forces them).
    pub in_run: bool,
    /// Review pipelines per review (N, consensus mode when above 1).
    pub consensus: usize,
    /// How many of the N pipelines must agree (K); absent means a majority.
    pub threshold: Option<usize>,
}

impl Default for ReviewConfig {
    fn default() -> Self {
        ReviewConfig { in_run: true, consensus: 1, threshold: None }
    }
}

impl ReviewConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.consensus == 0 {
            return Err(invalid("review.consensus must be at least 1"));
        }
        if let Some(k) = self.threshold
            && (k == 0 || k > self.consensus)
        {
            return Err(invalid(format!(
                "review.threshold {k} must be between 1 and review.consensus ({})",
                self.consensus
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn reviews_are_on_by_default_and_can_be_turned_off() {
        let c = Config::from_toml("").unwrap();
        assert!(c.review.in_run);
        assert_eq!((c.review.consensus, c.review.threshold), (1, None));
        let c = Config::from_toml("[review]\nin_run = false\nconsensus = 3\nthreshold = 2\n").unwrap();
        assert!(!c.review.in_run);
        assert_eq!((c.review.consensus, c.review.threshold), (3, Some(2)));
    }

    #[test]
    fn bad_values_and_unknown_keys_are_named() {
        let err = Config::from_toml("[review]\nconsensus = 0\n").unwrap_err();
        assert!(err.message.contains("review.consensus"), "{err}");
        let err = Config::from_toml("[review]\nconsensus = 3\nthreshold = 4\n").unwrap_err();
        assert!(err.message.contains("review.threshold 4"), "{err}");
        let err = Config::from_toml("[review]\nin_runs = false\n").unwrap_err();
        assert!(err.message.contains("in_runs"), "{err}");
    }
}
