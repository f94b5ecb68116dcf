/**
 * {NAME}: a modelless policy in TypeScript. `decide` gets the snapshot and answers a
 * decision; tasks it leaves out keep everything. Build with ./build.sh, check with
 * `modelless policy check {NAME}.wasm`.
 */
import { exportPolicy, log, Policy } from "./kit/policy.js";
import type { Decision, Snapshot } from "./kit/types.js";

class Starter implements Policy {
  decide(snapshot: Snapshot): Decision {
    for (const task of snapshot.tasks) {
      log("info", `${task.name}: ${task.demand.per_s_10s.toFixed(1)}/s on ${task.active.variant}`);
    }
    return { tasks: [] };
  }
}

export const { init, decide, saveState, loadState } = exportPolicy(new Starter());
