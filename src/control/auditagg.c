/* auditagg: see auditagg.h. */
#include "auditagg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"

struct aagg {
    unsigned n;
    struct aagg_row rows[AAGG_MAX_KEYS];
    struct aagg_row overflow;
};

int aagg_new(struct aagg **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? AL_OK : AL_E_NOMEM;
}

void aagg_free(struct aagg *g)
{
    free(g);
}

static void fill(struct aagg_row *r, const char *source, const char *action, const char *reason,
                 const char *target, int64_t now_ms)
{
    memset(r, 0, sizeof *r);
    (void)snprintf(r->source, sizeof r->source, "%s", source);
    (void)snprintf(r->action, sizeof r->action, "%s", action);
    (void)snprintf(r->reason, sizeof r->reason, "%s", reason);
    (void)snprintf(r->target, sizeof r->target, "%s", target);
    r->first_ms = now_ms;
}

void aagg_add(struct aagg *g, const char *source, const char *action, const char *reason,
              const char *target, int64_t now_ms)
{
    source = source ? source : "?";
    action = action ? action : "refused";
    reason = reason ? reason : "";
    target = target ? target : "";
    char key[3][AAGG_FIELD_MAX];
    (void)snprintf(key[0], sizeof key[0], "%s", source);
    (void)snprintf(key[1], sizeof key[1], "%s", action);
    (void)snprintf(key[2], sizeof key[2], "%s", reason);
    struct aagg_row *r = NULL;
    for (unsigned i = 0; i < g->n && !r; i++)
        if (!strcmp(g->rows[i].source, key[0]) && !strcmp(g->rows[i].action, key[1]) &&
            !strcmp(g->rows[i].reason, key[2]))
            r = &g->rows[i];
    if (!r && g->n < AAGG_MAX_KEYS) {
        r = &g->rows[g->n++];
        fill(r, source, action, reason, target, now_ms);
    }
    if (!r) {
        r = &g->overflow;
        if (!r->count)
            fill(r, AAGG_OVERFLOW_SOURCE, action, "more sources than one interval holds", target,
                 now_ms);
    }
    r->count++;
    r->last_ms = now_ms;
}

unsigned aagg_count(const struct aagg *g)
{
    return g->n + (g->overflow.count ? 1u : 0u);
}

unsigned aagg_flush(struct aagg *g, aagg_row_cb cb, void *ctx)
{
    unsigned n = 0;
    for (unsigned i = 0; i < g->n; i++, n++)
        cb(ctx, &g->rows[i]);
    if (g->overflow.count) {
        cb(ctx, &g->overflow);
        n++;
    }
    g->n = 0;
    memset(&g->overflow, 0, sizeof g->overflow);
    return n;
}
