/*
 * api_audit: what airlockd writes to its audit log (db.h): one row per
 * action of a user (api_audit), the refusals of unauthenticated peers
 * counted in memory and written once per source, action and reason per
 * API_AUDIT_FLUSH_MS (auditagg.h) with a log line at most once per
 * API_LOG_INTERVAL_MS, the rows queued in memory and written in one
 * transaction per flush (auditq.h: the credential proxy's calls, one row
 * each), within AUDITQ_FLUSH_MS on a timer of their own, at once when
 * AUDITQ_BATCH_ROWS wait or the queue is full, and at a clean stop, the
 * retention of old rows (days and a row count, every API_AUDIT_PRUNE_MS),
 * and GET /v1/audit, which writes the refusals counted and the rows
 * queued so far before it reads (a call that has ended is in the log).
 *
 * Not here: what each action's detail holds (its handler says), the rows
 * as JSON (api_view.c).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "al_err.h"
#include "al_log.h"
#include "api_local.h"
#include "auditagg.h"
#include "auditq.h"
#include "db.h"

#define API_AUDIT_FLUSH_MS 5000   /* refusals: one audit row per source and reason per interval */
#define API_AUDIT_PRUNE_MS 60000  /* how often audit retention runs */
#define API_LOG_INTERVAL_MS 10000 /* refusal log lines: one per interval, with a count */
#define API_MS_PER_DAY 86400000LL

/* A row of the audit log for what actor did; a failure is logged. */
void api_audit(struct api *a, const char *actor, const char *action, const char *target,
               const char *detail)
{
    if (db_audit_add(a->db, 0, actor, action, target, detail) != AL_OK)
        api_log(a, 0, "audit: %s", db_errmsg(a->db));
}

/*
 * An unauthenticated peer was refused: counted (auditagg.h) and written to
 * the audit log once per source and reason per API_AUDIT_FLUSH_MS; logged
 * at most once per API_LOG_INTERVAL_MS with the count since the last line.
 */
void api_audit_refused(struct api *a, const char *peer, const char *action, const char *why,
                       const char *target)
{
    aagg_add(a->agg, peer, action, why, target, api_now_ms());
    unsigned long n = al_lograte_hit(&a->log_refused, uv_now(a->loop), API_LOG_INTERVAL_MS);
    if (n)
        api_log(a, 1, "refused %s %s from %s: %s (%lu refusals since the last line)", action,
                target, peer, why, n);
}

void api_audit_refused_of(void *api, const char *peer, const char *action, const char *why,
                          const char *target)
{
    api_audit_refused(api, peer, action, why, target);
}

static void audit_row(void *ctx, const struct aagg_row *r)
{
    struct api *a = ctx;
    json_t *d = json_pack("{s:s, s:s, s:I, s:I, s:I}", "peer", r->source, "why", r->reason, "count",
                          (json_int_t)r->count, "first_at", (json_int_t)r->first_ms, "last_at",
                          (json_int_t)r->last_ms);
    char *detail = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    if (db_audit_add(a->db, r->last_ms, "anonymous", r->action, r->target, detail) != AL_OK)
        api_log(a, 0, "audit: %s", db_errmsg(a->db));
    free(detail);
}

void api_audit_flush_queue(struct api *a)
{
    unsigned n = 0;
    if (auditq_flush(a->auditq, a->db, &n) != AL_OK)
        api_log(a, 0, "audit: %u rows lost: %s", n, db_errmsg(a->db));
}

static void on_auditq_timer(uv_timer_t *t)
{
    api_audit_flush_queue(t->data);
}

void api_audit_later(void *api, const char *actor, const char *action, const char *target,
                     const char *detail)
{
    struct api *a = api;
    const struct db_audit_row r = {api_now_ms(), actor, action, target, detail};
    uint64_t now = uv_now(a->loop);
    int rc = auditq_add(a->auditq, &r, now);
    if (rc == AL_E_LIMIT) { /* full: written now, on this call, rather than dropped */
        api_audit_flush_queue(a);
        rc = auditq_add(a->auditq, &r, now);
    }
    if (rc != AL_OK) { /* a row the queue cannot hold: written alone, as before */
        if (db_audit_add(a->db, r.at, actor, action, target, detail) != AL_OK)
            api_log(a, 0, "audit: %s", db_errmsg(a->db));
        return;
    }
    int64_t wait = auditq_due_in(a->auditq, now);
    if (a->auditq_timer_on && wait >= 0)
        (void)uv_timer_start(&a->auditq_timer, on_auditq_timer, (uint64_t)wait, 0);
}

/* Write the refusals counted so far (and, forced, the rows queued); run
 * retention when it is due. */
void api_audit_housekeeping(struct api *a, int force)
{
    uint64_t now = uv_now(a->loop);
    if (force)
        api_audit_flush_queue(a);
    if (force || now >= a->next_flush_ms) {
        a->next_flush_ms = now + API_AUDIT_FLUSH_MS;
        (void)aagg_flush(a->agg, audit_row, a);
    }
    if (force || now >= a->next_prune_ms) {
        a->next_prune_ms = now + API_AUDIT_PRUNE_MS;
        int64_t before = api_now_ms() - (int64_t)a->cfg.audit_keep_days * API_MS_PER_DAY;
        if (db_audit_prune(a->db, before > 0 ? before : 0, a->cfg.audit_keep_rows) != AL_OK)
            api_log(a, 0, "audit retention: %s", db_errmsg(a->db));
    }
}

int api_audit_list(struct api *a, struct lws *wsi, struct call *c)
{
    struct api_list l = {a, json_array(), 0};
    if (!l.arr)
        return api_reply_error(wsi, 500, "out of memory");
    /* the refusals counted and the calls ended so far are rows before the
     * log is read */
    (void)aagg_flush(a->agg, audit_row, a);
    api_audit_flush_queue(a);
    struct db_audit_filter f;
    memset(&f, 0, sizeof f);
    f.limit = API_LIST_MAX;
    return api_reply_list(a, wsi, c, &l, db_audit_query(a->db, &f, api_view_add_audit, &l));
}
