/* Runs queue-guard natively over a file of snapshots (JSON Lines): one decision per
 * line on stdout, for comparison with the wasm module's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s SNAPSHOTS.jsonl\n", argv[0]); return 2; }
    FILE *f = fopen(argv[1], "r");
    if (!f) { perror(argv[1]); return 1; }
    size_t cap = 1 << 20;
    char *line = malloc(cap), *out = malloc(1 << 16);
    while (fgets(line, (int)cap, f)) {
        size_t len = strlen(line);
        if (len == 0 || line[0] == '\n') continue;
        unsigned long n = queue_guard_decide(line, len, out, 1 << 16);
        if (n == 0) { fprintf(stderr, "invalid snapshot\n"); return 1; }
        fwrite(out, 1, n, stdout);
        putchar('\n');
    }
    return 0;
}
