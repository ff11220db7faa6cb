/*
 * db_pg_tables: the PostgreSQL backend's calls (db_backend.h), table by
 * table: users, sandboxes, terminals, audit, web sessions, proxy
 * credentials; and its
 * function table, db_pg_backend. Each call is one statement with text
 * parameters (db_pg_exec.c) whose failed constraint, if any, is told apart
 * by SQLSTATE and constraint name and reported as the SQLite backend
 * reports it (db_sqlite_tables.c). Rows are decoded by db_row.c. Not here:
 * the connection and the schema (db_pg.c, db_pg_schema.c), the checks of
 * inputs (db_check.c: they were made before any of these runs).
 */
#include "al_err.h"
#include "db.h"
#include "db_backend.h"
#include "db_pg.h"
#include "db_row.h"

#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- users ---------------------------------------------------------------------- */

static int dbp_user_add(struct db *db, const char *name, enum db_role role, const char *key_sha256,
                        int64_t now)
{
    char at[DBP_INT_TEXT];
    dbp_i64_text(at, sizeof at, now);
    const char *const v[] = {name, db_role_name(role), key_sha256, at};
    struct dbp_res r;
    int rc = dbp_exec(db, "add user",
                      "INSERT INTO users (name, role, key_sha256, created_at)"
                      " VALUES ($1, $2, $3, $4)",
                      4, v, &r);
    PQclear(r.res);
    if (dbp_state_is(r.state, "23505") && strcmp(r.constraint, "users_pkey") == 0)
        rc = db_fail(db, AL_E_EXISTS, "user %s already exists", name);
    else if (dbp_state_is(r.state, "23505"))
        rc = db_fail(db, AL_E_EXISTS, "API key collision; try again");
    return rc;
}

static int dbp_user_by_hash(struct db *db, const char *key_sha256, struct db_user *out)
{
    const char *const v[] = {key_sha256};
    bool found = false;
    int rc = dbp_one(db, "find user", "SELECT " DB_USER_COLS " FROM users WHERE key_sha256 = $1", 1,
                     v, db_row_one_user, out, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no user holds this API key");
    return rc;
}

static int dbp_user_list(struct db *db, db_user_cb cb, void *ctx)
{
    struct db_row_list l = {.cb.user = cb, .ctx = ctx};
    return dbp_list(db, "list users",
                    "SELECT " DB_USER_COLS " FROM users ORDER BY name COLLATE \"C\"", 0, NULL,
                    db_row_list_user, &l);
}

static int dbp_user_remove(struct db *db, const char *name)
{
    const char *const v[] = {name};
    struct dbp_res r;
    int rc = dbp_exec(db, "remove user", "DELETE FROM users WHERE name = $1", 1, v, &r);
    if (rc == AL_OK && !dbp_one_changed(r.res))
        rc = db_fail(db, AL_E_NOENT, "no user named %s", name);
    PQclear(r.res);
    return rc;
}

/* ---- sandboxes ---------------------------------------------------------------- */

static int dbp_sandbox_add(struct db *db, const struct db_sandbox_spec *sp, int64_t now)
{
    char at[DBP_INT_TEXT];
    dbp_i64_text(at, sizeof at, now);
    const char *const v[] = {sp->id,
                             db_sandbox_kind_name(sp->kind),
                             sp->url,
                             at,
                             sp->record_input ? "true" : "false",
                             db_sandbox_network_name(sp->network),
                             sp->platform,
                             sp->identifier};
    struct dbp_res r;
    int rc = dbp_exec(db, "add sandbox",
                      "INSERT INTO sandboxes (id, kind, url, created_at, link_up, link_since,"
                      " link_rtt_us, record_input, network, platform, identifier)"
                      " VALUES ($1, $2, $3, $4, false, $4, -1, $5, $6, $7, $8)",
                      8, v, &r);
    PQclear(r.res);
    if (dbp_state_is(r.state, "23505"))
        rc = strstr(r.constraint, "identifier")
                 ? db_fail(db, AL_E_EXISTS, "session identifier %s is taken", sp->identifier)
                 : db_fail(db, AL_E_EXISTS, "sandbox %s already exists", sp->id);
    return rc;
}

static int dbp_sandbox_get(struct db *db, const char *id, struct db_sandbox *out)
{
    const char *const v[] = {id};
    bool found = false;
    int rc = dbp_one(db, "get sandbox", "SELECT " DB_SANDBOX_COLS " FROM sandboxes WHERE id = $1",
                     1, v, db_row_one_sandbox, out, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no sandbox %s", id);
    return rc;
}

static int dbp_sandbox_list(struct db *db, db_sandbox_cb cb, void *ctx)
{
    struct db_row_list l = {.cb.sandbox = cb, .ctx = ctx};
    int rc = db_row_list_start(db, &l, sizeof(struct db_sandbox)); /* the URL buffer is large */
    if (rc == AL_OK)
        rc = dbp_list(db, "list sandboxes",
                      "SELECT " DB_SANDBOX_COLS " FROM sandboxes ORDER BY id COLLATE \"C\"", 0,
                      NULL, db_row_list_sandbox, &l);
    db_row_list_end(&l);
    return rc;
}

static int dbp_sandbox_set_link(struct db *db, const char *id, bool up, int64_t since,
                                int64_t rtt_us, int64_t fence)
{
    char s[DBP_INT_TEXT], rtt[DBP_INT_TEXT], f[DBP_INT_TEXT];
    dbp_i64_text(s, sizeof s, since);
    dbp_i64_text(rtt, sizeof rtt, rtt_us);
    dbp_i64_text(f, sizeof f, fence);
    const char *const v[] = {id, up ? "true" : "false", s, rtt, f};
    struct dbp_res r;
    int rc = dbp_exec(db, "set sandbox link",
                      "UPDATE sandboxes SET link_up = $2, link_since = $3, link_rtt_us = $4"
                      " WHERE id = $1 AND ($5::bigint < 0 OR fence = $5::bigint)",
                      5, v, &r);
    if (rc == AL_OK && !dbp_one_changed(r.res))
        rc = fence >= 0
                 ? db_fail(db, AL_E_PERM, "sandbox %s: gone, or another owner now (our fence %lld)",
                           id, (long long)fence)
                 : db_fail(db, AL_E_NOENT, "no sandbox %s", id);
    PQclear(r.res);
    return rc;
}

static int dbp_sandbox_set_record_input(struct db *db, const char *id, bool on)
{
    const char *const v[] = {id, on ? "true" : "false"};
    struct dbp_res r;
    int rc = dbp_exec(db, "set sandbox record_input",
                      "UPDATE sandboxes SET record_input = $2 WHERE id = $1", 2, v, &r);
    if (rc == AL_OK && !dbp_one_changed(r.res))
        rc = db_fail(db, AL_E_NOENT, "no sandbox %s", id);
    PQclear(r.res);
    return rc;
}

static int dbp_sandbox_remove(struct db *db, const char *id)
{
    const char *const v[] = {id};
    struct dbp_res r;
    int rc = dbp_exec(db, "remove sandbox", "DELETE FROM sandboxes WHERE id = $1", 1, v, &r);
    if (rc == AL_OK && !dbp_one_changed(r.res))
        rc = db_fail(db, AL_E_NOENT, "no sandbox %s", id);
    PQclear(r.res);
    if (dbp_state_is(r.state, "23503"))
        rc = db_fail(db, AL_E_STATE, "sandbox %s still has terminals; remove them first", id);
    return rc;
}

/* ---- terminals -------------------------------------------------------------- */

static int dbp_terminal_add(struct db *db, const char *id, const struct db_terminal_spec *sp,
                            int64_t now)
{
    char ch[DBP_INT_TEXT], cols[DBP_INT_TEXT], rows[DBP_INT_TEXT], at[DBP_INT_TEXT];
    dbp_i64_text(ch, sizeof ch, (int64_t)sp->channel);
    dbp_i64_text(cols, sizeof cols, sp->cols);
    dbp_i64_text(rows, sizeof rows, sp->rows);
    dbp_i64_text(at, sizeof at, now);
    const char *const v[] = {id,
                             sp->sandbox_id,
                             ch,
                             sp->argv_json,
                             sp->cwd,
                             sp->env_json,
                             cols,
                             rows,
                             db_term_mode_name(sp->mode),
                             at,
                             sp->creator,
                             sp->record_input ? "true" : "false"};
    struct dbp_res r;
    int rc = dbp_exec(db, "add terminal",
                      "INSERT INTO terminals (id, sandbox_id, channel, argv, cwd, env, cols,"
                      " rows, mode, state, created_at, creator, record_input)"
                      " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'opening', $10, $11, $12)",
                      12, v, &r);
    PQclear(r.res);
    if (dbp_state_is(r.state, "23503"))
        rc = db_fail(db, AL_E_NOENT, "no sandbox %s", sp->sandbox_id);
    else if (dbp_state_is(r.state, "23505") && strcmp(r.constraint, "terminals_pkey") == 0)
        rc = db_fail(db, AL_E_EXISTS, "terminal %s already exists", id);
    else if (dbp_state_is(r.state, "23505"))
        rc = db_fail(db, AL_E_EXISTS, "channel %lu is in use on sandbox %s",
                     (unsigned long)sp->channel, sp->sandbox_id);
    return rc;
}

static int dbp_terminal_get(struct db *db, const char *id, struct db_terminal *out)
{
    const char *const v[] = {id};
    bool found = false;
    int rc = dbp_one(db, "get terminal", "SELECT " DB_TERM_COLS " FROM terminals WHERE id = $1", 1,
                     v, db_row_one_terminal, out, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no terminal %s", id);
    return rc;
}

static int dbp_terminal_list(struct db *db, const char *sandbox_id, db_terminal_cb cb, void *ctx)
{
    struct db_row_list l = {.cb.terminal = cb, .ctx = ctx};
    const char *const v[] = {sandbox_id};
    int rc = db_row_list_start(db, &l, sizeof(struct db_terminal)); /* argv and env buffers */
    if (rc == AL_OK)
        rc = dbp_list(db, "list terminals",
                      "SELECT " DB_TERM_COLS " FROM terminals"
                      " WHERE $1::text IS NULL OR sandbox_id = $1 ORDER BY created_at, seq",
                      1, v, db_row_list_terminal, &l);
    db_row_list_end(&l);
    return rc;
}

/* After a compare-and-set matched no row: gone, or changed meanwhile. */
static int dbp_cas_missed(struct db *db, const char *id)
{
    const char *const v[] = {id};
    struct dbp_res r;
    int rc =
        dbp_exec(db, "find terminal", "SELECT count(*) FROM terminals WHERE id = $1", 1, v, &r);
    int64_t n = 0;
    if (rc == AL_OK)
        rc = dbp_col_i64(db, r.res, 0, 0, 0, INT64_MAX, NULL, &n);
    PQclear(r.res);
    if (rc != AL_OK)
        return rc;
    if (n == 0)
        return db_fail(db, AL_E_NOENT, "no terminal %s", id);
    return db_fail(db, AL_E_STATE, "terminal %s changed meanwhile; read it again", id);
}

/* A compare-and-set statement: one row changed, or why not. */
static int dbp_cas(struct db *db, const char *what, const char *id, const char *sql, int n,
                   const char *const *params)
{
    struct dbp_res r;
    int rc = dbp_exec(db, what, sql, n, params, &r);
    bool changed = rc == AL_OK && dbp_one_changed(r.res);
    PQclear(r.res);
    return rc == AL_OK && !changed ? dbp_cas_missed(db, id) : rc;
}

static bool dbp_final(enum db_term_state s)
{
    return s == DB_TERM_EXITED || s == DB_TERM_CLOSED || s == DB_TERM_LOST;
}

/* The condition of a fenced write to terminals, its fence as $N: none
 * (N < 0), or the fence of the terminal's sandbox. FOR SHARE: under READ
 * COMMITTED a plain subquery reads the snapshot of the statement's start,
 * so a write could land just after another replica's take-over committed;
 * the row lock waits for a take-over in progress and then reads the row as
 * it committed (and a take-over waits for a write that locked it first). */
#define DBP_TERM_FENCE(n)                                                                          \
    " AND ($" #n "::bigint < 0 OR EXISTS (SELECT 1 FROM sandboxes s"                               \
    " WHERE s.id = terminals.sandbox_id AND s.fence = $" #n "::bigint FOR SHARE))"

static int dbp_terminal_cas_state(struct db *db, const char *id, enum db_term_state from,
                                  enum db_term_state to, int64_t now, int64_t fence)
{
    char at[DBP_INT_TEXT], f[DBP_INT_TEXT];
    dbp_i64_text(at, sizeof at, now);
    dbp_i64_text(f, sizeof f, fence);
    const char *const v[] = {id, db_term_state_name(from),         db_term_state_name(to),
                             at, dbp_final(to) ? "true" : "false", f};
    return dbp_cas(db, "set terminal state", id,
                   "UPDATE terminals SET state = $3, ended_at = CASE WHEN $5::boolean"
                   " THEN coalesce(ended_at, $4::bigint) ELSE ended_at END"
                   " WHERE id = $1 AND state = $2" DBP_TERM_FENCE(6),
                   6, v);
}

static int dbp_terminal_cas_exit(struct db *db, const char *id, enum db_term_state from, int code,
                                 int signo, int64_t now, int64_t fence)
{
    char c[DBP_INT_TEXT], s[DBP_INT_TEXT], at[DBP_INT_TEXT], f[DBP_INT_TEXT];
    dbp_i64_text(c, sizeof c, code);
    dbp_i64_text(s, sizeof s, signo);
    dbp_i64_text(at, sizeof at, now);
    dbp_i64_text(f, sizeof f, fence);
    const char *const v[] = {id, db_term_state_name(from), c, s, at, f};
    return dbp_cas(
        db, "set terminal exit", id,
        "UPDATE terminals SET state = 'exited', exit_code = $3, exit_signal = $4,"
        " ended_at = coalesce(ended_at, $5) WHERE id = $1 AND state = $2" DBP_TERM_FENCE(6),
        6, v);
}

static int dbp_terminal_fence(struct db *db, const char *id, int64_t *fence)
{
    const char *const v[] = {id};
    bool found = false;
    int rc = dbp_one(db, "read fence",
                     "SELECT s.fence FROM terminals t JOIN sandboxes s ON s.id = t.sandbox_id"
                     " WHERE t.id = $1",
                     1, v, db_row_one_fence, fence, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no terminal %s", id);
    return rc;
}

/* After an offsets update matched no row: gone, or a value would shrink. */
static int dbp_offsets_missed(struct db *db, const char *id)
{
    const char *const v[] = {id};
    struct dbp_res r;
    int rc = dbp_exec(db, "read offsets",
                      "SELECT out_offset, err_offset, rec_bytes, coalesce(rec_time_us, -1)"
                      " FROM terminals WHERE id = $1",
                      1, v, &r);
    if (rc == AL_OK && PQntuples(r.res) == 0)
        rc = db_fail(db, AL_E_NOENT, "no terminal %s", id);
    else if (rc == AL_OK)
        rc = db_fail(db, AL_E_STATE,
                     "offsets of terminal %s may not go backwards (stored: out %s, err %s, "
                     "recording %s bytes, time %s us)",
                     id, PQgetvalue(r.res, 0, 0), PQgetvalue(r.res, 0, 1), PQgetvalue(r.res, 0, 2),
                     PQgetvalue(r.res, 0, 3));
    PQclear(r.res);
    return rc;
}

static int dbp_terminal_set_offsets(struct db *db, const char *id, const struct db_term_offsets *o,
                                    int64_t fence)
{
    /* One statement, one commit, synchronous (see the top of this file). */
    char out[DBP_INT_TEXT], e[DBP_INT_TEXT], rb[DBP_INT_TEXT], tu[DBP_INT_TEXT], f[DBP_INT_TEXT];
    dbp_i64_text(f, sizeof f, fence);
    dbp_i64_text(out, sizeof out, (int64_t)o->out_offset);
    dbp_i64_text(e, sizeof e, (int64_t)o->err_offset);
    dbp_i64_text(rb, sizeof rb, (int64_t)o->rec_bytes);
    dbp_i64_text(tu, sizeof tu, o->rec_time_us);
    const char *const v[] = {
        id, out, e, rb, o->rec_time_us >= 0 ? tu : NULL, o->rec_exited ? "true" : "false", f};
    struct dbp_res r;
    int rc = dbp_exec(
        db, "set offsets",
        "UPDATE terminals SET out_offset = $2, err_offset = $3, rec_bytes = $4,"
        " rec_time_us = $5, rec_exited = $6"
        " WHERE id = $1 AND out_offset <= $2 AND err_offset <= $3"
        " AND rec_bytes <= $4"
        " AND ($5::bigint IS NULL OR rec_time_us IS NULL OR rec_time_us <= $5)" DBP_TERM_FENCE(7),
        7, v, &r);
    bool changed = rc == AL_OK && dbp_one_changed(r.res);
    PQclear(r.res);
    return rc == AL_OK && !changed ? dbp_offsets_missed(db, id) : rc;
}

static int dbp_terminal_cas_remove(struct db *db, const char *id, enum db_term_state from)
{
    const char *const v[] = {id, db_term_state_name(from)};
    return dbp_cas(db, "remove terminal", id, "DELETE FROM terminals WHERE id = $1 AND state = $2",
                   2, v);
}

/* ---- audit ---------------------------------------------------------------------- */

static int dbp_audit_add(struct db *db, int64_t at, const char *actor, const char *action,
                         const char *target, const char *detail_json, const char *sandbox_id,
                         int64_t fence)
{
    char a[DBP_INT_TEXT], f[DBP_INT_TEXT];
    dbp_i64_text(a, sizeof a, at);
    dbp_i64_text(f, sizeof f, fence);
    const char *const v[] = {a, actor, action, target, detail_json, f, sandbox_id};
    struct dbp_res r;
    int rc = dbp_exec(db, "add audit",
                      "INSERT INTO audit (at, actor, action, target, detail)"
                      " SELECT $1::bigint, $2, $3, $4, $5 WHERE $6::bigint < 0 OR EXISTS"
                      " (SELECT 1 FROM sandboxes WHERE id = $7::text AND fence = $6::bigint"
                      " FOR SHARE)", /* see DBP_TERM_FENCE */
                      7, v, &r);
    if (rc == AL_OK && !dbp_one_changed(r.res))
        rc = db_fail(db, AL_E_PERM, "sandbox %s: gone, or another owner now (our fence %lld)",
                     sandbox_id ? sandbox_id : "", (long long)fence);
    PQclear(r.res);
    return rc;
}

enum {
    DBP_AUDIT_ROW_PARAMS = 5,   /* a batch's row: at, actor, action, target, detail */
    DBP_AUDIT_ROW_SQL_MAX = 64, /* ", ($N::bigint, $N, $N, $N, $N)" for N < 10^6 */
};
#define DBP_AUDIT_INSERT "INSERT INTO audit (at, actor, action, target, detail) VALUES "

/* One statement for the whole batch: one round trip, and one transaction
 * (a statement is atomic). The rows of VALUES take their ids in order. The
 * SQL is our own text, placeholders only: every value is a parameter. */
static int dbp_audit_add_batch(struct db *db, const struct db_audit_row *rows, size_t n)
{
    size_t cap = sizeof DBP_AUDIT_INSERT + n * DBP_AUDIT_ROW_SQL_MAX;
    char *sql = malloc(cap);
    const char **v = malloc(n * DBP_AUDIT_ROW_PARAMS * sizeof *v);
    char(*at)[DBP_INT_TEXT] = malloc(n * sizeof *at);
    if (!sql || !v || !at) {
        free(at);
        free(v);
        free(sql);
        return dbp_fail(db, AL_E_NOMEM, "out of memory");
    }
    int rc = AL_OK;
    size_t o = (size_t)snprintf(sql, cap, "%s", DBP_AUDIT_INSERT);
    for (size_t i = 0; rc == AL_OK && i < n; i++) {
        size_t p = i * DBP_AUDIT_ROW_PARAMS; /* this row's: $p+1 .. $p+5 */
        int w = snprintf(sql + o, cap - o, "%s($%zu::bigint, $%zu, $%zu, $%zu, $%zu)",
                         i ? ", " : "", p + 1, p + 2, p + 3, p + 4, p + 5);
        if (w < 0 || (size_t)w >= cap - o) {
            rc = dbp_fail(db, AL_E_TOOBIG, "add audit rows: query too long");
            break;
        }
        o += (size_t)w;
        dbp_i64_text(at[i], sizeof at[i], rows[i].at);
        v[p] = at[i];
        v[p + 1] = rows[i].actor;
        v[p + 2] = rows[i].action;
        v[p + 3] = rows[i].target;
        v[p + 4] = rows[i].detail_json;
    }
    struct dbp_res r = {0};
    if (rc == AL_OK)
        rc = dbp_exec(db, "add audit rows", sql, (int)(n * DBP_AUDIT_ROW_PARAMS), v, &r);
    char want[DBP_INT_TEXT];
    dbp_i64_text(want, sizeof want, (int64_t)n);
    if (rc == AL_OK && strcmp(PQcmdTuples(r.res), want) != 0)
        rc =
            dbp_fail(db, AL_E_IO, "add audit rows: %s rows stored of %s", PQcmdTuples(r.res), want);
    PQclear(r.res);
    free(at);
    free(v);
    free(sql);
    return rc;
}

static int dbp_audit_query(struct db *db, const struct db_audit_filter *f, db_audit_cb cb,
                           void *ctx)
{
    struct db_row_list l = {.cb.audit = cb, .ctx = ctx};
    int rc = db_row_list_start(db, &l, sizeof(struct db_audit));
    if (rc != AL_OK)
        return rc;
    char since[DBP_INT_TEXT], limit[DBP_INT_TEXT];
    dbp_i64_text(since, sizeof since, f->since);
    dbp_i64_text(limit, sizeof limit, (int64_t)f->limit);
    const char *const v[] = {since, f->actor, f->action, limit};
    rc = dbp_list(db, "query audit",
                  "SELECT " DB_AUDIT_COLS " FROM audit"
                  " WHERE at >= $1::bigint AND ($2::text IS NULL OR actor = $2)"
                  " AND ($3::text IS NULL OR action = $3)"
                  " ORDER BY at DESC, id DESC LIMIT $4::bigint",
                  4, v, db_row_list_audit, &l);
    db_row_list_end(&l);
    return rc;
}

static int dbp_audit_prune(struct db *db, int64_t before_at, uint64_t keep_rows)
{
    char b[DBP_INT_TEXT], k[DBP_INT_TEXT];
    dbp_i64_text(b, sizeof b, before_at);
    dbp_i64_text(k, sizeof k, (int64_t)keep_rows);
    const char *const v[] = {b, k};
    return dbp_run(db, "prune audit",
                   "DELETE FROM audit WHERE ($1::bigint > 0 AND at < $1::bigint) OR"
                   " ($2::bigint > 0 AND id <= (SELECT id FROM audit ORDER BY id DESC"
                   " LIMIT 1 OFFSET $2::bigint))",
                   2, v);
}

/* ---- web sessions ------------------------------------------------------------ */

static int dbp_session_add(struct db *db, const char *id_sha256, const char *csrf_sha256,
                           const char *user, int64_t now, int64_t expires_at, unsigned max)
{
    char at[DBP_INT_TEXT], until[DBP_INT_TEXT], lim[DBP_INT_TEXT];
    dbp_i64_text(at, sizeof at, now);
    dbp_i64_text(until, sizeof until, expires_at);
    dbp_i64_text(lim, sizeof lim, (int64_t)max);
    const char *const v[] = {id_sha256, csrf_sha256, user, at, until, lim};
    struct dbp_res r;
    /* one statement, as in SQLite; two sign-ins racing may both pass the
     * count under READ COMMITTED, which overshoots the limit by one at most */
    int rc = dbp_exec(db, "add session",
                      "INSERT INTO sessions (id_sha256, csrf_sha256, user_name, created_at,"
                      " last_seen, expires_at) SELECT $1, $2, $3, $4::bigint, $4::bigint,"
                      " $5::bigint WHERE (SELECT count(*) FROM sessions WHERE user_name = $3)"
                      " < $6::bigint",
                      6, v, &r);
    if (rc == AL_OK && !dbp_one_changed(r.res))
        rc = db_fail(db, AL_E_LIMIT, "user %s has %u sessions already", user, max);
    PQclear(r.res);
    if (dbp_state_is(r.state, "23503"))
        rc = db_fail(db, AL_E_NOENT, "no user named %s", user);
    else if (dbp_state_is(r.state, "23505"))
        rc = db_fail(db, AL_E_EXISTS, "session collision; try again");
    return rc;
}

static int dbp_session_get(struct db *db, const char *id_sha256, struct db_session *out,
                           char *csrf_hex)
{
    const char *const v[] = {id_sha256};
    struct db_row_session_out o = {.s = out, .csrf_hex = csrf_hex};
    bool found = false;
    int rc = dbp_one(db, "find session",
                     "SELECT " DB_SESSION_COLS " FROM sessions s"
                     " JOIN users u ON u.name = s.user_name WHERE s.id_sha256 = $1",
                     1, v, db_row_one_session, &o, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no such session");
    return rc;
}

/* UPDATE or DELETE of one session row: AL_E_NOENT when it is gone. */
static int dbp_session_one(struct db *db, const char *what, const char *sql, int n,
                           const char *const *v)
{
    struct dbp_res r;
    int rc = dbp_exec(db, what, sql, n, v, &r);
    if (rc == AL_OK && !dbp_one_changed(r.res))
        rc = db_fail(db, AL_E_NOENT, "no such session");
    PQclear(r.res);
    return rc;
}

static int dbp_session_touch(struct db *db, const char *id_sha256, int64_t now)
{
    char at[DBP_INT_TEXT];
    dbp_i64_text(at, sizeof at, now);
    const char *const v[] = {id_sha256, at};
    return dbp_session_one(
        db, "use session",
        "UPDATE sessions SET last_seen = greatest(last_seen, $2::bigint) WHERE id_sha256 = $1", 2,
        v);
}

static int dbp_session_remove(struct db *db, const char *id_sha256)
{
    const char *const v[] = {id_sha256};
    return dbp_session_one(db, "remove session", "DELETE FROM sessions WHERE id_sha256 = $1", 1, v);
}

static int dbp_session_expire(struct db *db, int64_t now, int64_t idle_ms)
{
    char at[DBP_INT_TEXT], idle[DBP_INT_TEXT];
    dbp_i64_text(at, sizeof at, now);
    dbp_i64_text(idle, sizeof idle, idle_ms);
    const char *const v[] = {at, idle};
    return dbp_run(db, "expire sessions",
                   "DELETE FROM sessions WHERE expires_at <= $1::bigint"
                   " OR ($2::bigint > 0 AND last_seen <= $1::bigint - $2::bigint)",
                   2, v);
}

/* ---- proxy credentials ---------------------------------------------------------- */

static int dbp_proxy_add(struct db *db, const char *hash_hex, const char *terminal_id,
                         const char *upstreams, int64_t now)
{
    char at[DBP_INT_TEXT];
    dbp_i64_text(at, sizeof at, now);
    const char *const v[] = {hash_hex, terminal_id, upstreams, at};
    struct dbp_res r;
    int rc = dbp_exec(db, "add proxy credential",
                      "INSERT INTO proxy_credentials (hash_sha256, terminal_id, upstreams,"
                      " revoked, created_at) VALUES ($1, $2, $3, false, $4::bigint)",
                      4, v, &r);
    PQclear(r.res);
    if (dbp_state_is(r.state, "23503"))
        rc = db_fail(db, AL_E_NOENT, "no terminal %s", terminal_id);
    else if (dbp_state_is(r.state, "23505"))
        rc = db_fail(db, AL_E_EXISTS, "proxy credential collision; try again");
    return rc;
}

static int dbp_proxy_get(struct db *db, const char *hash_hex, struct db_proxy *out,
                         enum db_term_state *term_state)
{
    const char *const v[] = {hash_hex};
    struct db_row_proxy_out o = {.p = out, .term_state = term_state};
    bool found = false;
    int rc = dbp_one(db, "find proxy credential",
                     "SELECT " DB_PROXY_COLS " FROM proxy_credentials p"
                     " JOIN terminals t ON t.id = p.terminal_id WHERE p.hash_sha256 = $1",
                     1, v, db_row_one_proxy, &o, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no such proxy credential");
    return rc;
}

static int dbp_proxy_revoke_terminal(struct db *db, const char *terminal_id, int64_t now)
{
    char at[DBP_INT_TEXT];
    dbp_i64_text(at, sizeof at, now);
    const char *const v[] = {terminal_id, at};
    return dbp_run(db, "revoke proxy credentials",
                   "UPDATE proxy_credentials SET revoked = true, revoked_at = $2::bigint"
                   " WHERE terminal_id = $1 AND NOT revoked",
                   2, v);
}

static int dbp_proxy_revoke_ended(struct db *db, int64_t now)
{
    char at[DBP_INT_TEXT];
    dbp_i64_text(at, sizeof at, now);
    const char *const v[] = {at};
    return dbp_run(db, "revoke proxy credentials",
                   "UPDATE proxy_credentials SET revoked = true, revoked_at = $1::bigint"
                   " WHERE NOT revoked AND terminal_id IN (SELECT id FROM terminals"
                   " WHERE state NOT IN ('opening', 'running'))",
                   1, v);
}

static int dbp_proxy_of_terminal(struct db *db, const char *terminal_id, struct db_proxy *out)
{
    const char *const v[] = {terminal_id};
    enum db_term_state st = DB_TERM_OPENING;
    struct db_row_proxy_out o = {.p = out, .term_state = &st};
    bool found = false;
    int rc = dbp_one(db, "find proxy credential",
                     "SELECT " DB_PROXY_COLS " FROM proxy_credentials p"
                     " JOIN terminals t ON t.id = p.terminal_id WHERE p.terminal_id = $1"
                     " ORDER BY p.created_at DESC, p.hash_sha256 DESC LIMIT 1",
                     1, v, db_row_one_proxy, &o, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "terminal %s has no proxy credential", terminal_id);
    return rc;
}

/* ---- replicas ------------------------------------------------------------------ */

/* The database's clock in Unix ms: every replica reads the same one. */
#define DBP_NOW_MS "(extract(epoch FROM now()) * 1000)::bigint"

static int dbp_replica_beat(struct db *db, const char *id, const char *address)
{
    const char *const v[] = {id, address};
    return dbp_run(
        db, "replica heartbeat",
        "INSERT INTO replicas (id, address, started_at, beat_at) VALUES ($1, $2, " DBP_NOW_MS
        ", " DBP_NOW_MS ") ON CONFLICT (id) DO UPDATE SET"
        " address = EXCLUDED.address,"
        " beat_at = greatest(replicas.beat_at, EXCLUDED.beat_at)",
        2, v);
}

static int dbp_replica_stop(struct db *db, const char *id)
{
    const char *const v[] = {id};
    struct dbp_res r;
    int rc = dbp_exec(db, "replica stop",
                      "UPDATE replicas SET stopped_at = " DBP_NOW_MS " WHERE id = $1", 1, v, &r);
    if (rc == AL_OK && !dbp_one_changed(r.res))
        rc = db_fail(db, AL_E_NOENT, "no replica %s", id);
    PQclear(r.res);
    return rc;
}

static int dbp_replica_list(struct db *db, int64_t stale_ms, db_replica_cb cb, void *ctx)
{
    char stale[DBP_INT_TEXT], lim[DBP_INT_TEXT];
    dbp_i64_text(stale, sizeof stale, stale_ms);
    dbp_i64_text(lim, sizeof lim, DB_REPLICAS_LIST_MAX);
    const char *const v[] = {stale, lim};
    struct db_row_list l = {.cb.replica = cb, .ctx = ctx};
    return dbp_list(db, "list replicas",
                    "SELECT id, address, started_at, beat_at, stopped_at,"
                    " (stopped_at IS NULL AND beat_at > " DBP_NOW_MS " - $1::bigint) AS alive"
                    " FROM replicas ORDER BY started_at, id COLLATE \"C\" LIMIT $2::bigint",
                    2, v, db_row_list_replica, &l);
}

static int dbp_replica_set_jwks(struct db *db, const char *id, const char *jwks)
{
    const char *const v[] = {id, jwks};
    struct dbp_res r;
    int rc = dbp_exec(db, "publish replica keys", "UPDATE replicas SET jwks = $2 WHERE id = $1", 2,
                      v, &r);
    if (rc == AL_OK && !dbp_one_changed(r.res))
        rc = db_fail(db, AL_E_NOENT, "no replica %s", id);
    PQclear(r.res);
    return rc;
}

static int dbp_replica_jwks_list(struct db *db, db_replica_jwks_cb cb, void *ctx)
{
    char lim[DBP_INT_TEXT];
    dbp_i64_text(lim, sizeof lim, DB_REPLICAS_LIST_MAX);
    const char *const v[] = {lim};
    struct db_row_list l = {.cb.jwks = cb, .ctx = ctx};
    int rc = db_row_list_start(db, &l, DB_REPLICA_JWKS_MAX + 1);
    if (rc == AL_OK)
        rc = dbp_list(db, "list replica keys",
                      "SELECT id, jwks FROM replicas WHERE jwks IS NOT NULL"
                      " ORDER BY started_at, id COLLATE \"C\" LIMIT $1::bigint",
                      1, v, db_row_list_jwks, &l);
    db_row_list_end(&l);
    return rc;
}

static int dbp_replica_prune(struct db *db, int64_t keep_ms)
{
    char keep[DBP_INT_TEXT];
    dbp_i64_text(keep, sizeof keep, keep_ms);
    const char *const v[] = {keep};
    return dbp_run(db, "forget replicas",
                   "DELETE FROM replicas WHERE beat_at < " DBP_NOW_MS " - $1::bigint", 1, v);
}

/* ---- leases -------------------------------------------------------------------- */

/* As DBS_LEASE_FREE (db_sqlite_tables.c): free, expired, held by a
 * replica not alive or superseded at its address, or ours. */
#define DBP_LEASE_FREE                                                                             \
    "(owner IS NULL OR owner = $2 OR lease_until <= " DBP_NOW_MS " OR NOT EXISTS"                  \
    " (SELECT 1 FROM replicas r WHERE r.id = sandboxes.owner AND r.stopped_at IS NULL"             \
    " AND r.beat_at > " DBP_NOW_MS " - $3::bigint AND NOT EXISTS (SELECT 1 FROM replicas n"        \
    " WHERE n.address = r.address AND n.id <> r.id AND n.started_at > r.started_at)))"

static int dbp_lease_take(struct db *db, const char *sandbox_id, const char *replica_id,
                          int64_t stale_ms, int64_t lease_ms, int64_t *fence)
{
    char st[DBP_INT_TEXT], ls[DBP_INT_TEXT];
    dbp_i64_text(st, sizeof st, stale_ms);
    dbp_i64_text(ls, sizeof ls, lease_ms);
    const char *const v[] = {sandbox_id, replica_id, st, ls};
    bool found = false;
    int rc = dbp_one(db, "take lease",
                     "UPDATE sandboxes SET fence = CASE WHEN owner IS NOT DISTINCT FROM $2::text"
                     " THEN fence ELSE fence + 1 END, owner = $2,"
                     " lease_until = " DBP_NOW_MS " + $4::bigint"
                     " WHERE id = $1 AND " DBP_LEASE_FREE " RETURNING fence",
                     4, v, db_row_one_fence, fence, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_STATE, "sandbox %s: its lease is held", sandbox_id);
    return rc;
}

static int dbp_lease_take_free(struct db *db, const char *replica_id, int64_t stale_ms,
                               int64_t lease_ms, db_lease_cb cb, void *ctx)
{
    char st[DBP_INT_TEXT], ls[DBP_INT_TEXT];
    dbp_i64_text(st, sizeof st, stale_ms);
    dbp_i64_text(ls, sizeof ls, lease_ms);
    const char *const v[] = {NULL, replica_id, st, ls};
    struct dbp_res r;
    int rc =
        dbp_exec(db, "take free leases",
                 "UPDATE sandboxes SET fence = fence + 1, owner = $2::text,"
                 " lease_until = " DBP_NOW_MS " + $4::bigint"
                 " WHERE $1::text IS NULL AND owner IS DISTINCT FROM $2::text AND " DBP_LEASE_FREE
                 " RETURNING id, fence",
                 4, v, &r);
    struct db_row_lease l = {cb, ctx};
    if (rc == AL_OK)
        rc = dbp_rows(db, r.res, db_row_list_lease, &l);
    PQclear(r.res);
    return rc;
}

static int dbp_lease_move(struct db *db, const char *sandbox_id, const char *replica_id,
                          int64_t lease_ms, int64_t *fence)
{
    char ls[DBP_INT_TEXT];
    dbp_i64_text(ls, sizeof ls, lease_ms);
    const char *const v[] = {sandbox_id, replica_id, ls};
    bool found = false;
    int rc = dbp_one(db, "move lease",
                     "UPDATE sandboxes SET fence = CASE WHEN owner IS NOT DISTINCT FROM $2::text"
                     " THEN fence ELSE fence + 1 END, owner = $2,"
                     " lease_until = " DBP_NOW_MS " + $3::bigint WHERE id = $1 RETURNING fence",
                     3, v, db_row_one_fence, fence, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no sandbox %s", sandbox_id);
    return rc;
}

/* One UPDATE ... RETURNING (not a cursor's listing: a cursor only
 * selects); its rows are as many as the leases held. */
static int dbp_lease_renew(struct db *db, const char *replica_id, int64_t lease_ms, db_lease_cb cb,
                           void *ctx)
{
    char ls[DBP_INT_TEXT];
    dbp_i64_text(ls, sizeof ls, lease_ms);
    const char *const v[] = {replica_id, ls};
    struct dbp_res r;
    int rc = dbp_exec(db, "renew leases",
                      "UPDATE sandboxes SET lease_until = " DBP_NOW_MS " + $2::bigint"
                      " WHERE owner = $1 RETURNING id, fence",
                      2, v, &r);
    struct db_row_lease l = {cb, ctx};
    if (rc == AL_OK)
        rc = dbp_rows(db, r.res, db_row_list_lease, &l);
    PQclear(r.res);
    return rc;
}

static int dbp_lease_release(struct db *db, const char *replica_id)
{
    const char *const v[] = {replica_id};
    return dbp_run(db, "release leases",
                   "UPDATE sandboxes SET owner = NULL, lease_until = NULL WHERE owner = $1", 1, v);
}

/* ---- runner keys --------------------------------------------------------------- */

static int dbp_runner_key_pin(struct db *db, const char *sandbox_id, const char *hash, char *pinned)
{
    const char *const v[] = {sandbox_id, hash};
    bool found = false;
    int rc = dbp_one(db, "pin runner key",
                     "UPDATE sandboxes SET runner_key = coalesce(runner_key, $2) WHERE id = $1"
                     " RETURNING runner_key",
                     2, v, db_row_one_hash, pinned, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no sandbox %s", sandbox_id);
    return rc;
}

static int dbp_runner_key_set(struct db *db, const char *sandbox_id, const char *hash,
                              int64_t fence)
{
    char f[DBP_INT_TEXT];
    dbp_i64_text(f, sizeof f, fence);
    const char *const v[] = {sandbox_id, hash, f};
    struct dbp_res r;
    int rc = dbp_exec(db, "set runner key",
                      "UPDATE sandboxes SET runner_key = $2 WHERE id = $1"
                      " AND ($3::bigint < 0 OR fence = $3::bigint)",
                      3, v, &r);
    if (rc == AL_OK && !dbp_one_changed(r.res))
        rc = fence >= 0
                 ? db_fail(db, AL_E_PERM, "sandbox %s: gone, or another owner now (our fence %lld)",
                           sandbox_id, (long long)fence)
                 : db_fail(db, AL_E_NOENT, "no sandbox %s", sandbox_id);
    PQclear(r.res);
    return rc;
}

const struct db_backend db_pg_backend = {
    .scheme = "postgres",
    .open = dbp_open,
    .close = dbp_close,
    .user_add = dbp_user_add,
    .user_by_hash = dbp_user_by_hash,
    .user_list = dbp_user_list,
    .user_remove = dbp_user_remove,
    .sandbox_add = dbp_sandbox_add,
    .sandbox_get = dbp_sandbox_get,
    .sandbox_list = dbp_sandbox_list,
    .sandbox_set_link = dbp_sandbox_set_link,
    .sandbox_set_record_input = dbp_sandbox_set_record_input,
    .sandbox_remove = dbp_sandbox_remove,
    .terminal_add = dbp_terminal_add,
    .terminal_get = dbp_terminal_get,
    .terminal_list = dbp_terminal_list,
    .terminal_cas_state = dbp_terminal_cas_state,
    .terminal_cas_exit = dbp_terminal_cas_exit,
    .terminal_set_offsets = dbp_terminal_set_offsets,
    .terminal_cas_remove = dbp_terminal_cas_remove,
    .terminal_fence = dbp_terminal_fence,
    .session_add = dbp_session_add,
    .session_get = dbp_session_get,
    .session_touch = dbp_session_touch,
    .session_remove = dbp_session_remove,
    .session_expire = dbp_session_expire,
    .proxy_add = dbp_proxy_add,
    .proxy_get = dbp_proxy_get,
    .proxy_revoke_terminal = dbp_proxy_revoke_terminal,
    .proxy_revoke_ended = dbp_proxy_revoke_ended,
    .proxy_of_terminal = dbp_proxy_of_terminal,
    .replica_beat = dbp_replica_beat,
    .replica_stop = dbp_replica_stop,
    .replica_list = dbp_replica_list,
    .replica_prune = dbp_replica_prune,
    .replica_set_jwks = dbp_replica_set_jwks,
    .replica_jwks_list = dbp_replica_jwks_list,
    .lease_take = dbp_lease_take,
    .lease_take_free = dbp_lease_take_free,
    .lease_move = dbp_lease_move,
    .lease_renew = dbp_lease_renew,
    .lease_release = dbp_lease_release,
    .runner_key_pin = dbp_runner_key_pin,
    .runner_key_set = dbp_runner_key_set,
    .audit_add = dbp_audit_add,
    .audit_add_batch = dbp_audit_add_batch,
    .audit_query = dbp_audit_query,
    .audit_prune = dbp_audit_prune,
};
