/* queue-guard's decision function, shared by the wasm module and the native test. */
#ifndef QUEUE_GUARD_POLICY_H
#define QUEUE_GUARD_POLICY_H

unsigned long queue_guard_decide(const char *json, unsigned long len, char *out, unsigned long cap);

#endif
