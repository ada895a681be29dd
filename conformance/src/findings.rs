//! The findings a run records: each departure as first seen (at which exchange, with
//! the model's answer there) and the example that reproduces it, so that the report
//! lists each once with a transcript to replay.

use crate::exchange::Exchange;
use queen_reference::finding::Finding;
use queen_reference::wire::HttpResponse;

/// A finding as first seen by a session: at which exchange, and the model's answer there.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The departure from the protocol.
    pub finding: Finding,
    /// Index of the exchange in the session's transcript.
    pub step: usize,
    /// What the model would have answered (with placeholders for what only the broker
    /// knows); `None` for a PROJECT alternative explored without an answer of its own.
    pub expected: Option<HttpResponse>,
}

/// A finding with what reproduces it: the transcript of the case (or sequence) up to and
/// including the exchange where it was first seen.
#[derive(Clone, Debug)]
pub struct Example {
    /// The finding and where it was first seen.
    pub seen: Seen,
    /// Where it was seen: a case id, or the lockstep run.
    pub(crate) origin: String,
    /// The case's name prefix (curl scripts make it fresh).
    pub(crate) prefix: String,
    /// The exchanges up to and including the one where it was seen.
    pub transcript: Vec<Exchange>,
}

impl Example {
    /// One example per finding of `seen`, cut from `transcript`.
    pub fn all(seen: &[Seen], transcript: &[Exchange], prefix: &str, origin: &str) -> Vec<Example> {
        seen.iter()
            .map(|s| Example {
                seen: s.clone(),
                origin: origin.to_string(),
                prefix: prefix.to_string(),
                transcript: transcript[..(s.step + 1).min(transcript.len())].to_vec(),
            })
            .collect()
    }
}
