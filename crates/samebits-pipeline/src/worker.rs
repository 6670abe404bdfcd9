//! The worker protocol: the tick loop every rank runs, the same over NCCL and in the simulation.
//!
//! Each tick, every rank computes its stage on the group it received in the previous tick (if
//! any), then exchanges once around the ring (`link.rs`): its result goes to the next rank and
//! the previous rank's result comes in. Rank 0 is also the driver ([`Head::drive`]): each tick
//! it injects the next ready group (a micro-batch of requests) from a [`Driver`] into stage 0,
//! and receives finished groups from the last stage N ticks after injecting them, so up to N
//! groups are in flight, one per stage. Groups never overtake each other and each request is
//! computed alone, so the bits of a request do not depend on N nor on how requests are grouped.
//!
//! A stage error travels on as `Failed` to rank 0, which reports it once nothing is in flight.
//! Shutdown ([`Head::stop`]): rank 0 sends `Stop`; a rank that receives it forwards it and every
//! rank leaves after the same tick (rank r receives it in tick r - 1 and does N - r more
//! exchanges), so no rank waits on one that has left.

use crate::link::{Item, Link, Message};
use crate::stage::{Stage, run_group};
use crate::{PipelineError, Result};

/// Rank 0's source of work: hands out groups, takes back finished ones.
pub trait Driver {
    /// The next group to inject now, if one is ready.
    fn next_group(&mut self) -> Result<Option<Vec<Item>>>;
    /// A group the last stage finished, in injection order.
    fn finish(&mut self, items: Vec<Item>) -> Result<()>;
    /// Nothing more will be injected.
    fn done(&self) -> bool;
}

/// Rank 0's end of the pipeline: stage 0, its link, and the number of ranks.
pub struct Head {
    stage: Box<dyn Stage>,
    link: Box<dyn Link>,
    world: usize,
    stopped: bool,
}

impl Head {
    pub fn new(stage: Box<dyn Stage>, link: Box<dyn Link>, world: usize) -> Head {
        Head {
            stage,
            link,
            world,
            stopped: false,
        }
    }

    /// Runs ticks until `driver` is done and nothing is in flight (module doc). The pipeline
    /// stays up for the next call.
    pub fn drive(&mut self, driver: &mut dyn Driver) -> Result<()> {
        if self.stopped {
            return Err(PipelineError::Link("the pipeline has stopped".into()));
        }
        let mut in_flight = 0usize;
        let mut failure: Option<PipelineError> = None;
        loop {
            if in_flight == 0 && (failure.is_some() || driver.done()) {
                break;
            }
            let ready = match &failure {
                Some(_) => None,
                None => driver.next_group().unwrap_or_else(|e| {
                    failure = Some(e);
                    None
                }),
            };
            if ready.is_none() && in_flight == 0 {
                if failure.is_some() {
                    break;
                }
                return Err(PipelineError::Link(
                    "the driver has nothing to send and waits for nothing".into(),
                ));
            }
            let out = match ready {
                Some(items) => {
                    in_flight += 1;
                    match run_group(self.stage.as_mut(), items) {
                        Ok(items) => Message::Work(items),
                        Err(e) => Message::Failed(format!("stage 0: {e}")),
                    }
                }
                None => Message::Idle,
            };
            match self.exchange(&out)? {
                Message::Idle => {}
                Message::Work(items) => {
                    in_flight -= 1;
                    if failure.is_none()
                        && let Err(e) = driver.finish(items)
                    {
                        failure = Some(e);
                    }
                }
                Message::Failed(message) => {
                    in_flight -= 1;
                    failure.get_or_insert(PipelineError::Stage(message));
                }
                Message::Stop => {
                    return Err(PipelineError::Link(
                        "a worker stopped while rank 0 was driving".into(),
                    ));
                }
            }
        }
        failure.map_or(Ok(()), Err)
    }

    /// Shuts every rank down (module doc); later calls do nothing.
    pub fn stop(&mut self) -> Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        for _ in 0..self.world {
            self.link.exchange(&Message::Stop)?;
        }
        Ok(())
    }

    fn exchange(&mut self, message: &Message) -> Result<Message> {
        let result = self.link.exchange(message);
        if result.is_err() {
            // The ring is broken: no shutdown round can complete.
            self.stopped = true;
        }
        result
    }
}

/// A worker rank's loop (rank ≥ 1): compute what comes in, pass it on, until shutdown.
pub fn serve(stage: &mut dyn Stage, link: &mut dyn Link, rank: usize, world: usize) -> Result<()> {
    let mut received = Message::Idle;
    let mut left: Option<usize> = None;
    loop {
        let out = match (left, std::mem::replace(&mut received, Message::Idle)) {
            (Some(_), _) => Message::Stop,
            (None, Message::Work(items)) => match run_group(stage, items) {
                Ok(items) => Message::Work(items),
                Err(e) => Message::Failed(format!("stage {rank}: {e}")),
            },
            (None, other) => other,
        };
        received = link.exchange(&out)?;
        match left.as_mut() {
            Some(l) => {
                *l -= 1;
                if *l == 0 {
                    return Ok(());
                }
            }
            None if received == Message::Stop => left = Some(world - rank),
            None => {}
        }
    }
}
