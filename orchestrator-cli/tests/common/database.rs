//! A fresh PostgreSQL database per test (SPEC §16), created and dropped through
//! `tokio-postgres`; `None` (said on stderr) when no server answers, so the tests pass
//! without one.
#![allow(dead_code)]

/// The server the tests use: `ORCHESTRATOR_TEST_DATABASE_URL` (a database to connect to for
/// creating the others), else the local one.
pub fn admin_url() -> String {
    std::env::var("ORCHESTRATOR_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A fresh database, dropped when the value is.
pub struct Database {
    /// The database's name.
    pub name: String,
}

impl Database {
    /// A new empty database, or `None` (said on stderr) when no server answers.
    pub fn create() -> Option<Database> {
        let name = format!("orch_cli_{}", uuid::Uuid::new_v4().simple());
        match sql(&format!("CREATE DATABASE {name}")) {
            Ok(()) => Some(Database { name }),
            Err(e) => {
                eprintln!("skipped: no PostgreSQL at {} ({e})", admin_url());
                None
            }
        }
    }

    /// The URL of the database: the server's, with this database's name.
    pub fn url(&self) -> String {
        let admin = admin_url();
        let server = admin.rsplit_once('/').map_or(admin.as_str(), |(s, _)| s);
        format!("{server}/{}", self.name)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = sql(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

/// Runs `statement` on the server, giving up after 2 s without an answer.
pub fn sql(statement: &str) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let url = admin_url();
        let connect = tokio_postgres::connect(&url, tokio_postgres::NoTls);
        let (client, connection) =
            match tokio::time::timeout(std::time::Duration::from_secs(2), connect).await {
                Err(_) => return Err("no answer within 2 s".to_owned()),
                Ok(result) => result.map_err(|e| e.to_string())?,
            };
        tokio::spawn(connection);
        client
            .batch_execute(statement)
            .await
            .map_err(|e| e.to_string())
    })
}
