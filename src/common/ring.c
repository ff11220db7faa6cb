/*
 * ring: see ring.h. Byte at absolute offset o lives at buf[o % cap].
 */
#include "ring.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "al_err.h"

/* From this size a buffer is mapped rather than taken from the heap, so
 * that ring_free gives it back to the system at once (a freed heap block
 * of megabytes may stay in the process: glibc raises its mmap threshold
 * after the first such free). */
#define RING_MAP_MIN (64u << 10)

static uint8_t *buf_new(size_t cap)
{
    if (cap < RING_MAP_MIN)
        return malloc(cap);
    void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void buf_free(uint8_t *p, size_t cap)
{
    if (!p)
        return;
    if (cap < RING_MAP_MIN)
        free(p);
    else
        (void)munmap(p, cap);
}

void ring_init(struct ring *r, size_t cap, uint64_t start)
{
    r->buf = NULL;
    r->cap = cap;
    r->base = start;
    r->end = start;
}

void ring_free(struct ring *r)
{
    buf_free(r->buf, r->cap);
    r->buf = NULL;
    r->base = r->end;
}

int ring_append(struct ring *r, const uint8_t *p, size_t n)
{
    if (n == 0)
        return AL_OK;
    if (n > r->cap)
        return AL_E_TOOBIG;
    if (!r->buf) {
        r->buf = buf_new(r->cap);
        if (!r->buf)
            return AL_E_NOMEM;
    }
    size_t at = (size_t)(r->end % r->cap);
    size_t first = r->cap - at < n ? r->cap - at : n;
    memcpy(r->buf + at, p, first);
    memcpy(r->buf, p + first, n - first);
    r->end += n;
    if (r->end - r->base > r->cap)
        r->base = r->end - r->cap;
    return AL_OK;
}

size_t ring_peek(const struct ring *r, uint64_t off, size_t max, const uint8_t **p)
{
    if (off < r->base || off >= r->end || !r->buf) {
        *p = NULL;
        return 0;
    }
    size_t at = (size_t)(off % r->cap);
    uint64_t avail = r->end - off;
    size_t run = r->cap - at;
    if (avail < run)
        run = (size_t)avail;
    if (max < run)
        run = max;
    *p = r->buf + at;
    return run;
}

void ring_reset(struct ring *r, uint64_t off)
{
    r->base = off;
    r->end = off;
}
