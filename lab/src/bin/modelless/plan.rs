//! `modelless plan`: how many devices finish N items by a deadline (soft real-time),
//! or how many items a set of devices finishes by it (relaxed).

use std::path::PathBuf;

use anyhow::Context;
use modelless_lab::plan::{Device, Plan, relaxed, soft_real_time};
use serde::Deserialize;

#[derive(clap::Args)]
pub struct Args {
    /// TOML with `[[devices]]`: `name`, `a_ms`, `c_ms`, `warmup_ms`, `max_batch`,
    /// `count` (the fit and warm-up of `modelless profile`).
    #[arg(long)]
    devices: PathBuf,
    /// The deadline, ms.
    #[arg(long)]
    deadline_ms: f64,
    /// Items to finish (soft real-time); without it, the most items all the devices
    /// finish (relaxed).
    #[arg(long)]
    items: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Devices {
    devices: Vec<Device>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.devices).with_context(|| args.devices.display().to_string())?;
    let devices: Devices = toml::from_str(&text).with_context(|| args.devices.display().to_string())?;
    for device in &devices.devices {
        device.check().map_err(anyhow::Error::msg)?;
    }
    match args.items {
        Some(items) => match soft_real_time(&devices.devices, items, args.deadline_ms) {
            Some(plan) => {
                println!("{} devices finish {items} items by {} ms:", plan.devices.len(), args.deadline_ms);
                print(&plan);
            }
            None => {
                let most = relaxed(&devices.devices, args.deadline_ms).items;
                anyhow::bail!("all the devices together finish {most} items by {} ms, not {items}", args.deadline_ms);
            }
        },
        None => {
            let plan = relaxed(&devices.devices, args.deadline_ms);
            println!("the devices finish {} items by {} ms:", plan.items, args.deadline_ms);
            print(&plan);
        }
    }
    Ok(())
}

fn print(plan: &Plan) {
    println!("| device | items | batches | finishes at ms |\n|---|---:|---|---:|");
    for a in &plan.devices {
        let last = a.last_batch.map_or(String::new(), |b| format!(" + 1 of {b}"));
        let batches = format!("{} of {}{last}", a.full_batches, a.batch_size);
        println!("| {} | {} | {batches} | {:.1} |", a.device, a.items, a.finish_ms);
    }
}
