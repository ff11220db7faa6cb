/*
 * db_audit: the audit log of the data layer (db.h "Audit"): add a row,
 * add a batch of rows in one transaction (auditq.c's flush), query newest
 * first with filters and a limit, prune by age and count.
 * Not here: which refusals are counted before they become rows
 * (auditagg.c), storing (the backends' audit_* calls).
 */
#include "db.h"

#include "al_err.h"
#include "db_backend.h"
#include "db_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int db_audit_add(struct db *db, int64_t at, const char *actor, const char *action,
                 const char *target, const char *detail_json)
{
    return db_audit_add_fenced(db, NULL, DB_NO_FENCE, at, actor, action, target, detail_json);
}

/* Check one row's fields and fill in its defaults: target NULL is "",
 * detail NULL is {}, at 0 is now. */
static int check_row(struct db *db, struct db_audit_row *r)
{
    int rc;
    if (r->at < 0)
        return db_fail(db, AL_E_INVAL, "audit time must not be negative");
    if ((rc = db_check_name(db, "audit actor", r->actor)) != AL_OK)
        return rc;
    if ((rc = db_check_action(db, r->action)) != AL_OK)
        return rc;
    if (!r->target)
        r->target = "";
    if ((rc = db_check_text(db, "audit target", r->target, DB_TARGET_MAX)) != AL_OK)
        return rc;
    if (!r->detail_json)
        r->detail_json = "{}";
    if ((rc = db_check_detail(db, r->detail_json)) != AL_OK)
        return rc;
    if (r->at == 0 && (rc = db_now_or_fail(db, &r->at)) != AL_OK)
        return rc;
    return AL_OK;
}

int db_audit_add_fenced(struct db *db, const char *sandbox_id, int64_t fence, int64_t at,
                        const char *actor, const char *action, const char *target,
                        const char *detail_json)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (fence < DB_NO_FENCE)
        return db_fail(db, AL_E_INVAL, "a fence is >= 0 (or none)");
    if (fence >= 0 && (rc = db_check_name(db, "sandbox id", sandbox_id)) != AL_OK)
        return rc;
    if (fence < 0)
        sandbox_id = NULL;
    struct db_audit_row r = {at, actor, action, target, detail_json};
    if ((rc = check_row(db, &r)) != AL_OK)
        return rc;
    return db->be->audit_add(db, r.at, r.actor, r.action, r.target, r.detail_json, sandbox_id,
                             fence);
}

int db_audit_add_batch(struct db *db, const struct db_audit_row *rows, size_t n)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (n == 0)
        return AL_OK;
    if (!rows)
        return db_fail(db, AL_E_INVAL, "no audit rows");
    if (n > DB_AUDIT_BATCH_MAX)
        return db_fail(db, AL_E_TOOBIG, "at most %d audit rows in one batch", DB_AUDIT_BATCH_MAX);
    struct db_audit_row *checked = malloc(n * sizeof *checked); /* with the defaults */
    if (!checked)
        return db_fail(db, AL_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == AL_OK && i < n; i++) {
        checked[i] = rows[i];
        if ((rc = check_row(db, &checked[i])) != AL_OK) {
            char why[DB_MSG_MAX];
            (void)snprintf(why, sizeof why, "%s", db->msg);
            rc = db_fail(db, rc, "audit row %zu: %s", i, why);
        }
    }
    if (rc == AL_OK)
        rc = db->be->audit_add_batch(db, checked, n);
    free(checked);
    return rc;
}

int db_audit_query(struct db *db, const struct db_audit_filter *f, db_audit_cb cb, void *ctx)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!f || !cb)
        return db_fail(db, AL_E_INVAL, "no filter or no callback");
    if (f->since < 0)
        return db_fail(db, AL_E_INVAL, "since must not be negative");
    if (f->actor && (rc = db_check_name(db, "audit actor", f->actor)) != AL_OK)
        return rc;
    if (f->action && (rc = db_check_action(db, f->action)) != AL_OK)
        return rc;
    if (f->limit == 0)
        return db_fail(db, AL_E_INVAL, "limit must be 1 or more");
    if (f->limit > DB_AUDIT_LIMIT_MAX)
        return db_fail(db, AL_E_TOOBIG, "limit must be at most %d", DB_AUDIT_LIMIT_MAX);
    return db->be->audit_query(db, f, cb, ctx);
}

int db_audit_prune(struct db *db, int64_t before_at, uint64_t keep_rows)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (before_at < 0)
        return db_fail(db, AL_E_INVAL, "audit retention time must not be negative");
    if (keep_rows > (uint64_t)INT64_MAX)
        return db_fail(db, AL_E_INVAL, "audit retention count too large");
    return db->be->audit_prune(db, before_at, keep_rows);
}
