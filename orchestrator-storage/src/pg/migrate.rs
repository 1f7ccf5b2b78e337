//! Schema migrations: the SQL files under `orchestrator-storage/migrations/`, embedded in the
//! build and applied in order when a store connects.
//!
//! All of it runs in one transaction that first takes a transaction-scoped advisory lock
//! (`pg_advisory_xact_lock`) keyed on the schema, so processes starting together apply each
//! migration once, and either every pending migration lands or none does. Applied versions
//! are recorded in the schema's `schema_migrations` table; a database recording a version
//! newer than this build knows is refused with [`StoreError::SchemaVersion`] (an older build
//! must not write into tables it does not understand).

use orchestrator_core::StoreError;

use super::connect::Db;
use super::error;

/// One embedded migration.
struct Migration {
    version: u32,
    name: &'static str,
    sql: &'static str,
}

/// Every migration, oldest first; versions are 1, 2, 3, ... without gaps.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "plans",
        sql: include_str!("../../migrations/0001_plans.sql"),
    },
    Migration {
        version: 2,
        name: "work_queue",
        sql: include_str!("../../migrations/0002_work_queue.sql"),
    },
    Migration {
        version: 3,
        name: "sessions",
        sql: include_str!("../../migrations/0003_sessions.sql"),
    },
];

/// The schema version this build writes: that of its newest migration.
///
/// ```
/// assert!(orchestrator_storage::pg::MIGRATION_VERSION >= 1);
/// ```
pub const MIGRATION_VERSION: u32 = MIGRATIONS.len() as u32;

// Versions must be 1..=n in order (checked when compiling).
const _: () = {
    let mut i = 0;
    while i < MIGRATIONS.len() {
        assert!(MIGRATIONS[i].version as usize == i + 1);
        i += 1;
    }
};

/// The advisory lock key of a schema's migrations: FNV-1a of a fixed prefix and the name, so
/// every build and every process computes the same key.
fn lock_key(schema: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in "orchestrator-storage migrations: "
        .bytes()
        .chain(schema.bytes())
    {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    i64::from_ne_bytes(hash.to_ne_bytes())
}

/// Applies the migrations `schema` lacks; returns the versions applied (empty when it was
/// current).
pub(crate) async fn run(db: &Db, schema: &str) -> Result<Vec<u32>, StoreError> {
    let at = db.location();
    let fail = |op| move |e| error::db(op, at, e);
    let mut client = db.client("migrate").await?;
    let tx = client.transaction().await.map_err(fail("migrate"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock_key(schema)])
        .await
        .map_err(fail("lock the migrations"))?;
    // `schema` is a checked identifier (see PgOptions::schema), safe to splice.
    let setup = format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         SET LOCAL search_path TO {schema};
         CREATE TABLE IF NOT EXISTS schema_migrations (
             version    integer PRIMARY KEY,
             name       text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         );"
    );
    tx.batch_execute(&setup)
        .await
        .map_err(fail("create the schema"))?;
    let row = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM schema_migrations",
            &[],
        )
        .await
        .map_err(fail("read the schema version"))?;
    let found: i32 = row.get(0);
    let found = u32::try_from(found).unwrap_or(0);
    if found > MIGRATION_VERSION {
        // Ended here rather than on drop, so the lock is gone when this returns.
        let _ = tx.rollback().await;
        return Err(StoreError::SchemaVersion {
            path: at.join("schema_migrations"),
            found,
            supported: MIGRATION_VERSION,
        });
    }
    let mut applied = Vec::new();
    for m in MIGRATIONS.iter().filter(|m| m.version > found) {
        tx.batch_execute(m.sql)
            .await
            .map_err(fail("apply a schema migration"))?;
        let version = i32::try_from(m.version).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[&version, &m.name],
        )
        .await
        .map_err(fail("record a schema migration"))?;
        tracing::info!(store = %at.display(), version = m.version, name = m.name, "applied a schema migration");
        applied.push(m.version);
    }
    tx.commit().await.map_err(fail("commit the migrations"))?;
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_keys_are_stable_and_differ_by_schema() {
        assert_eq!(lock_key("orchestrator"), lock_key("orchestrator"));
        assert_ne!(lock_key("orchestrator"), lock_key("orchestrator2"));
    }

    #[test]
    fn every_migration_is_embedded_and_not_empty() {
        assert_eq!(MIGRATION_VERSION as usize, MIGRATIONS.len());
        for m in MIGRATIONS {
            assert!(m.sql.contains("CREATE"), "migration {} is empty", m.version);
        }
    }

    #[test]
    fn migrations_are_named_after_their_files() {
        let names: Vec<&str> = MIGRATIONS.iter().map(|m| m.name).collect();
        assert_eq!(names, ["plans", "work_queue", "sessions"]);
        assert!(MIGRATIONS[2].sql.contains("CREATE TABLE sessions"));
    }
}
