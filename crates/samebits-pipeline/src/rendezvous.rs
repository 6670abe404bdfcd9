//! Rendezvous: how the ranks learn the NCCL unique id (128 bytes) that rank 0 creates. Only the
//! id travels this way; every activation goes through NCCL.
//!
//! - `file:PATH`: rank 0 writes the id to PATH (through a temporary file and a rename, so a
//!   reader never sees half of it) and removes it at shutdown; the others poll until it exists.
//!   PATH must not exist beforehand (a stale id would make the others wait on a dead session).
//!   The launcher uses a fresh temporary folder on one host; a shared filesystem works too.
//! - `tcp:HOST:PORT`: rank 0 listens on HOST:PORT and gives the id to each of the N - 1 ranks
//!   that connect; the others connect (retrying) to HOST:PORT. Works across hosts.

use crate::{PipelineError, Result};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// The NCCL unique id's size.
pub const ID_BYTES: usize = 128;
const MAGIC: &[u8; 8] = b"sbpipe01";

/// How long a rank waits for the id.
pub const TIMEOUT: Duration = Duration::from_secs(300);

/// Where the id is exchanged (module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rendezvous {
    File(PathBuf),
    Tcp(String),
}

impl FromStr for Rendezvous {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if let Some(path) = s.strip_prefix("file:").filter(|p| !p.is_empty()) {
            return Ok(Rendezvous::File(PathBuf::from(path)));
        }
        if let Some(addr) = s.strip_prefix("tcp:").filter(|a| a.contains(':')) {
            return Ok(Rendezvous::Tcp(addr.to_string()));
        }
        Err(format!(
            "rendezvous {s:?} is neither file:PATH nor tcp:HOST:PORT"
        ))
    }
}

impl std::fmt::Display for Rendezvous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rendezvous::File(p) => write!(f, "file:{}", p.display()),
            Rendezvous::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// Rank 0's published id: removes the file, or stops serving, when dropped.
#[derive(Debug)]
pub struct Published {
    file: Option<PathBuf>,
    server: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Published {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            let _ = std::fs::remove_file(file);
        }
        // A server thread still waiting for peers that never came is left to the process's end.
        drop(self.server.take());
    }
}

impl Rendezvous {
    /// Rank 0: makes `id` available to `peers` other ranks.
    pub fn publish(&self, id: &[u8; ID_BYTES], peers: usize) -> Result<Published> {
        let mut message = MAGIC.to_vec();
        message.extend_from_slice(id);
        match self {
            Rendezvous::File(path) => {
                if path.exists() {
                    return Err(PipelineError::Usage(format!(
                        "rendezvous file {} exists already (a stale session?); remove it or \
                         name a new one",
                        path.display()
                    )));
                }
                let tmp = path.with_extension("partial");
                let io = |e| PipelineError::io(path, e);
                std::fs::write(&tmp, &message).map_err(io)?;
                std::fs::rename(&tmp, path).map_err(io)?;
                Ok(Published {
                    file: Some(path.clone()),
                    server: None,
                })
            }
            Rendezvous::Tcp(addr) => {
                let listener = TcpListener::bind(addr).map_err(|e| {
                    PipelineError::Usage(format!("rendezvous: cannot listen on {addr}: {e}"))
                })?;
                let server = std::thread::spawn(move || {
                    for _ in 0..peers {
                        match listener.accept() {
                            Ok((mut stream, _)) => {
                                let _ = stream.write_all(&message);
                            }
                            Err(_) => return,
                        }
                    }
                });
                Ok(Published {
                    file: None,
                    server: Some(server),
                })
            }
        }
    }

    /// A rank other than 0: waits up to `timeout` for rank 0's id.
    pub fn fetch(&self, timeout: Duration) -> Result<[u8; ID_BYTES]> {
        let start = Instant::now();
        let mut last_error = String::from("nothing yet");
        while start.elapsed() < timeout {
            match self.try_fetch() {
                Ok(id) => return Ok(id),
                Err(e) => last_error = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(PipelineError::Usage(format!(
            "rendezvous {self}: no id from rank 0 within {} s ({last_error})",
            timeout.as_secs()
        )))
    }

    fn try_fetch(&self) -> std::result::Result<[u8; ID_BYTES], String> {
        let mut message = [0u8; 8 + ID_BYTES];
        match self {
            Rendezvous::File(path) => {
                let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
                if bytes.len() != message.len() {
                    return Err(format!("{} holds {} bytes", path.display(), bytes.len()));
                }
                message.copy_from_slice(&bytes);
            }
            Rendezvous::Tcp(addr) => {
                let mut stream = TcpStream::connect(addr).map_err(|e| e.to_string())?;
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .map_err(|e| e.to_string())?;
                stream.read_exact(&mut message).map_err(|e| e.to_string())?;
            }
        }
        if &message[..8] != MAGIC {
            return Err("not a samebits rendezvous".into());
        }
        Ok(message[8..].try_into().expect("128 bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(seed: u8) -> [u8; ID_BYTES] {
        std::array::from_fn(|i| seed.wrapping_add(i as u8))
    }

    #[test]
    fn addresses_parse() {
        assert_eq!(
            "file:/tmp/x".parse(),
            Ok(Rendezvous::File(PathBuf::from("/tmp/x")))
        );
        assert_eq!(
            "tcp:10.0.0.1:29500".parse(),
            Ok(Rendezvous::Tcp("10.0.0.1:29500".into()))
        );
        assert!("tcp:nohost".parse::<Rendezvous>().is_err());
        assert!("/tmp/x".parse::<Rendezvous>().is_err());
    }

    #[test]
    fn a_file_rendezvous_hands_the_id_over_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let r = Rendezvous::File(dir.path().join("id"));
        let reader = {
            let r = r.clone();
            std::thread::spawn(move || r.fetch(Duration::from_secs(10)))
        };
        std::thread::sleep(Duration::from_millis(150));
        let published = r.publish(&id(7), 1).unwrap();
        assert_eq!(reader.join().unwrap().unwrap(), id(7));
        assert!(
            r.publish(&id(8), 1)
                .unwrap_err()
                .to_string()
                .contains("exists already")
        );
        drop(published);
        assert!(!dir.path().join("id").exists());
        let e = r.fetch(Duration::from_millis(250)).unwrap_err().to_string();
        assert!(e.contains("no id from rank 0"), "{e}");
    }

    #[test]
    fn a_tcp_rendezvous_serves_every_peer() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let r = Rendezvous::Tcp(format!("127.0.0.1:{port}"));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let r = r.clone();
                std::thread::spawn(move || r.fetch(Duration::from_secs(10)))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(150));
        let _published = r.publish(&id(42), 3).unwrap();
        for reader in readers {
            assert_eq!(reader.join().unwrap().unwrap(), id(42));
        }
    }
}
