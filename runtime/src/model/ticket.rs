//! The answer to a submitted request, to wait for.

use tokio::sync::oneshot;

use crate::error::Error;
use crate::request::Output;

/// The answer to a submitted request, to wait for. Dropping it withdraws the request
/// if it has not run yet.
#[must_use = "dropping a ticket withdraws its request"]
pub struct Ticket {
    state: TicketState,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket").finish_non_exhaustive()
    }
}

enum TicketState {
    /// Queued on a model.
    Queued {
        /// The answer to the request, or to its first part where it was split.
        first: Answer,
        /// The other parts' answers, in row order.
        rest: Vec<Answer>,
    },
    /// Its images are being preprocessed; then it is queued and this is its ticket.
    Preprocessing(oneshot::Receiver<Result<Ticket, Error>>),
}

pub(super) type Answer = oneshot::Receiver<Result<Output, Error>>;

impl Ticket {
    pub(super) fn queued(first: Answer, rest: Vec<Answer>) -> Ticket {
        Ticket { state: TicketState::Queued { first, rest } }
    }

    /// The ticket of a request handed to the preprocessing pool, which sends the
    /// ticket of the queued request (or why it could not be queued) on `queued`.
    pub(crate) fn preprocessing(queued: oneshot::Receiver<Result<Ticket, Error>>) -> Ticket {
        Ticket { state: TicketState::Preprocessing(queued) }
    }

    /// Waits for the answer.
    pub async fn await_answer(self) -> Result<Output, Error> {
        let mut state = self.state;
        loop {
            match state {
                TicketState::Preprocessing(queued) => {
                    state = queued.await.map_err(|_| Error::ShuttingDown)??.state;
                }
                TicketState::Queued { first, rest } => {
                    let first = first.await.map_err(|_| Error::ShuttingDown)??;
                    let mut others = Vec::with_capacity(rest.len());
                    for answer in rest {
                        others.push(answer.await.map_err(|_| Error::ShuttingDown)??);
                    }
                    return joined(first, others);
                }
            }
        }
    }

    /// Waits for the answer, blocking the thread. Do not call it on an async executor.
    pub fn wait(self) -> Result<Output, Error> {
        let mut state = self.state;
        loop {
            match state {
                TicketState::Preprocessing(queued) => {
                    state = queued.blocking_recv().map_err(|_| Error::ShuttingDown)??.state;
                }
                TicketState::Queued { first, rest } => {
                    let first = first.blocking_recv().map_err(|_| Error::ShuttingDown)??;
                    let others = rest
                        .into_iter()
                        .map(|answer| answer.blocking_recv().map_err(|_| Error::ShuttingDown)?)
                        .collect::<Result<Vec<_>, _>>()?;
                    return joined(first, others);
                }
            }
        }
    }
}

/// The answer from the first part's and the others'; the first alone when it was whole.
fn joined(first: Output, rest: Vec<Output>) -> Result<Output, Error> {
    if rest.is_empty() {
        return Ok(first);
    }
    Output::joined(std::iter::once(first).chain(rest).collect())
}
