//! The few statements the provider itself sends: connect, create and drop a database.
//!
//! Exists to keep sqlx details (connect timeouts, identifier quoting, the `WITH (FORCE)`
//! fallback for servers older than 13) out of the source and per-test-database logic.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::ConnectOptions;
#[cfg(feature = "test-sources")]
use sqlx::Connection;

#[cfg(feature = "test-sources")]
use crate::error::{Error, Result};

/// How long one connection attempt may take before it counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One connection attempt to `url`; the error is a short reason.
pub(crate) async fn connect(url: &str) -> std::result::Result<PgConnection, String> {
    let opts = PgConnectOptions::from_str(url)
        .map_err(|e| e.to_string())?
        .disable_statement_logging();
    match tokio::time::timeout(CONNECT_TIMEOUT, opts.connect()).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {CONNECT_TIMEOUT:?}")),
    }
}

#[cfg(feature = "test-sources")]
/// Connects, retrying until `limit` passes (servers refuse connections while starting up).
pub(crate) async fn connect_within(url: &str, limit: Duration) -> Result<PgConnection> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match connect(url).await {
            Ok(conn) => return Ok(conn),
            Err(why) if tokio::time::Instant::now() >= deadline => {
                return Err(Error::sql(
                    url,
                    format!("not accepting connections after {limit:?}: {why}"),
                ))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

#[cfg(feature = "test-sources")]
/// `CREATE DATABASE name` on the server behind `admin_url`.
pub(crate) async fn create_database(admin_url: &str, name: &str) -> Result<()> {
    let mut conn = connect(admin_url)
        .await
        .map_err(|e| Error::sql(admin_url, e))?;
    let result = sqlx::raw_sql(&format!("CREATE DATABASE {}", quote_ident(name)))
        .execute(&mut conn)
        .await;
    let _ = conn.close().await;
    result.map(drop).map_err(|e| {
        Error::sql(
            admin_url,
            format!("cannot create test database {name} (the role needs CREATEDB): {e}"),
        )
    })
}

#[cfg(feature = "test-sources")]
/// `DROP DATABASE IF EXISTS name`, disconnecting whoever is still connected to it.
pub(crate) async fn drop_database(admin_url: &str, name: &str) -> Result<()> {
    let mut conn = connect(admin_url)
        .await
        .map_err(|e| Error::sql(admin_url, e))?;
    let ident = quote_ident(name);
    let forced = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {ident} WITH (FORCE)"))
        .execute(&mut conn)
        .await;
    let result = match forced {
        Ok(_) => Ok(()),
        // Before PostgreSQL 13 there is no FORCE; try the plain statement.
        Err(_) => sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {ident}"))
            .execute(&mut conn)
            .await
            .map(drop),
    };
    let _ = conn.close().await;
    result.map_err(|e| Error::sql(admin_url, format!("cannot drop database {name}: {e}")))
}

#[cfg(feature = "test-sources")]
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
