/* GUPS over 1 GiB, as a native program to trace (scripts/trace_bench.py): random
 * read-modify-write updates of a table of 64-bit words, addressed by an xorshift
 * generator. Usage: gups [LOG2_TABLE_BYTES [UPDATES]] (default 30 and 10,000,000). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int log2_bytes = argc > 1 ? atoi(argv[1]) : 30;
    long updates = argc > 2 ? atol(argv[2]) : 10000000L;
    if (log2_bytes < 12 || log2_bytes > 40 || updates < 0) {
        fprintf(stderr, "usage: gups [LOG2_TABLE_BYTES (12-40) [UPDATES]]\n");
        return 2;
    }
    uint64_t words = (1ULL << log2_bytes) / sizeof(uint64_t);
    uint64_t *table = calloc(words, sizeof(uint64_t));
    if (!table) {
        perror("gups: calloc");
        return 1;
    }
    uint64_t x = 1, check = 0;
    for (long i = 0; i < updates; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        table[x & (words - 1)] ^= x;
    }
    for (uint64_t i = 0; i < words; i += words / 16) check ^= table[i];
    printf("%llu\n", (unsigned long long)check);
    free(table);
    return 0;
}
