// Checks `rules.ts` against the cases the Rust rules answered: `check` takes
// policy-abi/schema/rules-cases.json and answers the misses, one a line ("" for none).
// Built with asc and the json-as transform, run by `rules_check.mjs` under node.
import { JSON } from "json-as";
import { input, output } from "./policy";
import { activeIndex, coresHeld, mayServe, servingInstances, taskCoresHeld } from "./rules";
export { alloc, dealloc } from "./policy";

@json
class Share {
  cores: f64 = 0;
}

@json
class Variant {
  name: string = "";
  state: string = "";
  refused: string | null = null;
  instances: u32 = 0;
  instances_starting: u32 = 0;
  share: Share | null = null;
}

@json
class Knobs {
  variant: string = "";
}

@json
class Task {
  name: string = "";
  active: Knobs = new Knobs();
  variants: Variant[] = [];
}

@json
class Expected {
  active_index: i32 = -1;
  cores_held: f64 = 0;
  may_serve: bool[] = [];
  serving_instances: u32[] = [];
}

@json
class ExpectedAll {
  tasks: Expected[] = [];
  cores_held: f64 = 0;
}

@json
class Case {
  tasks: Task[] = [];
  shared_pool_cores: f64 = 0;
  expected: ExpectedAll = new ExpectedAll();
}

@json
class Cases {
  cases: Case[] = [];
}

export function check(ptr: i32, len: i32): i64 {
  const cases = JSON.parse<Cases>(input(ptr, len)).cases;
  const misses: string[] = [];
  for (let n = 0; n < cases.length; n++) {
    const c = cases[n];
    for (let i = 0; i < c.tasks.length; i++) {
      const task = c.tasks[i];
      const want = c.expected.tasks[i];
      const at = "case " + n.toString() + ", task " + task.name + ": ";
      if (activeIndex(task) != want.active_index) misses.push(at + "active index " + activeIndex(task).toString());
      const held = taskCoresHeld(task, c.shared_pool_cores);
      if (held != want.cores_held) misses.push(at + "cores held " + held.toString());
      for (let v = 0; v < task.variants.length; v++) {
        if (mayServe(task.variants[v]) != want.may_serve[v]) misses.push(at + "may serve " + task.variants[v].name);
        const serving = servingInstances(task.variants[v]);
        if (serving != want.serving_instances[v]) misses.push(at + "serving instances " + task.variants[v].name);
      }
    }
    const all = coresHeld(c.tasks, c.shared_pool_cores);
    if (all != c.expected.cores_held) misses.push("case " + n.toString() + ": cores held " + all.toString());
  }
  return output(misses.join("\n"));
}
