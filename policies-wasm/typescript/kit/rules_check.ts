/**
 * Checks `rules.ts` against the cases the Rust rules answered:
 * `tsc` it with `rules.ts`, then `node rules_check.js policy-abi/schema/rules-cases.json`.
 */
import { activeIndex, activeVariant, coresHeld, mayServe, servingInstances, taskCoresHeld } from "./rules.js";
import type { TaskSnapshot } from "./types.js";

declare const process: { argv: string[]; exit(code: number): never };
declare function require(module: string): { readFileSync(path: string, encoding: string): string };

interface Case {
  tasks: TaskSnapshot[];
  shared_pool_cores: number;
  expected: { tasks: Record<string, unknown>[]; cores_held: number };
}

const cases: Case[] = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8")).cases;
const misses: string[] = [];
cases.forEach((c, n) => {
  c.tasks.forEach((task, i) => {
    const got: Record<string, unknown> = {
      active_variant: activeVariant(task)?.name ?? null,
      active_index: activeIndex(task) ?? null,
      cores_held: taskCoresHeld(task, c.shared_pool_cores),
      may_serve: task.variants.map(mayServe),
      serving_instances: task.variants.map(servingInstances),
    };
    for (const [rule, value] of Object.entries(got)) {
      const want = c.expected.tasks[i][rule];
      if (JSON.stringify(value) !== JSON.stringify(want)) {
        misses.push(`case ${n}, task ${task.name}: ${rule} is ${JSON.stringify(value)}, the host says ${JSON.stringify(want)}`);
      }
    }
  });
  const all = coresHeld(c.tasks, c.shared_pool_cores);
  if (all !== c.expected.cores_held) misses.push(`case ${n}: cores_held is ${all}, the host says ${c.expected.cores_held}`);
});
console.log(misses.join("\n") || "rules: every case as the host answers it");
process.exit(misses.length > 0 ? 1 : 0);
