//! Tunables of [`super::PgPlanRepository`].

use std::time::Duration;

use crate::Compaction;

/// Options of [`super::PgPlanRepository`], with documented defaults.
///
/// ```
/// use std::time::Duration;
/// use orchestrator_storage::pg::PgOptions;
/// let options = PgOptions::default()
///     .schema("ci_run_42")
///     .lease_timeout(Duration::from_secs(10))
///     .pool_size(4);
/// assert_eq!(options.schema, "ci_run_42");
/// assert_eq!(options.lease_timeout, Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PgOptions {
    /// The PostgreSQL schema holding every table of the store (default `orchestrator`): a
    /// lowercase identifier (`[a-z_][a-z0-9_]*`, at most 63 bytes). It is created if missing.
    pub schema: String,
    /// How long a plan's lease lasts without renewal (default 30 s). The holder renews it every
    /// third of this; a holder that dies loses it this long after its last renewal.
    pub lease_timeout: Duration,
    /// The most connections the store opens (default 8).
    pub pool_size: usize,
    /// How long opening one connection may take, unless the URL sets `connect_timeout`
    /// (default 5 s); also the longest wait for a free connection of the pool.
    pub connect_timeout: Duration,
    /// How many times a connection that cannot be opened for a transient reason (refused,
    /// reset, timed out, the server starting or shutting down) is tried again before the call
    /// fails, waiting 50 ms, 100 ms, ... up to 1 s between tries (default 5), as long as all
    /// the tries fit in [`PgOptions::connect_timeout`].
    pub connect_retries: u32,
    /// When a plan's journal is folded into its stored state (the same rule as the file
    /// store's: see [`Compaction`]).
    pub compaction: Compaction,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            schema: "orchestrator".to_owned(),
            lease_timeout: Duration::from_secs(30),
            pool_size: 8,
            connect_timeout: Duration::from_secs(5),
            connect_retries: 5,
            compaction: Compaction::default(),
        }
    }
}

impl PgOptions {
    /// Sets [`PgOptions::schema`].
    ///
    /// ```
    /// let o = orchestrator_storage::pg::PgOptions::default().schema("team_a");
    /// assert_eq!(o.schema, "team_a");
    /// ```
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Sets [`PgOptions::lease_timeout`].
    ///
    /// ```
    /// use std::time::Duration;
    /// let o = orchestrator_storage::pg::PgOptions::default().lease_timeout(Duration::from_secs(5));
    /// assert_eq!(o.lease_timeout, Duration::from_secs(5));
    /// ```
    pub fn lease_timeout(mut self, timeout: Duration) -> Self {
        self.lease_timeout = timeout;
        self
    }

    /// Sets [`PgOptions::pool_size`].
    ///
    /// ```
    /// let o = orchestrator_storage::pg::PgOptions::default().pool_size(2);
    /// assert_eq!(o.pool_size, 2);
    /// ```
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size;
        self
    }

    /// Sets [`PgOptions::connect_timeout`].
    ///
    /// ```
    /// use std::time::Duration;
    /// let o = orchestrator_storage::pg::PgOptions::default().connect_timeout(Duration::from_secs(2));
    /// assert_eq!(o.connect_timeout, Duration::from_secs(2));
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`PgOptions::connect_retries`].
    ///
    /// ```
    /// let o = orchestrator_storage::pg::PgOptions::default().connect_retries(0);
    /// assert_eq!(o.connect_retries, 0);
    /// ```
    pub fn connect_retries(mut self, retries: u32) -> Self {
        self.connect_retries = retries;
        self
    }

    /// Sets [`PgOptions::compaction`].
    ///
    /// ```
    /// use orchestrator_storage::{pg::PgOptions, Compaction};
    /// let o = PgOptions::default().compaction(Compaction::default().max_journal_records(100));
    /// assert_eq!(o.compaction.max_journal_records, 100);
    /// ```
    pub fn compaction(mut self, compaction: Compaction) -> Self {
        self.compaction = compaction;
        self
    }

    /// The problem with these options, if any.
    pub(crate) fn invalid(&self) -> Option<String> {
        if !is_identifier(&self.schema) {
            return Some(format!(
                "schema name {:?} is not a lowercase identifier ([a-z_][a-z0-9_]*, at most 63 bytes)",
                self.schema
            ));
        }
        if self.lease_timeout < Duration::from_millis(30) {
            return Some("the lease timeout must be at least 30 ms".to_owned());
        }
        if self.pool_size == 0 {
            return Some("the pool needs at least one connection".to_owned());
        }
        None
    }
}

/// A name PostgreSQL takes as is, without quotes, and that cannot inject SQL.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    first_ok
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.starts_with("pg_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        for good in ["orchestrator", "t_0a9f", "_x", "a"] {
            assert!(
                PgOptions::default().schema(good).invalid().is_none(),
                "{good}"
            );
        }
        let long = "a".repeat(64);
        for bad in [
            "",
            "Orch",
            "1abc",
            "a-b",
            "a;drop",
            "pg_x",
            "a b",
            long.as_str(),
        ] {
            assert!(
                PgOptions::default().schema(bad).invalid().is_some(),
                "{bad}"
            );
        }
    }

    #[test]
    fn tiny_leases_and_empty_pools_are_refused() {
        let o = PgOptions::default().lease_timeout(Duration::from_millis(1));
        assert!(o.invalid().is_some());
        assert!(PgOptions::default().pool_size(0).invalid().is_some());
        assert!(PgOptions::default().invalid().is_none());
    }
}
