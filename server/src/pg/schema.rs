//! The database's shape: tables in migrations, functions in `server/sql`.
//!
//! Tables change by migration, once, in order; a migration is never edited after it
//! lands. Functions are code: each lives in one file under `server/sql`, and every start
//! applies them all with `CREATE OR REPLACE` after the migrations, so changing a rule's
//! SQL is an edit of the one file that holds it. A function whose result columns change
//! needs its old version dropped by a migration first (PostgreSQL cannot replace that).

use sqlx::PgPool;

/// Schema migrations, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The function files, in the order they are applied (later ones call earlier ones).
pub(crate) const FUNCTIONS: [(&str, &str); 8] = [
    ("01_rules.sql", include_str!("../../sql/01_rules.sql")),
    (
        "02_candidates.sql",
        include_str!("../../sql/02_candidates.sql"),
    ),
    ("03_claim.sql", include_str!("../../sql/03_claim.sql")),
    ("04_pop_head.sql", include_str!("../../sql/04_pop_head.sql")),
    (
        "05_push_minted.sql",
        include_str!("../../sql/05_push_minted.sql"),
    ),
    (
        "06_retention.sql",
        include_str!("../../sql/06_retention.sql"),
    ),
    ("07_manage.sql", include_str!("../../sql/07_manage.sql")),
    ("08_ack.sql", include_str!("../../sql/08_ack.sql")),
];

/// The advisory lock servers starting at once take, so their replacements of the same
/// functions do not collide ("tuple concurrently updated").
const APPLY_LOCK: i64 = 0x7175_6565_6e5f_666e; // "queen_fn"

/// Why the schema could not be brought up to date.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("cannot apply the schema migrations: {0}")]
    Migrate(#[source] sqlx::migrate::MigrateError),
    #[error("cannot read {file} from the folder {SQL_OVERRIDE_ENV} names: {source}")]
    Override {
        file: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot apply server/sql/{file}: {source}")]
    Function {
        file: &'static str,
        #[source]
        source: sqlx::Error,
    },
}

/// The environment variable naming a folder whose function files are applied instead of
/// the built-in ones: the SQL mutation tests (`queen-sql-mutants`) start one server
/// binary on many mutated copies of `server/sql`. Never for production: the start-up log
/// says so when it is set.
pub const SQL_OVERRIDE_ENV: &str = "QUEEN_SQL_MUTANT_DIR";

/// The function files to apply: the built-in ones, or those of [`SQL_OVERRIDE_ENV`]'s
/// folder (every file must be there).
fn function_sources() -> Result<Vec<(&'static str, std::borrow::Cow<'static, str>)>, SchemaError> {
    let Some(dir) = std::env::var_os(SQL_OVERRIDE_ENV) else {
        return Ok(FUNCTIONS
            .iter()
            .map(|(f, sql)| (*f, (*sql).into()))
            .collect());
    };
    let dir = std::path::PathBuf::from(dir);
    tracing::warn!(dir = %dir.display(), "{SQL_OVERRIDE_ENV} is set: the SQL functions come from that folder, not from this build (mutation testing only)");
    FUNCTIONS
        .iter()
        .map(|(f, _)| {
            std::fs::read_to_string(dir.join(f))
                .map(|sql| (*f, sql.into()))
                .map_err(|e| SchemaError::Override { file: f, source: e })
        })
        .collect()
}

/// Runs the pending migrations, then, when any function file differs from the one last
/// applied, replaces every function, in one transaction.
pub(crate) async fn apply(pool: &PgPool) -> Result<(), SchemaError> {
    let functions = function_sources()?;
    MIGRATOR.run(pool).await.map_err(SchemaError::Migrate)?;
    let fail = |file| move |source| SchemaError::Function { file, source };
    let mut tx = pool.begin().await.map_err(fail("(begin)"))?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(APPLY_LOCK)
        .execute(&mut *tx)
        .await
        .map_err(fail("(lock)"))?;
    let applied: Vec<(String, String)> = sqlx::query_as("SELECT file, source FROM queen_functions")
        .fetch_all(&mut *tx)
        .await
        .map_err(fail("(read queen_functions)"))?;
    let current = applied.len() == functions.len()
        && functions
            .iter()
            .all(|(f, sql)| applied.iter().any(|(af, asql)| af == f && asql == sql));
    if current {
        return Ok(());
    }
    sqlx::query("DELETE FROM queen_functions")
        .execute(&mut *tx)
        .await
        .map_err(fail("(clear queen_functions)"))?;
    for (file, sql) in &functions {
        let (file, sql) = (*file, sql.as_ref());
        sqlx::raw_sql(sql)
            .execute(&mut *tx)
            .await
            .map_err(fail(file))?;
        sqlx::query("INSERT INTO queen_functions (file, source) VALUES ($1, $2)")
            .bind(file)
            .bind(sql)
            .execute(&mut *tx)
            .await
            .map_err(fail(file))?;
    }
    tx.commit().await.map_err(fail("(commit)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_in_the_folder_is_applied_in_name_order() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/sql");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .expect("server/sql")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        on_disk.sort();
        let applied: Vec<&str> = FUNCTIONS.iter().map(|(f, _)| *f).collect();
        assert_eq!(on_disk, applied);
    }

    #[test]
    fn function_files_only_create_or_replace_and_migrations_create_no_new_functions() {
        for (file, sql) in FUNCTIONS {
            assert!(
                !sql.contains("CREATE FUNCTION"),
                "{file} must CREATE OR REPLACE"
            );
            assert!(
                !sql.contains("CREATE TYPE"),
                "{file}: types belong in migrations"
            );
        }
    }
}
