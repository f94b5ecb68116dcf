/**
 * The TypeScript kit for modelless policies. A policy implements `Policy` on the
 * types of `./types.ts` (generated from `policy-abi/schema/`), and its module
 * re-exports what `exportPolicy` returns, which componentize-js builds into a
 * component of the `modelless:policy` world:
 *
 *     import { exportPolicy, Policy } from "../kit/policy.js";
 *     class KeepEverything implements Policy {
 *       decide(snapshot: Snapshot): Decision { return { tasks: [] }; }
 *     }
 *     export const { init, decide, saveState, loadState } = exportPolicy(new KeepEverything());
 *
 * Whatever a method throws becomes the call's error, which the host counts as the
 * policy's own failure.
 */
import { log as hostLog } from "modelless:policy/host@1.0.0";
import type { Decision, Snapshot } from "./types.js";

export type * from "./types.js";
/** The rules a policy reads a snapshot by to agree with the host. */
export * as rules from "./rules.js";

/** A scheduling policy. */
export interface Policy {
  /** Takes the parameters (decoded JSON), once, before the first `decide`. */
  init?(parameters: unknown): void;
  /** The decision for this tick. */
  decide(snapshot: Snapshot): Decision;
  /** The policy's own state (JSON-encodable) for the module that replaces it. */
  saveState?(): unknown;
  /** Takes the state a module it replaces saved. */
  loadState?(state: unknown): void;
}

export type Level = "error" | "warn" | "info" | "debug" | "trace";

/** Logs a line through the host; `warn` and `error` show in the policy's status. */
export function log(level: Level, message: string): void {
  hostLog(level, message);
}

/** A thrown value as the error the host reports. */
function reason(error: unknown): string {
  if (error instanceof Error) {
    const where = error.stack?.split("\n").find((line) => line.includes("@"));
    return `${error.name}: ${error.message}${where ? ` at ${where.trim()}` : ""}`;
  }
  return String(error);
}

/** Runs `call`, a throw turned into the world's `err` case. */
function guarded<T>(call: () => T): T {
  try {
    return call();
  } catch (error) {
    // componentize-js maps a thrown value with a `payload` to `err(payload)`.
    throw { payload: reason(error) };
  }
}

/** The world's exports, served by `policy`. */
export function exportPolicy(policy: Policy) {
  return {
    init(parameters: string): void {
      guarded(() => policy.init?.(JSON.parse(parameters)));
    },
    decide(snapshot: string): string {
      return guarded(() => JSON.stringify(policy.decide(JSON.parse(snapshot) as Snapshot)));
    },
    saveState(): string | undefined {
      const state = policy.saveState?.();
      return state === undefined || state === null ? undefined : JSON.stringify(state);
    },
    loadState(state: string): void {
      guarded(() => policy.loadState?.(JSON.parse(state)));
    },
  };
}
