/* benchutil: small helpers the benchmarks share (not a module of airlock). */
#ifndef BENCHUTIL_H
#define BENCHUTIL_H

#include <stddef.h>

/* Monotonic seconds. */
double bu_now_s(void);
/* Write or read exactly n bytes (EINTR retried); 0 or -1. */
int bu_write_all(int fd, const void *p, size_t n);
int bu_read_all(int fd, void *p, size_t n);
/* qsort comparator for doubles, and the median of n samples (sorts v). */
int bu_cmp_double(const void *a, const void *b);
double bu_median(double *v, int n);

#endif
