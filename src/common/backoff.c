/*
 * backoff: exponential redial delays with jitter (backoff.h).
 */
#include "backoff.h"

#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define BACKOFF_SEED_FALLBACK 0x9e3779b97f4a7c15ull

void backoff_init(struct backoff *b, uint64_t min_ms, uint64_t max_ms)
{
    b->min_ms = min_ms ? min_ms : 1;
    b->max_ms = max_ms < b->min_ms ? b->min_ms : max_ms;
    b->attempt = 0;
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ BACKOFF_SEED_FALLBACK;
    }
    b->rng = seed ? seed : BACKOFF_SEED_FALLBACK;
}

static uint64_t next_rand(struct backoff *b)
{
    b->rng ^= b->rng >> 12;
    b->rng ^= b->rng << 25;
    b->rng ^= b->rng >> 27;
    return b->rng * 2685821657736338717ull;
}

uint64_t backoff_next(struct backoff *b)
{
    uint64_t cap = b->min_ms;
    for (unsigned i = 0; i < b->attempt && cap < b->max_ms; i++)
        cap *= 2;
    if (cap > b->max_ms)
        cap = b->max_ms;
    if (b->attempt < UINT32_MAX)
        b->attempt++;
    return cap / 2 + next_rand(b) % (cap / 2 + 1);
}

void backoff_reset(struct backoff *b)
{
    b->attempt = 0;
}
