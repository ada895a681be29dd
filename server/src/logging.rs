//! How `queen-server` logs. Operators read a terminal, but most logs land in a file or
//! a collector: colour escapes there are noise, and a collector wants one JSON object
//! per line. So: plain text, coloured only on a terminal that has not asked for no
//! colour (`NO_COLOR`), or JSON lines with `LOG_FORMAT=json`. `RUST_LOG` filters as
//! usual.

use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// The shape of each log line (`LOG_FORMAT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    /// `LOG_FORMAT`'s value: `text` (the default when unset or empty) or `json`.
    pub fn parse(value: Option<&str>) -> Result<LogFormat, String> {
        match value.map(str::trim).unwrap_or("") {
            "" | "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("LOG_FORMAT={other}: expected text or json")),
        }
    }
}

/// Whether text lines carry colour: only on a terminal, and never with `NO_COLOR` set
/// to anything non-empty (no-color.org).
pub fn colour(on_terminal: bool, no_color: Option<&str>) -> bool {
    on_terminal && no_color.is_none_or(str::is_empty)
}

/// Installs the process's log subscriber from the environment.
pub fn init() -> Result<(), String> {
    let format = LogFormat::parse(std::env::var("LOG_FORMAT").ok().as_deref())?;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Json => builder.json().with_ansi(false).init(),
        LogFormat::Text => {
            let no_color = std::env::var("NO_COLOR").ok();
            let ansi = colour(std::io::stdout().is_terminal(), no_color.as_deref());
            builder.with_ansi(ansi).init()
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_format_is_text_unless_json_is_asked_for() {
        assert_eq!(LogFormat::parse(None), Ok(LogFormat::Text));
        assert_eq!(LogFormat::parse(Some("")), Ok(LogFormat::Text));
        assert_eq!(LogFormat::parse(Some("text")), Ok(LogFormat::Text));
        assert_eq!(LogFormat::parse(Some("json")), Ok(LogFormat::Json));
        assert!(LogFormat::parse(Some("xml"))
            .unwrap_err()
            .contains("LOG_FORMAT=xml"));
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some("")));
        assert!(!colour(true, Some("1")));
        assert!(!colour(false, None));
    }
}
