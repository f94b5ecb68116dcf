//! Blocking work made awaitable: loading, warming and compiling take seconds, and an
//! application's executor must keep running its other tasks meanwhile. The work runs
//! on a thread of its own, so no async runtime (tokio or another) is assumed.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

/// What the thread hands back, and who waits for it.
struct Slot<T> {
    done: Option<T>,
    waker: Option<Waker>,
}

/// Resolves to what `work` returned, once the thread that runs it has finished.
pub(crate) struct OffThread<T> {
    slot: Arc<Mutex<Slot<T>>>,
}

/// Runs `work` on a thread named `name` and resolves to its result. Should no
/// thread start (the process is out of threads), `work` runs on the caller's.
pub(crate) fn off_thread<T: Send + 'static>(name: &str, work: impl FnOnce() -> T + Send + 'static) -> OffThread<T> {
    let slot = Arc::new(Mutex::new(Slot { done: None, waker: None }));
    let theirs = slot.clone();
    let work = Arc::new(Mutex::new(Some(work)));
    let on_thread = work.clone();
    let spawned = std::thread::Builder::new().name(name.to_string()).spawn(move || {
        let Some(work) = on_thread.lock().unwrap_or_else(PoisonError::into_inner).take() else { return };
        let result = work();
        let mut slot = theirs.lock().unwrap_or_else(PoisonError::into_inner);
        slot.done = Some(result);
        if let Some(waker) = slot.waker.take() {
            waker.wake();
        }
    });
    if spawned.is_err()
        && let Some(work) = work.lock().unwrap_or_else(PoisonError::into_inner).take()
    {
        slot.lock().unwrap_or_else(PoisonError::into_inner).done = Some(work());
    }
    OffThread { slot }
}

impl<T> Future for OffThread<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.done.take() {
            Some(done) => Poll::Ready(done),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::task::Wake;

    /// Counts wakes and sends each.
    struct Signal(Mutex<mpsc::Sender<()>>);

    impl Wake for Signal {
        fn wake(self: Arc<Self>) {
            let _ = self.0.lock().unwrap().send(());
        }
    }

    #[test]
    fn the_future_is_pending_while_the_work_runs_and_wakes_its_waiter_with_the_result() {
        let (release, gate) = mpsc::channel::<()>();
        let mut future = off_thread("test", move || {
            gate.recv().unwrap();
            42
        });
        let (woken, wakes) = mpsc::channel();
        let waker = Waker::from(Arc::new(Signal(Mutex::new(woken))));
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut future).poll(&mut cx).is_pending(), "the work waits on the gate");
        release.send(()).unwrap();
        wakes.recv().unwrap();
        assert_eq!(Pin::new(&mut future).poll(&mut cx), Poll::Ready(42));
    }
}
