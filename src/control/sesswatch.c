/*
 * sesswatch: see sesswatch.h.
 *
 * Data model: ents[0..cap) with used marking the live ones; n counts them.
 * Every operation is one pass over the table (cap is airlockd's connection
 * limit: a thousand entries of ~90 bytes), so nothing here allocates after
 * sesswatch_new.
 */
#include "sesswatch.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"

struct sw_ent {
    bool used;
    char handle[SESSWATCH_HANDLE_MAX + 1];
    void *conn;
    uint64_t due_ms;
};

struct sesswatch {
    unsigned cap, n;
    uint64_t every_ms;
    struct sw_ent *ents;
};

int sesswatch_new(unsigned cap, uint64_t every_ms, struct sesswatch **out)
{
    if (!out)
        return AL_E_INVAL;
    *out = NULL;
    if (cap == 0 || every_ms == 0)
        return AL_E_INVAL;
    struct sesswatch *w = calloc(1, sizeof *w);
    if (!w)
        return AL_E_NOMEM;
    w->ents = calloc(cap, sizeof *w->ents);
    if (!w->ents) {
        free(w);
        return AL_E_NOMEM;
    }
    w->cap = cap;
    w->every_ms = every_ms;
    *out = w;
    return AL_OK;
}

void sesswatch_free(struct sesswatch *w)
{
    if (!w)
        return;
    free(w->ents);
    free(w);
}

int sesswatch_add(struct sesswatch *w, const char *handle, void *conn, uint64_t now_ms)
{
    if (!w || !conn || !handle)
        return AL_E_INVAL;
    size_t hl = strnlen(handle, SESSWATCH_HANDLE_MAX + 1);
    if (hl == 0 || hl > SESSWATCH_HANDLE_MAX)
        return AL_E_INVAL;
    struct sw_ent *free_ent = NULL;
    uint64_t due = now_ms + w->every_ms;
    for (unsigned i = 0; i < w->cap; i++) {
        struct sw_ent *e = &w->ents[i];
        if (!e->used) {
            if (!free_ent)
                free_ent = e;
            continue;
        }
        if (e->conn == conn)
            return AL_E_EXISTS;
        if (!strcmp(e->handle, handle)) /* one lookup serves the session's connections */
            due = e->due_ms;
    }
    if (!free_ent)
        return AL_E_LIMIT;
    free_ent->used = true;
    memcpy(free_ent->handle, handle, hl + 1);
    free_ent->conn = conn;
    free_ent->due_ms = due;
    w->n++;
    return AL_OK;
}

void sesswatch_remove(struct sesswatch *w, void *conn)
{
    if (!w || !conn)
        return;
    for (unsigned i = 0; i < w->cap; i++)
        if (w->ents[i].used && w->ents[i].conn == conn) {
            memset(&w->ents[i], 0, sizeof w->ents[i]);
            w->n--;
            return;
        }
}

int sesswatch_due(struct sesswatch *w, uint64_t now_ms, char *out, size_t cap)
{
    if (!w || !out || cap <= SESSWATCH_HANDLE_MAX)
        return AL_E_INVAL;
    out[0] = 0;
    const struct sw_ent *first = NULL;
    for (unsigned i = 0; i < w->cap; i++) {
        const struct sw_ent *e = &w->ents[i];
        if (e->used && e->due_ms <= now_ms && (!first || e->due_ms < first->due_ms))
            first = e;
    }
    if (!first)
        return AL_E_NOENT;
    memcpy(out, first->handle, strlen(first->handle) + 1);
    for (unsigned i = 0; i < w->cap; i++) {
        struct sw_ent *e = &w->ents[i];
        if (e->used && !strcmp(e->handle, out))
            e->due_ms = now_ms + w->every_ms;
    }
    return AL_OK;
}

unsigned sesswatch_end(struct sesswatch *w, const char *handle, sesswatch_fn *fn, void *ud)
{
    if (!w || !handle)
        return 0;
    unsigned ended = 0;
    for (unsigned i = 0; i < w->cap; i++) {
        struct sw_ent *e = &w->ents[i];
        if (!e->used || strcmp(e->handle, handle) != 0)
            continue;
        void *conn = e->conn;
        memset(e, 0, sizeof *e);
        w->n--;
        ended++;
        if (fn)
            fn(ud, conn);
    }
    return ended;
}

unsigned sesswatch_count(const struct sesswatch *w)
{
    return w ? w->n : 0;
}
