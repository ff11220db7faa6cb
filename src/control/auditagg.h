/*
 * auditagg: refusals of unauthenticated peers, counted in memory and
 * written to the audit log as one row per (source, action, reason) per
 * interval, with a count. A peer can make airlockd refuse it as often as
 * it likes; one synchronous row per refusal was ~1,700 rows/s and
 * ~2.4 GiB/hour of database. Pure: no I/O, the time passed in.
 *
 * Data model: up to AAGG_MAX_KEYS entries, each a key (source address,
 * action, reason), the first target seen, a count and the first and last
 * times (Unix ms). Refusals that find the table full are counted in one
 * overflow entry (source "*"). aagg_flush() hands every entry to the
 * caller and empties the table.
 */
#ifndef AL_AUDITAGG_H
#define AL_AUDITAGG_H

#include <stdint.h>

#define AAGG_MAX_KEYS 256   /* distinct (source, action, reason) per interval */
#define AAGG_FIELD_MAX 64   /* bytes kept of a source, an action, a reason */
#define AAGG_TARGET_MAX 256 /* bytes kept of the first target */
#define AAGG_OVERFLOW_SOURCE "*"

struct aagg_row {
    char source[AAGG_FIELD_MAX];
    char action[AAGG_FIELD_MAX];
    char reason[AAGG_FIELD_MAX];
    char target[AAGG_TARGET_MAX];
    uint64_t count;
    int64_t first_ms, last_ms;
};

struct aagg;

/* AL_OK or AL_E_NOMEM. */
int aagg_new(struct aagg **out);
void aagg_free(struct aagg *g);
/* Count one refusal (strings are cut to fit). */
void aagg_add(struct aagg *g, const char *source, const char *action, const char *reason,
              const char *target, int64_t now_ms);
/* Entries held now. */
unsigned aagg_count(const struct aagg *g);
/* Call cb for every entry, then empty the table. Returns the number of
 * entries handed on. cb's errors are the caller's to log. */
typedef void (*aagg_row_cb)(void *ctx, const struct aagg_row *row);
unsigned aagg_flush(struct aagg *g, aagg_row_cb cb, void *ctx);

#endif
