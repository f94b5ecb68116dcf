// The schedule policy in AssemblyScript, deciding exactly as the Rust
// `policies-wasm/schedule`: serves each task with the listed variants in turn, and
// with the listed instances in turn, each for `period_ms`, shifted by `offset_ms`, on
// the control loop's clock. Parameters: `{"variants": ["a", "b"], "instances": [1, 3],
// "period_ms": 5000, "offset_ms": 0}`; either list may be left out, not both.
import { JSON } from "json-as";
import { fail, input, output } from "../kit/policy";
import { variantIndex } from "../kit/rules";
export { alloc, dealloc, modelless_policy_abi_v1 } from "../kit/policy";

@json
class Knobs {
  variant: string = "";
  max_batch_size: u32 = 0;
  max_queue_delay_us: u64 = 0;
  instances: u32 = 0;
}

@json
class Variant {
  name: string = "";
}

@json
class Task {
  name: string = "";
  active: Knobs = new Knobs();
  variants: Variant[] = [];
}

@json
class Snapshot {
  now_ms: u64 = 0;
  tasks: Task[] = [];
}

@json
class Parameters {
  variants: string[] = [];
  instances: u32[] = [];
  period_ms: u64 = 0;
  offset_ms: u64 = 0;
}

let parameters = new Parameters();

function turn(nowMs: u64): i32 {
  return <i32>((nowMs + parameters.offset_ms) / max(parameters.period_ms, 1));
}

/** A task's decision as JSON: only the knobs that change; "" when none does. */
function towards(task: Task, variant: string, instances: u32): string {
  let fields = "";
  if (variant != task.active.variant) fields += ',"variant":' + JSON.stringify(variant);
  if (instances != task.active.instances) fields += ',"instances":' + instances.toString();
  return fields.length == 0 ? "" : '{"task":' + JSON.stringify(task.name) + fields + "}";
}

export function init(ptr: i32, len: i32): i64 {
  const given = JSON.parse<Parameters>(input(ptr, len));
  if ((given.variants.length == 0 && given.instances.length == 0) || given.period_ms == 0) {
    return fail("schedule needs variants or instances, and a period_ms above 0");
  }
  parameters = given;
  return output("{}");
}

export function decide(ptr: i32, len: i32): i64 {
  const snapshot = JSON.parse<Snapshot>(input(ptr, len));
  const at = turn(snapshot.now_ms);
  const variants = parameters.variants;
  const instances = parameters.instances;
  const due: string | null = variants.length > 0 ? variants[at % variants.length] : null;
  const decided: string[] = [];
  for (let i = 0; i < snapshot.tasks.length; i++) {
    const task = snapshot.tasks[i];
    let variant = task.active.variant;
    if (due !== null) {
      if (variantIndex(task.variants, due) < 0) continue;
      variant = due;
    }
    const wanted = instances.length > 0 ? instances[at % instances.length] : task.active.instances;
    const wants = towards(task, variant, wanted);
    if (wants.length > 0) decided.push(wants);
  }
  return output('{"tasks":[' + decided.join(",") + "]}");
}
