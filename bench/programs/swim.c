/* A shallow-water PDE solver on a periodic grid, the kind of program SPEC95's swim is
 * (Elphinstone's conventional applications, thesis Table 4.1: 14.2 MB mapped): Sadourny's
 * finite-difference scheme on a staggered grid, with thirteen M x M arrays of doubles
 * (velocities u, v and pressure p at three time levels, the mass fluxes cu, cv, the
 * potential vorticity z and the height h) swept row by row each step, and a
 * Robert-Asselin time filter. Prints the pressure and kinetic-energy sums.
 * Usage: swim [M [STEPS]] (default 370 and 2: 13 x 1.04 MiB of arrays). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static long m;
#define AT(a, i, j) (a)[(i) * m + (j)]

int main(int argc, char **argv) {
    m = argc > 1 ? atol(argv[1]) : 370L;
    long steps = argc > 2 ? atol(argv[2]) : 2L;
    if (m < 4 || m > 20000 || steps < 1) {
        fprintf(stderr, "usage: swim [M (4-20000) [STEPS (>= 1)]]\n");
        return 2;
    }
    double *u = malloc(m * m * sizeof(double)), *v = malloc(m * m * sizeof(double)), *p = malloc(m * m * sizeof(double));
    double *un = malloc(m * m * sizeof(double)), *vn = malloc(m * m * sizeof(double)), *pn = malloc(m * m * sizeof(double));
    double *uo = malloc(m * m * sizeof(double)), *vo = malloc(m * m * sizeof(double)), *po = malloc(m * m * sizeof(double));
    double *cu = malloc(m * m * sizeof(double)), *cv = malloc(m * m * sizeof(double)), *z = malloc(m * m * sizeof(double));
    double *h = malloc(m * m * sizeof(double));
    if (!u || !v || !p || !un || !vn || !pn || !uo || !vo || !po || !cu || !cv || !z || !h) {
        perror("swim: malloc");
        return 1;
    }
    const double pi = 3.14159265358979323846, dx = 1.0e5, dy = 1.0e5, dt = 20.0, alpha = 0.001;
    const double el = m * dx, amp = 1.0e6, pcf = pi * pi * amp * amp / (el * el);
    const double di = 2 * pi / m, fsdx = 4 / dx, fsdy = 4 / dy;
    /* Initial state: a velocity field from a stream function psi = amp sin x sin y,
     * and a pressure field in balance with it (psi is kept in h for the moment). */
    for (long i = 0; i < m; i++)
        for (long j = 0; j < m; j++) AT(h, i, j) = amp * sin((i + 0.5) * di) * sin((j + 0.5) * di);
    for (long i = 0; i < m; i++) {
        long ip = i + 1 == m ? 0 : i + 1;
        for (long j = 0; j < m; j++) {
            long jp = j + 1 == m ? 0 : j + 1;
            AT(u, i, j) = -(AT(h, i, jp) - AT(h, i, j)) / dy;
            AT(v, i, j) = (AT(h, ip, j) - AT(h, i, j)) / dx;
            AT(p, i, j) = pcf * (cos(2 * i * di) + cos(2 * j * di)) + 50000.0;
            AT(uo, i, j) = AT(u, i, j);
            AT(vo, i, j) = AT(v, i, j);
            AT(po, i, j) = AT(p, i, j);
        }
    }
    double tdt = dt;
    for (long step = 0; step < steps; step++) {
        /* Mass fluxes, potential vorticity and height. */
        for (long i = 0; i < m; i++) {
            long im = i == 0 ? m - 1 : i - 1, ip = i + 1 == m ? 0 : i + 1;
            for (long j = 0; j < m; j++) {
                long jm = j == 0 ? m - 1 : j - 1, jp = j + 1 == m ? 0 : j + 1;
                AT(cu, i, j) = 0.5 * (AT(p, i, j) + AT(p, im, j)) * AT(u, i, j);
                AT(cv, i, j) = 0.5 * (AT(p, i, j) + AT(p, i, jm)) * AT(v, i, j);
                AT(z, i, j) = (fsdx * (AT(v, i, j) - AT(v, im, j)) - fsdy * (AT(u, i, j) - AT(u, i, jm))) /
                              (AT(p, im, jm) + AT(p, i, jm) + AT(p, i, j) + AT(p, im, j));
                AT(h, i, j) = AT(p, i, j) + 0.25 * (AT(u, ip, j) * AT(u, ip, j) + AT(u, i, j) * AT(u, i, j) +
                                                    AT(v, i, jp) * AT(v, i, jp) + AT(v, i, j) * AT(v, i, j));
            }
        }
        /* New velocities and pressure, a leapfrog step of 2 dt from the old level. */
        const double tdts8 = tdt / 8, tdtsdx = tdt / dx, tdtsdy = tdt / dy;
        for (long i = 0; i < m; i++) {
            long im = i == 0 ? m - 1 : i - 1, ip = i + 1 == m ? 0 : i + 1;
            for (long j = 0; j < m; j++) {
                long jm = j == 0 ? m - 1 : j - 1, jp = j + 1 == m ? 0 : j + 1;
                AT(un, i, j) = AT(uo, i, j) +
                               tdts8 * (AT(z, i, jp) + AT(z, i, j)) * (AT(cv, i, jp) + AT(cv, im, jp) + AT(cv, im, j) + AT(cv, i, j)) -
                               tdtsdx * (AT(h, i, j) - AT(h, im, j));
                AT(vn, i, j) = AT(vo, i, j) -
                               tdts8 * (AT(z, ip, j) + AT(z, i, j)) * (AT(cu, ip, j) + AT(cu, i, j) + AT(cu, i, jm) + AT(cu, ip, jm)) -
                               tdtsdy * (AT(h, i, j) - AT(h, i, jm));
                AT(pn, i, j) = AT(po, i, j) - tdtsdx * (AT(cu, ip, j) - AT(cu, i, j)) - tdtsdy * (AT(cv, i, jp) - AT(cv, i, j));
            }
        }
        /* Time filter, then advance the levels (the first step is a forward step). */
        for (long k = 0; k < m * m; k++) {
            if (step > 0) {
                uo[k] = u[k] + alpha * (un[k] - 2 * u[k] + uo[k]);
                vo[k] = v[k] + alpha * (vn[k] - 2 * v[k] + vo[k]);
                po[k] = p[k] + alpha * (pn[k] - 2 * p[k] + po[k]);
            } else {
                uo[k] = u[k];
                vo[k] = v[k];
                po[k] = p[k];
            }
            u[k] = un[k];
            v[k] = vn[k];
            p[k] = pn[k];
        }
        tdt = 2 * dt;
    }
    double psum = 0, ke = 0;
    for (long k = 0; k < m * m; k++) {
        psum += p[k];
        ke += u[k] * u[k] + v[k] * v[k];
    }
    printf("%.9f %.12e\n", psum / (m * m), ke / (m * m));
    return 0;
}
