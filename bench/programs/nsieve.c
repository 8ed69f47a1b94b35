/* Sieve of Eratosthenes over a large byte array, written from the algorithm: a program
 * of the kind of Al Aburto's "nsieve", one of Elphinstone's conventional applications
 * (thesis Table 4.1: 4.9 MB mapped). One flag byte per odd number, crossed off from p*p
 * in steps of 2p, then counted; prints the number of primes and the largest.
 * Usage: nsieve [FLAGS] (default 4,500,000: the odd numbers below 9 M). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 4500000L;
    if (n < 2) {
        fprintf(stderr, "usage: nsieve [FLAGS (>= 2)]\n");
        return 2;
    }
    /* flags[i] stands for the odd number 2i+3. */
    unsigned char *flags = malloc((size_t)n);
    if (!flags) {
        perror("nsieve: malloc");
        return 1;
    }
    memset(flags, 1, (size_t)n);
    for (long i = 0; i < n; i++) {
        if (!flags[i]) continue;
        long p = 2 * i + 3;
        long first = (p * p - 3) / 2;
        if (first >= n) break;
        for (long k = first; k < n; k += p) flags[k] = 0;
    }
    long count = 1, largest = 2; /* 2 */
    for (long i = 0; i < n; i++)
        if (flags[i]) {
            count++;
            largest = 2 * i + 3;
        }
    printf("%ld primes below %ld, the largest %ld\n", count, 2 * n + 3, largest);
    free(flags);
    return 0;
}
