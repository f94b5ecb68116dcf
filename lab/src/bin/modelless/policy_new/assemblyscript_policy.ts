// {NAME}: a modelless policy in AssemblyScript. `decide` gets the snapshot's JSON
// (declare the fields it reads as @json classes) and answers a decision's JSON; tasks
// it leaves out keep everything. Build with ./build.sh, check with
// `modelless policy check {NAME}.wasm`.
import { JSON } from "json-as";
import { input, log, output } from "./kit/policy";
export { alloc, dealloc, modelless_policy_abi_v1 } from "./kit/policy";

@json
class Task {
  name: string = "";
}

@json
class Snapshot {
  tasks: Task[] = [];
}

export function decide(ptr: i32, len: i32): i64 {
  const snapshot = JSON.parse<Snapshot>(input(ptr, len));
  for (let i = 0; i < snapshot.tasks.length; i++) log(2, "task " + snapshot.tasks[i].name);
  return output('{"tasks":[]}');
}
