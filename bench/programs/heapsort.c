/* Heapsort of a large array of doubles, written from the algorithm: a program of the
 * kind of Al Aburto's "heapsort", one of Elphinstone's conventional applications (thesis
 * Table 4.1: 4.0 MB mapped). The keys come from a fixed 64-bit LCG; the program checks
 * the order and prints a checksum.
 * Usage: heapsort [ELEMENTS] (default 440,000: 3.4 MiB of keys). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void sift_down(double *a, long root, long n) {
    double v = a[root];
    long child;
    while ((child = 2 * root + 1) < n) {
        if (child + 1 < n && a[child + 1] > a[child]) child++;
        if (a[child] <= v) break;
        a[root] = a[child];
        root = child;
    }
    a[root] = v;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 440000L;
    if (n < 2) {
        fprintf(stderr, "usage: heapsort [ELEMENTS (>= 2)]\n");
        return 2;
    }
    double *a = malloc((size_t)n * sizeof *a);
    if (!a) {
        perror("heapsort: malloc");
        return 1;
    }
    uint64_t x = 42;
    for (long i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        a[i] = (double)(x >> 11) / 9007199254740992.0;
    }
    for (long i = n / 2 - 1; i >= 0; i--) sift_down(a, i, n);
    for (long end = n - 1; end > 0; end--) {
        double t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift_down(a, 0, end);
    }
    double sum = 0;
    for (long i = 0; i < n; i++) {
        if (i && a[i - 1] > a[i]) {
            fprintf(stderr, "heapsort: not sorted at %ld\n", i);
            return 1;
        }
        sum += a[i] * (double)(i % 7 + 1);
    }
    printf("%.6f %.9f %.9f\n", sum, a[0], a[n - 1]);
    free(a);
    return 0;
}
