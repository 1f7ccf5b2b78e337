//! The connection pool: parsing the URL, pinning every connection to the store's schema, and
//! getting a connection with backoff while the server is momentarily unreachable.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use orchestrator_core::StoreError;
use tokio_postgres::config::Host;
use tokio_postgres::NoTls;

use super::error;
use super::options::PgOptions;

/// A pooled connection.
pub(crate) type Client = Object;

/// The pool of one store, and where it points (for error messages; never the password).
pub(crate) struct Db {
    pool: Pool,
    location: PathBuf,
    retries: u32,
    /// How long all tries of one connection may take together.
    budget: Duration,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// The first wait between two tries of a connection, doubled each time up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(50);
const MAX_WAIT: Duration = Duration::from_secs(1);

impl Db {
    /// A pool for `url` (a `postgres://` URL or `key=value` settings) whose connections use
    /// `options.schema` as their `search_path`. Connects lazily: nothing is opened yet.
    pub(crate) fn new(url: &str, options: &PgOptions) -> Result<Db, StoreError> {
        let redacted = PathBuf::from("postgres://");
        let mut config = tokio_postgres::Config::from_str(url)
            .map_err(|e| error::invalid("parse the database URL", &redacted, e.to_string()))?;
        let location = location(&config, &options.schema);
        if let Some(problem) = options.invalid() {
            return Err(error::invalid("configure the store", &location, problem));
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("orchestrator");
        }
        // The schema is a checked identifier, so it needs no quoting or escaping here.
        let pin = format!("-c search_path={}", options.schema);
        let startup = match config.get_options() {
            Some(given) if !given.trim().is_empty() => format!("{given} {pin}"),
            _ => pin,
        };
        config.options(startup);
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.connect_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| error::invalid("create the connection pool", &location, e.to_string()))?;
        Ok(Db {
            pool,
            location,
            retries: options.connect_retries,
            budget: options.connect_timeout,
        })
    }

    /// Where the store is, as `postgres://host:port/database/schema`.
    pub(crate) fn location(&self) -> &Path {
        &self.location
    }

    /// A connection for `operation`. A connection that cannot be had for a transient reason
    /// is tried again with backoff, while the tries fit in the connect timeout (a server that
    /// does not answer at all is waited for once); nothing has been sent yet, so this is
    /// always safe.
    pub(crate) async fn client(&self, operation: &'static str) -> Result<Client, StoreError> {
        let deadline = Instant::now() + self.budget;
        let mut wait = FIRST_WAIT;
        let mut tries = 0;
        loop {
            match self.pool.get().await {
                Ok(client) => return Ok(client),
                Err(e)
                    if tries < self.retries
                        && Instant::now() + wait < deadline
                        && error::pool_is_transient(&e) =>
                {
                    tracing::debug!(
                        store = %self.location.display(),
                        error = %e,
                        "cannot connect to PostgreSQL; trying again in {wait:?}"
                    );
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(MAX_WAIT);
                    tries += 1;
                }
                Err(e) => return Err(error::pool(operation, &self.location, e)),
            }
        }
    }
}

/// `postgres://host:port/database/schema`, from the parsed settings (so without a password).
fn location(config: &tokio_postgres::Config, schema: &str) -> PathBuf {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        #[cfg(unix)]
        Some(Host::Unix(dir)) => dir.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let dbname = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    PathBuf::from(format!("postgres://{host}:{port}/{dbname}/{schema}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn location_names_host_port_database_and_schema_but_no_password() {
        let options = PgOptions::default().schema("s1");
        let db = Db::new("postgres://u:secret@db.example:6543/app", &options);
        let db = db.unwrap_or_else(|e| panic!("{e}"));
        let shown = db.location().display().to_string();
        assert_eq!(shown, "postgres://db.example:6543/app/s1");
        assert!(!format!("{db:?}").contains("secret"));
    }

    #[tokio::test]
    async fn bad_urls_and_options_are_refused_before_connecting() {
        let bad = Db::new("postgres://h:notaport/db", &PgOptions::default());
        assert!(matches!(bad, Err(StoreError::Io { .. })));
        let bad = Db::new("postgres://h/db", &PgOptions::default().schema("Bad-Name"));
        match bad {
            Err(StoreError::Io { source, .. }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::InvalidInput)
            }
            other => panic!("{other:?}"),
        }
    }
}
