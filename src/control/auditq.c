/* auditq: see auditq.h. */
#include "auditq.h"

#include <stdlib.h>
#include <string.h>

#include "al_err.h"

_Static_assert((int)AUDITQ_MAX_ROWS <= (int)DB_AUDIT_BATCH_MAX, "a full queue is one batch");
_Static_assert(AUDITQ_BATCH_ROWS <= AUDITQ_MAX_ROWS, "a batch fits the queue");

struct auditq {
    unsigned n;
    uint64_t first_ms;                         /* when rows[0] was queued */
    struct db_audit_row rows[AUDITQ_MAX_ROWS]; /* its strings point into text[i] */
    char *text[AUDITQ_MAX_ROWS];               /* each row's strings, owned */
};

int auditq_new(struct auditq **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? AL_OK : AL_E_NOMEM;
}

static void drop_rows(struct auditq *q)
{
    for (unsigned i = 0; i < q->n; i++) {
        free(q->text[i]);
        q->text[i] = NULL;
    }
    q->n = 0;
}

void auditq_free(struct auditq *q)
{
    if (!q)
        return;
    drop_rows(q);
    free(q);
}

/* s's length, or max + 1 when it is longer than max. */
static size_t len_upto(const char *s, size_t max)
{
    return strnlen(s, max + 1);
}

int auditq_add(struct auditq *q, const struct db_audit_row *row, uint64_t now_ms)
{
    if (!row->actor || !row->action)
        return AL_E_INVAL;
    const char *target = row->target ? row->target : "";
    const char *detail = row->detail_json ? row->detail_json : "{}";
    size_t la = len_upto(row->actor, DB_NAME_MAX), lc = len_upto(row->action, DB_ACTION_MAX),
           lt = len_upto(target, DB_TARGET_MAX), ld = len_upto(detail, DB_DETAIL_MAX);
    if (la > DB_NAME_MAX || lc > DB_ACTION_MAX || lt > DB_TARGET_MAX || ld > DB_DETAIL_MAX)
        return AL_E_TOOBIG;
    if (q->n == AUDITQ_MAX_ROWS)
        return AL_E_LIMIT;
    char *t = malloc(la + lc + lt + ld + 4);
    if (!t)
        return AL_E_NOMEM;
    struct db_audit_row *r = &q->rows[q->n];
    r->at = row->at;
    r->actor = memcpy(t, row->actor, la + 1);
    r->action = memcpy(t + la + 1, row->action, lc + 1);
    r->target = memcpy(t + la + lc + 2, target, lt + 1);
    r->detail_json = memcpy(t + la + lc + lt + 3, detail, ld + 1);
    q->text[q->n] = t;
    if (q->n++ == 0)
        q->first_ms = now_ms;
    return AL_OK;
}

unsigned auditq_count(const struct auditq *q)
{
    return q->n;
}

int64_t auditq_due_in(const struct auditq *q, uint64_t now_ms)
{
    if (q->n == 0)
        return AUDITQ_IDLE;
    if (q->n >= AUDITQ_BATCH_ROWS)
        return 0;
    uint64_t due = q->first_ms + AUDITQ_FLUSH_MS;
    return now_ms >= due ? 0 : (int64_t)(due - now_ms);
}

int auditq_flush(struct auditq *q, struct db *db, unsigned *n)
{
    if (n)
        *n = q->n;
    if (q->n == 0)
        return AL_OK;
    int rc = db_audit_add_batch(db, q->rows, q->n);
    drop_rows(q);
    return rc;
}
