/*
 * backoff: the delay before a redial, exponential with jitter, for every
 * program that redials (airlockd towards static runners, a dialing
 * runner, the CLI's attach).
 *
 * Data model: a struct backoff is a plain value owned by its user: the
 * bounds (ms), the attempts since the last success, and the state of its
 * own random generator, seeded from the system once at backoff_init so
 * that two processes (or two starts of one) never redial in step. Attempt
 * n waits a uniform time in [cap/2, cap], cap = min(min_ms * 2^n, max_ms).
 */
#ifndef AL_BACKOFF_H
#define AL_BACKOFF_H

#include <stdint.h>

struct backoff {
    uint64_t min_ms, max_ms;
    unsigned attempt;
    uint64_t rng; /* xorshift64* state, never 0 */
};

void backoff_init(struct backoff *b, uint64_t min_ms, uint64_t max_ms);
/* The delay before the next attempt (and one attempt more). */
uint64_t backoff_next(struct backoff *b);
/* A success: the next delay starts from min_ms again. */
void backoff_reset(struct backoff *b);

#endif
