/*
 * queue-guard: a scheduling policy for modelless written in C, built with clang for
 * wasm32 (no libc). For each task whose queue holds more than four batches while it
 * waits to fill batches (max_queue_delay_us > 0), it sets the queue delay to 0, so
 * that batches leave as soon as an instance is free; otherwise it changes nothing.
 *
 * It reads only the fields it needs from the snapshot's JSON with a small scanner that
 * skips every value it does not need, whatever the order of the keys.
 */

#include "policy.h"

/* --- memory: a bump allocator over a static arena, reset for every call ----------- */

static unsigned char arena[1 << 20];
static unsigned long used;

static void *bump(unsigned long size) {
    unsigned long at = (used + 7) & ~7ul;
    if (at + size > sizeof arena) return 0;
    used = at + size;
    return arena + at;
}

/* --- a JSON scanner: positions in the input, skipping what is not needed ---------- */

typedef struct { const char *at, *end; } Scan;

static void space(Scan *s) {
    while (s->at < s->end && (*s->at == ' ' || *s->at == '\n' || *s->at == '\r' || *s->at == '\t')) s->at++;
}

static int eat(Scan *s, char c) {
    space(s);
    if (s->at < s->end && *s->at == c) { s->at++; return 1; }
    return 0;
}

/* A string's contents (escapes left as they are); 0 when there is none. */
static int string(Scan *s, const char **start, unsigned long *len) {
    if (!eat(s, '"')) return 0;
    *start = s->at;
    while (s->at < s->end && *s->at != '"') s->at += (*s->at == '\\') ? 2 : 1;
    if (s->at >= s->end) return 0;
    *len = (unsigned long)(s->at - *start);
    s->at++;
    return 1;
}

static int skip(Scan *s);

static int skip_container(Scan *s, char open, char close) {
    if (!eat(s, open)) return 0;
    if (eat(s, close)) return 1;
    do {
        if (open == '{') {
            const char *k; unsigned long n;
            if (!string(s, &k, &n) || !eat(s, ':')) return 0;
        }
        if (!skip(s)) return 0;
    } while (eat(s, ','));
    return eat(s, close);
}

/* Skips one value of any kind. */
static int skip(Scan *s) {
    space(s);
    if (s->at >= s->end) return 0;
    char c = *s->at;
    if (c == '{') return skip_container(s, '{', '}');
    if (c == '[') return skip_container(s, '[', ']');
    if (c == '"') { const char *x; unsigned long n; return string(s, &x, &n); }
    while (s->at < s->end && *s->at != ',' && *s->at != '}' && *s->at != ']') s->at++;
    return 1;
}

static int key_is(const char *k, unsigned long n, const char *want) {
    unsigned long i = 0;
    for (; i < n && want[i]; i++) if (k[i] != want[i]) return 0;
    return i == n && want[i] == 0;
}

static unsigned long number(Scan *s) {
    unsigned long v = 0;
    space(s);
    while (s->at < s->end && *s->at >= '0' && *s->at <= '9') v = v * 10 + (unsigned long)(*s->at++ - '0');
    skip(s); /* a fraction or exponent, if any */
    return v;
}

/* --- the policy ------------------------------------------------------------------- */

typedef struct {
    const char *name; unsigned long name_len;
    unsigned long queue_length, max_batch_size, max_queue_delay_us;
} Task;

/* Reads one task object: its name, queue and active knobs. */
static int task(Scan *s, Task *t) {
    if (!eat(s, '{')) return 0;
    if (eat(s, '}')) return 1;
    do {
        const char *k; unsigned long n;
        if (!string(s, &k, &n) || !eat(s, ':')) return 0;
        if (key_is(k, n, "name")) { if (!string(s, &t->name, &t->name_len)) return 0; }
        else if (key_is(k, n, "queue_length")) t->queue_length = number(s);
        else if (key_is(k, n, "active")) {
            if (!eat(s, '{')) return 0;
            if (!eat(s, '}')) {
                do {
                    const char *ak; unsigned long an;
                    if (!string(s, &ak, &an) || !eat(s, ':')) return 0;
                    if (key_is(ak, an, "max_batch_size")) t->max_batch_size = number(s);
                    else if (key_is(ak, an, "max_queue_delay_us")) t->max_queue_delay_us = number(s);
                    else if (!skip(s)) return 0;
                } while (eat(s, ','));
                if (!eat(s, '}')) return 0;
            }
        } else if (!skip(s)) return 0;
    } while (eat(s, ','));
    return eat(s, '}');
}

static unsigned long put(char *out, unsigned long at, const char *text, unsigned long n) {
    for (unsigned long i = 0; i < n; i++) out[at + i] = text[i];
    return at + n;
}

static unsigned long put_str(char *out, unsigned long at, const char *text) {
    unsigned long n = 0;
    while (text[n]) n++;
    return put(out, at, text, n);
}

/* The decision for a snapshot, written to `out` (at most `cap` bytes); its length, or 0. */
unsigned long queue_guard_decide(const char *json, unsigned long len, char *out, unsigned long cap) {
    Scan s = { json, json + len };
    unsigned long w = put_str(out, 0, "{\"tasks\":[");
    int first = 1;
    if (!eat(&s, '{')) return 0;
    do {
        const char *k; unsigned long n;
        if (!string(&s, &k, &n) || !eat(&s, ':')) return 0;
        if (!key_is(k, n, "tasks")) { if (!skip(&s)) return 0; continue; }
        if (!eat(&s, '[')) return 0;
        if (eat(&s, ']')) continue;
        do {
            Task t = { 0, 0, 0, 0, 0 };
            if (!task(&s, &t)) return 0;
            int flooded = t.queue_length > 4 * (t.max_batch_size ? t.max_batch_size : 1);
            if (flooded && t.max_queue_delay_us > 0 && t.name) {
                if (w + t.name_len + 64 > cap) return 0;
                if (!first) w = put_str(out, w, ",");
                w = put_str(out, w, "{\"task\":\"");
                w = put(out, w, t.name, t.name_len);
                w = put_str(out, w, "\",\"max_queue_delay_us\":0}");
                first = 0;
            }
        } while (eat(&s, ','));
        if (!eat(&s, ']')) return 0;
    } while (eat(&s, ','));
    return put_str(out, w, "]}");
}

/* --- the ABI ---------------------------------------------------------------------- */

#ifdef __wasm__
#define EXPORT(name) __attribute__((export_name(name)))

static const char invalid[] = "{\"error\":\"queue-guard: invalid snapshot\"}";

EXPORT("modelless_policy_abi_v1") void marker(void) {}

EXPORT("alloc") void *alloc(int len) { return bump((unsigned long)len); }

/* Memory is reset at the start of every decide, so nothing is freed one by one. */
EXPORT("dealloc") void dealloc(void *ptr, int len) { (void)ptr; (void)len; }

EXPORT("decide") long long decide(const char *json, int len) {
    unsigned long cap = 1 << 16;
    char *out = bump(cap);
    unsigned long n = out ? queue_guard_decide(json, (unsigned long)len, out, cap) : 0;
    used = 0; /* the input and this output stay readable until the next alloc */
    if (n == 0) { out = (char *)invalid; n = sizeof invalid - 1; }
    return ((long long)(unsigned long)out << 32) | (long long)n;
}
#endif
