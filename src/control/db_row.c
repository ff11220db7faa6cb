/*
 * db_row: the decoding of rows both SQL backends share (db_row.h): one
 * function per kind of row, reading its columns in the order of its
 * DB_*_COLS list through the backend's column readers, and the listing
 * glue that hands each decoded row to db.h's callback. Not here: SQL
 * text or how a backend fetches rows (db_sqlite_stmt.c, db_pg_exec.c).
 *
 * Ranges checked on the way out (a row outside them is corrupt, not
 * trusted): channel 1..UINT32_MAX, cols and rows 1..AL_MAX_COLS/ROWS, an
 * exit code -1..255 and signal 0..127 (NULL: -1 and 0, not exited yet),
 * times and offsets >= 0 (a recording's time NULL: -1, not stored), rtt
 * >= -1.
 */
#include "db_row.h"

#include "al_err.h"
#include "al_limits.h"
#include "db_backend.h"

#include <stdlib.h>

enum {
    DB_ROW_EXIT_CODE_MAX = 255,   /* as the EXIT frame */
    DB_ROW_EXIT_SIGNAL_MAX = 127, /* as the EXIT frame */
};

int db_row_user(const struct db_row *r, struct db_user *u)
{
    int role = 0;
    int rc = r->ops->text(r, 0, u->name, sizeof u->name, false);
    if (rc == AL_OK)
        rc = r->ops->enumv(r, 1, db_parse_role_int, &role);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 2, 0, INT64_MAX, NULL, &u->created_at);
    u->role = (enum db_role)role;
    return rc;
}

int db_row_sandbox(const struct db_row *r, struct db_sandbox *sb)
{
    int kind = 0;
    int rc = r->ops->text(r, 0, sb->id, sizeof sb->id, false);
    if (rc == AL_OK)
        rc = r->ops->enumv(r, 1, db_parse_kind_int, &kind);
    if (rc == AL_OK)
        rc = r->ops->text(r, 2, sb->url, sizeof sb->url, true);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 3, 0, INT64_MAX, NULL, &sb->created_at);
    if (rc == AL_OK)
        rc = r->ops->flag(r, 4, &sb->link_up);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 5, 0, INT64_MAX, NULL, &sb->link_since);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 6, -1, INT64_MAX, NULL, &sb->rtt_us);
    if (rc == AL_OK)
        rc = r->ops->flag(r, 7, &sb->record_input);
    int net = DB_NETWORK_DEFAULT;
    if (rc == AL_OK)
        rc = r->ops->enumv(r, 8, db_parse_network_int, &net);
    if (rc == AL_OK)
        rc = r->ops->text(r, 9, sb->platform, sizeof sb->platform, true);
    if (rc == AL_OK)
        rc = r->ops->text(r, 10, sb->identifier, sizeof sb->identifier, true);
    static const int64_t none = 0;
    if (rc == AL_OK)
        rc = r->ops->text(r, 11, sb->owner, sizeof sb->owner, true);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 12, 0, INT64_MAX, NULL, &sb->fence);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 13, 0, INT64_MAX, &none, &sb->lease_until);
    sb->kind = (enum db_sandbox_kind)kind;
    sb->network = (enum db_sandbox_network)net;
    return rc;
}

int db_row_terminal(const struct db_row *r, struct db_terminal *t)
{
    static const int64_t no_code = -1, zero = 0;
    int mode = 0, state = 0;
    int64_t v[5] = {0};
    int rc = r->ops->text(r, 0, t->id, sizeof t->id, false);
    if (rc == AL_OK)
        rc = r->ops->text(r, 1, t->sandbox_id, sizeof t->sandbox_id, false);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 2, 1, (int64_t)UINT32_MAX, NULL, &v[0]);
    if (rc == AL_OK)
        rc = r->ops->text(r, 3, t->argv_json, sizeof t->argv_json, false);
    if (rc == AL_OK)
        rc = r->ops->text(r, 4, t->cwd, sizeof t->cwd, false);
    if (rc == AL_OK)
        rc = r->ops->text(r, 5, t->env_json, sizeof t->env_json, false);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 6, 1, AL_MAX_COLS, NULL, &v[1]);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 7, 1, AL_MAX_ROWS, NULL, &v[2]);
    if (rc == AL_OK)
        rc = r->ops->enumv(r, 8, db_parse_mode_int, &mode);
    if (rc == AL_OK)
        rc = r->ops->enumv(r, 9, db_parse_state_int, &state);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 10, -1, DB_ROW_EXIT_CODE_MAX, &no_code, &v[3]);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 11, 0, DB_ROW_EXIT_SIGNAL_MAX, &zero, &v[4]);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 12, 0, INT64_MAX, NULL, &t->created_at);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 13, 0, INT64_MAX, &zero, &t->ended_at);
    int64_t out = 0, err = 0, rec = 0;
    if (rc == AL_OK)
        rc = r->ops->i64(r, 14, 0, INT64_MAX, NULL, &out);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 15, 0, INT64_MAX, NULL, &err);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 16, 0, INT64_MAX, NULL, &rec);
    if (rc == AL_OK)
        rc = r->ops->text(r, 17, t->creator, sizeof t->creator, false);
    if (rc == AL_OK)
        rc = r->ops->flag(r, 18, &t->record_input);
    static const int64_t unknown = -1;
    if (rc == AL_OK)
        rc = r->ops->i64(r, 19, 0, INT64_MAX, &unknown, &t->rec_time_us);
    if (rc == AL_OK)
        rc = r->ops->flag(r, 20, &t->rec_exited);
    t->channel = (uint32_t)v[0];
    t->cols = (uint16_t)v[1];
    t->rows = (uint16_t)v[2];
    t->mode = (enum db_term_mode)mode;
    t->state = (enum db_term_state)state;
    t->exit_code = (int)v[3];
    t->exit_signal = (int)v[4];
    t->out_offset = (uint64_t)out;
    t->err_offset = (uint64_t)err;
    t->rec_bytes = (uint64_t)rec;
    return rc;
}

int db_row_audit(const struct db_row *r, struct db_audit *a)
{
    int rc = r->ops->i64(r, 0, 1, INT64_MAX, NULL, &a->id);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 1, 0, INT64_MAX, NULL, &a->at);
    if (rc == AL_OK)
        rc = r->ops->text(r, 2, a->actor, sizeof a->actor, false);
    if (rc == AL_OK)
        rc = r->ops->text(r, 3, a->action, sizeof a->action, false);
    if (rc == AL_OK)
        rc = r->ops->text(r, 4, a->target, sizeof a->target, false);
    if (rc == AL_OK)
        rc = r->ops->text(r, 5, a->detail, sizeof a->detail, false);
    return rc;
}

int db_row_session(const struct db_row *r, struct db_session *s, char *csrf_hex)
{
    int rc = db_row_user(r, &s->user);
    if (rc == AL_OK)
        rc = r->ops->text(r, 3, csrf_hex, DB_HASH_HEX + 1, false);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 4, 0, INT64_MAX, NULL, &s->created_at);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 5, 0, INT64_MAX, NULL, &s->last_seen);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 6, 0, INT64_MAX, NULL, &s->expires_at);
    return rc;
}

int db_row_proxy(const struct db_row *r, struct db_proxy *p, enum db_term_state *term_state)
{
    static const int64_t zero = 0;
    int state = 0;
    int rc = r->ops->text(r, 0, p->terminal_id, sizeof p->terminal_id, false);
    if (rc == AL_OK)
        rc = r->ops->text(r, 1, p->upstreams, sizeof p->upstreams, false);
    if (rc == AL_OK)
        rc = r->ops->flag(r, 2, &p->revoked);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 3, 0, INT64_MAX, &zero, &p->revoked_at);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 4, 0, INT64_MAX, NULL, &p->created_at);
    if (rc == AL_OK)
        rc = r->ops->enumv(r, 5, db_parse_state_int, &state);
    *term_state = (enum db_term_state)state;
    return rc;
}

/* ---- lookups and listings ------------------------------------------------- */

int db_row_list_user(const struct db_row *r, void *ctx)
{
    const struct db_row_list *l = ctx;
    struct db_user u;
    int rc = db_row_user(r, &u);
    return rc == AL_OK ? l->cb.user(l->ctx, &u) : rc;
}

int db_row_list_sandbox(const struct db_row *r, void *ctx)
{
    const struct db_row_list *l = ctx;
    int rc = db_row_sandbox(r, l->row);
    return rc == AL_OK ? l->cb.sandbox(l->ctx, l->row) : rc;
}

int db_row_list_terminal(const struct db_row *r, void *ctx)
{
    const struct db_row_list *l = ctx;
    int rc = db_row_terminal(r, l->row);
    return rc == AL_OK ? l->cb.terminal(l->ctx, l->row) : rc;
}

int db_row_list_audit(const struct db_row *r, void *ctx)
{
    const struct db_row_list *l = ctx;
    int rc = db_row_audit(r, l->row);
    return rc == AL_OK ? l->cb.audit(l->ctx, l->row) : rc;
}

/* A replica (db_row.h): stopped_at NULL reads as 0 (running). */
int db_row_list_replica(const struct db_row *r, void *ctx)
{
    const struct db_row_list *l = ctx;
    struct db_replica p;
    const int64_t zero = 0;
    int rc = r->ops->text(r, 0, p.id, sizeof p.id, false);
    if (rc == AL_OK)
        rc = r->ops->text(r, 1, p.address, sizeof p.address, false);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 2, 0, INT64_MAX, NULL, &p.started_at);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 3, 0, INT64_MAX, NULL, &p.beat_at);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 4, 0, INT64_MAX, &zero, &p.stopped_at);
    if (rc == AL_OK)
        rc = r->ops->flag(r, 5, &p.alive);
    return rc == AL_OK ? l->cb.replica(l->ctx, &p) : rc;
}

int db_row_list_jwks(const struct db_row *r, void *ctx)
{
    const struct db_row_list *l = ctx;
    char id[DB_REPLICA_ID_LEN + 1];
    int rc = r->ops->text(r, 0, id, sizeof id, false);
    if (rc == AL_OK)
        rc = r->ops->text(r, 1, l->row, DB_REPLICA_JWKS_MAX + 1, false);
    return rc == AL_OK ? l->cb.jwks(l->ctx, id, l->row) : rc;
}

int db_row_one_user(const struct db_row *r, void *out)
{
    return db_row_user(r, out);
}

int db_row_one_sandbox(const struct db_row *r, void *out)
{
    return db_row_sandbox(r, out);
}

int db_row_one_terminal(const struct db_row *r, void *out)
{
    return db_row_terminal(r, out);
}

int db_row_one_session(const struct db_row *r, void *out)
{
    const struct db_row_session_out *o = out;
    return db_row_session(r, o->s, o->csrf_hex);
}

int db_row_one_proxy(const struct db_row *r, void *out)
{
    const struct db_row_proxy_out *o = out;
    return db_row_proxy(r, o->p, o->term_state);
}

int db_row_list_start(struct db *db, struct db_row_list *l, size_t size)
{
    l->row = malloc(size);
    return l->row ? AL_OK : db_fail(db, AL_E_NOMEM, "out of memory");
}

void db_row_list_end(struct db_row_list *l)
{
    free(l->row);
    l->row = NULL;
}

/* A lease (db_row.h): the sandbox's id and its fence. */
int db_row_list_lease(const struct db_row *r, void *ctx)
{
    const struct db_row_lease *l = ctx;
    char id[DB_NAME_MAX + 1];
    int64_t fence = 0;
    int rc = r->ops->text(r, 0, id, sizeof id, false);
    if (rc == AL_OK)
        rc = r->ops->i64(r, 1, 0, INT64_MAX, NULL, &fence);
    return rc == AL_OK ? l->cb(l->ctx, id, fence) : rc;
}

int db_row_one_fence(const struct db_row *r, void *out)
{
    return r->ops->i64(r, 0, 0, INT64_MAX, NULL, out);
}

int db_row_one_hash(const struct db_row *r, void *out)
{
    return r->ops->text(r, 0, out, DB_HASH_HEX + 1, false);
}
