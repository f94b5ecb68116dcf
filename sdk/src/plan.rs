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
    /// Items in each of its batches, in order; a short last batch runs padded to the
    /// warm size unless it paid a warm-up of its own size (whichever finishes more).
    pub batches: Vec<u32>,
    /// When it finishes them, ms.
    pub finish_ms: f64,
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
        let mut batches = Vec::new();
        let mut done = 0u64;
        let mut elapsed = 0.0;
        // Full batches while they fit (the first one warms the size up).
        while items - done >= big {
            let cost = full + if batches.is_empty() { w } else { 0.0 };
            if elapsed + cost > deadline_ms {
                break;
            }
            elapsed += cost;
            done += big;
            batches.push(big as u32);
        }
        // Then one batch for what is left of the items or of the time: padded to the
        // warm size, or of its own size at the cost of another warm-up.
        let wanted = (items - done).min(big);
        if wanted > 0 {
            let left = deadline_ms - elapsed;
            let padded_cost = full + if batches.is_empty() { w } else { 0.0 };
            let own = |r: u64| a * r as f64 + c + w;
            let own_fits = if left < c + w {
                0
            } else if a > 0.0 {
                (((left - c - w) / a).floor() as u64).min(wanted)
            } else {
                wanted
            };
            if padded_cost <= left && wanted >= own_fits {
                elapsed += padded_cost;
                done += wanted;
                batches.push(wanted as u32);
            } else if own_fits > 0 {
                elapsed += own(own_fits);
                done += own_fits;
                batches.push(own_fits as u32);
            }
        }
        Assignment { device: self.name.clone(), items: done, batches, finish_ms: elapsed }
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
        assert_eq!((by_100.items, by_100.batches.clone(), by_100.finish_ms), (40, vec![10, 10, 10, 10], 100.0));
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
        assert_eq!((cheap_warmup.items, cheap_warmup.batches), (35, vec![10, 10, 10, 5]));
        // Fewer items than a batch: one batch of just those.
        let few = d.schedule(3, 100.0);
        assert_eq!((few.items, few.batches, few.finish_ms), (3, vec![3], 40.0), "padded: 20 + 20 warm-up");
        assert_eq!(d.capacity(39.0).batches, vec![9], "no full batch: 9 + 10 + 20 ms for 9 items");
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
    fn relaxed_sums_what_every_device_finishes() {
        let plan = relaxed(&[device("x", 1.0, 10.0, 0.0, 10, 2), device("y", 2.0, 10.0, 0.0, 10, 1)], 100.0);
        assert_eq!(plan.items, 50 + 50 + 30);
        assert_eq!(plan.devices.len(), 3);
    }
}
