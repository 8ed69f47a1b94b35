/* Naive (inner-product) matrix multiply of doubles, C = A x B, written from the
 * algorithm: a program of the kind of Al Aburto's "mm" with its "normal" algorithm, as
 * Elphinstone ran it (thesis Table 4.1: 7.7 MB mapped). Each element of C is the dot
 * product of a row of A and a column of B, so B is walked down its columns: a new page
 * every step once a row of B spans a page. All three N x N matrices are allocated and
 * written (C cleared); ROWS rows of C are computed. Every row walks all of B in the
 * same order, so a band of rows makes the TLB see what the whole product makes it see,
 * N/ROWS times over. Prints a checksum of C.
 * Usage: mm [N [ROWS]] (default 560 and 560: three 2.4 MiB matrices, the whole product). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 560L;
    long rows = argc > 2 ? atol(argv[2]) : n;
    if (n < 1 || n > 20000 || rows < 1 || rows > n) {
        fprintf(stderr, "usage: mm [N (1-20000) [ROWS (1-N)]]\n");
        return 2;
    }
    double *a = malloc((size_t)(n * n) * sizeof *a), *b = malloc((size_t)(n * n) * sizeof *b),
           *c = malloc((size_t)(n * n) * sizeof *c);
    if (!a || !b || !c) {
        perror("mm: malloc");
        return 1;
    }
    uint64_t x = 7;
    for (long i = 0; i < n * n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        a[i] = (double)(x >> 40) / 16777216.0 - 0.5;
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        b[i] = (double)(x >> 40) / 16777216.0 - 0.5;
        c[i] = 0;
    }
    for (long i = 0; i < rows; i++)
        for (long j = 0; j < n; j++) {
            double s = 0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
    double sum = 0;
    for (long i = 0; i < n * n; i++) sum += c[i] * (double)(i % 5 + 1);
    printf("%.9f\n", sum);
    free(a);
    free(b);
    free(c);
    return 0;
}
