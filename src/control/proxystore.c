/*
 * proxystore: the credential proxy's store in the database (proxystore.h).
 */
#include "proxystore.h"

#include "al_err.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static int lookup(void *ud, const char *hash, const char *upstream, char *terminal, size_t cap)
{
    return db_proxy_lookup(ud, hash, upstream, terminal, cap);
}

static int sandbox_of(void *ud, const char *terminal, char *sandbox, size_t cap)
{
    struct db_terminal *t = malloc(sizeof *t); /* argv and env buffers: large */
    if (!t)
        return AL_E_NOMEM;
    int rc = db_terminal_get(ud, terminal, t);
    if (rc == AL_OK && strlen(t->sandbox_id) >= cap)
        rc = AL_E_TOOBIG;
    if (rc == AL_OK)
        memcpy(sandbox, t->sandbox_id, strlen(t->sandbox_id) + 1);
    free(t);
    return rc;
}

/* The record's detail (JSON text, the caller frees it; NULL: out of memory). */
static char *detail_of(const struct proxyconn_record *rec)
{
    size_t plen = strnlen(rec->path ? rec->path : "", PROXYSTORE_PATH_SHOWN);
    json_t *d = json_pack(
        "{s:s, s:s, s:s%, s:i, s:I, s:I, s:I}", "upstream", rec->upstream ? rec->upstream : "",
        "method", rec->method ? rec->method : "", "path", rec->path ? rec->path : "", plen,
        "status", rec->status, "bytes_up", (json_int_t)rec->bytes_up, "bytes_down",
        (json_int_t)rec->bytes_down, "latency_ms", (json_int_t)rec->latency_ms);
    char *detail = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    return detail;
}

static void record(void *ud, const struct proxyconn_record *rec)
{
    struct db *db = ud;
    char *detail = detail_of(rec);
    /* a failure here costs the row, never the call */
    (void)db_audit_add(db, 0, "system", "proxy_call", rec->terminal ? rec->terminal : "", detail);
    free(detail);
}

static int lookup_live(void *ud, const char *hash, const char *upstream, char *terminal, size_t cap)
{
    struct proxystore *ps = ud;
    int rc = db_proxy_lookup(ps->db, hash, upstream, terminal, cap);
    if (rc == AL_OK && ps->live && !ps->live(ps->live_ud, terminal))
        return AL_E_AGAIN;
    return rc;
}

static int sandbox_of_live(void *ud, const char *terminal, char *sandbox, size_t cap)
{
    struct proxystore *ps = ud;
    return sandbox_of(ps->db, terminal, sandbox, cap);
}

static void record_live(void *ud, const struct proxyconn_record *rec)
{
    struct proxystore *ps = ud;
    if (ps->refused && (!rec->terminal || !rec->terminal[0])) {
        char why[32];
        if (rec->status > 0)
            (void)snprintf(why, sizeof why, "HTTP %d", rec->status);
        else
            (void)snprintf(why, sizeof why, "cut");
        size_t plen = strnlen(rec->path ? rec->path : "", PROXYSTORE_PATH_SHOWN);
        char target[PROXYSTORE_PATH_SHOWN + 1];
        (void)snprintf(target, sizeof target, "%.*s", (int)plen, rec->path ? rec->path : "");
        ps->refused(ps->audit_ud, rec->source ? rec->source : "", "proxy_refused", why, target);
        return;
    }
    if (!ps->audit) {
        record(ps->db, rec);
        return;
    }
    char *detail = detail_of(rec);
    ps->audit(ps->audit_ud, "system", "proxy_call", rec->terminal ? rec->terminal : "", detail);
    free(detail);
}

void proxystore_of(struct proxystore *ps, struct proxy_store *out)
{
    out->lookup = lookup_live;
    out->sandbox_of = sandbox_of_live; /* a runner's channel: its own sandbox's only */
    out->record = record_live;
    out->ud = ps;
}

void proxystore_of_db(struct db *db, struct proxy_store *out)
{
    out->lookup = lookup;
    out->sandbox_of = sandbox_of;
    out->record = record;
    out->ud = db;
}
