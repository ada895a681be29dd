//! A TCP forwarder between one broker and its database, so that one broker of several
//! can lose the database while the others keep it (`broker-partition`, `spool-orphan`).
//!
//! Signals act on whole processes: stopping PostgreSQL takes it from every broker at
//! once. A forwarder per broker is the smallest network the harness can cut for one of
//! them: [`Proxy::cut`] resets every connection through it and refuses new ones (the
//! broker sees its database go away, as after a lost route), [`Proxy::heal`] lets
//! connections through again. The same forwarder in front of a broker can hold its
//! answers back ([`Slow`]), so a client's timeout fires on a fast machine too.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

/// A loopback forwarder to `127.0.0.1:upstream`, running while this value lives.
pub struct Proxy {
    port: u16,
    state: Arc<State>,
    accept: JoinHandle<()>,
}

/// What the accept loop and [`Proxy::cut`] share.
#[derive(Default)]
struct State {
    /// Refuse new connections.
    cut: AtomicBool,
    /// The forwarding tasks of open connections, aborted by a cut.
    live: Mutex<Vec<AbortHandle>>,
}

/// Answers held back on their way to the client: every `every`-th read from the
/// upstream on a connection waits `delay` before it is passed on. A client whose timeout
/// is shorter than `delay` then gives up on those calls while the broker did their work,
/// whatever the speed of the machine.
#[derive(Clone, Copy, Debug)]
pub struct Slow {
    /// How long a held-back read waits.
    pub delay: std::time::Duration,
    /// Every how many reads of a connection one is held back.
    pub every: u32,
}

impl Proxy {
    /// Listens on a free loopback port and forwards each connection to `upstream`.
    pub async fn start(upstream: u16) -> Result<Proxy, String> {
        Proxy::start_with(upstream, None).await
    }

    /// [`Proxy::start`], with the upstream's answers held back as `slow` says.
    pub(crate) async fn start_slow(upstream: u16, slow: Slow) -> Result<Proxy, String> {
        Proxy::start_with(upstream, Some(slow)).await
    }

    async fn start_with(upstream: u16, slow: Option<Slow>) -> Result<Proxy, String> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| format!("proxy: cannot listen: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("proxy: {e}"))?
            .port();
        let state = Arc::new(State::default());
        let shared = state.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if shared.cut.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let task = tokio::spawn(forward(client, upstream, slow));
                let mut live = shared.live.lock().expect("proxy lock");
                live.retain(|h| !h.is_finished());
                live.push(task.abort_handle());
            }
        });
        Ok(Proxy {
            port,
            state,
            accept,
        })
    }

    /// The port brokers connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Resets every connection and refuses new ones: the number reset.
    pub fn cut(&self) -> usize {
        self.state.cut.store(true, Ordering::SeqCst);
        let mut live = self.state.live.lock().expect("proxy lock");
        let open = live.iter().filter(|h| !h.is_finished()).count();
        for h in live.drain(..) {
            h.abort();
        }
        open
    }

    /// Lets new connections through again.
    pub fn heal(&self) {
        self.state.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

async fn forward(mut client: TcpStream, upstream: u16, slow: Option<Slow>) {
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let Some(slow) = slow else {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        return;
    };
    let (mut from_client, to_client) = client.into_split();
    let (from_server, mut to_server) = server.into_split();
    tokio::select! {
        _ = tokio::io::copy(&mut from_client, &mut to_server) => {}
        _ = held_back(from_server, to_client, slow) => {}
    }
}

/// Copies `from` to `to`, every `slow.every`-th read after `slow.delay`.
async fn held_back(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    slow: Slow,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    for n in 1u32.. {
        let k = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(k) => k,
        };
        if n % slow.every.max(1) == 0 {
            tokio::time::sleep(slow.delay).await;
        }
        if to.write_all(&buf[..k]).await.is_err() {
            return;
        }
    }
}
