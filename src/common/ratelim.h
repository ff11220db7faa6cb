/*
 * ratelim: a fair-share rate limiter (GCRA, the integer form of a token
 * bucket), pure: the caller passes the time in.
 *
 * Data model: one struct per thing limited (a runner's snapshot requests
 * from its controller, one client's snapshot requests in airlockd). It
 * allows `burst` events at once, then one per `interval_us`. `tat_us` is
 * the theoretical arrival time of the next event at the steady rate, in
 * the caller's monotonic microseconds; the struct owns nothing.
 */
#ifndef AL_RATELIM_H
#define AL_RATELIM_H

#include <stdint.h>

struct ratelim {
    uint64_t interval_us; /* steady rate: one event per interval (> 0) */
    uint64_t burst;       /* events allowed at once (>= 1) */
    uint64_t tat_us;      /* theoretical arrival time; 0: never used */
};

/* interval_us 0 is taken as 1, burst 0 as 1. */
void ratelim_init(struct ratelim *l, uint64_t interval_us, unsigned burst);

/* 1: an event at now_us is allowed and counted; 0: not now (nothing counted). */
int ratelim_take(struct ratelim *l, uint64_t now_us);

/* The earliest time (>= now_us) at which ratelim_take would allow one. */
uint64_t ratelim_next(const struct ratelim *l, uint64_t now_us);

#endif
