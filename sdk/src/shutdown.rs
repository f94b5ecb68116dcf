//! The signal a server stops on.

use std::task::Poll;

/// Resolves when the process is asked to stop: Ctrl-C (SIGINT), or SIGTERM on Unix.
pub async fn shutdown_signal() {
    let mut interrupted = std::pin::pin!(tokio::signal::ctrl_c());
    #[cfg(unix)]
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let mut terminated = std::pin::pin!(async {
        #[cfg(unix)]
        if let Some(signal) = terminate.as_mut() {
            signal.recv().await;
            return;
        }
        std::future::pending::<()>().await
    });
    std::future::poll_fn(|cx| {
        if interrupted.as_mut().poll(cx).is_ready() || terminated.as_mut().poll(cx).is_ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}
