//! Open-loop arrival times: a Poisson process whose rate changes each second.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Poisson};

/// Arrival times (s from the start, ascending) for `rates` requests per second: in
/// each second a Poisson-distributed count with that mean, spread uniformly over the
/// second (which is a Poisson process within it). The same seed gives the same times.
pub fn arrivals(rates: &[f64], seed: u64) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut times = Vec::with_capacity(rates.iter().sum::<f64>() as usize + rates.len());
    for (second, &rate) in rates.iter().enumerate() {
        let count = match Poisson::new(rate) {
            Ok(poisson) => poisson.sample(&mut rng) as usize,
            Err(_) => 0, // a rate of 0
        };
        let start = times.len();
        times.extend((0..count).map(|_| second as f64 + rng.random::<f64>()));
        times[start..].sort_by(f64::total_cmp);
    }
    times
}

/// A seed of its own for stream `index` (a task of a run), so that adding a task
/// leaves the others' arrivals as they were.
pub fn stream_seed(seed: u64, index: usize) -> u64 {
    // SplitMix64's finaliser: nearby inputs give unrelated outputs.
    let mut z = seed.wrapping_add((index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_second_follow_the_rates_and_times_stay_in_their_second() {
        let rates = [100.0, 0.0, 400.0, 50.0];
        let times = arrivals(&rates, 3);
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "ascending");
        for (second, rate) in rates.iter().enumerate() {
            let n = times.iter().filter(|t| t.floor() as usize == second).count() as f64;
            // Poisson: standard deviation √rate; 4 of them is a generous bound.
            assert!((n - rate).abs() <= 4.0 * rate.sqrt() + 1e-9, "second {second}: {n} for {rate}");
        }
        assert!(times.iter().all(|t| *t >= 0.0 && *t < rates.len() as f64));
    }

    #[test]
    fn over_many_seconds_the_mean_count_is_the_rate_and_gaps_are_exponential() {
        let rates = vec![20.0; 2000];
        let times = arrivals(&rates, 11);
        let mean = times.len() as f64 / rates.len() as f64;
        assert!((mean - 20.0).abs() < 0.3, "mean {mean}");
        // Exponential gaps: the share longer than the mean gap is e^-1.
        let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        let long = gaps.iter().filter(|g| **g > 1.0 / 20.0).count() as f64 / gaps.len() as f64;
        assert!((long - (-1.0f64).exp()).abs() < 0.02, "share of long gaps {long}");
    }

    #[test]
    fn the_same_seed_gives_the_same_arrivals_and_streams_differ() {
        let rates = [30.0; 10];
        assert_eq!(arrivals(&rates, 5), arrivals(&rates, 5));
        assert_ne!(arrivals(&rates, 5), arrivals(&rates, 6));
        assert_ne!(stream_seed(5, 0), stream_seed(5, 1));
        assert_ne!(stream_seed(5, 0), stream_seed(6, 0));
    }
}
