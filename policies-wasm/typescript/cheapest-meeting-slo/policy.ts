/**
 * INFaaS's rule in TypeScript, deciding exactly as the Rust
 * `policies-wasm/cheapest-meeting-slo`: serve each task with the cheapest variant (by
 * profiled maximal throughput) whose predicted latency at the current load meets the
 * task's latency target and whose accuracy meets its floor (`{"min_accuracy":
 * {"task": 70.0}}`). The prediction is `2·L(b)` at the smallest batch `b` (up to the
 * task's `max_batch_size`) that keeps up with the last 10 s of demand. When no variant
 * meets the target, the one predicted fastest among those accurate enough serves.
 */
import { exportPolicy, Policy } from "../kit/policy.js";
import type { Decision, Snapshot, TaskDecision, TaskSnapshot, VariantSnapshot } from "../kit/types.js";

interface Parameters {
  min_accuracy: Record<string, number>;
}

interface Candidate {
  variant: VariantSnapshot;
  latency: number;
  cost: number;
}

/** About `2·L(b)` at the smallest batch that keeps up with `demand`. */
function predictedLatencyMs(variant: VariantSnapshot, demand: number, maxBatch: number): number | undefined {
  const fit = variant.profile?.fit;
  if (!fit) return undefined;
  for (let b = 1; b <= maxBatch; b++) {
    const latency = fit.a_ms * b + fit.c_ms;
    if (latency > 0 && (b / latency) * 1e3 >= demand) return 2 * latency;
  }
  return undefined;
}

/** The first candidate with the least `key`. */
function first(candidates: Candidate[], key: (c: Candidate) => number): Candidate | undefined {
  let best: Candidate | undefined;
  for (const c of candidates) if (best === undefined || key(c) < key(best)) best = c;
  return best;
}

class CheapestMeetingSlo implements Policy {
  private parameters: Parameters = { min_accuracy: {} };

  init(parameters: unknown): void {
    const given = (parameters ?? {}) as Record<string, unknown>;
    const unknown = Object.keys(given).filter((k) => k !== "min_accuracy");
    if (unknown.length > 0) throw new Error(`unknown parameters: ${unknown.join(", ")}`);
    this.parameters = { min_accuracy: (given.min_accuracy ?? {}) as Record<string, number> };
  }

  decide(snapshot: Snapshot): Decision {
    const tasks: TaskDecision[] = [];
    for (const task of snapshot.tasks) {
      const choice = this.choose(task);
      if (choice !== undefined && choice !== task.active.variant) tasks.push({ task: task.name, variant: choice });
    }
    return { tasks };
  }

  private choose(task: TaskSnapshot): string | undefined {
    const target = task.slo_latency_ms;
    if (target === undefined || target === null) return undefined;
    const floor = this.parameters.min_accuracy[task.name] ?? -Number.MAX_VALUE;
    const maxBatch = Math.max(task.active.max_batch_size, 1);
    const candidates: Candidate[] = [];
    for (const variant of task.variants) {
      if (!(variant.accuracy >= floor)) continue;
      const latency = predictedLatencyMs(variant, task.demand.per_s_10s, maxBatch);
      const best = variant.profile?.max_throughput;
      if (latency === undefined || !best) continue;
      candidates.push({ variant, latency, cost: 1 / best.requests_per_s });
    }
    const meeting = first(
      candidates.filter((c) => c.latency <= target),
      (c) => c.cost,
    );
    return (meeting ?? first(candidates, (c) => c.latency))?.variant.name;
  }
}

export const { init, decide, saveState, loadState } = exportPolicy(new CheapestMeetingSlo());
