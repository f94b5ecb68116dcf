//! The fleet's pods and the balancer in front of them. A pod asked for starts, and
//! is ready a start time later; a ready pod takes requests from the balancer, which
//! sends each to the ready replica with the fewest in flight (nginx's `least_conn`,
//! ties in turn); a pod removed takes no more, answers what it holds, and is gone.
//! Removed first, as a ReplicaSet picks them: pods not yet ready, then the newest.

use super::replica::{Replica, ReplicaModel};

/// Where a pod is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodState {
    /// Asked for; ready at this time, µs.
    Starting {
        /// When it is ready, µs.
        ready_us: u64,
    },
    /// Taking requests since this time, µs.
    Ready {
        /// When it became ready, µs.
        since_us: u64,
    },
    /// Removed: answering what it holds.
    Draining,
    /// Ended at this time, µs.
    Gone {
        /// When it ended, µs.
        at_us: u64,
    },
}

/// One pod.
#[derive(Clone, Debug)]
pub struct Pod {
    /// Where it is in its life.
    pub state: PodState,
    /// When it was asked for, µs.
    pub created_us: u64,
    /// Its server.
    pub replica: Replica,
    /// (time, instance time busy) at the last CPU reading.
    pub cpu_mark: (u64, u64),
}

/// Every pod the fleet ever had, and the ready ones the balancer sends to.
#[derive(Clone, Debug, Default)]
pub struct Pods {
    pods: Vec<Pod>,
    /// Indices of the ready pods, in the order they became ready.
    ready: Vec<usize>,
    /// Where the balancer's next look starts, so that ties go round.
    turn: usize,
}

impl Pods {
    /// `count` pods of `model`, ready at `now`.
    pub fn ready_at_start(model: &ReplicaModel, count: u32, now: u64) -> Self {
        let mut pods = Pods::default();
        for _ in 0..count {
            let index = pods.add(model, now, now);
            pods.make_ready(index, now);
        }
        pods
    }

    /// The pod at `index`, to change.
    pub fn get_mut(&mut self, index: usize) -> &mut Pod {
        &mut self.pods[index]
    }

    /// Every pod, gone ones included.
    pub fn all(&self) -> &[Pod] {
        &self.pods
    }

    /// Pods asked for and not removed: what the workload's spec says.
    pub fn wanted(&self) -> u32 {
        self.count(|s| matches!(s, PodState::Starting { .. } | PodState::Ready { .. }))
    }

    /// Pods taking requests.
    pub fn ready(&self) -> u32 {
        self.ready.len() as u32
    }

    /// Pods that exist (starting, ready or draining): what the cluster holds.
    pub fn held(&self) -> u32 {
        self.count(|s| !matches!(s, PodState::Gone { .. }))
    }

    fn count(&self, keep: impl Fn(&PodState) -> bool) -> u32 {
        self.pods.iter().filter(|p| keep(&p.state)).count() as u32
    }

    fn add(&mut self, model: &ReplicaModel, now: u64, ready_us: u64) -> usize {
        let replica = Replica::new(model, now);
        self.pods.push(Pod { state: PodState::Starting { ready_us }, created_us: now, replica, cpu_mark: (now, 0) });
        self.pods.len() - 1
    }

    /// The pod at `index` is ready at `now`, if it is still starting.
    pub fn make_ready(&mut self, index: usize, now: u64) {
        if matches!(self.pods[index].state, PodState::Starting { .. }) {
            self.pods[index].state = PodState::Ready { since_us: now };
            self.pods[index].cpu_mark = (now, self.pods[index].replica.busy_us(now));
            self.ready.push(index);
        }
    }

    /// Asks for `desired` pods at `now`: new ones ready `start_us` later, or the
    /// surplus removed. Returns the new pods' indices and when each is ready.
    pub fn scale_to(&mut self, model: &ReplicaModel, desired: u32, now: u64, start_us: u64) -> Vec<(usize, u64)> {
        let wanted = self.wanted();
        if desired > wanted {
            return (wanted..desired).map(|_| (self.add(model, now, now + start_us), now + start_us)).collect();
        }
        for _ in desired..wanted {
            let starting = self.pods.iter().rposition(|p| matches!(p.state, PodState::Starting { .. }));
            match starting {
                Some(index) => self.pods[index].state = PodState::Gone { at_us: now },
                None => {
                    let Some(index) = self.ready.pop() else { break };
                    self.pods[index].state = PodState::Draining;
                    self.end_if_drained(index, now);
                }
            }
        }
        Vec::new()
    }

    /// A draining pod with nothing left in flight is gone at `now`.
    pub fn end_if_drained(&mut self, index: usize, now: u64) {
        let pod = &mut self.pods[index];
        if pod.state == PodState::Draining && pod.replica.in_flight() == 0 {
            pod.state = PodState::Gone { at_us: now };
        }
    }

    /// The ready pod the balancer sends the next request to: the fewest in flight,
    /// ties taken in turn. `None` with no pod ready.
    pub fn pick(&mut self) -> Option<usize> {
        let n = self.ready.len();
        if n == 0 {
            return None;
        }
        let start = self.turn % n;
        let at = (0..n).map(|k| (start + k) % n).min_by_key(|&i| self.pods[self.ready[i]].replica.in_flight())?;
        self.turn = at + 1;
        Some(self.ready[at])
    }

    /// Pod-seconds held from the start up to `end_us`.
    pub fn replica_seconds(&self, end_us: u64) -> f64 {
        let held_us: u64 = self
            .pods
            .iter()
            .map(|p| {
                let ended = match p.state {
                    PodState::Gone { at_us } => at_us,
                    _ => end_us,
                };
                ended.min(end_us).saturating_sub(p.created_us.min(end_us))
            })
            .sum();
        held_us as f64 / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::replica::Waiting;

    fn model() -> ReplicaModel {
        ReplicaModel {
            variant: "v".into(),
            fit: modelless::policy_abi::LatencyFit { a_ms: 1.0, c_ms: 4.0, r2: 1.0 },
            spread: 0.0,
            max_batch_size: 4,
            max_queue_size: 64,
            instances: 1,
            slo_ms: 100.0,
        }
    }

    #[test]
    fn the_balancer_sends_to_the_fewest_in_flight_and_takes_ties_in_turn() {
        let model = model();
        let mut pods = Pods::ready_at_start(&model, 3, 0);
        let request = Waiting { arrived_us: 0, deadline_us: 100_000 };
        let picks: Vec<usize> = (0..3).map(|_| pods.pick().unwrap()).collect();
        assert_eq!(picks, [0, 1, 2], "all idle: in turn");
        assert!(pods.get_mut(0).replica.offer(&model, request, 0));
        assert!(pods.get_mut(2).replica.offer(&model, request, 0));
        assert_eq!(pods.pick(), Some(1), "the one with nothing in flight");
    }

    #[test]
    fn scaling_down_removes_starting_pods_first_then_the_newest_and_drains_them() {
        let model = model();
        let mut pods = Pods::ready_at_start(&model, 2, 0);
        let new = pods.scale_to(&model, 4, 1_000_000, 5_000_000);
        assert_eq!(new, vec![(2, 6_000_000), (3, 6_000_000)]);
        pods.make_ready(2, 6_000_000);
        assert_eq!((pods.wanted(), pods.ready(), pods.held()), (4, 3, 4));
        // Down to 2: pod 3 (still starting) goes at once, then pod 2 (the newest ready).
        assert!(pods.get_mut(2).replica.offer(&model, Waiting { arrived_us: 0, deadline_us: 9_000_000 }, 7_000_000));
        pods.scale_to(&model, 2, 7_000_000, 5_000_000);
        assert_eq!(pods.all()[3].state, PodState::Gone { at_us: 7_000_000 });
        assert_eq!(pods.all()[2].state, PodState::Draining, "it holds a request");
        assert_eq!((pods.wanted(), pods.ready(), pods.held()), (2, 2, 3));
        assert!((0..10).all(|_| pods.pick() != Some(2)), "a draining pod takes nothing");
        // Held: pods 0 and 1 for 10 s, 2 from 1 s on (still draining), 3 from 1 to 7 s.
        assert!((pods.replica_seconds(10_000_000) - (10.0 + 10.0 + 9.0 + 6.0)).abs() < 1e-9);
    }
}
