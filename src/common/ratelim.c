/*
 * ratelim: see ratelim.h. GCRA: an event at `now` conforms when
 * now >= tat - (burst - 1) * interval; it then moves tat to
 * max(tat, now) + interval. No division, no clock of its own.
 */
#include "ratelim.h"

void ratelim_init(struct ratelim *l, uint64_t interval_us, unsigned burst)
{
    l->interval_us = interval_us ? interval_us : 1;
    l->burst = burst ? burst : 1;
    l->tat_us = 0;
}

/* How far ahead of now tat may run and still allow an event. */
static uint64_t slack(const struct ratelim *l)
{
    return (l->burst - 1) * l->interval_us;
}

uint64_t ratelim_next(const struct ratelim *l, uint64_t now_us)
{
    uint64_t s = slack(l);
    if (l->tat_us <= s || l->tat_us - s <= now_us)
        return now_us;
    return l->tat_us - s;
}

int ratelim_take(struct ratelim *l, uint64_t now_us)
{
    if (ratelim_next(l, now_us) > now_us)
        return 0;
    l->tat_us = (l->tat_us > now_us ? l->tat_us : now_us) + l->interval_us;
    return 1;
}
