//! Where the primary is: a `DATABASE_URL` may name several hosts, as libpq's does
//! (`postgres://u@a:5432,b:5432/db?target_session_attrs=read-write`, or the key/value
//! form `host=a,b port=5432 dbname=db target_session_attrs=read-write`).
//!
//! PostgreSQL replicates and promotes; the broker only has to find whichever host
//! takes writes now. sqlx connects to one host, so the list is kept here: at start and
//! whenever the pool stops reaching a writable database, the hosts are tried in order
//! and the pool's connect options are pointed at the first that answers (and accepts
//! writes, unless `target_session_attrs=any`). Pushes meanwhile go to the spool
//! (PUSH-7) and are replayed into the new primary.

use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::{ConnectOptions, Connection};
use std::time::Duration;

/// The hosts a `DATABASE_URL` names, each as sqlx connect options.
#[derive(Clone, Debug)]
pub struct Hosts {
    candidates: Vec<PgConnectOptions>,
    /// Only a host that accepts writes will do (`read-write` or `primary`).
    writable: bool,
}

/// How long one host may take to answer while the primary is sought.
const PROBE_LIMIT: Duration = Duration::from_secs(2);
/// How often a multi-host broker checks that its pool still reaches a primary.
const FOLLOW_EVERY: Duration = Duration::from_millis(500);

impl Hosts {
    /// Parses a URL or a key/value connection string with one host or several.
    pub fn parse(url: &str) -> Result<Hosts, sqlx::Error> {
        let (hosts, attrs) = if url.contains("://") {
            split_url(url)?
        } else {
            split_key_values(url)?
        };
        // Several hosts default to read-write: the broker only writes.
        let writable = match attrs.as_deref() {
            None => hosts.len() > 1,
            Some("any") => false,
            Some("read-write") | Some("primary") => true,
            Some(other) => {
                return Err(config_error(format!(
                    "target_session_attrs={other} is not supported (any, read-write, primary)"
                )))
            }
        };
        Ok(Hosts {
            candidates: hosts,
            writable,
        })
    }

    /// Whether more than one host is named (so a failover is possible).
    pub fn several(&self) -> bool {
        self.candidates.len() > 1
    }

    /// Whether connections must land on a host that accepts writes.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The first host, in order, that answers and suits.
    pub async fn find(&self) -> Result<PgConnectOptions, sqlx::Error> {
        let mut last = None;
        for c in &self.candidates {
            match tokio::time::timeout(PROBE_LIMIT, suits(c, self.writable)).await {
                Ok(Ok(true)) => return Ok(c.clone()),
                Ok(Ok(false)) => {
                    last = Some(config_error(format!(
                        "{}:{} does not accept writes",
                        c.get_host(),
                        c.get_port()
                    )))
                }
                Ok(Err(e)) => last = Some(e),
                Err(_) => last = Some(sqlx::Error::PoolTimedOut),
            }
        }
        Err(last.unwrap_or_else(|| config_error("no host".into())))
    }
}

/// Whether a connection accepts writes (libpq's `read-write` test).
pub async fn accepts_writes(conn: &mut sqlx::PgConnection) -> Result<bool, sqlx::Error> {
    let (read_only,): (String,) = sqlx::query_as("SHOW transaction_read_only")
        .fetch_one(conn)
        .await?;
    Ok(read_only == "off")
}

async fn suits(c: &PgConnectOptions, writable: bool) -> Result<bool, sqlx::Error> {
    let mut conn = c.connect().await?;
    let ok = !writable || accepts_writes(&mut conn).await?;
    let _ = conn.close().await;
    Ok(ok)
}

/// Keeps `pool` pointed at a writable host until the pool closes: when a probe through
/// it fails, the hosts are tried again and the pool reconnects to the one that suits.
pub async fn follow(pool: PgPool, hosts: Hosts, tune: fn(PgConnectOptions) -> PgConnectOptions) {
    if !hosts.several() {
        return;
    }
    loop {
        tokio::time::sleep(FOLLOW_EVERY).await;
        if pool.is_closed() {
            return;
        }
        let probe = async {
            let mut conn = pool.acquire().await?;
            accepts_writes(&mut conn).await
        };
        if let Ok(Ok(true)) = tokio::time::timeout(FOLLOW_EVERY * 2, probe).await {
            continue;
        }
        let Ok(found) = hosts.find().await else {
            continue;
        };
        let now = pool.connect_options();
        if (found.get_host(), found.get_port()) != (now.get_host(), now.get_port()) {
            tracing::warn!(
                "the database's primary is now {}:{}; reconnecting",
                found.get_host(),
                found.get_port()
            );
            pool.set_connect_options(tune(found));
        }
    }
}

fn config_error(why: String) -> sqlx::Error {
    sqlx::Error::Configuration(why.into())
}

/// `scheme://userinfo@h1:p1,h2:p2/rest`: one URL per host, and target_session_attrs.
fn split_url(url: &str) -> Result<(Vec<PgConnectOptions>, Option<String>), sqlx::Error> {
    let (scheme, rest) = url.split_once("://").expect("checked by the caller");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(i) => (&authority[..=i], &authority[i + 1..]),
        None => ("", authority),
    };
    let (tail, attrs) = take_param(tail, "target_session_attrs");
    let mut out = Vec::new();
    for host in hosts.split(',') {
        let one = format!("{scheme}://{userinfo}{host}{tail}");
        out.push(one.parse::<PgConnectOptions>()?);
    }
    Ok((out, attrs))
}

/// Removes `key=value` from a URL's query: the rest, and the value.
fn take_param(tail: &str, key: &str) -> (String, Option<String>) {
    let Some((path, query)) = tail.split_once('?') else {
        return (tail.to_string(), None);
    };
    let mut value = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.split_once('=') {
            Some((k, v)) if k == key => {
                value = Some(v.to_string());
                false
            }
            _ => true,
        })
        .collect();
    if kept.is_empty() {
        (path.to_string(), value)
    } else {
        (format!("{path}?{}", kept.join("&")), value)
    }
}

/// `host=a,b port=1,2 user=u ...`: options per host, and target_session_attrs.
fn split_key_values(s: &str) -> Result<(Vec<PgConnectOptions>, Option<String>), sqlx::Error> {
    let mut base = PgConnectOptions::new_without_pgpass();
    let (mut hosts, mut ports, mut attrs) = (vec![], vec![], None);
    for pair in key_values(s)? {
        match pair {
            (k, v) if k == "host" || k == "hostaddr" => {
                hosts = v.split(',').map(str::to_string).collect()
            }
            (k, v) if k == "port" => {
                ports = v
                    .split(',')
                    .map(|p| {
                        p.parse::<u16>()
                            .map_err(|_| config_error(format!("bad port {p}")))
                    })
                    .collect::<Result<_, _>>()?
            }
            (k, v) if k == "user" => base = base.username(&v),
            (k, v) if k == "password" => base = base.password(&v),
            (k, v) if k == "dbname" => base = base.database(&v),
            (k, v) if k == "application_name" => base = base.application_name(&v),
            (k, v) if k == "sslmode" => {
                base = base.ssl_mode(
                    v.parse()
                        .map_err(|_| config_error(format!("bad sslmode {v}")))?,
                )
            }
            (k, v) if k == "target_session_attrs" => attrs = Some(v),
            (k, _) => return Err(config_error(format!("unsupported connection key {k}"))),
        }
    }
    if hosts.is_empty() {
        hosts.push("localhost".into());
    }
    if ports.len() > 1 && ports.len() != hosts.len() {
        return Err(config_error(format!(
            "{} hosts but {} ports",
            hosts.len(),
            ports.len()
        )));
    }
    let out = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            base.clone().host(h).port(port)
        })
        .collect();
    Ok((out, attrs))
}

/// The pairs of a key/value string; values may be single-quoted.
fn key_values(s: &str) -> Result<Vec<(String, String)>, sqlx::Error> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
        let key = key.trim().to_string();
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '\'' => break,
                    c => value.push(c),
                }
            }
        } else {
            value = chars.by_ref().take_while(|c| !c.is_whitespace()).collect();
        }
        if key.is_empty() {
            return Err(config_error(format!(
                "bad connection string near {value:?}"
            )));
        }
        out.push((key, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints(h: &Hosts) -> Vec<(String, u16, Option<String>)> {
        h.candidates
            .iter()
            .map(|c| {
                (
                    c.get_host().to_string(),
                    c.get_port(),
                    c.get_database().map(str::to_string),
                )
            })
            .collect()
    }

    #[test]
    fn a_url_with_several_hosts_gives_one_candidate_each() {
        let h = Hosts::parse(
            "postgres://u:p@a:5433,b:5434/queen?target_session_attrs=read-write&sslmode=disable",
        )
        .unwrap();
        assert!(h.several() && h.writable());
        assert_eq!(
            endpoints(&h),
            vec![
                ("a".into(), 5433, Some("queen".into())),
                ("b".into(), 5434, Some("queen".into()))
            ]
        );
    }

    #[test]
    fn one_host_takes_any_session_and_several_a_writable_one_unless_told() {
        let h = Hosts::parse("postgres://u@a:5433/queen").unwrap();
        assert!(!h.several() && !h.writable());
        let several = Hosts::parse("postgres://u@a,b/queen").unwrap();
        assert!(several.several() && several.writable());
        let any = Hosts::parse("postgres://u@a,b/queen?target_session_attrs=any").unwrap();
        assert!(any.several() && !any.writable());
    }

    #[test]
    fn the_key_value_form_names_hosts_and_ports() {
        let h = Hosts::parse(
            "host=a,b port=1,2 user=queen password='p w' dbname=q target_session_attrs=primary",
        )
        .unwrap();
        assert!(h.writable());
        assert_eq!(
            endpoints(&h),
            vec![
                ("a".into(), 1, Some("q".into())),
                ("b".into(), 2, Some("q".into()))
            ]
        );
    }

    #[test]
    fn one_port_serves_every_host_and_none_means_5432() {
        let h = Hosts::parse("host=a,b port=7 dbname=q").unwrap();
        assert_eq!(
            endpoints(&h),
            vec![
                ("a".into(), 7, Some("q".into())),
                ("b".into(), 7, Some("q".into()))
            ]
        );
        let h = Hosts::parse("dbname=q").unwrap();
        assert_eq!(
            endpoints(&h),
            vec![("localhost".into(), 5432, Some("q".into()))]
        );
    }

    #[test]
    fn the_key_value_form_takes_quotes_escapes_and_libpq_keys() {
        let h = Hosts::parse(
            r"hostaddr=10.0.0.1 dbname='it\'s q' application_name=queen sslmode=disable",
        )
        .unwrap();
        assert_eq!(
            endpoints(&h),
            vec![("10.0.0.1".into(), 5432, Some("it's q".into()))]
        );
        let c = &h.candidates[0];
        assert_eq!(c.get_application_name(), Some("queen"));
        assert!(matches!(
            c.get_ssl_mode(),
            sqlx::postgres::PgSslMode::Disable
        ));
        assert!(Hosts::parse("=x").unwrap_err().to_string().contains("near"));
        assert!(Hosts::parse("sslmode=sometimes").is_err());
    }

    #[test]
    fn unsupported_settings_are_refused_with_their_name() {
        let e = Hosts::parse("postgres://a,b/q?target_session_attrs=standby").unwrap_err();
        assert!(e.to_string().contains("standby"), "{e}");
        let e = Hosts::parse("host=a,b,c port=1,2").unwrap_err();
        assert!(e.to_string().contains("3 hosts but 2 ports"), "{e}");
        let e = Hosts::parse("host=a keepalives=any").unwrap_err();
        assert!(
            e.to_string()
                .contains("unsupported connection key keepalives"),
            "{e}"
        );
    }
}
