//! Turns for running batches one at a time, first come first served: a ticket lock.
//! A plain mutex lets the thread that just ran take it again at once, so a task whose
//! queue never empties would starve the tasks beside it.
//!
//! A thread that holds a turn and asks the same turns again gets it at once: a model's
//! worker takes its turn before it forms the batch (so that what arrives while it
//! waits joins the batch), and the session's run inside asks too.

use std::cell::Cell;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// The turns of the process's sessions, when they take turns.
pub static RUN_TURNS: Turns = Turns::new();

thread_local! {
    /// The turns this thread holds one of, if any.
    static HOLDING: Cell<*const Turns> = const { Cell::new(std::ptr::null()) };
}

/// A queue of turns.
#[derive(Debug, Default)]
pub struct Turns {
    /// The next ticket to hand out, and the ticket whose turn it is.
    tickets: Mutex<(u64, u64)>,
    next: Condvar,
}

/// A turn, held until dropped (nothing to give back when its thread held one already).
#[derive(Debug)]
pub struct Turn<'a> {
    turns: Option<&'a Turns>,
}

impl Turns {
    /// A queue where nobody waits.
    pub const fn new() -> Self {
        Turns { tickets: Mutex::new((0, 0)), next: Condvar::new() }
    }

    /// Waits for every turn taken before this one to end, unless this thread holds one
    /// of these turns already.
    pub fn take(&self) -> Turn<'_> {
        if std::ptr::eq(HOLDING.get(), self) {
            return Turn { turns: None };
        }
        let mut tickets = self.lock();
        let mine = tickets.0;
        tickets.0 += 1;
        while tickets.1 != mine {
            tickets = self.next.wait(tickets).unwrap_or_else(PoisonError::into_inner);
        }
        HOLDING.set(self);
        Turn { turns: Some(self) }
    }

    fn lock(&self) -> MutexGuard<'_, (u64, u64)> {
        self.tickets.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if let Some(turns) = self.turns {
            HOLDING.set(std::ptr::null());
            turns.lock().1 += 1;
            turns.next.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn turns_go_in_the_order_they_were_asked_for() {
        let turns = Arc::new(Turns::new());
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = turns.take();
        let waiters: Vec<_> = (0..4)
            .map(|i| {
                // Each asks after the one before it is waiting.
                std::thread::sleep(Duration::from_millis(20));
                let (turns, order) = (turns.clone(), order.clone());
                std::thread::spawn(move || {
                    let _turn = turns.take();
                    order.lock().unwrap().push(i);
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        assert!(order.lock().unwrap().is_empty(), "nobody runs while a turn is held");
        drop(first);
        waiters.into_iter().for_each(|w| w.join().unwrap());
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_thread_holding_a_turn_gets_another_at_once_and_gives_back_only_the_first() {
        let turns = Arc::new(Turns::new());
        let outer = turns.take();
        drop(turns.take());
        let (other, ran) = (turns.clone(), Arc::new(Mutex::new(false)));
        let ran_too = ran.clone();
        let waiter = std::thread::spawn(move || {
            let _turn = other.take();
            *ran_too.lock().unwrap() = true;
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(!*ran.lock().unwrap(), "the inner turn's end did not end the outer one");
        drop(outer);
        waiter.join().unwrap();
        assert!(*ran.lock().unwrap());
    }
}
