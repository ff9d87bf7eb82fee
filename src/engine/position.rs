//! Where a postgres instance stands in its WAL: its timeline and the last position it has
//! flushed, asked over postgres's streaming replication protocol (`IDENTIFY_SYSTEM`), as a
//! replica asks its primary before it streams.
//!
//! - **Why this protocol**: it is the one every instance of a Database already lets in from
//!   any address, as the replication role (`host replication streaming_replica all`, the
//!   primary's first start), and its one command answers for a primary and a replica alike: a
//!   primary gives the WAL it has flushed, a replica the WAL it has received and flushed from
//!   its primary (postgres's walsender, `IdentifySystem`). No SQL session, no grant, no
//!   superuser, and nothing is left running on the instance.
//! - **Lag** is the primary's position less the replica's, in bytes: how much of what the
//!   primary holds the replica would lack if it were promoted now.
//! - **The session** is the protocol's smallest: a startup message with `replication=true`,
//!   SCRAM-SHA-256 (or MD5, for a server configured so) with the password of the replication
//!   Secret, one simple query, a `Terminate`. The messages and SCRAM are the
//!   `postgres-protocol` crate's (the protocol layer of rust-postgres); tokio-postgres itself
//!   has no replication mode. Plain TCP: the instances serve no TLS.
//! - **Errors** carry the server's own message (an `ErrorResponse`, e.g. a refused password)
//!   or the socket's; never the password, which travels only inside the SCRAM exchange.
//!
//! # Cancellation safety
//!
//! [`identify`] is cancellation safe: dropping it closes the connection.

use std::time::Duration;

use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, SCRAM_SHA_256, ScramSha256};
use postgres_protocol::message::backend::{DataRowBody, ErrorFields, ErrorResponseBody, Message};
use postgres_protocol::message::frontend;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An instance's answer to `IDENTIFY_SYSTEM`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Position {
    /// The cluster's system identifier: the same on a primary and every replica copied from it.
    pub(crate) system_id: String,
    /// The timeline the instance is on (1 until a replica is first promoted).
    pub(crate) timeline: u32,
    /// The WAL position it has flushed (a primary) or received and flushed (a replica), as a
    /// byte offset in the WAL (`X/Y` in postgres's notation is `X << 32 | Y`).
    pub(crate) lsn: u64,
}

/// Why an instance could not be asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The connection failed or broke.
    #[error("connecting to {address}: {source}")]
    Io { address: String, source: std::io::Error },
    /// It did not answer within the time given.
    #[error("{address} did not answer within {timeout:?}")]
    Timeout { address: String, timeout: Duration },
    /// The server refused, in its words (a wrong password, too many connections, ...).
    #[error("{address} refused: {message}")]
    Refused { address: String, message: String },
    /// The server said something this client does not expect.
    #[error("{address}: {message}")]
    Protocol { address: String, message: String },
}

/// Asks the instance at `host:port` where it stands, as `user` with `password`, within `timeout`.
///
/// # Errors
///
/// [`Error`]: the connection's, the server's refusal, or no answer in time.
pub(crate) async fn identify(
    host: &str,
    port: u16,
    user: &str,
    password: &str,
    timeout: Duration,
) -> Result<Position, Error> {
    let address = format!("{host}:{port}");
    match tokio::time::timeout(timeout, session(&address, user, password)).await {
        Ok(result) => result.map_err(|failure| failure.at(&address)),
        Err(_) => Err(Error::Timeout { address, timeout }),
    }
}

/// What went wrong, before the address is known to the error.
enum Failure {
    Io(std::io::Error),
    Refused(String),
    Protocol(String),
}

impl Failure {
    fn at(self, address: &str) -> Error {
        let address = address.to_string();
        match self {
            Failure::Io(source) => Error::Io { address, source },
            Failure::Refused(message) => Error::Refused { address, message },
            Failure::Protocol(message) => Error::Protocol { address, message },
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        Failure::Io(error)
    }
}

/// The session: startup, authentication, `IDENTIFY_SYSTEM`, terminate.
async fn session(address: &str, user: &str, password: &str) -> Result<Position, Failure> {
    let mut connection = Connection { stream: TcpStream::connect(address).await?, buffer: BytesMut::new() };
    let mut out = BytesMut::new();
    let parameters = [("user", user), ("replication", "true"), ("application_name", "database-operator")];
    frontend::startup_message(parameters, &mut out)?;
    connection.send(&mut out).await?;
    authenticate(&mut connection, user, password).await?;
    frontend::query("IDENTIFY_SYSTEM", &mut out)?;
    connection.send(&mut out).await?;
    let mut position = None;
    loop {
        match connection.receive().await? {
            Message::DataRow(row) => position = Some(parse_row(&row)?),
            Message::ReadyForQuery(_) => break,
            Message::ErrorResponse(body) => return Err(Failure::Refused(error_message(&body))),
            _ => {}
        }
    }
    frontend::terminate(&mut out);
    // The answer is in hand: a failure to say goodbye loses nothing.
    let _ = connection.send(&mut out).await;
    position.ok_or_else(|| Failure::Protocol("IDENTIFY_SYSTEM returned no row".into()))
}

/// Answers the server's authentication request until it says `AuthenticationOk`, then
/// reads on until it is ready for a query.
async fn authenticate(connection: &mut Connection, user: &str, password: &str) -> Result<(), Failure> {
    let mut out = BytesMut::new();
    let mut scram: Option<ScramSha256> = None;
    loop {
        match connection.receive().await? {
            Message::AuthenticationOk | Message::ParameterStatus(_) | Message::BackendKeyData(_) => {}
            Message::ReadyForQuery(_) => return Ok(()),
            Message::AuthenticationSasl(body) => {
                let mut mechanisms = body.mechanisms();
                let mut offered = false;
                while let Some(mechanism) = mechanisms.next()? {
                    offered |= mechanism == SCRAM_SHA_256;
                }
                if !offered {
                    return Err(Failure::Protocol("the server offers no SCRAM-SHA-256".into()));
                }
                let exchange = ScramSha256::new(password.as_bytes(), ChannelBinding::unsupported());
                frontend::sasl_initial_response(SCRAM_SHA_256, exchange.message(), &mut out)?;
                scram = Some(exchange);
            }
            Message::AuthenticationSaslContinue(body) => {
                let exchange = scram.as_mut().ok_or_else(|| Failure::Protocol("SASL out of turn".into()))?;
                exchange.update(body.data())?;
                frontend::sasl_response(exchange.message(), &mut out)?;
            }
            Message::AuthenticationSaslFinal(body) => {
                let exchange = scram.as_mut().ok_or_else(|| Failure::Protocol("SASL out of turn".into()))?;
                exchange.finish(body.data())?;
            }
            Message::AuthenticationMd5Password(body) => {
                let hash = md5_hash(user.as_bytes(), password.as_bytes(), body.salt());
                frontend::password_message(hash.as_bytes(), &mut out)?;
            }
            Message::ErrorResponse(body) => return Err(Failure::Refused(error_message(&body))),
            _ => return Err(Failure::Protocol("an authentication this client does not speak".into())),
        }
        if !out.is_empty() {
            connection.send(&mut out).await?;
        }
    }
}

/// A row of `IDENTIFY_SYSTEM`: systemid, timeline, xlogpos, dbname.
fn parse_row(row: &DataRowBody) -> Result<Position, Failure> {
    let mut fields = Vec::with_capacity(4);
    let mut ranges = row.ranges();
    while let Some(range) = ranges.next()? {
        let text = range.map(|r| String::from_utf8_lossy(&row.buffer()[r]).into_owned());
        fields.push(text.unwrap_or_default());
    }
    let unexpected = || Failure::Protocol(format!("IDENTIFY_SYSTEM answered {fields:?}"));
    let [system_id, timeline, lsn, ..] = fields.as_slice() else { return Err(unexpected()) };
    let timeline = timeline.parse().map_err(|_| unexpected())?;
    let lsn = parse_lsn(lsn).ok_or_else(unexpected)?;
    Ok(Position { system_id: system_id.clone(), timeline, lsn })
}

/// A WAL position in postgres's notation, `X/Y` (two hexadecimal halves), as a byte offset.
pub(crate) fn parse_lsn(text: &str) -> Option<u64> {
    let (high, low) = text.split_once('/')?;
    let (high, low) = (u32::from_str_radix(high, 16).ok()?, u32::from_str_radix(low, 16).ok()?);
    Some(u64::from(high) << 32 | u64::from(low))
}

/// The message of an `ErrorResponse` (field `M`), with its SQLSTATE (field `C`).
fn error_message(body: &ErrorResponseBody) -> String {
    let (mut message, mut code) = (String::new(), String::new());
    let mut fields: ErrorFields<'_> = body.fields();
    while let Ok(Some(field)) = fields.next() {
        match field.type_() {
            b'M' => message = String::from_utf8_lossy(field.value_bytes()).into_owned(),
            b'C' => code = String::from_utf8_lossy(field.value_bytes()).into_owned(),
            _ => {}
        }
    }
    if code.is_empty() { message } else { format!("{message} (SQLSTATE {code})") }
}

/// A socket and what has been read from it but not yet parsed.
struct Connection {
    stream: TcpStream,
    buffer: BytesMut,
}

impl Connection {
    async fn send(&mut self, out: &mut BytesMut) -> std::io::Result<()> {
        self.stream.write_all(out).await?;
        out.clear();
        Ok(())
    }

    /// The next whole message; an end of stream before it is an error.
    async fn receive(&mut self) -> Result<Message, Failure> {
        loop {
            if let Some(message) = Message::parse(&mut self.buffer)? {
                return Ok(message);
            }
            if self.stream.read_buf(&mut self.buffer).await? == 0 {
                return Err(Failure::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wal_position_is_its_two_hexadecimal_halves() {
        assert_eq!(parse_lsn("0/3000148"), Some(0x300_0148));
        assert_eq!(parse_lsn("16/B374D848"), Some(0x16_B374_D848));
        assert_eq!(parse_lsn("0/0"), Some(0));
        for bad in ["", "3000148", "0/", "/1", "G/1", "1/2/3", "100000000/0"] {
            assert_eq!(parse_lsn(bad), None, "{bad}");
        }
    }

    /// A server that answers the startup message with `reply` and then keeps the connection
    /// open without a word; its address.
    async fn server(reply: &'static [u8]) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut startup = [0u8; 512];
            let _ = socket.read(&mut startup).await.unwrap();
            socket.write_all(reply).await.unwrap();
            tokio::time::sleep(Duration::from_secs(60)).await;
        });
        address
    }

    #[tokio::test]
    async fn a_refusal_is_the_server_s_own_words_and_a_silent_server_times_out() {
        let fields: &[u8] = b"SFATAL\0C28P01\0Mpassword authentication failed for user \"streaming_replica\"\0\0";
        let mut refusal = vec![b'E'];
        refusal.extend_from_slice(&u32::try_from(fields.len() + 4).unwrap().to_be_bytes());
        refusal.extend_from_slice(fields);
        let refusal: &'static [u8] = Box::leak(refusal.into_boxed_slice());
        let address = server(refusal).await;
        let error = identify("127.0.0.1", address.port(), "streaming_replica", "secret", Duration::from_secs(5))
            .await
            .unwrap_err();
        let said = error.to_string();
        assert!(matches!(error, Error::Refused { .. }), "{said}");
        assert!(said.ends_with("password authentication failed for user \"streaming_replica\" (SQLSTATE 28P01)"));
        assert!(!said.contains("secret"), "{said}");

        let silent = server(b"").await;
        let timeout = Duration::from_millis(200);
        let error = identify("127.0.0.1", silent.port(), "u", "p", timeout).await.unwrap_err();
        assert!(matches!(error, Error::Timeout { .. }), "{error}");
    }
}
