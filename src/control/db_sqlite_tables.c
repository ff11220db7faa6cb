/*
 * db_sqlite_tables: the SQLite backend's calls (db_backend.h), table by
 * table: users, sandboxes, terminals, audit, web sessions, proxy
 * credentials; and its
 * function table, db_sqlite_backend. Each call is one statement with its
 * parameters (db_sqlite_stmt.c) whose SQLite constraint, if one fails, is
 * told apart by its extended result code (SQLITE_CONSTRAINT_PRIMARYKEY,
 * _UNIQUE, _FOREIGNKEY) and reported as db.h's errors. Rows are decoded
 * by db_row.c. Not here: the connection and the schema (db_sqlite.c,
 * db_sqlite_schema.c), the checks of inputs (db_check.c: they were made
 * before any of these runs).
 */
#include "al_err.h"
#include "db.h"
#include "db_backend.h"
#include "db_row.h"
#include "db_sqlite.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- users ---------------------------------------------------------------------- */

static int dbs_user_add(struct db *db, const char *name, enum db_role role, const char *key_sha256,
                        int64_t now)
{
    const struct dbs_arg a[] = {dbs_text(name), dbs_text(db_role_name(role)), dbs_text(key_sha256),
                                dbs_int(now)};
    int raw = SQLITE_OK;
    int rc = dbs_run(
        db, "INSERT INTO users (name, role, key_sha256, created_at) VALUES (?1, ?2, ?3, ?4)", a,
        DBS_NARGS(a), &raw, NULL);
    if (raw == SQLITE_CONSTRAINT_PRIMARYKEY)
        rc = db_fail(db, AL_E_EXISTS, "user %s already exists", name);
    else if (raw == SQLITE_CONSTRAINT_UNIQUE)
        rc = db_fail(db, AL_E_EXISTS, "API key collision; try again");
    return rc;
}

static int dbs_user_by_hash(struct db *db, const char *key_sha256, struct db_user *out)
{
    const struct dbs_arg a[] = {dbs_text(key_sha256)};
    bool found = false;
    int rc = dbs_one(db, "SELECT " DB_USER_COLS " FROM users WHERE key_sha256 = ?1", a,
                     DBS_NARGS(a), db_row_one_user, out, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no user holds this API key");
    return rc;
}

static int dbs_user_list(struct db *db, db_user_cb cb, void *ctx)
{
    struct db_row_list l = {.cb.user = cb, .ctx = ctx};
    return dbs_list(db, "SELECT " DB_USER_COLS " FROM users ORDER BY name", NULL, 0,
                    db_row_list_user, &l);
}

static int dbs_user_remove(struct db *db, const char *name)
{
    const struct dbs_arg a[] = {dbs_text(name)};
    return dbs_change(db, "DELETE FROM users WHERE name = ?1", a, DBS_NARGS(a), "user named", name,
                      NULL);
}

/* ---- sandboxes ---------------------------------------------------------------- */

static int dbs_sandbox_add(struct db *db, const struct db_sandbox_spec *sp, int64_t now)
{
    const struct dbs_arg a[] = {dbs_text(sp->id),
                                dbs_text(db_sandbox_kind_name(sp->kind)),
                                dbs_text(sp->url),
                                dbs_int(now),
                                dbs_int(sp->record_input ? 1 : 0),
                                dbs_text(db_sandbox_network_name(sp->network)),
                                dbs_text(sp->platform),
                                dbs_text(sp->identifier)};
    int raw = SQLITE_OK;
    int rc = dbs_run(db,
                     "INSERT INTO sandboxes (id, kind, url, created_at, link_up, link_since,"
                     " link_rtt_us, record_input, network, platform, identifier)"
                     " VALUES (?1, ?2, ?3, ?4, 0, ?4, -1, ?5, ?6, ?7, ?8)",
                     a, DBS_NARGS(a), &raw, NULL);
    if (raw == SQLITE_CONSTRAINT_PRIMARYKEY)
        rc = db_fail(db, AL_E_EXISTS, "sandbox %s already exists", sp->id);
    else if (raw == SQLITE_CONSTRAINT_UNIQUE)
        rc = db_fail(db, AL_E_EXISTS, "session identifier %s is taken", sp->identifier);
    return rc;
}

static int dbs_sandbox_get(struct db *db, const char *id, struct db_sandbox *out)
{
    const struct dbs_arg a[] = {dbs_text(id)};
    bool found = false;
    int rc = dbs_one(db, "SELECT " DB_SANDBOX_COLS " FROM sandboxes WHERE id = ?1", a, DBS_NARGS(a),
                     db_row_one_sandbox, out, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no sandbox %s", id);
    return rc;
}

static int dbs_sandbox_list(struct db *db, db_sandbox_cb cb, void *ctx)
{
    struct db_row_list l = {.cb.sandbox = cb, .ctx = ctx};
    int rc = db_row_list_start(db, &l, sizeof(struct db_sandbox)); /* the URL buffer is large */
    if (rc == AL_OK)
        rc = dbs_list(db, "SELECT " DB_SANDBOX_COLS " FROM sandboxes ORDER BY id", NULL, 0,
                      db_row_list_sandbox, &l);
    db_row_list_end(&l);
    return rc;
}

static int dbs_sandbox_set_link(struct db *db, const char *id, bool up, int64_t since,
                                int64_t rtt_us, int64_t fence)
{
    const struct dbs_arg a[] = {dbs_text(id), dbs_int(up ? 1 : 0), dbs_int(since), dbs_int(rtt_us),
                                dbs_int(fence)};
    int rc = dbs_change(db,
                        "UPDATE sandboxes SET link_up = ?2, link_since = ?3, link_rtt_us = ?4"
                        " WHERE id = ?1 AND (?5 < 0 OR fence = ?5)",
                        a, DBS_NARGS(a), "sandbox", id, NULL);
    if (rc == AL_E_NOENT && fence >= 0)
        rc = db_fail(db, AL_E_PERM, "sandbox %s: gone, or another owner now (our fence %lld)", id,
                     (long long)fence);
    return rc;
}

static int dbs_sandbox_set_record_input(struct db *db, const char *id, bool on)
{
    const struct dbs_arg a[] = {dbs_text(id), dbs_int(on ? 1 : 0)};
    return dbs_change(db, "UPDATE sandboxes SET record_input = ?2 WHERE id = ?1", a, DBS_NARGS(a),
                      "sandbox", id, NULL);
}

static int dbs_sandbox_remove(struct db *db, const char *id)
{
    const struct dbs_arg a[] = {dbs_text(id)};
    int raw = SQLITE_OK;
    int rc =
        dbs_change(db, "DELETE FROM sandboxes WHERE id = ?1", a, DBS_NARGS(a), "sandbox", id, &raw);
    if (raw == SQLITE_CONSTRAINT_FOREIGNKEY)
        rc = db_fail(db, AL_E_STATE, "sandbox %s still has terminals; remove them first", id);
    return rc;
}

/* ---- terminals -------------------------------------------------------------- */

static int dbs_terminal_add(struct db *db, const char *id, const struct db_terminal_spec *sp,
                            int64_t now)
{
    const struct dbs_arg a[] = {dbs_text(id),
                                dbs_text(sp->sandbox_id),
                                dbs_int(sp->channel),
                                dbs_text(sp->argv_json),
                                dbs_text(sp->cwd),
                                dbs_text(sp->env_json),
                                dbs_int(sp->cols),
                                dbs_int(sp->rows),
                                dbs_text(db_term_mode_name(sp->mode)),
                                dbs_int(now),
                                dbs_text(sp->creator),
                                dbs_int(sp->record_input ? 1 : 0)};
    int raw = SQLITE_OK;
    int rc = dbs_run(db,
                     "INSERT INTO terminals (id, sandbox_id, channel, argv, cwd, env, cols,"
                     " rows, mode, state, created_at, creator, record_input)"
                     " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'opening', ?10, ?11, ?12)",
                     a, DBS_NARGS(a), &raw, NULL);
    if (raw == SQLITE_CONSTRAINT_FOREIGNKEY)
        rc = db_fail(db, AL_E_NOENT, "no sandbox %s", sp->sandbox_id);
    else if (raw == SQLITE_CONSTRAINT_UNIQUE)
        rc = db_fail(db, AL_E_EXISTS, "channel %lu is in use on sandbox %s",
                     (unsigned long)sp->channel, sp->sandbox_id);
    else if (raw == SQLITE_CONSTRAINT_PRIMARYKEY)
        rc = db_fail(db, AL_E_EXISTS, "terminal %s already exists", id);
    return rc;
}

static int dbs_terminal_get(struct db *db, const char *id, struct db_terminal *out)
{
    const struct dbs_arg a[] = {dbs_text(id)};
    bool found = false;
    int rc = dbs_one(db, "SELECT " DB_TERM_COLS " FROM terminals WHERE id = ?1", a, DBS_NARGS(a),
                     db_row_one_terminal, out, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no terminal %s", id);
    return rc;
}

static int dbs_terminal_list(struct db *db, const char *sandbox_id, db_terminal_cb cb, void *ctx)
{
    struct db_row_list l = {.cb.terminal = cb, .ctx = ctx};
    const struct dbs_arg a[] = {dbs_text(sandbox_id)};
    int rc = db_row_list_start(db, &l, sizeof(struct db_terminal)); /* argv and env buffers */
    if (rc == AL_OK)
        rc = dbs_list(db,
                      "SELECT " DB_TERM_COLS " FROM terminals"
                      " WHERE ?1 IS NULL OR sandbox_id = ?1 ORDER BY created_at, rowid",
                      a, DBS_NARGS(a), db_row_list_terminal, &l);
    db_row_list_end(&l);
    return rc;
}

static int dbs_get_count(const struct db_row *r, void *out)
{
    return r->ops->i64(r, 0, 0, INT64_MAX, NULL, out);
}

/* After a compare-and-set matched no row: gone, or changed meanwhile. */
static int dbs_cas_missed(struct db *db, const char *id)
{
    const struct dbs_arg a[] = {dbs_text(id)};
    int64_t n = 0;
    bool found = false;
    int rc = dbs_one(db, "SELECT count(*) FROM terminals WHERE id = ?1", a, DBS_NARGS(a),
                     dbs_get_count, &n, &found);
    if (rc != AL_OK)
        return rc;
    if (n == 0)
        return db_fail(db, AL_E_NOENT, "no terminal %s", id);
    return db_fail(db, AL_E_STATE, "terminal %s changed meanwhile; read it again", id);
}

/* A compare-and-set statement: one row changed, or why not. */
static int dbs_cas(struct db *db, const char *id, const char *sql, const struct dbs_arg *a, int n)
{
    bool one = false;
    int rc = dbs_run(db, sql, a, n, NULL, &one);
    return rc == AL_OK && !one ? dbs_cas_missed(db, id) : rc;
}

static bool dbs_final(enum db_term_state s)
{
    return s == DB_TERM_EXITED || s == DB_TERM_CLOSED || s == DB_TERM_LOST;
}

/* The condition of a fenced write to terminals, its fence as ?N: none
 * (N < 0), or the fence of the terminal's sandbox. */
#define DBS_TERM_FENCE(n)                                                                          \
    " AND (?" #n " < 0 OR EXISTS (SELECT 1 FROM sandboxes s"                                       \
    " WHERE s.id = terminals.sandbox_id AND s.fence = ?" #n "))"

static int dbs_terminal_cas_state(struct db *db, const char *id, enum db_term_state from,
                                  enum db_term_state to, int64_t now, int64_t fence)
{
    const struct dbs_arg a[] = {
        dbs_text(id), dbs_text(db_term_state_name(from)), dbs_text(db_term_state_name(to)),
        dbs_int(now), dbs_int(dbs_final(to) ? 1 : 0),     dbs_int(fence)};
    return dbs_cas(db, id,
                   "UPDATE terminals SET state = ?3,"
                   " ended_at = CASE WHEN ?5 THEN coalesce(ended_at, ?4) ELSE ended_at END"
                   " WHERE id = ?1 AND state = ?2" DBS_TERM_FENCE(6),
                   a, DBS_NARGS(a));
}

static int dbs_terminal_cas_exit(struct db *db, const char *id, enum db_term_state from, int code,
                                 int signo, int64_t now, int64_t fence)
{
    const struct dbs_arg a[] = {dbs_text(id),  dbs_text(db_term_state_name(from)),
                                dbs_int(code), dbs_int(signo),
                                dbs_int(now),  dbs_int(fence)};
    return dbs_cas(db, id,
                   "UPDATE terminals SET state = 'exited', exit_code = ?3,"
                   " exit_signal = ?4, ended_at = coalesce(ended_at, ?5)"
                   " WHERE id = ?1 AND state = ?2" DBS_TERM_FENCE(6),
                   a, DBS_NARGS(a));
}

static int dbs_terminal_fence(struct db *db, const char *id, int64_t *fence)
{
    const struct dbs_arg a[] = {dbs_text(id)};
    bool found = false;
    int rc = dbs_one(db,
                     "SELECT s.fence FROM terminals t JOIN sandboxes s ON s.id = t.sandbox_id"
                     " WHERE t.id = ?1",
                     a, DBS_NARGS(a), db_row_one_fence, fence, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no terminal %s", id);
    return rc;
}

/* The stored offsets, as the message of a refused update: out, err, rec,
 * the recording's time (-1: not stored). */
static int dbs_get_offsets(const struct db_row *r, void *out)
{
    int64_t *v = out;
    int rc = AL_OK;
    for (int i = 0; i < 4 && rc == AL_OK; i++)
        rc = r->ops->i64(r, i, INT64_MIN, INT64_MAX, NULL, &v[i]);
    return rc;
}

/* After an offsets update matched no row: gone, or a value would shrink. */
static int dbs_offsets_missed(struct db *db, const char *id)
{
    const struct dbs_arg a[] = {dbs_text(id)};
    int64_t v[4] = {0};
    bool found = false;
    int rc = dbs_one(db,
                     "SELECT out_offset, err_offset, rec_bytes, coalesce(rec_time_us, -1)"
                     " FROM terminals WHERE id = ?1",
                     a, DBS_NARGS(a), dbs_get_offsets, v, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no terminal %s", id);
    else if (rc == AL_OK)
        rc = db_fail(db, AL_E_STATE,
                     "offsets of terminal %s may not go backwards (stored: out %lld, err %lld, "
                     "recording %lld bytes, time %lld us)",
                     id, (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3]);
    return rc;
}

static int dbs_terminal_set_offsets(struct db *db, const char *id, const struct db_term_offsets *o,
                                    int64_t fence)
{
    /* FULL: this one commit is fsync'ed (see the top of db_sqlite.c). */
    int rc = dbs_exec(db, "PRAGMA synchronous = FULL");
    if (rc != AL_OK)
        return rc;
    const struct dbs_arg a[] = {dbs_text(id),
                                dbs_int((int64_t)o->out_offset),
                                dbs_int((int64_t)o->err_offset),
                                dbs_int((int64_t)o->rec_bytes),
                                o->rec_time_us >= 0 ? dbs_int(o->rec_time_us) : dbs_text(NULL),
                                dbs_int(o->rec_exited ? 1 : 0),
                                dbs_int(fence)};
    bool changed = false;
    rc = dbs_run(db,
                 "UPDATE terminals SET out_offset = ?2, err_offset = ?3, rec_bytes = ?4,"
                 " rec_time_us = ?5, rec_exited = ?6"
                 " WHERE id = ?1 AND out_offset <= ?2 AND err_offset <= ?3"
                 " AND rec_bytes <= ?4 AND (?5 IS NULL OR rec_time_us IS NULL OR rec_time_us <= "
                 "?5)" DBS_TERM_FENCE(7),
                 a, DBS_NARGS(a), NULL, &changed);
    if (rc == AL_OK && !changed)
        rc = dbs_offsets_missed(db, id);
    if (rc != AL_OK) {
        char keep[DB_MSG_MAX];
        (void)snprintf(keep, sizeof keep, "%s", db->msg);
        if (dbs_exec(db, "PRAGMA synchronous = NORMAL") == AL_OK)
            (void)snprintf(db->msg, sizeof db->msg, "%s", keep);
        return rc;
    }
    /* The offsets are stored; failing to go back to NORMAL only costs speed,
     * but it is still reported. */
    return dbs_exec(db, "PRAGMA synchronous = NORMAL");
}

static int dbs_terminal_cas_remove(struct db *db, const char *id, enum db_term_state from)
{
    const struct dbs_arg a[] = {dbs_text(id), dbs_text(db_term_state_name(from))};
    return dbs_cas(db, id, "DELETE FROM terminals WHERE id = ?1 AND state = ?2", a, DBS_NARGS(a));
}

/* ---- audit ---------------------------------------------------------------------- */

static int dbs_audit_add(struct db *db, int64_t at, const char *actor, const char *action,
                         const char *target, const char *detail_json, const char *sandbox_id,
                         int64_t fence)
{
    const struct dbs_arg a[] = {dbs_int(at),         dbs_text(actor),       dbs_text(action),
                                dbs_text(target),    dbs_text(detail_json), dbs_int(fence),
                                dbs_text(sandbox_id)};
    bool one = false;
    int rc = dbs_run(db,
                     "INSERT INTO audit (at, actor, action, target, detail)"
                     " SELECT ?1, ?2, ?3, ?4, ?5 WHERE ?6 < 0 OR EXISTS"
                     " (SELECT 1 FROM sandboxes WHERE id = ?7 AND fence = ?6)",
                     a, DBS_NARGS(a), NULL, &one);
    if (rc == AL_OK && !one)
        rc = db_fail(db, AL_E_PERM, "sandbox %s: gone, or another owner now (our fence %lld)",
                     sandbox_id ? sandbox_id : "", (long long)fence);
    return rc;
}

/* One transaction, one statement run once per row: a single commit (one
 * WAL append and, at most, one sync) for the whole batch. */
static int dbs_audit_add_batch(struct db *db, const struct db_audit_row *rows, size_t n)
{
    int rc = dbs_exec(db, "BEGIN IMMEDIATE");
    if (rc != AL_OK)
        return rc;
    sqlite3_stmt *st = NULL;
    rc = dbs_prepare(db,
                     "INSERT INTO audit (at, actor, action, target, detail)"
                     " VALUES (?1, ?2, ?3, ?4, ?5)",
                     &st);
    for (size_t i = 0; rc == AL_OK && i < n; i++) {
        const struct dbs_arg a[] = {dbs_int(rows[i].at), dbs_text(rows[i].actor),
                                    dbs_text(rows[i].action), dbs_text(rows[i].target),
                                    dbs_text(rows[i].detail_json)};
        rc = dbs_rerun(db, st, a, DBS_NARGS(a));
    }
    if (st)
        rc = dbs_finish(db, st, rc);
    if (rc == AL_OK)
        rc = dbs_exec(db, "COMMIT");
    if (rc != AL_OK)
        dbs_rollback(db);
    return rc;
}

static int dbs_audit_query(struct db *db, const struct db_audit_filter *f, db_audit_cb cb,
                           void *ctx)
{
    struct db_row_list l = {.cb.audit = cb, .ctx = ctx};
    const struct dbs_arg a[] = {dbs_int(f->since), dbs_text(f->actor), dbs_text(f->action),
                                dbs_int(f->limit)};
    int rc = db_row_list_start(db, &l, sizeof(struct db_audit));
    if (rc == AL_OK)
        rc = dbs_list(db,
                      "SELECT " DB_AUDIT_COLS " FROM audit"
                      " WHERE at >= ?1 AND (?2 IS NULL OR actor = ?2)"
                      " AND (?3 IS NULL OR action = ?3)"
                      " ORDER BY at DESC, id DESC LIMIT ?4",
                      a, DBS_NARGS(a), db_row_list_audit, &l);
    db_row_list_end(&l);
    return rc;
}

static int dbs_audit_prune(struct db *db, int64_t before_at, uint64_t keep_rows)
{
    const struct dbs_arg a[] = {dbs_int(before_at), dbs_int((int64_t)keep_rows)};
    return dbs_run(db,
                   "DELETE FROM audit WHERE (?1 > 0 AND at < ?1) OR (?2 > 0 AND id <= "
                   "(SELECT id FROM audit ORDER BY id DESC LIMIT 1 OFFSET ?2))",
                   a, DBS_NARGS(a), NULL, NULL);
}

/* ---- web sessions ------------------------------------------------------------ */

static int dbs_session_add(struct db *db, const char *id_sha256, const char *csrf_sha256,
                           const char *user, int64_t now, int64_t expires_at, unsigned max)
{
    const struct dbs_arg a[] = {dbs_text(id_sha256), dbs_text(csrf_sha256), dbs_text(user),
                                dbs_int(now),        dbs_int(expires_at),   dbs_int(max)};
    int raw = SQLITE_OK;
    bool one = false;
    /* one statement: the count and the insert cannot be split by another writer */
    int rc = dbs_run(db,
                     "INSERT INTO sessions (id_sha256, csrf_sha256, user_name, created_at,"
                     " last_seen, expires_at) SELECT ?1, ?2, ?3, ?4, ?4, ?5"
                     " WHERE (SELECT count(*) FROM sessions WHERE user_name = ?3) < ?6",
                     a, DBS_NARGS(a), &raw, &one);
    if (raw == SQLITE_CONSTRAINT_FOREIGNKEY)
        rc = db_fail(db, AL_E_NOENT, "no user named %s", user);
    else if (raw == SQLITE_CONSTRAINT_PRIMARYKEY)
        rc = db_fail(db, AL_E_EXISTS, "session collision; try again");
    else if (rc == AL_OK && !one)
        rc = db_fail(db, AL_E_LIMIT, "user %s has %u sessions already", user, max);
    return rc;
}

static int dbs_session_get(struct db *db, const char *id_sha256, struct db_session *out,
                           char *csrf_hex)
{
    const struct dbs_arg a[] = {dbs_text(id_sha256)};
    struct db_row_session_out o = {.s = out, .csrf_hex = csrf_hex};
    bool found = false;
    int rc = dbs_one(db,
                     "SELECT " DB_SESSION_COLS " FROM sessions s"
                     " JOIN users u ON u.name = s.user_name WHERE s.id_sha256 = ?1",
                     a, DBS_NARGS(a), db_row_one_session, &o, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no such session");
    return rc;
}

static int dbs_session_touch(struct db *db, const char *id_sha256, int64_t now)
{
    const struct dbs_arg a[] = {dbs_text(id_sha256), dbs_int(now)};
    return dbs_change(db, "UPDATE sessions SET last_seen = max(last_seen, ?2) WHERE id_sha256 = ?1",
                      a, DBS_NARGS(a), "session", "(signed out meanwhile)", NULL);
}

static int dbs_session_remove(struct db *db, const char *id_sha256)
{
    const struct dbs_arg a[] = {dbs_text(id_sha256)};
    return dbs_change(db, "DELETE FROM sessions WHERE id_sha256 = ?1", a, DBS_NARGS(a), "session",
                      "to sign out", NULL);
}

static int dbs_session_expire(struct db *db, int64_t now, int64_t idle_ms)
{
    const struct dbs_arg a[] = {dbs_int(now), dbs_int(idle_ms)};
    return dbs_run(db,
                   "DELETE FROM sessions WHERE expires_at <= ?1"
                   " OR (?2 > 0 AND last_seen <= ?1 - ?2)",
                   a, DBS_NARGS(a), NULL, NULL);
}

/* ---- proxy credentials ---------------------------------------------------------- */

static int dbs_proxy_add(struct db *db, const char *hash_hex, const char *terminal_id,
                         const char *upstreams, int64_t now)
{
    const struct dbs_arg a[] = {dbs_text(hash_hex), dbs_text(terminal_id), dbs_text(upstreams),
                                dbs_int(now)};
    int raw = SQLITE_OK;
    int rc = dbs_run(db,
                     "INSERT INTO proxy_credentials (hash_sha256, terminal_id, upstreams,"
                     " revoked, created_at) VALUES (?1, ?2, ?3, 0, ?4)",
                     a, DBS_NARGS(a), &raw, NULL);
    if (raw == SQLITE_CONSTRAINT_FOREIGNKEY)
        rc = db_fail(db, AL_E_NOENT, "no terminal %s", terminal_id);
    else if (raw == SQLITE_CONSTRAINT_PRIMARYKEY)
        rc = db_fail(db, AL_E_EXISTS, "proxy credential collision; try again");
    return rc;
}

static int dbs_proxy_get(struct db *db, const char *hash_hex, struct db_proxy *out,
                         enum db_term_state *term_state)
{
    const struct dbs_arg a[] = {dbs_text(hash_hex)};
    struct db_row_proxy_out o = {.p = out, .term_state = term_state};
    bool found = false;
    int rc = dbs_one(db,
                     "SELECT " DB_PROXY_COLS " FROM proxy_credentials p"
                     " JOIN terminals t ON t.id = p.terminal_id WHERE p.hash_sha256 = ?1",
                     a, DBS_NARGS(a), db_row_one_proxy, &o, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no such proxy credential");
    return rc;
}

static int dbs_proxy_revoke_terminal(struct db *db, const char *terminal_id, int64_t now)
{
    const struct dbs_arg a[] = {dbs_text(terminal_id), dbs_int(now)};
    return dbs_run(db,
                   "UPDATE proxy_credentials SET revoked = 1, revoked_at = ?2"
                   " WHERE terminal_id = ?1 AND revoked = 0",
                   a, DBS_NARGS(a), NULL, NULL);
}

static int dbs_proxy_revoke_ended(struct db *db, int64_t now)
{
    const struct dbs_arg a[] = {dbs_int(now)};
    return dbs_run(db,
                   "UPDATE proxy_credentials SET revoked = 1, revoked_at = ?1"
                   " WHERE revoked = 0 AND terminal_id IN (SELECT id FROM terminals"
                   " WHERE state NOT IN ('opening', 'running'))",
                   a, DBS_NARGS(a), NULL, NULL);
}

static int dbs_proxy_of_terminal(struct db *db, const char *terminal_id, struct db_proxy *out)
{
    const struct dbs_arg a[] = {dbs_text(terminal_id)};
    enum db_term_state st = DB_TERM_OPENING;
    struct db_row_proxy_out o = {.p = out, .term_state = &st};
    bool found = false;
    int rc = dbs_one(db,
                     "SELECT " DB_PROXY_COLS " FROM proxy_credentials p"
                     " JOIN terminals t ON t.id = p.terminal_id WHERE p.terminal_id = ?1"
                     " ORDER BY p.created_at DESC, p.rowid DESC LIMIT 1",
                     a, DBS_NARGS(a), db_row_one_proxy, &o, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "terminal %s has no proxy credential", terminal_id);
    return rc;
}

/* ---- replicas ------------------------------------------------------------------ */

/* The database's clock in Unix ms (SQLite's 'now': this host's, the only
 * one an embedded database has). */
#define DBS_NOW_MS "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"

static int dbs_replica_beat(struct db *db, const char *id, const char *address)
{
    const struct dbs_arg a[] = {dbs_text(id), dbs_text(address)};
    return dbs_run(
        db,
        "INSERT INTO replicas (id, address, started_at, beat_at) VALUES (?1, ?2, " DBS_NOW_MS
        ", " DBS_NOW_MS ") ON CONFLICT (id) DO UPDATE SET"
        " address = excluded.address, beat_at = max(beat_at, excluded.beat_at)",
        a, DBS_NARGS(a), NULL, NULL);
}

static int dbs_replica_stop(struct db *db, const char *id)
{
    const struct dbs_arg a[] = {dbs_text(id)};
    return dbs_change(db, "UPDATE replicas SET stopped_at = " DBS_NOW_MS " WHERE id = ?1", a,
                      DBS_NARGS(a), "replica", id, NULL);
}

static int dbs_replica_list(struct db *db, int64_t stale_ms, db_replica_cb cb, void *ctx)
{
    const struct dbs_arg a[] = {dbs_int(stale_ms), dbs_int(DB_REPLICAS_LIST_MAX)};
    struct db_row_list l = {.cb.replica = cb, .ctx = ctx};
    return dbs_list(db,
                    "SELECT id, address, started_at, beat_at, stopped_at,"
                    " (stopped_at IS NULL AND beat_at > " DBS_NOW_MS " - ?1) AS alive"
                    " FROM replicas ORDER BY started_at, id LIMIT ?2",
                    a, DBS_NARGS(a), db_row_list_replica, &l);
}

static int dbs_replica_prune(struct db *db, int64_t keep_ms)
{
    const struct dbs_arg a[] = {dbs_int(keep_ms)};
    return dbs_run(db, "DELETE FROM replicas WHERE beat_at < " DBS_NOW_MS " - ?1", a, DBS_NARGS(a),
                   NULL, NULL);
}

static int dbs_replica_set_jwks(struct db *db, const char *id, const char *jwks)
{
    const struct dbs_arg a[] = {dbs_text(id), dbs_text(jwks)};
    return dbs_change(db, "UPDATE replicas SET jwks = ?2 WHERE id = ?1", a, DBS_NARGS(a), "replica",
                      id, NULL);
}

static int dbs_replica_jwks_list(struct db *db, db_replica_jwks_cb cb, void *ctx)
{
    const struct dbs_arg a[] = {dbs_int(DB_REPLICAS_LIST_MAX)};
    struct db_row_list l = {.cb.jwks = cb, .ctx = ctx};
    int rc = db_row_list_start(db, &l, DB_REPLICA_JWKS_MAX + 1);
    if (rc == AL_OK)
        rc = dbs_list(db,
                      "SELECT id, jwks FROM replicas WHERE jwks IS NOT NULL"
                      " ORDER BY started_at, id LIMIT ?1",
                      a, DBS_NARGS(a), db_row_list_jwks, &l);
    db_row_list_end(&l);
    return rc;
}

/* ---- leases -------------------------------------------------------------------- */

/* Free, expired, held by a replica not alive (?3: its staleness; or
 * superseded: a replica registered later at its address, which it can no
 * longer be listening at), or ours. */
#define DBS_LEASE_FREE                                                                             \
    "(owner IS NULL OR owner = ?2 OR lease_until <= " DBS_NOW_MS " OR NOT EXISTS"                  \
    " (SELECT 1 FROM replicas r WHERE r.id = sandboxes.owner AND r.stopped_at IS NULL"             \
    " AND r.beat_at > " DBS_NOW_MS " - ?3 AND NOT EXISTS (SELECT 1 FROM replicas n"                \
    " WHERE n.address = r.address AND n.id <> r.id AND n.started_at > r.started_at)))"

static int dbs_lease_take(struct db *db, const char *sandbox_id, const char *replica_id,
                          int64_t stale_ms, int64_t lease_ms, int64_t *fence)
{
    const struct dbs_arg a[] = {dbs_text(sandbox_id), dbs_text(replica_id), dbs_int(stale_ms),
                                dbs_int(lease_ms)};
    bool found = false;
    int rc = dbs_one(db,
                     "UPDATE sandboxes SET fence = CASE WHEN owner IS ?2 THEN fence ELSE fence + 1"
                     " END, owner = ?2, lease_until = " DBS_NOW_MS " + ?4"
                     " WHERE id = ?1 AND " DBS_LEASE_FREE " RETURNING fence",
                     a, DBS_NARGS(a), db_row_one_fence, fence, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_STATE, "sandbox %s: its lease is held", sandbox_id);
    return rc;
}

static int dbs_lease_take_free(struct db *db, const char *replica_id, int64_t stale_ms,
                               int64_t lease_ms, db_lease_cb cb, void *ctx)
{
    const struct dbs_arg a[] = {dbs_text(NULL), dbs_text(replica_id), dbs_int(stale_ms),
                                dbs_int(lease_ms)};
    struct db_row_lease l = {cb, ctx};
    return dbs_list(db,
                    "UPDATE sandboxes SET fence = fence + 1, owner = ?2,"
                    " lease_until = " DBS_NOW_MS " + ?4"
                    " WHERE owner IS NOT ?2 AND " DBS_LEASE_FREE " RETURNING id, fence",
                    a, DBS_NARGS(a), db_row_list_lease, &l);
}

static int dbs_lease_move(struct db *db, const char *sandbox_id, const char *replica_id,
                          int64_t lease_ms, int64_t *fence)
{
    const struct dbs_arg a[] = {dbs_text(sandbox_id), dbs_text(replica_id), dbs_int(lease_ms)};
    bool found = false;
    int rc = dbs_one(db,
                     "UPDATE sandboxes SET fence = CASE WHEN owner IS ?2 THEN fence ELSE fence + 1"
                     " END, owner = ?2, lease_until = " DBS_NOW_MS " + ?3"
                     " WHERE id = ?1 RETURNING fence",
                     a, DBS_NARGS(a), db_row_one_fence, fence, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no sandbox %s", sandbox_id);
    return rc;
}

static int dbs_lease_renew(struct db *db, const char *replica_id, int64_t lease_ms, db_lease_cb cb,
                           void *ctx)
{
    const struct dbs_arg a[] = {dbs_text(replica_id), dbs_int(lease_ms)};
    struct db_row_lease l = {cb, ctx};
    return dbs_list(db,
                    "UPDATE sandboxes SET lease_until = " DBS_NOW_MS " + ?2"
                    " WHERE owner = ?1 RETURNING id, fence",
                    a, DBS_NARGS(a), db_row_list_lease, &l);
}

static int dbs_lease_release(struct db *db, const char *replica_id)
{
    const struct dbs_arg a[] = {dbs_text(replica_id)};
    return dbs_run(db, "UPDATE sandboxes SET owner = NULL, lease_until = NULL WHERE owner = ?1", a,
                   DBS_NARGS(a), NULL, NULL);
}

/* ---- runner keys --------------------------------------------------------------- */

static int dbs_runner_key_pin(struct db *db, const char *sandbox_id, const char *hash, char *pinned)
{
    const struct dbs_arg a[] = {dbs_text(sandbox_id), dbs_text(hash)};
    bool found = false;
    int rc = dbs_one(db,
                     "UPDATE sandboxes SET runner_key = coalesce(runner_key, ?2) WHERE id = ?1"
                     " RETURNING runner_key",
                     a, DBS_NARGS(a), db_row_one_hash, pinned, &found);
    if (rc == AL_OK && !found)
        rc = db_fail(db, AL_E_NOENT, "no sandbox %s", sandbox_id);
    return rc;
}

static int dbs_runner_key_set(struct db *db, const char *sandbox_id, const char *hash,
                              int64_t fence)
{
    const struct dbs_arg a[] = {dbs_text(sandbox_id), dbs_text(hash), dbs_int(fence)};
    int rc = dbs_change(db,
                        "UPDATE sandboxes SET runner_key = ?2 WHERE id = ?1"
                        " AND (?3 < 0 OR fence = ?3)",
                        a, DBS_NARGS(a), "sandbox", sandbox_id, NULL);
    if (rc == AL_E_NOENT && fence >= 0)
        rc = db_fail(db, AL_E_PERM, "sandbox %s: gone, or another owner now (our fence %lld)",
                     sandbox_id, (long long)fence);
    return rc;
}

const struct db_backend db_sqlite_backend = {
    .scheme = "sqlite",
    .open = dbs_open,
    .close = dbs_close,
    .user_add = dbs_user_add,
    .user_by_hash = dbs_user_by_hash,
    .user_list = dbs_user_list,
    .user_remove = dbs_user_remove,
    .sandbox_add = dbs_sandbox_add,
    .sandbox_get = dbs_sandbox_get,
    .sandbox_list = dbs_sandbox_list,
    .sandbox_set_link = dbs_sandbox_set_link,
    .sandbox_set_record_input = dbs_sandbox_set_record_input,
    .sandbox_remove = dbs_sandbox_remove,
    .terminal_add = dbs_terminal_add,
    .terminal_get = dbs_terminal_get,
    .terminal_list = dbs_terminal_list,
    .terminal_cas_state = dbs_terminal_cas_state,
    .terminal_cas_exit = dbs_terminal_cas_exit,
    .terminal_set_offsets = dbs_terminal_set_offsets,
    .terminal_cas_remove = dbs_terminal_cas_remove,
    .terminal_fence = dbs_terminal_fence,
    .session_add = dbs_session_add,
    .session_get = dbs_session_get,
    .session_touch = dbs_session_touch,
    .session_remove = dbs_session_remove,
    .session_expire = dbs_session_expire,
    .proxy_add = dbs_proxy_add,
    .proxy_get = dbs_proxy_get,
    .proxy_revoke_terminal = dbs_proxy_revoke_terminal,
    .proxy_revoke_ended = dbs_proxy_revoke_ended,
    .proxy_of_terminal = dbs_proxy_of_terminal,
    .replica_beat = dbs_replica_beat,
    .replica_stop = dbs_replica_stop,
    .replica_list = dbs_replica_list,
    .replica_prune = dbs_replica_prune,
    .replica_set_jwks = dbs_replica_set_jwks,
    .replica_jwks_list = dbs_replica_jwks_list,
    .lease_take = dbs_lease_take,
    .lease_take_free = dbs_lease_take_free,
    .lease_move = dbs_lease_move,
    .lease_renew = dbs_lease_renew,
    .lease_release = dbs_lease_release,
    .runner_key_pin = dbs_runner_key_pin,
    .runner_key_set = dbs_runner_key_set,
    .audit_add = dbs_audit_add,
    .audit_add_batch = dbs_audit_add_batch,
    .audit_query = dbs_audit_query,
    .audit_prune = dbs_audit_prune,
};
