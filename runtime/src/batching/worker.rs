//! An instance thread: owns one backend, runs the batches it is given, answers each
//! request with its slice of the outputs. A failing or panicking backend fails its
//! batch, never the thread.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Receiver;

use super::assemble::BatchAssembler;
use super::pending::Pending;
use super::queue::Queue;
use crate::answered::{AnswerHook, Answered};
use crate::backend::turns::RUN_TURNS;
use crate::backend::{Backend, Batch, BatchParts, parts_disagree};
use crate::error::{BackendError, Error};
use crate::metrics::ModelCounters;
use crate::request::{Output, Timings};
use crate::tensor::Tensor;
use crate::trace;

/// Names shared by every answer of one model.
pub(crate) struct ModelNames {
    pub model: Arc<str>,
    pub version: u64,
    pub task: Option<Arc<str>>,
    pub outputs: Arc<[String]>,
    pub on_answer: Option<AnswerHook>,
    pub counters: Arc<ModelCounters>,
    pub labels: Option<Arc<[String]>>,
}

/// Runs the batches it is handed, and after each the next one the queue has for it,
/// until the queue closes its job channel. Batches are padded up to `pad_sizes`
/// (ascending; empty: not padded).
pub(crate) fn worker_task(
    names: Arc<ModelNames>,
    mut backend: Box<dyn Backend + Send>,
    jobs: Receiver<Vec<Pending>>,
    queue: Arc<Queue>,
    index: usize,
    pad_sizes: Vec<usize>,
) {
    let mut assembler = BatchAssembler::new(pad_sizes);
    let mut predictions = Vec::new();
    for mut batch in jobs {
        loop {
            // Where sessions take turns, the batch is completed once its turn comes:
            // beside other tasks' batches a queue grows while it waits, and those
            // requests would otherwise wait for a turn of their own.
            let waiting = Instant::now();
            let turn = backend.takes_turns().then(|| RUN_TURNS.take());
            let waited = waiting.elapsed();
            if turn.is_some() {
                queue.top_up(&mut batch);
            }
            let rows = batch.iter().map(|p| p.rows).sum();
            predictions.clear();
            predictions.extend(batch.iter().filter_map(|p| p.prediction));
            run_batch(&names, backend.as_mut(), &mut assembler, batch, index);
            drop(turn);
            match queue.next_for(index, rows, waited, &predictions) {
                Some(next) => batch = next,
                None => break,
            }
        }
    }
    // The session is torn down here at normal priority: freeing its memory takes locks
    // of the process's address space that serving threads need too, and a low-priority
    // thread preempted while holding them stalled serving for up to 200 ms (measured
    // with `make bench-switch`).
    drop(backend);
}

fn run_batch(
    names: &ModelNames,
    backend: &mut dyn Backend,
    assembler: &mut BatchAssembler,
    requests: Vec<Pending>,
    instance: usize,
) {
    let started = Instant::now();
    // Entered while it runs, so that what the backend logs is seen in the batch.
    let batch_span = trace::batch_run(&names.model, instance);
    let _running = batch_span.enter();
    let tell = |answered: Answered| {
        if let Some(on_answer) = &names.on_answer {
            on_answer(answered);
        }
    };
    let (requests, abandoned): (Vec<Pending>, Vec<Pending>) = requests.into_iter().partition(|p| !p.reply.is_closed());
    for _ in &abandoned {
        names.counters.canceled();
        tell(Answered::Abandoned);
    }
    let Some(first) = requests.first() else {
        return;
    };
    let mut columns: Vec<Vec<Tensor>> = (0..first.tensors.len()).map(|_| Vec::with_capacity(requests.len())).collect();
    let mut waiters = Vec::with_capacity(requests.len());
    let mut rows: Vec<usize> = requests.iter().map(|r| r.rows).collect();
    let batch_size = rows.iter().sum();
    batch_span.record("batch_size", batch_size).record("requests", requests.len());
    for mut request in requests {
        for (column, tensor) in columns.iter_mut().zip(request.tensors) {
            column.push(tensor);
        }
        request.traced.run_in(&batch_span, batch_size, instance);
        waiters.push((
            request.reply,
            request.rows,
            request.admitted,
            request.deadline,
            request.prepared,
            request.traced,
        ));
    }
    let pad_rows = assembler.pad_rows(batch_size);
    if pad_rows > 0 {
        // The padding's outputs are split off as a request of their own, and dropped.
        rows.push(pad_rows);
    }
    // A backend that copies each batch into memory of its own joins it there; for the
    // others it is joined here, into memory the instance keeps.
    let joined = if backend.joins_batches() {
        Some(BatchInput::Unjoined(BatchParts { columns, pad_rows }))
    } else {
        assembler.assemble(columns, pad_rows).map(|inputs| BatchInput::Joined(Batch { inputs }))
    };
    let assembled = Instant::now();
    let result = match joined {
        None => Err(parts_disagree()),
        Some(input) => {
            let run = AssertUnwindSafe(|| match input {
                BatchInput::Joined(batch) => backend.infer(batch),
                BatchInput::Unjoined(parts) => backend.infer_parts(parts),
            });
            catch_unwind(run).unwrap_or_else(|panic| {
                crate::metrics::serving_metrics().request_panicked("batch");
                Err(BackendError::Panicked(crate::error::panic_message(panic.as_ref())))
            })
        }
    };
    let computed = Instant::now();
    let per_request = result.and_then(|out| split_outputs(out.outputs, &rows, names.outputs.len()));
    let finished = Instant::now();
    match per_request {
        Ok(per_request) => {
            names.counters.executed(computed - assembled);
            for ((reply, rows, admitted, deadline, prepared, traced), tensors) in waiters.into_iter().zip(per_request) {
                let timings = Timings {
                    decode: prepared.decode,
                    preprocess: prepared.preprocess,
                    queue: started
                        .saturating_duration_since(admitted)
                        .saturating_sub(prepared.decode + prepared.preprocess),
                    compute_input: assembled - started,
                    compute: computed - assembled,
                    postprocess: finished - computed,
                    total: finished.saturating_duration_since(admitted),
                };
                let output = Output {
                    names: names.outputs.clone(),
                    tensors,
                    model: names.model.clone(),
                    version: names.version,
                    task: names.task.clone(),
                    labels: names.labels.clone(),
                    batch_size,
                    timings,
                };
                let late = deadline.is_some_and(|d| finished > d);
                names.counters.served(rows, &timings);
                tell(Answered::Served { latency: timings.total, late });
                let _ = reply.send(Ok(output));
                // The request's spans end once its answer is sent.
                drop(traced);
            }
        }
        Err(source) => {
            let error = Error::Backend { model: names.model.to_string(), source: Arc::new(source) };
            for (reply, .., traced) in waiters {
                traced.failed(&error);
                names.counters.failed(&error);
                tell(Answered::Failed);
                let _ = reply.send(Err(error.clone()));
            }
        }
    }
}

/// A batch as the worker hands it to its backend.
enum BatchInput {
    Joined(Batch),
    Unjoined(BatchParts),
}

/// Splits every output by the requests' rows: one `Vec<Tensor>` per request.
fn split_outputs(outputs: Vec<Tensor>, rows: &[usize], expected: usize) -> Result<Vec<Vec<Tensor>>, BackendError> {
    if outputs.len() != expected {
        return Err(BackendError::OutputMismatch(format!("{} outputs, expected {expected}", outputs.len())));
    }
    let mut per_request: Vec<Vec<Tensor>> = rows.iter().map(|_| Vec::with_capacity(expected)).collect();
    for output in outputs {
        let shape = output.shape().to_vec();
        let pieces = output.split_rows(rows).ok_or_else(|| {
            BackendError::OutputMismatch(format!(
                "output of shape {shape:?} for a batch of {}",
                rows.iter().sum::<usize>()
            ))
        })?;
        for (request, piece) in per_request.iter_mut().zip(pieces) {
            request.push(piece);
        }
    }
    Ok(per_request)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};
    use crate::batching::BatchingConfig;
    use crate::model::{Model, StartOptions};
    use crate::request::{InferOptions, Inputs};
    use crate::tensor::Tensor;
    use crate::warmup::WarmupConfig;

    /// Whether the worker joins the batch or hands it to a backend that joins it itself.
    #[test]
    fn a_padded_batch_runs_at_a_warmed_size_and_answers_each_request_with_its_own_rows() {
        for joins_batches in [false, true] {
            let log = BatchLog::default();
            let warmup = WarmupConfig::default().with_batch_sizes([1, 2, 4]).with_pad_to_warmed(true);
            let options = StartOptions { warmup, ..StartOptions::default() };
            // A delay long enough for the three requests to meet in one batch.
            let batching = BatchingConfig::default().with_max_batch_size(4).with_max_queue_delay_us(200_000);
            let factory = FakeBackend::factory(FakeConfig { joins_batches, ..FakeConfig::default() }, log.clone());
            let model = Model::start_with("padded", factory, 1, batching, options).unwrap();
            let warmed = log.sizes().len();
            let tickets: Vec<_> = (1..=3)
                .map(|i| {
                    let row = Tensor::new([1, 4], vec![i as f32; 4]).unwrap();
                    let options = InferOptions::default().with_timeout(Duration::from_secs(30));
                    model.submit(Inputs::from(row), options).unwrap()
                })
                .collect();
            for (i, ticket) in (1..=3).zip(tickets) {
                let output = ticket.wait().unwrap();
                assert_eq!(output.batch_size, 3, "the answer tells the requests' rows, not the padding");
                let tensor = output.first().unwrap();
                assert_eq!((tensor.shape(), tensor.as_slice::<f32>().unwrap()), (&[1, 4][..], &[i as f32; 4][..]));
            }
            assert_eq!(log.sizes()[warmed..], [4], "three rows ran padded to the warmed 4");
            assert_eq!(log.unjoined(), usize::from(joins_batches), "handed unjoined: {joins_batches}");
        }
    }
}
