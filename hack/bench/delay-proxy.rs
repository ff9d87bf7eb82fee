//! A TCP proxy that delays every byte by a fixed time each way: the network between an operator
//! and an apiserver on other machines, for the worker sweep (hack/bench/workers.sh). The kernel
//! here has no netem qdisc, so the delay is added in user space.
//!
//! `delay-proxy --upstream 127.0.0.1:6443 --rtt-ms 20` listens on a free loopback port, prints
//! `listening on 127.0.0.1:PORT` on stdout, and forwards each connection to the upstream: what
//! one side sends reaches the other `rtt / 2` later, chunk by chunk, so a request and its answer
//! take one extra round trip while a stream keeps its bandwidth. Bytes pass untouched (TLS
//! included), so a kubeconfig pointing at the proxy verifies the apiserver's own certificate.
//!
//! Not part of the crate's API: an example target so that it shares the crate's build.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

#[derive(Debug, Parser)]
struct Cli {
    /// Where connections go.
    #[arg(long)]
    upstream: SocketAddr,
    /// The round trip added: each direction is delayed by half of it.
    #[arg(long)]
    rtt_ms: u64,
    /// Where to listen (port 0: a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let listener = TcpListener::bind(cli.listen).await.context("binding")?;
    println!("listening on {}", listener.local_addr()?);
    let delay = Duration::from_millis(cli.rtt_ms) / 2;
    loop {
        let (client, _) = listener.accept().await?;
        let upstream = cli.upstream;
        tokio::spawn(async move {
            if let Err(error) = relay(client, upstream, delay).await {
                eprintln!("[delay-proxy] connection ended: {error:#}");
            }
        });
    }
}

/// Forwards `client` to `upstream` and back, each direction delayed by `delay`.
async fn relay(client: TcpStream, upstream: SocketAddr, delay: Duration) -> anyhow::Result<()> {
    let server = TcpStream::connect(upstream).await.context("connecting upstream")?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = tokio::spawn(delayed(client_read, server_write, delay));
    let down = tokio::spawn(delayed(server_read, client_write, delay));
    let (up, down) = tokio::join!(up, down);
    up??;
    down??;
    Ok(())
}

/// Copies `from` to `to`, each chunk written `delay` after it was read; closes `to`'s write side
/// when `from` ends.
async fn delayed(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) -> anyhow::Result<()> {
    let (sender, mut receiver) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buffer = vec![0; 64 * 1024];
        loop {
            let read = from.read(&mut buffer).await?;
            if read == 0 {
                return anyhow::Ok(());
            }
            // Fails only when the writer has stopped (its side closed): nothing to deliver to.
            if sender.send((Instant::now() + delay, buffer[..read].to_vec())).is_err() {
                return Ok(());
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = receiver.recv().await {
            tokio::time::sleep_until(due).await;
            to.write_all(&chunk).await?;
        }
        to.shutdown().await?;
        anyhow::Ok(())
    };
    let (read, written) = tokio::join!(reader, writer);
    read.and(written)
}
