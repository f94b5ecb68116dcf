//! Traces of requests per second: read from CSV or made up (diurnal shape plus
//! spikes), then reshaped the way the TU Delft thesis reshaped its Twitter trace:
//! scaled to a target mean, ramped up over a warm-up, with a sinusoid or a sum of
//! random sinusoids added.

use std::f64::consts::TAU;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

use super::LoadError;
use super::bounds::{non_negative, within_run};

/// A trace and what is done to it, in this order: cut to `duration_s`, scaled to
/// `scale_to_mean`, sinusoids added, the warm-up ramp applied; rates below 0 become 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TraceConfig {
    /// A CSV of requests per second: one figure per line, or `second,requests` (the
    /// last column is taken); a header line is skipped.
    pub file: Option<PathBuf>,
    /// Or a made-up trace.
    pub synthetic: Option<SyntheticTrace>,
    /// Keep the first seconds only.
    pub duration_s: Option<u32>,
    /// Scale every second so that the mean is this (requests per second).
    pub scale_to_mean: Option<f64>,
    /// Added to the rate.
    pub sinusoid: Option<Sinusoid>,
    /// Added to the rate: a sum of sinusoids drawn from a seed (slow "macro trends").
    pub random_sinusoids: Option<RandomSinusoids>,
    /// Ramp from 0 to the trace over the first seconds, so that a run starts gently.
    pub warmup_s: u32,
}

/// `amplitude · sin(2π·t / period_s + phase)` requests per second.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sinusoid {
    /// Requests per second at the crest.
    pub amplitude: f64,
    /// Period, in s.
    pub period_s: f64,
    /// Phase at t = 0, in radians.
    #[serde(default)]
    pub phase: f64,
}

impl Sinusoid {
    fn at(&self, t: f64) -> f64 {
        self.amplitude * (TAU * t / self.period_s + self.phase).sin()
    }
}

/// `count` sinusoids with amplitude, period and phase drawn uniformly from a seed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomSinusoids {
    /// How many.
    pub count: u32,
    /// Largest amplitude, requests per second.
    pub max_amplitude: f64,
    /// Shortest period, s.
    pub min_period_s: f64,
    /// Longest period, s.
    pub max_period_s: f64,
    /// Seed of the draws.
    pub seed: u64,
}

impl RandomSinusoids {
    fn draw(&self) -> Vec<Sinusoid> {
        let mut rng = StdRng::seed_from_u64(self.seed);
        (0..self.count)
            .map(|_| Sinusoid {
                amplitude: rng.random_range(0.0..=self.max_amplitude),
                period_s: rng.random_range(self.min_period_s..=self.max_period_s),
                phase: rng.random_range(0.0..TAU),
            })
            .collect()
    }
}

/// A made-up bursty trace: a diurnal wave around a mean, spikes that rise within
/// seconds and decay, and noise, all from a seed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SyntheticTrace {
    /// Length, s.
    pub duration_s: u32,
    /// Mean of the diurnal wave, requests per second.
    pub mean: f64,
    /// Swing of the wave as a share of the mean (0 to 1); it starts at its trough.
    pub diurnal_amplitude: f64,
    /// Period of the wave, s (default: the whole trace).
    pub diurnal_period_s: Option<f64>,
    /// Spikes, placed at random after the first tenth of the trace.
    pub spikes: u32,
    /// A spike's peak as a multiple of the rate under it.
    pub spike_factor: f64,
    /// Seconds a spike takes to reach its peak.
    pub spike_rise_s: f64,
    /// Time constant of its decay, s.
    pub spike_decay_s: f64,
    /// Multiplicative noise per second (standard deviation, share of the rate).
    pub noise: f64,
    /// Seed of the spikes and the noise.
    pub seed: u64,
}

impl Default for SyntheticTrace {
    fn default() -> Self {
        SyntheticTrace {
            duration_s: 600,
            mean: 50.0,
            diurnal_amplitude: 0.4,
            diurnal_period_s: None,
            spikes: 3,
            spike_factor: 3.0,
            spike_rise_s: 3.0,
            spike_decay_s: 15.0,
            noise: 0.1,
            seed: 1,
        }
    }
}

impl SyntheticTrace {
    /// Requests per second, one figure per second.
    pub fn rates(&self) -> Result<Vec<f64>, LoadError> {
        non_negative("mean", self.mean)?;
        non_negative("noise", self.noise)?;
        if !(0.0..=1.0).contains(&self.diurnal_amplitude) || self.spike_factor < 1.0 {
            return Err(LoadError::invalid("synthetic: `diurnal_amplitude` must be in 0..=1, `spike_factor` ≥ 1"));
        }
        within_run("synthetic: `duration_s`", self.duration_s as usize)?;
        if self.spikes > self.duration_s {
            return Err(LoadError::invalid("synthetic: more `spikes` than seconds"));
        }
        let n = self.duration_s as usize;
        let period = self.diurnal_period_s.unwrap_or(f64::from(self.duration_s)).max(1.0);
        let mut rng = StdRng::seed_from_u64(self.seed);
        let starts: Vec<f64> =
            (0..self.spikes).map(|_| rng.random_range(0.1..1.0) * f64::from(self.duration_s)).collect();
        let noise = Normal::new(0.0, self.noise).map_err(|e| LoadError::invalid(e.to_string()))?;
        let rates = (0..n)
            .map(|s| {
                let t = s as f64;
                let wave = self.mean * (1.0 - self.diurnal_amplitude * (TAU * t / period).cos());
                let burst: f64 = starts.iter().map(|&start| self.spike(t - start)).sum();
                (wave * (1.0 + burst) * (1.0 + noise.sample(&mut rng))).max(0.0)
            })
            .collect();
        Ok(rates)
    }

    /// How much a spike that started `since` seconds ago adds, as a multiple of the rate.
    fn spike(&self, since: f64) -> f64 {
        let peak = self.spike_factor - 1.0;
        if since < 0.0 {
            0.0
        } else if since < self.spike_rise_s {
            peak * since / self.spike_rise_s
        } else {
            peak * (-(since - self.spike_rise_s) / self.spike_decay_s.max(1e-9)).exp()
        }
    }
}

impl TraceConfig {
    /// Requests per second, one figure per second, reshaped.
    pub fn rates(&self) -> Result<Vec<f64>, LoadError> {
        let mut rates = match (&self.file, &self.synthetic) {
            (Some(file), None) => read_csv(file)?,
            (None, Some(synthetic)) => synthetic.rates()?,
            _ => return Err(LoadError::invalid("a trace needs exactly one of `file` and `synthetic`")),
        };
        if let Some(keep) = self.duration_s {
            rates.truncate(keep as usize);
        }
        if let Some(mean) = self.scale_to_mean {
            non_negative("scale_to_mean", mean)?;
            let now = rates.iter().sum::<f64>() / rates.len().max(1) as f64;
            if now > 0.0 {
                rates.iter_mut().for_each(|r| *r *= mean / now);
            }
        }
        let mut waves: Vec<Sinusoid> = self.sinusoid.into_iter().collect();
        waves.extend(self.random_sinusoids.map(|r| r.draw()).unwrap_or_default());
        for (s, rate) in rates.iter_mut().enumerate() {
            let t = s as f64;
            *rate += waves.iter().map(|w| w.at(t)).sum::<f64>();
            if s < self.warmup_s as usize {
                *rate *= t / f64::from(self.warmup_s);
            }
            *rate = rate.max(0.0);
        }
        Ok(rates)
    }
}

/// Reads requests per second from a CSV: one number per line, or several columns of
/// which the last is taken; a first line that is not a number is a header.
pub fn read_csv(path: &Path) -> Result<Vec<f64>, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::io(path, e))?;
    let mut rates = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let last = line.rsplit(',').next().unwrap_or(line).trim();
        match last.parse::<f64>() {
            Ok(rate) if rate.is_finite() && rate >= 0.0 => rates.push(rate),
            Err(_) if rates.is_empty() && i == 0 => {} // header
            _ => {
                return Err(LoadError::invalid(format!("{}: line {}: `{last}` is not a rate", path.display(), i + 1)));
            }
        }
    }
    Ok(rates)
}

/// Writes requests per second as `second,requests_per_s`.
pub fn write_csv(path: &Path, rates: &[f64]) -> Result<(), LoadError> {
    let mut text = String::from("second,requests_per_s\n");
    for (s, rate) in rates.iter().enumerate() {
        text.push_str(&format!("{s},{rate:.3}\n"));
    }
    std::fs::write(path, text).map_err(|e| LoadError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean(rates: &[f64]) -> f64 {
        rates.iter().sum::<f64>() / rates.len() as f64
    }

    fn flat(rate: f64, seconds: u32) -> SyntheticTrace {
        SyntheticTrace {
            duration_s: seconds,
            mean: rate,
            diurnal_amplitude: 0.0,
            spikes: 0,
            noise: 0.0,
            ..Default::default()
        }
    }

    #[test]
    fn a_trace_is_scaled_to_its_target_mean_then_ramped_over_the_warm_up() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("trace.csv");
        std::fs::write(&file, "second,requests\n0,10\n1,20\n2,30\n3,40\n").unwrap();
        let config = TraceConfig { file: Some(file.clone()), scale_to_mean: Some(50.0), ..Default::default() };
        assert_eq!(config.rates().unwrap(), vec![20.0, 40.0, 60.0, 80.0]);
        let ramped = TraceConfig { warmup_s: 2, ..config }.rates().unwrap();
        assert_eq!(ramped, vec![0.0, 20.0, 60.0, 80.0], "second 0 at 0/2, second 1 at 1/2 of the trace");
        std::fs::write(&file, "1\n2\nmany\n").unwrap();
        let bad = TraceConfig { file: Some(file), ..Default::default() }.rates();
        assert!(matches!(bad, Err(LoadError::Invalid(m)) if m.contains("line 3")));
    }

    #[test]
    fn a_sinusoid_adds_its_wave_and_rates_never_go_below_zero() {
        let wave = Sinusoid { amplitude: 10.0, period_s: 4.0, phase: 0.0 };
        let config = TraceConfig { synthetic: Some(flat(5.0, 4)), sinusoid: Some(wave), ..Default::default() };
        let rates = config.rates().unwrap();
        let expected = [5.0, 15.0, 5.0, 0.0]; // 5 + 10·sin(0, π/2, π, 3π/2), clamped
        for (got, want) in rates.iter().zip(expected) {
            assert!((got - want).abs() < 1e-9, "{rates:?}");
        }
    }

    #[test]
    fn random_sinusoids_follow_their_seed() {
        let waves =
            |seed| RandomSinusoids { count: 3, max_amplitude: 5.0, min_period_s: 10.0, max_period_s: 60.0, seed };
        let trace = |seed| TraceConfig {
            synthetic: Some(flat(20.0, 120)),
            random_sinusoids: Some(waves(seed)),
            ..Default::default()
        };
        assert_eq!(trace(7).rates().unwrap(), trace(7).rates().unwrap());
        assert_ne!(trace(7).rates().unwrap(), trace(8).rates().unwrap());
        let rates = trace(7).rates().unwrap();
        assert!(rates.iter().all(|r| (r - 20.0).abs() <= 15.0 + 1e-9), "three waves of at most 5 each");
    }

    #[test]
    fn the_synthetic_trace_has_its_mean_its_wave_and_its_spikes() {
        let calm = SyntheticTrace { spikes: 0, noise: 0.0, duration_s: 1000, ..Default::default() };
        let rates = calm.rates().unwrap();
        assert!((mean(&rates) - 50.0).abs() < 0.5, "mean {}", mean(&rates));
        assert!((rates[0] - 30.0).abs() < 1e-9, "starts at its trough, 50·(1 − 0.4)");
        assert!((rates[500] - 70.0).abs() < 1e-6, "crest half-way, 50·(1 + 0.4)");

        let spiky = SyntheticTrace { spikes: 1, spike_factor: 4.0, ..calm };
        let spiked = spiky.rates().unwrap();
        let (peak_at, ratio) =
            spiked.iter().zip(&rates).map(|(s, c)| s / c).enumerate().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
        assert!((ratio - 4.0).abs() < 0.2, "the spike peaks at 4× the rate under it: {ratio}");
        assert!(peak_at >= 100, "no spike in the first tenth");
        let rise = spiked[peak_at] / spiked[peak_at.saturating_sub(4)];
        assert!(rise > 2.0, "several-fold within seconds: ×{rise}");

        let noisy = SyntheticTrace { noise: 0.1, ..spiky };
        assert_eq!(noisy.rates().unwrap(), noisy.rates().unwrap(), "same seed, same trace");
        assert_ne!(noisy.rates().unwrap(), SyntheticTrace { seed: 2, ..noisy }.rates().unwrap());
    }

    #[test]
    fn a_trace_needs_one_source() {
        assert!(TraceConfig::default().rates().is_err());
        let both = TraceConfig { file: Some("x.csv".into()), synthetic: Some(flat(1.0, 1)), ..Default::default() };
        assert!(both.rates().is_err());
    }
}
