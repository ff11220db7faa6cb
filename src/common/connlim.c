/* connlim: see connlim.h. */
#include "connlim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"

struct slot {
    int used;
    const void *key;
    uint64_t deadline_ms;
    char addr[CLIM_ADDR_MAX];
};

struct clim {
    struct clim_limits lim;
    unsigned count;
    struct slot *slots; /* lim.max_total of them */
};

int clim_new(const struct clim_limits *lim, struct clim **out)
{
    *out = NULL;
    if (!lim || lim->max_total == 0 || lim->max_per_ip == 0)
        return AL_E_INVAL;
    struct clim *t = calloc(1, sizeof *t);
    if (!t)
        return AL_E_NOMEM;
    t->lim = *lim;
    t->slots = calloc(lim->max_total, sizeof *t->slots);
    if (!t->slots) {
        free(t);
        return AL_E_NOMEM;
    }
    *out = t;
    return AL_OK;
}

void clim_free(struct clim *t)
{
    if (!t)
        return;
    free(t->slots);
    free(t);
}

unsigned clim_count_addr(const struct clim *t, const char *addr)
{
    unsigned n = 0;
    for (unsigned i = 0; i < t->lim.max_total; i++)
        if (t->slots[i].used && !strcmp(t->slots[i].addr, addr))
            n++;
    return n;
}

enum clim_verdict clim_admit(struct clim *t, const char *addr, uint64_t now_ms, int *slot)
{
    *slot = -1;
    if (t->count >= t->lim.max_total)
        return CLIM_FULL;
    if (clim_count_addr(t, addr) >= t->lim.max_per_ip)
        return CLIM_PER_IP;
    for (unsigned i = 0; i < t->lim.max_total; i++) {
        struct slot *s = &t->slots[i];
        if (s->used)
            continue;
        memset(s, 0, sizeof *s);
        s->used = 1;
        (void)snprintf(s->addr, sizeof s->addr, "%s", addr);
        s->deadline_ms = t->lim.deadline_ms ? now_ms + t->lim.deadline_ms : 0;
        t->count++;
        *slot = (int)i;
        return CLIM_ADMITTED;
    }
    return CLIM_FULL; /* not reached: count < max_total means a free slot */
}

void clim_bind(struct clim *t, int slot, const void *key)
{
    if (slot >= 0 && (unsigned)slot < t->lim.max_total && t->slots[slot].used)
        t->slots[slot].key = key;
}

void clim_release_slot(struct clim *t, int slot)
{
    if (slot < 0 || (unsigned)slot >= t->lim.max_total || !t->slots[slot].used)
        return;
    memset(&t->slots[slot], 0, sizeof t->slots[slot]);
    t->count--;
}

static struct slot *find(struct clim *t, const void *key)
{
    if (!key)
        return NULL;
    for (unsigned i = 0; i < t->lim.max_total; i++)
        if (t->slots[i].used && t->slots[i].key == key)
            return &t->slots[i];
    return NULL;
}

int clim_release(struct clim *t, const void *key)
{
    struct slot *s = find(t, key);
    if (!s)
        return -1;
    clim_release_slot(t, (int)(s - t->slots));
    return 0;
}

void clim_set_deadline(struct clim *t, const void *key, uint64_t at_ms)
{
    struct slot *s = find(t, key);
    if (s)
        s->deadline_ms = at_ms;
}

size_t clim_expired(struct clim *t, uint64_t now_ms, const void **keys, size_t cap)
{
    size_t n = 0;
    for (unsigned i = 0; i < t->lim.max_total && n < cap; i++) {
        struct slot *s = &t->slots[i];
        if (!s->used || !s->key || !s->deadline_ms || s->deadline_ms > now_ms)
            continue;
        s->deadline_ms = 0;
        keys[n++] = s->key;
    }
    return n;
}

unsigned clim_count(const struct clim *t)
{
    return t->count;
}

const struct clim_limits *clim_limits_of(const struct clim *t)
{
    return &t->lim;
}

const char *clim_verdict_text(enum clim_verdict v)
{
    switch (v) {
    case CLIM_ADMITTED:
        return "admitted";
    case CLIM_FULL:
        return "the server holds its maximum of connections";
    case CLIM_PER_IP:
        return "too many connections from this address";
    }
    return "refused";
}
