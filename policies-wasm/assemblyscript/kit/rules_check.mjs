// Runs the module asc built from rules_check.ts on the cases file:
// node rules_check.mjs rules_check.wasm policy-abi/schema/rules-cases.json
import { readFileSync } from "node:fs";

const [module, cases] = process.argv.slice(2);
const { instance } = await WebAssembly.instantiate(readFileSync(module), { modelless: { log() {} } });
const { memory, alloc, check } = instance.exports;
const text = new TextEncoder().encode(readFileSync(cases, "utf8"));
const at = alloc(text.length);
new Uint8Array(memory.buffer, at, text.length).set(text);
const packed = check(at, text.length);
const [ptr, len] = [Number(packed >> 32n), Number(packed & 0xffffffffn)];
const misses = new TextDecoder().decode(new Uint8Array(memory.buffer, ptr, len));
console.log(misses || "rules: every case as the host answers it");
process.exit(misses ? 1 : 0);
