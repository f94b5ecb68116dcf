// The `modelless:policy/host` import of policy-abi/wit/policy.wit, as componentize-js
// binds it.
declare module "modelless:policy/host@1.0.0" {
  export function log(level: "error" | "warn" | "info" | "debug" | "trace", message: string): void;
}
