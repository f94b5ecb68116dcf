/**
 * A policy that misbehaves as its parameters say, for the host's containment tests:
 * `{"do": "loop" | "allocate" | "recurse" | "raise" | "garbage" | "huge" | "nothing"}`,
 * and `"after": N` to behave for N decisions first. Never ship it.
 */
import { exportPolicy, log, Policy } from "../kit/policy.js";
import type { Decision, Snapshot } from "../kit/types.js";

function recurse(depth: number): number {
  return recurse(depth + 1) + 1;
}

class Hostile implements Policy {
  private do = "nothing";
  private after = 0;
  private calls = 0;

  init(parameters: unknown): void {
    const given = parameters as { do?: string; after?: number };
    this.do = given.do ?? "nothing";
    this.after = given.after ?? 0;
  }

  decide(_snapshot: Snapshot): Decision {
    this.calls += 1;
    if (this.calls <= this.after) return { tasks: [] };
    log("warn", `about to ${this.do}`);
    switch (this.do) {
      case "loop":
        for (;;) {}
      case "allocate": {
        const hoard: Uint8Array[] = [];
        for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
      }
      case "recurse":
        recurse(0);
        break;
      case "raise":
        throw new Error("the policy gave up");
      case "garbage":
        return "not a decision" as unknown as Decision;
      case "huge":
        return { tasks: [], padding: "x".repeat(100_000) } as unknown as Decision;
    }
    return { tasks: [] };
  }
}

export const { init, decide, saveState, loadState } = exportPolicy(new Hostile());
