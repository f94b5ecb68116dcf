//! Capacity planning from profiles, the two problems of González-Vidal et al.
//! (WoSC'23): *soft real-time*, the fewest devices that finish `N` items by a deadline
//! `T`; and *relaxed*, the most items a fixed set of devices finishes by `T`.
//!
//! A device runs batches one after another; a batch of `b` items takes `a·b + c` ms
//! once warm, and the first batch of each size it has not run before also pays its
//! warm-up. What a device can finish by `T` is therefore exact: full batches of its
//! largest size (the cheapest per item, since `c` is shared), then, in the time
//! left, either one more full batch or a smaller one that pays a second warm-up,
//! whichever finishes more items. Items are independent, so any split of them over
//! devices works, and the fewest devices are the ones that finish the most, taken
//! largest first: replacing any chosen device by a larger one never finishes fewer.

use serde::{Deserialize, Serialize};

/// A kind of device (or a variant on one), as its profile describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    /// Its name.
    pub name: String,
    /// Warm latency per item, ms (`a` of `a·b + c`).
    pub a_ms: f64,
    /// Warm latency per batch, ms (`c`).
    pub c_ms: f64,
    /// Extra time of the first batch of each size, ms.
    #[serde(default)]
    pub warmup_ms: f64,
    /// Largest batch it runs (what fits its memory).
    pub max_batch: u32,
    /// How many of them there are.
    #[serde(default = "one")]
    pub count: u32,
}

fn one() -> u32 {
    1
}

/// What one device does by the deadline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    /// The device kind.
    pub device: String,
    /// Items it finishes.
    pub items: u64,
    /// Batches of its largest size.
    pub full_batches: u64,
    /// That size.
    pub batch_size: u32,
    /// Items in one last, shorter batch: run padded to the warm size, or at its own
    /// size after a warm-up of its own, whichever finishes more.
    pub last_batch: Option<u32>,
    /// When it finishes them, ms.
    pub finish_ms: f64,
}

impl Assignment {
    /// Items in each batch, in order.
    pub fn batches(&self) -> Vec<u32> {
        let full = std::iter::repeat_n(self.batch_size, self.full_batches as usize);
        full.chain(self.last_batch).collect()
    }
}

/// A plan: which devices run how many items.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// One entry per device used.
    pub devices: Vec<Assignment>,
    /// Items finished by the deadline.
    pub items: u64,
}

impl Device {
    /// The most items it finishes within `deadline_ms`, and the batches that do it.
    pub fn capacity(&self, deadline_ms: f64) -> Assignment {
        self.schedule(u64::MAX, deadline_ms)
    }

    /// Its batches for at most `items` items within `deadline_ms`: as many as it can.
    pub fn schedule(&self, items: u64, deadline_ms: f64) -> Assignment {
        let (a, c, w, big) = (self.a_ms, self.c_ms, self.warmup_ms, u64::from(self.max_batch.max(1)));
        let full = a * big as f64 + c;
        // Full batches while they fit; the first one warms the size up.
        let fit = if deadline_ms >= w + full { ((deadline_ms - w) / full).floor() as u64 } else { 0 };
        let full_batches = fit.min(items / big);
        let mut done = full_batches * big;
        let mut elapsed = if full_batches > 0 { w + full_batches as f64 * full } else { 0.0 };
        // Then one batch for what is left of the items or of the time.
        let wanted = (items - done).min(big);
        let left = deadline_ms - elapsed;
        let padded_cost = full + if full_batches == 0 { w } else { 0.0 };
        let own_fits = if left < c + w {
            0
        } else if a > 0.0 {
            (((left - c - w) / a).floor() as u64).min(wanted)
        } else {
            wanted
        };
        let last_batch = if wanted > 0 && padded_cost <= left {
            elapsed += padded_cost;
            Some(wanted)
        } else if own_fits > 0 {
            elapsed += a * own_fits as f64 + c + w;
            Some(own_fits)
        } else {
            None
        };
        done += last_batch.unwrap_or(0);
        Assignment {
            device: self.name.clone(),
            items: done,
            full_batches,
            batch_size: big as u32,
            last_batch: last_batch.map(|b| b as u32),
            finish_ms: elapsed,
        }
    }

    /// Why the device cannot be planned with, if it cannot: costs must be finite and
    /// not negative, and a batch must take some time.
    pub fn check(&self) -> Result<(), String> {
        let costs = [self.a_ms, self.c_ms, self.warmup_ms];
        if costs.iter().any(|v| !v.is_finite() || *v < 0.0) || self.max_batch == 0 {
            return Err(format!("device `{}`: a_ms, c_ms and warmup_ms must be ≥ 0, max_batch ≥ 1", self.name));
        }
        if self.a_ms * f64::from(self.max_batch) + self.c_ms <= 0.0 {
            return Err(format!("device `{}`: a batch that takes no time", self.name));
        }
        Ok(())
    }
}

/// Soft real-time: the fewest devices (of those available, `count` of each kind) that
/// finish `items` by `deadline_ms`, with the items each runs; `None` if all of them
/// together cannot.
pub fn soft_real_time(devices: &[Device], items: u64, deadline_ms: f64) -> Option<Plan> {
    let mut units: Vec<(&Device, u64)> = devices
        .iter()
        .flat_map(|d| std::iter::repeat_n(d, d.count as usize))
        .map(|d| (d, d.capacity(deadline_ms).items))
        .filter(|(_, capacity)| *capacity > 0)
        .collect();
    units.sort_by_key(|unit| std::cmp::Reverse(unit.1));
    let mut plan = Plan { devices: Vec::new(), items: 0 };
    for (device, _) in units {
        if plan.items >= items {
            break;
        }
        let assignment = device.schedule(items - plan.items, deadline_ms);
        plan.items += assignment.items;
        plan.devices.push(assignment);
    }
    (plan.items >= items).then_some(plan)
}

/// Relaxed: the most items every available device together finishes by `deadline_ms`.
pub fn relaxed(devices: &[Device], deadline_ms: f64) -> Plan {
    let devices: Vec<Assignment> = devices
        .iter()
        .flat_map(|d| std::iter::repeat_n(d, d.count as usize))
        .map(|d| d.capacity(deadline_ms))
        .collect();
    let items = devices.iter().map(|a| a.items).sum();
    Plan { devices, items }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(name: &str, a_ms: f64, c_ms: f64, warmup_ms: f64, max_batch: u32, count: u32) -> Device {
        Device { name: name.into(), a_ms, c_ms, warmup_ms, max_batch, count }
    }

    #[test]
    fn a_device_runs_full_batches_then_the_best_last_batch() {
        // a = 1, c = 10, warm-up 20, batches of 10: a full batch takes 20 ms, the first 40.
        let d = device("d", 1.0, 10.0, 20.0, 10, 1);
        // 100 ms: 40 + 20 + 20 = 80 for 30 items; 20 ms left: a padded full batch
        // (20 ms) finishes 10 more; one of its own size would pay 30 ms first.
        let by_100 = d.capacity(100.0);
        assert_eq!((by_100.items, by_100.batches(), by_100.finish_ms), (40, vec![10, 10, 10, 10], 100.0));
        // 75 ms: 2 full batches (60 ms), 15 left: no full batch, and its own size
        // needs c + w = 30 ms: nothing more.
        assert_eq!(d.capacity(75.0).items, 20);
        // 95 ms: 3 full batches (80), 15 left: still nothing; 35 ms left would fit 5.
        assert_eq!(d.capacity(95.0).items, 30);
        assert_eq!(
            device("d", 1.0, 10.0, 5.0, 10, 1).capacity(95.0).items,
            40,
            "w = 5: 75 ms for 3, 20 ms: a full one"
        );
        // A last batch of its own size when no full one fits: w = 2, 3 full = 62 ms,
        // 17 ms left: own size r with r + 10 + 2 ≤ 17, r = 5.
        let cheap_warmup = device("d", 1.0, 10.0, 2.0, 10, 1).capacity(79.0);
        assert_eq!((cheap_warmup.items, cheap_warmup.batches()), (35, vec![10, 10, 10, 5]));
        // Fewer items than a batch: one batch of just those.
        let few = d.schedule(3, 100.0);
        assert_eq!((few.items, few.batches(), few.finish_ms), (3, vec![3], 40.0), "padded: 20 + 20 warm-up");
        assert_eq!(d.capacity(39.0).batches(), vec![9], "no full batch: 9 + 10 + 20 ms for 9 items");
        assert_eq!(d.capacity(29.0).items, 0, "not even one item with its warm-up");
    }

    #[test]
    fn soft_real_time_takes_the_fewest_devices_largest_first() {
        let fast = device("fast", 1.0, 10.0, 0.0, 10, 1); // 100 ms: 5 batches, 50 items
        let slow = device("slow", 2.0, 10.0, 0.0, 10, 3); // 100 ms: 3 batches, 30 items
        let plan = soft_real_time(&[slow.clone(), fast.clone()], 100, 100.0).unwrap();
        // 50 + 30 + 30 ≥ 100: three devices, the fast one first; the last runs 20.
        let used: Vec<(&str, u64)> = plan.devices.iter().map(|a| (a.device.as_str(), a.items)).collect();
        assert_eq!(used, vec![("fast", 50), ("slow", 30), ("slow", 20)]);
        assert_eq!(plan.items, 100);
        assert!(soft_real_time(&[slow.clone(), fast.clone()], 141, 100.0).is_none(), "140 at most");
        assert_eq!(soft_real_time(&[slow, fast], 50, 100.0).unwrap().devices.len(), 1);
    }

    #[test]
    fn the_greedy_choice_matches_trying_every_subset() {
        let kinds =
            [device("a", 0.7, 12.0, 30.0, 8, 2), device("b", 1.9, 3.0, 5.0, 4, 2), device("c", 0.4, 25.0, 80.0, 16, 1)];
        let units: Vec<&Device> = kinds.iter().flat_map(|d| std::iter::repeat_n(d, d.count as usize)).collect();
        for deadline in [60.0, 150.0, 400.0] {
            for items in [5u64, 40, 90, 160, 300] {
                let fewest = (0u32..1 << units.len())
                    .filter(|set| {
                        let total: u64 = (0..units.len())
                            .filter(|i| set & (1 << i) != 0)
                            .map(|i| units[i].capacity(deadline).items)
                            .sum();
                        total >= items
                    })
                    .map(|set| set.count_ones() as usize)
                    .min();
                let greedy = soft_real_time(&kinds, items, deadline).map(|p| p.devices.len());
                assert_eq!(greedy, fewest, "{items} items by {deadline} ms");
            }
        }
    }

    #[test]
    fn a_device_that_makes_no_sense_is_refused_and_a_huge_deadline_is_counted_not_looped() {
        assert!(device("free", 0.0, 0.0, 0.0, 8, 1).check().is_err());
        assert!(device("negative", -1.0, 1.0, 0.0, 8, 1).check().is_err());
        assert!(device("empty", 1.0, 1.0, 0.0, 0, 1).check().is_err());
        let d = device("d", 1.0, 10.0, 20.0, 10, 1);
        assert!(d.check().is_ok());
        let year = d.capacity(3.15e10);
        assert_eq!(year.full_batches, ((3.15e10 - 20.0) / 20.0) as u64);
        assert_eq!(year.items, year.full_batches * 10);
    }

    #[test]
    fn relaxed_sums_what_every_device_finishes() {
        let plan = relaxed(&[device("x", 1.0, 10.0, 0.0, 10, 2), device("y", 2.0, 10.0, 0.0, 10, 1)], 100.0);
        assert_eq!(plan.items, 50 + 50 + 30);
        assert_eq!(plan.devices.len(), 3);
    }
}
