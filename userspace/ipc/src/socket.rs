//! Abstract Unix socket addresses (`@clawos-ipc-<component>`), bind with the
//! spec's backlog, and connect.

use std::io;
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;

use nix::sys::socket::{bind, listen, socket, AddressFamily, Backlog, SockFlag, SockType, UnixAddr};

use crate::component::ComponentId;

/// Overrides the `clawos-ipc-` prefix of every socket name, so tests and
/// side-by-side instances on one host do not collide.
pub const SOCKET_PREFIX_ENV: &str = "CLAWOS_IPC_SOCKET_PREFIX";
/// The spec's prefix.
pub const DEFAULT_SOCKET_PREFIX: &str = "clawos-ipc-";
/// Pending connection queue (spec "Backlog").
pub const LISTEN_BACKLOG: i32 = 128;

/// The abstract socket name of `component`, without the leading `@`/NUL.
pub fn socket_name(component: ComponentId) -> String {
    let prefix = std::env::var(SOCKET_PREFIX_ENV).unwrap_or_else(|_| DEFAULT_SOCKET_PREFIX.to_owned());
    format!("{prefix}{component}")
}

/// Binds and listens on the abstract socket `name`.
pub fn bind_abstract(name: &str) -> io::Result<std::os::unix::net::UnixListener> {
    let fd = socket(AddressFamily::Unix, SockType::Stream, SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK, None)?;
    let address = UnixAddr::new_abstract(name.as_bytes())?;
    bind(fd.as_raw_fd(), &address).map_err(|errno| {
        let error = io::Error::from(errno);
        io::Error::new(error.kind(), format!("bind @{name}: {error}"))
    })?;
    listen(&fd, Backlog::new(LISTEN_BACKLOG)?)?;
    Ok(std::os::unix::net::UnixListener::from(fd))
}

/// Connects to the abstract socket `name`.
pub fn connect_abstract(name: &str) -> io::Result<tokio::net::UnixStream> {
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    // A Unix-socket connect completes or fails at once; it never waits on a network.
    let stream = std::os::unix::net::UnixStream::connect_addr(&address)?;
    stream.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(stream)
}
