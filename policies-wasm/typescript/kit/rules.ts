/**
 * The rules a policy reads a snapshot by to agree with the host, as the Rust kit has
 * them (`policy-abi/src/rules.rs`): which variant serves a task, whether a variant may
 * serve, and the cores serving instances hold, the pool sessions share counted once.
 * `rules_check.ts` checks them against the cases the Rust rules answered
 * (`policy-abi/schema/rules-cases.json`).
 */
import type { TaskSnapshot, VariantSnapshot } from "./types.js";

/** The variant named `name`. */
export function variant(task: TaskSnapshot, name: string): VariantSnapshot | undefined {
  return task.variants.find((v) => v.name === name);
}

/** The variant serving the task: the one `active` names. */
export function activeVariant(task: TaskSnapshot): VariantSnapshot | undefined {
  return variant(task, task.active.variant);
}

/** The index of the serving variant in `variants`. */
export function activeIndex(task: TaskSnapshot): number | undefined {
  const at = task.variants.findIndex((v) => v.name === task.active.variant);
  return at < 0 ? undefined : at;
}

/** Whether the variant fits its task and did not fail to load. */
export function mayServe(v: VariantSnapshot): boolean {
  return (v.refused ?? null) === null && v.state !== "failed";
}

/** Instances serving and starting. */
export function servingInstances(v: VariantSnapshot): number {
  return (v.instances ?? 0) + (v.instances_starting ?? 0);
}

/** The cores of the task's instances with threads of their own, and whether they run on the shared pool. */
function servingCores(task: TaskSnapshot): [number, boolean] {
  const v = activeVariant(task);
  if (v === undefined || v.share == null) return [0, false];
  const serving = servingInstances(v);
  return [v.share.cores * serving, v.share.cores === 0 && serving > 0];
}

/** The cores the task's serving instances hold, the shared pool counted where they run on it. */
export function taskCoresHeld(task: TaskSnapshot, sharedPoolCores: number): number {
  const [own, pooled] = servingCores(task);
  return own + (pooled ? sharedPoolCores : 0);
}

/** The cores the serving instances of `tasks` hold: each task's own, and the shared pool once. */
export function coresHeld(tasks: TaskSnapshot[], sharedPoolCores: number): number {
  const held = tasks.map(servingCores);
  const own = held.reduce((sum, [cores]) => sum + cores, 0);
  return own + (held.some(([, pooled]) => pooled) ? sharedPoolCores : 0);
}
