//! `modelless tune-measure`: the measuring process of `tune`. It loads one setting
//! of one variant, warms it up, says `ready`, then measures a slice for every line of
//! standard input (the slice's seconds) and answers each with a line of JSON, until
//! standard input ends ([`modelless_lab::tune::measure::serve_measurements`]). Its
//! flags are those [`MeasureRequest::args`] writes.

use std::path::PathBuf;

use anyhow::Context;
use modelless_lab::tune::ServingSetting;
use modelless_lab::tune::measure::{MeasureRequest, serve_measurements};

use crate::tune::ObjectiveArgs;

#[derive(clap::Args)]
pub struct MeasureArgs {
    #[arg(long)]
    config: PathBuf,
    #[arg(long)]
    task: String,
    #[arg(long)]
    variant: String,
    /// The setting, as JSON.
    #[arg(long)]
    setting: String,
    #[command(flatten)]
    objective: ObjectiveArgs,
    #[arg(long, default_value_t = 1)]
    warmup_seconds: u32,
    #[arg(long, default_value = "640x480")]
    image_sizes: String,
    /// Measure the variant's sessions alone instead (closed-loop objectives only).
    #[arg(long)]
    model_alone: bool,
}

impl MeasureArgs {
    /// The request the flags say.
    fn request(self) -> anyhow::Result<MeasureRequest> {
        let objective = self.objective.objectives()?.into_iter().next().context("no objective")?;
        let setting: ServingSetting = serde_json::from_str(&self.setting).context("--setting")?;
        Ok(MeasureRequest {
            config: self.config,
            task: self.task,
            variant: self.variant,
            setting,
            objective,
            warmup_seconds: self.warmup_seconds,
            image_sizes: self.image_sizes,
            model_alone: self.model_alone,
        })
    }
}

/// Loads and warms the setting, then measures the slices standard input asks for.
pub fn measure(args: MeasureArgs) -> anyhow::Result<()> {
    let request = args.request()?;
    Ok(serve_measurements(&request, std::io::stdin().lock(), std::io::stdout())?)
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use modelless_lab::tune::{Goal, KnobSpace, Objective, SpaceLimits};

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: MeasureArgs,
    }

    #[test]
    fn the_flags_a_request_writes_read_back_as_that_request() {
        let setting = KnobSpace::new(SpaceLimits { max_batch: 8, cores: 2, images: false, gpu: false }).decode(&[]);
        let objectives = [
            Objective { goal: Goal::Mean, concurrency: Some(8), rate: None, slo_ms: None, load: None },
            Objective { goal: Goal::Throughput, concurrency: None, rate: Some(120.5), slo_ms: Some(40.0), load: None },
            Objective { goal: Goal::Goodput, concurrency: None, rate: None, slo_ms: None, load: Some("l.json".into()) },
        ];
        for (objective, model_alone) in objectives.into_iter().zip([true, false, false]) {
            let request = MeasureRequest {
                config: "config.toml".into(),
                task: "classify".into(),
                variant: "small".into(),
                setting: setting.clone(),
                objective,
                warmup_seconds: 2,
                image_sizes: "320x240".into(),
                model_alone,
            };
            let mut flags = vec!["tune-measure".into()];
            flags.extend(request.args().unwrap());
            let read = Cli::try_parse_from(flags).unwrap().args.request().unwrap();
            assert_eq!(read, request);
        }
    }
}
