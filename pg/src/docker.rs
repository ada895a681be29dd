//! Source 2: a PostgreSQL container through testcontainers.
//!
//! Exists for machines with a Docker engine: a clean server whatever is installed locally.
//! testcontainers does the Docker API work (create, start, port mapping, removal); the image
//! comes from `QUEEN_PG_IMAGE` (default [`DEFAULT_IMAGE`]). We do not use testcontainers-modules'
//! `Postgres` image: it waits for a log line printed twice by the official image's init
//! sequence, which other images (like ours from `scripts/postgres-image.sh`) print once.
//! Readiness here is a real connection instead. The port is published on 127.0.0.1 only, since
//! the server trusts every connection.
//!
//! Before trying, we ping the engine (`GET /_ping` on `DOCKER_HOST` or `/var/run/docker.sock`),
//! so "no Docker" is a quick, clear answer instead of a testcontainers timeout.

use std::collections::HashMap;
use std::time::Duration;

use testcontainers::bollard::models::{HostConfig, PortBinding};
use testcontainers::core::{ContainerPort, IntoContainerPort};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{Error, Result};
use crate::{bg, sql, urls};

/// The image used when `QUEEN_PG_IMAGE` is unset: the official PostgreSQL 15 image.
pub const DEFAULT_IMAGE: &str = "postgres:15";

const PG_PORT: u16 = 5432;
const PING_LIMIT: Duration = Duration::from_secs(3);
const READY_LIMIT: Duration = Duration::from_secs(90);

/// The image to run: `QUEEN_PG_IMAGE`, or [`DEFAULT_IMAGE`].
pub fn image() -> String {
    std::env::var("QUEEN_PG_IMAGE")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_IMAGE.to_owned())
}

/// `Ok` when a Docker engine answers its ping.
pub async fn engine_answers() -> Result<()> {
    let host = std::env::var("DOCKER_HOST").unwrap_or_default();
    let endpoint = if host.is_empty() {
        "unix:///var/run/docker.sock".to_owned()
    } else {
        host
    };
    let unavailable = |reason: String| Error::DockerUnavailable {
        endpoint: endpoint.clone(),
        reason,
    };
    let reply = tokio::time::timeout(PING_LIMIT, ping(&endpoint))
        .await
        .map_err(|_| unavailable(format!("no answer within {PING_LIMIT:?}")))?
        .map_err(|e| unavailable(e.to_string()))?;
    if reply.starts_with("HTTP/1.") && reply.lines().next().is_some_and(|l| l.contains(" 200")) {
        Ok(())
    } else {
        Err(unavailable(format!(
            "unexpected reply {:?}",
            reply.lines().next().unwrap_or("")
        )))
    }
}

async fn ping(endpoint: &str) -> std::io::Result<String> {
    const REQUEST: &[u8] = b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n";
    let mut reply = Vec::new();
    if let Some(path) = endpoint.strip_prefix("unix://") {
        let mut s = tokio::net::UnixStream::connect(path).await?;
        s.write_all(REQUEST).await?;
        s.take(4096).read_to_end(&mut reply).await?;
    } else if let Some(addr) = endpoint.strip_prefix("tcp://") {
        let mut s = tokio::net::TcpStream::connect(addr.trim_end_matches('/')).await?;
        s.write_all(REQUEST).await?;
        s.take(4096).read_to_end(&mut reply).await?;
    } else {
        return Err(std::io::Error::other(
            "only unix:// and tcp:// DOCKER_HOST values are supported",
        ));
    }
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

/// A running PostgreSQL container, removed on drop.
pub(crate) struct DockerPg {
    container: Option<ContainerAsync<GenericImage>>,
    url: String,
    image: String,
}

impl DockerPg {
    /// Starts a container of [`image()`] and waits until it accepts connections.
    pub(crate) async fn start() -> Result<DockerPg> {
        let image = image();
        // Everything Docker-related runs on the background runtime, which outlives tests.
        bg::run(start_on_bg(image)).await
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    pub(crate) fn describe(&self) -> String {
        let id = self.container.as_ref().map_or("", |c| c.id());
        format!(
            "docker image {}, container {}",
            self.image,
            &id[..id.len().min(12)]
        )
    }

    /// Removes the container now (also what drop does).
    pub(crate) fn remove(&mut self) {
        if let Some(container) = self.container.take() {
            let _ = bg::block(container.rm(), Duration::from_secs(30));
        }
    }
}

impl Drop for DockerPg {
    fn drop(&mut self) {
        self.remove();
    }
}

async fn start_on_bg(image: String) -> Result<DockerPg> {
    let failed = |reason: String| Error::Docker {
        image: image.clone(),
        reason,
    };
    let (name, tag) = split_image(&image);
    let container = GenericImage::new(name, tag)
        .with_exposed_port(PG_PORT.tcp())
        // The official image refuses to start without a password or this.
        .with_env_var("POSTGRES_HOST_AUTH_METHOD", "trust")
        .with_cmd([
            "postgres",
            "-c",
            "max_connections=300",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ])
        .with_label("org.queen.pg.owner-pid", std::process::id().to_string())
        .with_host_config_modifier(publish_on_loopback)
        .with_startup_timeout(READY_LIMIT)
        .start()
        .await
        .map_err(|e| {
            failed(format!(
                "{e} (no registry reachable? build a local image with scripts/postgres-image.sh \
                 and set QUEEN_PG_IMAGE=queen-postgres:15)"
            ))
        })?;
    let port = container
        .get_host_port_ipv4(ContainerPort::Tcp(PG_PORT))
        .await
        .map_err(|e| failed(format!("no published port: {e}")))?;
    let url = urls::loopback(port);
    // On error the container is dropped here, which removes it (we are inside the runtime).
    let conn = sql::connect_within(&url, READY_LIMIT)
        .await
        .map_err(|e| failed(e.to_string()))?;
    drop(conn);
    Ok(DockerPg {
        container: Some(container),
        url,
        image,
    })
}

/// Publishes 5432 on 127.0.0.1 only (testcontainers would publish on all interfaces).
fn publish_on_loopback(config: &mut HostConfig) {
    config.publish_all_ports = Some(false);
    config.port_bindings = Some(HashMap::from([(
        format!("{PG_PORT}/tcp"),
        Some(vec![PortBinding {
            host_ip: Some("127.0.0.1".into()),
            host_port: Some(String::new()),
        }]),
    )]));
}

/// `registry:5000/name:tag` → (`registry:5000/name`, `tag`); no tag means `latest`.
fn split_image(image: &str) -> (&str, &str) {
    match image.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => (name, tag),
        _ => (image, "latest"),
    }
}

#[cfg(test)]
mod tests {
    use super::split_image;

    #[test]
    fn splits_image_references() {
        assert_eq!(split_image("postgres:15"), ("postgres", "15"));
        assert_eq!(split_image("queen-postgres"), ("queen-postgres", "latest"));
        assert_eq!(
            split_image("localhost:5000/pg/x:15-alpine"),
            ("localhost:5000/pg/x", "15-alpine")
        );
        assert_eq!(
            split_image("localhost:5000/pg"),
            ("localhost:5000/pg", "latest")
        );
    }
}
