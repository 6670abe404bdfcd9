//! What crosses between stages and how: [`Message`]s of [`Item`]s, their wire encoding (one byte
//! buffer), and the [`Link`] every rank exchanges them over.
//!
//! The ranks form a ring `0 → 1 → ... → N-1 → 0`: stage k sends its results to stage k+1, and
//! the last stage sends the pipeline's outputs back to rank 0. One [`Link::exchange`] sends one
//! message to the next rank and receives one from the previous rank; every rank exchanges once
//! per tick (`worker.rs`), so the exchange never deadlocks. [`ThreadLink`] is the in-process ring
//! of the CPU simulation; `nccl.rs` has the one between GPUs.
//!
//! Wire format (little-endian u64 words, then bytes): `[header_words, MAGIC, fingerprint, kind,
//! item_count, per item: key, flags, tensor_count, per tensor: dtype_index, rank, dims...,
//! byte_len]`, then every tensor's raw bytes in order (for `Failed`, the UTF-8 message).

use crate::{PipelineError, Result};
use samebits_ir::{DType, Tensor};
use std::sync::mpsc::{Receiver, Sender, channel};

const MAGIC: u64 = 0x7069_7065_6c69_6e65; // "pipeline"

/// Item flag: drop the state kept for this item's key (a sequence's KV caches) and pass on.
pub const RELEASE: u64 = 1;
/// Item flag: the last stage returns only the last position's logits.
pub const LAST_ROW: u64 = 2;

/// One request inside a group: its key (a request or sequence id), flags, and tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub key: u64,
    pub flags: u64,
    pub tensors: Vec<Tensor>,
}

/// What one rank sends another in one tick.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// Nothing this tick.
    Idle,
    /// A group of requests (a micro-batch), computed by the sending stage.
    Work(Vec<Item>),
    /// A stage failed on a group; the message travels on to rank 0.
    Failed(String),
    /// The pipeline shuts down (`worker.rs`).
    Stop,
}

/// Sends one message to the next rank and receives one from the previous rank.
pub trait Link {
    fn exchange(&mut self, message: &Message) -> Result<Message>;
}

/// Encodes a message; `fingerprint` identifies the stage plan (all ranks must agree on it).
pub fn encode(message: &Message, fingerprint: u64) -> Result<Vec<u8>> {
    let mut header = vec![MAGIC, fingerprint];
    let mut payload: Vec<&[u8]> = Vec::new();
    match message {
        Message::Idle => header.extend([0, 0]),
        Message::Stop => header.extend([2, 0]),
        Message::Failed(text) => {
            header.extend([3, 0]);
            payload.push(text.as_bytes());
        }
        Message::Work(items) => {
            header.extend([1, items.len() as u64]);
            for item in items {
                header.extend([item.key, item.flags, item.tensors.len() as u64]);
                for t in &item.tensors {
                    let bytes = t.bytes()?;
                    let dtype = DType::ALL.iter().position(|&d| d == t.dtype());
                    header.push(dtype.expect("every dtype is in DType::ALL") as u64);
                    header.push(t.rank() as u64);
                    header.extend(t.shape().iter().map(|&d| d as u64));
                    header.push(bytes.len() as u64);
                    payload.push(bytes);
                }
            }
        }
    }
    let total = 8 * (header.len() + 1) + payload.iter().map(|p| p.len()).sum::<usize>();
    let mut out = Vec::with_capacity(total);
    out.extend((header.len() as u64).to_le_bytes());
    for word in header {
        out.extend(word.to_le_bytes());
    }
    for p in payload {
        out.extend_from_slice(p);
    }
    Ok(out)
}

/// Decodes a message, checking that it comes from a rank with the same stage plan.
pub fn decode(bytes: &[u8], fingerprint: u64) -> Result<Message> {
    let bad = |what: &str| PipelineError::Link(format!("malformed message: {what}"));
    let word = |i: usize| -> Result<u64> {
        bytes
            .get(8 * i..8 * i + 8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
            .ok_or_else(|| bad("truncated header"))
    };
    let words = usize::try_from(word(0)?).map_err(|_| bad("header length"))?;
    let mut at = 1;
    let mut next = || -> Result<u64> {
        if at > words {
            return Err(bad("header shorter than its contents"));
        }
        at += 1;
        word(at - 1)
    };
    if next()? != MAGIC {
        return Err(bad("not a samebits pipeline message"));
    }
    if next()? != fingerprint {
        return Err(PipelineError::Link(
            "a peer runs another stage plan (another model, partition count or version)".into(),
        ));
    }
    let (kind, count) = (next()?, next()?);
    let mut offset = 8 * (words + 1);
    let mut take = |len: usize| -> Result<&[u8]> {
        let piece = bytes
            .get(offset..offset + len)
            .ok_or_else(|| bad("payload shorter than its header"))?;
        offset += len;
        Ok(piece)
    };
    match kind {
        0 => Ok(Message::Idle),
        2 => Ok(Message::Stop),
        3 => {
            let rest = bytes.len().saturating_sub(8 * (words + 1));
            Ok(Message::Failed(
                String::from_utf8_lossy(take(rest)?).into_owned(),
            ))
        }
        1 => {
            let mut items = Vec::new();
            for _ in 0..count {
                let (key, flags, tensors) = (next()?, next()?, next()?);
                let mut item = Item {
                    key,
                    flags,
                    tensors: Vec::new(),
                };
                for _ in 0..tensors {
                    let dtype = *DType::ALL
                        .get(next()? as usize)
                        .ok_or_else(|| bad("dtype"))?;
                    let rank = next()? as usize;
                    let shape = (0..rank)
                        .map(|_| next().map(|d| d as usize))
                        .collect::<Result<Vec<_>>>()?;
                    let len = next()? as usize;
                    item.tensors
                        .push(Tensor::from_le_bytes(dtype, shape, take(len)?)?);
                }
                items.push(item);
            }
            Ok(Message::Work(items))
        }
        _ => Err(bad("unknown kind")),
    }
}

/// The in-process ring of the CPU simulation: one thread per rank, channels between them. It
/// sends the encoded bytes, so the simulation exercises the wire format too.
pub struct ThreadLink {
    to_next: Sender<Vec<u8>>,
    from_prev: Receiver<Vec<u8>>,
    fingerprint: u64,
}

impl ThreadLink {
    /// The links of a ring of `n` ranks, rank 0 first.
    pub fn ring(n: usize, fingerprint: u64) -> Vec<ThreadLink> {
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..n).map(|_| channel()).unzip();
        // Rank r sends on channel r and receives on channel r - 1.
        let mut receivers: Vec<Option<Receiver<Vec<u8>>>> =
            receivers.into_iter().map(Some).collect();
        (0..n)
            .map(|r| ThreadLink {
                to_next: senders[r].clone(),
                from_prev: receivers[(r + n - 1) % n]
                    .take()
                    .expect("one receiver each"),
                fingerprint,
            })
            .collect()
    }
}

impl Link for ThreadLink {
    fn exchange(&mut self, message: &Message) -> Result<Message> {
        let gone = || PipelineError::Link("a simulated stage thread has stopped".into());
        self.to_next
            .send(encode(message, self.fingerprint)?)
            .map_err(|_| gone())?;
        let bytes = self.from_prev.recv().map_err(|_| gone())?;
        decode(&bytes, self.fingerprint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_survive_the_wire_bit_for_bit() {
        let f =
            Tensor::from_vec(vec![2, 3], vec![1.5f32, -0.0, f32::NAN, 3.0, 1e-42, -7.0]).unwrap();
        let i = Tensor::from_vec(vec![1, 4], vec![1i64, 2, 3, 49151]).unwrap();
        let empty = Tensor::from_vec(vec![1, 3, 0, 64], Vec::<f32>::new()).unwrap();
        let scalar = Tensor::scalar(7u8);
        let messages = [
            Message::Idle,
            Message::Stop,
            Message::Failed("stage 1: boom ✗".into()),
            Message::Work(vec![]),
            Message::Work(vec![
                Item {
                    key: 3,
                    flags: LAST_ROW,
                    tensors: vec![f.clone(), i, empty],
                },
                Item {
                    key: u64::MAX,
                    flags: RELEASE,
                    tensors: vec![],
                },
                Item {
                    key: 0,
                    flags: 0,
                    tensors: vec![scalar, f],
                },
            ]),
        ];
        for m in messages {
            let back = decode(&encode(&m, 42).unwrap(), 42).unwrap();
            match (&m, &back) {
                (Message::Work(a), Message::Work(b)) => {
                    assert_eq!(a.len(), b.len());
                    for (x, y) in a.iter().zip(b) {
                        assert_eq!((x.key, x.flags), (y.key, y.flags));
                        for (s, t) in x.tensors.iter().zip(&y.tensors) {
                            assert_eq!(s.dtype(), t.dtype());
                            assert_eq!(s.shape(), t.shape());
                            assert_eq!(s.bytes().unwrap(), t.bytes().unwrap());
                        }
                    }
                }
                _ => assert_eq!(m, back),
            }
        }
        let e = decode(&encode(&Message::Idle, 1).unwrap(), 2).unwrap_err();
        assert!(e.to_string().contains("another stage plan"), "{e}");
    }

    #[test]
    fn a_thread_ring_passes_each_message_to_the_next_rank() {
        let links = ThreadLink::ring(3, 9);
        let handles: Vec<_> = links
            .into_iter()
            .enumerate()
            .map(|(r, mut link)| {
                std::thread::spawn(move || {
                    let sent = Message::Failed(format!("from {r}"));
                    link.exchange(&sent).unwrap()
                })
            })
            .collect();
        let got: Vec<Message> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(got[0], Message::Failed("from 2".into()));
        assert_eq!(got[1], Message::Failed("from 0".into()));
        assert_eq!(got[2], Message::Failed("from 1".into()));
    }
}
