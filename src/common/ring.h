/*
 * ring: a bounded byte ring addressed by absolute stream offsets.
 *
 * Holds the most recent bytes of one stream: offsets [base, end), with
 * end - base <= cap. Appending past capacity drops the oldest bytes (base
 * moves up); callers that must not lose unacknowledged bytes check
 * ring_space-style limits themselves. The buffer is allocated on first
 * append, so an idle stream costs nothing, and ring_free gives it back to
 * the system (large ones are mapped, not heap).
 */
#ifndef AL_RING_H
#define AL_RING_H

#include <stddef.h>
#include <stdint.h>

struct ring {
    uint8_t *buf;  /* owned; NULL until the first append */
    size_t cap;    /* bytes */
    uint64_t base; /* offset of the oldest byte held */
    uint64_t end;  /* offset one past the newest byte */
};

/* An empty ring of cap bytes starting at offset start. No allocation. */
void ring_init(struct ring *r, size_t cap, uint64_t start);
void ring_free(struct ring *r);

/* Append n bytes (n <= cap), dropping the oldest if needed. 0 or AL_E_*. */
int ring_append(struct ring *r, const uint8_t *p, size_t n);

/*
 * The longest contiguous run of bytes starting at offset off (base <= off
 * <= end), at most max bytes: sets *p and returns its length (0 at end).
 */
size_t ring_peek(const struct ring *r, uint64_t off, size_t max, const uint8_t **p);

/* Forget everything; the ring restarts empty at offset off. */
void ring_reset(struct ring *r, uint64_t off);

#endif
