//! The measuring process's side: it loads one setting of one variant, warms it up,
//! says `ready`, then measures a slice for every line of its input (the slice's
//! seconds) and answers each with a line of JSON, until its input ends. Staying up
//! between slices is what lets the measurer alternate a candidate's slices with a
//! reference's (see [`super::measure_pairs`]).

use std::io::{BufRead, Write};
use std::sync::Arc;

use modelless::profile::ProfileMode;
use modelless::{RuntimeBuilder, RuntimeConfig};

use super::{MeasureRequest, Measured};
use crate::load::{ImageSet, InProcess, LoadSpec, Pattern, RunResult, Target, TaskLoad};
use crate::tune::TuneError;
use crate::tune::reference::Sessions;

/// Loads and warms the request's setting, then measures the slices `input` asks for
/// and answers them on `output` (a measuring process's standard input and output).
pub fn serve_measurements(request: &MeasureRequest, input: impl BufRead, output: impl Write) -> Result<(), TuneError> {
    let MeasureRequest { task, variant, objective, setting, .. } = request;
    let mut config = RuntimeConfig::from_file(&request.config)?;
    only_variant(&mut config, task, variant)?;
    setting.apply(&mut config, task, variant);
    if request.model_alone {
        let clients = objective
            .concurrency
            .ok_or_else(|| TuneError::Invalid("the model alone is measured in a closed loop only".into()))?;
        let mut sessions = Sessions::load(&config, task, variant, setting.instances)?;
        return serve_slices(input, output, |seconds| {
            Ok(Measured::of_model_alone(&sessions.run(clients, f64::from(seconds))?, clients))
        });
    }
    if let Some(clients) = objective.concurrency {
        // Closed loop: no batch holds more rows than there are clients, so warming
        // larger ones up would only lengthen every evaluation.
        for variant in config.tasks.iter_mut().flat_map(|t| t.variants.iter_mut()) {
            variant.warmup.up_to_batch = Some(clients);
        }
    }
    let slo = config.tasks.first().and_then(|t| t.latency_slo_ms);
    let takes_images = config.tasks.iter().flat_map(|t| &t.variants).any(|v| v.preprocess.is_some());
    let runtime = Arc::new(RuntimeBuilder::default().with_config(config).build()?);
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(TuneError::Threads)?;
    let spec_for = |seconds: u32| -> Result<LoadSpec, TuneError> {
        if let Some(load) = &objective.load {
            return Ok(LoadSpec::from_file(load)?);
        }
        let rate = objective.rate.unwrap_or(1.0);
        let task = TaskLoad {
            task: task.clone(),
            pattern: Pattern::Constant { rate, duration_s: seconds },
            slo_ms: objective.slo_ms.or(slo).or(Some(60_000.0)),
            min_accuracy: None,
            start_s: 0,
        };
        Ok(LoadSpec { seed: 0, tasks: vec![task], rate_scale: 1.0 })
    };
    let images = takes_images
        .then(|| ImageSet::generated(&crate::load::images::parse_sizes(&request.image_sizes)?, 0))
        .transpose()?;
    let drive = |spec: &LoadSpec| -> Result<RunResult, TuneError> {
        let mut target = InProcess::new(runtime.clone(), spec)?;
        if let Some(images) = &images {
            target.with_images(images);
        }
        let target: Arc<dyn Target> = Arc::new(target);
        Ok(match objective.concurrency {
            Some(clients) => tokio.block_on(crate::load::run_closed(target, spec, clients, &mut |_| {}))?,
            None => tokio.block_on(crate::load::run(target, spec, &mut |_| {}))?,
        })
    };
    if request.warmup_seconds > 0 && objective.load.is_none() {
        drive(&spec_for(request.warmup_seconds)?)?;
    }
    serve_slices(input, output, |seconds| Ok(Measured::of_run(&drive(&spec_for(seconds)?)?)))
}

/// Says `ready`, then measures a slice of the seconds each line of `input` gives and
/// answers it on `output` with a line of JSON, until `input` ends.
fn serve_slices(
    input: impl BufRead,
    mut output: impl Write,
    mut slice: impl FnMut(u32) -> Result<Measured, TuneError>,
) -> Result<(), TuneError> {
    writeln!(output, "ready").and_then(|_| output.flush()).map_err(TuneError::Pipe)?;
    for line in input.lines() {
        let line = line.map_err(TuneError::Pipe)?;
        let seconds: u32 =
            line.trim().parse().map_err(|source| TuneError::SliceRequest { line: line.clone(), source })?;
        if seconds < 1 {
            return Err(TuneError::Invalid("a slice lasts at least a second".into()));
        }
        let answer = serde_json::to_string(&slice(seconds)?).map_err(TuneError::Json)?;
        writeln!(output, "{answer}").and_then(|_| output.flush()).map_err(TuneError::Pipe)?;
    }
    Ok(())
}

/// Leaves only `variant` of `task` in `config`, active, with whatever profile is
/// stored (profiling at every evaluation would measure the profiler).
fn only_variant(config: &mut RuntimeConfig, task: &str, variant: &str) -> Result<(), TuneError> {
    config.tasks.retain(|t| t.name == task);
    let found = config.tasks.first_mut().ok_or_else(|| TuneError::UnknownTask(task.into()))?;
    found.variants.retain(|v| v.name == variant);
    let chosen = found
        .variants
        .first_mut()
        .ok_or_else(|| TuneError::UnknownVariant { task: task.into(), variant: variant.into() })?;
    if chosen.profile == ProfileMode::Measure {
        chosen.profile = ProfileMode::Stored;
    }
    found.active = Some(variant.to_string());
    config.models.clear();
    config.policy = None;
    config.server = None;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_asks_for_a_slice_and_gets_a_line_of_json_after_ready() {
        let mut asked = Vec::new();
        let mut output = Vec::new();
        let measured = |seconds: u32| Measured { mean_ms: Some(f64::from(seconds)), ..Measured::default() };
        serve_slices(&b"1\n 3 \n"[..], &mut output, |seconds| {
            asked.push(seconds);
            Ok(measured(seconds))
        })
        .unwrap();
        assert_eq!(asked, [1, 3]);
        let lines: Vec<&str> = std::str::from_utf8(&output).unwrap().lines().collect();
        assert_eq!(lines[0], "ready");
        let answers: Vec<Measured> = lines[1..].iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(answers, [measured(1), measured(3)]);
        let refused = |input: &'static [u8]| serve_slices(input, Vec::new(), |_| Ok(Measured::default())).unwrap_err();
        assert!(matches!(refused(b"soon\n"), TuneError::SliceRequest { .. }));
        assert_eq!(refused(b"0\n").to_string(), "a slice lasts at least a second");
    }
}
