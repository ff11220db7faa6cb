/*
 * auditq: audit rows queued in memory and written to the database in one
 * transaction per flush (db_audit_add_batch), so that a row costs its
 * caller no write of its own: the credential proxy's calls, one row each,
 * had cost one SQLite transaction (or one PostgreSQL round trip) per call
 * on airlockd's event loop (docs/performance.md). The queue itself is
 * pure: no I/O and no clock (the time is passed in); auditq_flush alone
 * writes, through db.h.
 *
 * When to flush is the caller's (airlockd: api_audit.c, on a timer):
 * auditq_due_in says how long until one is due: AUDITQ_FLUSH_MS after the
 * oldest queued row, or at once when AUDITQ_BATCH_ROWS are queued. The
 * queue holds at most AUDITQ_MAX_ROWS: auditq_add then refuses the row
 * (AL_E_LIMIT) and the caller flushes at once, synchronously, then adds
 * it: a row is never dropped for room.
 *
 * Data model: rows in the order added, each db_audit_add's arguments: at
 * (Unix ms, the event's own time, so a row's time is not its flush's),
 * actor, action, target, detail (JSON text), the four strings copied into
 * one allocation per row that the queue owns until the flush. first_ms:
 * the caller's clock (monotonic ms, e.g. uv_now) when the oldest row was
 * queued. A flush empties the queue whatever the database said: rows
 * whose write failed are lost, and the caller says so (with their count;
 * never their content).
 */
#ifndef AL_AUDITQ_H
#define AL_AUDITQ_H

#include <stdint.h>

#include "db.h"

enum {
    AUDITQ_FLUSH_MS = 100,   /* a row waits at most this long for its write */
    AUDITQ_BATCH_ROWS = 512, /* this many rows queued: a flush is due at once */
    AUDITQ_MAX_ROWS = 1000,  /* the queue's bound: full, the caller flushes now */
    AUDITQ_IDLE = -1,        /* auditq_due_in of an empty queue: nothing due */
};

struct auditq;

/* AL_OK or AL_E_NOMEM. */
int auditq_new(struct auditq **out);
/* Frees the rows still queued too (lost: flush first). NULL is fine. */
void auditq_free(struct auditq *q);
/* Queue a copy of row at now_ms (the caller's monotonic clock). AL_OK;
 * AL_E_LIMIT when AUDITQ_MAX_ROWS are queued (nothing queued: flush, then
 * add again); AL_E_INVAL without an actor or an action, AL_E_TOOBIG for
 * a field longer than db.h allows (such a row would fail its whole
 * batch); AL_E_NOMEM. */
int auditq_add(struct auditq *q, const struct db_audit_row *row, uint64_t now_ms);
/* Rows queued now. */
unsigned auditq_count(const struct auditq *q);
/* Milliseconds from now_ms until a flush is due: 0 when it is due now,
 * AUDITQ_IDLE when the queue is empty. */
int64_t auditq_due_in(const struct auditq *q, uint64_t now_ms);
/* Write every queued row to db in one transaction, oldest first, and
 * empty the queue. AL_OK (nothing is written when nothing is queued), or
 * db_audit_add_batch's error with db_errmsg(db) saying why: the rows are
 * then lost. *n (may be NULL): the rows handed to the database, written
 * or lost. */
int auditq_flush(struct auditq *q, struct db *db, unsigned *n);

#endif
