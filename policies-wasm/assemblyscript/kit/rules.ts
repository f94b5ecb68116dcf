// The rules a policy reads a snapshot by to agree with the host, as the Rust kit has
// them (policy-abi/src/rules.rs): which variant serves a task, whether a variant may
// serve, and the cores serving instances hold, the pool sessions share counted once.
// A policy declares the snapshot's classes it reads (json-as), so these are generic:
// they take any class with the fields they read, named as the snapshot names them.
// `rules_check.ts` checks them against the cases the Rust rules answered
// (policy-abi/schema/rules-cases.json).

/** The index of the variant named `name` in `variants`, or -1. */
export function variantIndex<V>(variants: V[], name: string): i32 {
  for (let i = 0; i < variants.length; i++) {
    if (variants[i].name == name) return i;
  }
  return -1;
}

/** The index of the variant serving `task` (the one `active` names), or -1. */
export function activeIndex<T>(task: T): i32 {
  return variantIndex(task.variants, task.active.variant);
}

/** Whether the variant fits its task and did not fail to load. */
export function mayServe<V>(v: V): bool {
  return v.refused === null && v.state != "failed";
}

/** Instances serving and starting. */
export function servingInstances<V>(v: V): u32 {
  return v.instances + v.instances_starting;
}

/** The cores of `task`'s instances with threads of their own, negative where they run on the shared pool. */
function servingCores<T>(task: T): f64 {
  const at = activeIndex(task);
  if (at < 0) return 0;
  const v = task.variants[at];
  const share = v.share;
  if (share === null) return 0;
  const serving = servingInstances(v);
  if (share.cores == 0) return serving > 0 ? -1 : 0;
  return share.cores * <f64>serving;
}

/** The cores `task`'s serving instances hold, the shared pool counted where they run on it. */
export function taskCoresHeld<T>(task: T, sharedPoolCores: f64): f64 {
  const own = servingCores(task);
  return own < 0 ? sharedPoolCores : own;
}

/** The cores the serving instances of `tasks` hold: each task's own, and the shared pool once. */
export function coresHeld<T>(tasks: T[], sharedPoolCores: f64): f64 {
  let held: f64 = 0;
  let pooled = false;
  for (let i = 0; i < tasks.length; i++) {
    const own = servingCores(tasks[i]);
    if (own < 0) pooled = true;
    else held += own;
  }
  return held + (pooled ? sharedPoolCores : 0);
}
