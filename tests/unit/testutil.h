/* Helpers shared by the unit tests. */
#ifndef TESTUTIL_H
#define TESTUTIL_H
#include <stddef.h>
#include <stdint.h>

/* Decode hex (whitespace ignored) into out; returns bytes written or -1. */
long tu_hex_decode(const char *hex, uint8_t *out, size_t cap);

/* Deterministic PRNG (xorshift64*), so failures reproduce. */
uint64_t tu_rand(uint64_t *state);

/* Open file descriptors of this process (entries of /proc/self/fd, the one
 * reading them included), or -1: compared before and after a test, it shows
 * a descriptor left behind. */
int tu_count_fds(void);

#endif
