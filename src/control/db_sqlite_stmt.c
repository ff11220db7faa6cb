/*
 * db_sqlite_stmt: the SQLite backend's statements (db_sqlite.h): SQLite's
 * result codes as AL_E_* (dbs_code), prepare, bind, step and finalize with
 * the error of each in db's message, whole statements run with an array
 * of parameters (dbs_run, dbs_change, dbs_one, dbs_list), and the column
 * readers behind struct db_row (db_row.h). Not here: the connection
 * (db_sqlite.c), any table's SQL (db_sqlite_tables.c).
 *
 * Every statement is prepared, bound and finalized in the call that uses
 * it; values only ever go in as bound parameters.
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

static int dbs_code(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_NOMEM:
        return AL_E_NOMEM;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return AL_E_TIMEOUT;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
    case SQLITE_FORMAT:
    case SQLITE_MISMATCH:
        return AL_E_FORMAT;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return AL_E_PERM;
    case SQLITE_TOOBIG:
        return AL_E_TOOBIG;
    case SQLITE_CONSTRAINT:
    case SQLITE_RANGE:
        return AL_E_INVAL;
    default:
        return AL_E_IO;
    }
}

struct dbs *dbs_of(struct db *db)
{
    return (struct dbs *)db->impl;
}

int dbs_err(struct db *db, int rc, const char *what)
{
    struct dbs *s = dbs_of(db);
    const char *m = s && s->h ? sqlite3_errmsg(s->h) : sqlite3_errstr(rc);
    return db_fail(db, dbs_code(rc), "%s: %s: %s", s ? s->path : "sqlite", what, m);
}

int dbs_prepare(struct db *db, const char *sql, sqlite3_stmt **st)
{
    *st = NULL;
    int rc = sqlite3_prepare_v2(dbs_of(db)->h, sql, -1, st, NULL);
    if (rc != SQLITE_OK || !*st) {
        (void)sqlite3_finalize(*st); /* NULL on failure; harmless */
        *st = NULL;
        return dbs_err(db, rc != SQLITE_OK ? rc : SQLITE_MISUSE, "prepare");
    }
    return AL_OK;
}

int dbs_finish(struct db *db, sqlite3_stmt *st, int rc)
{
    int f = sqlite3_finalize(st);
    if (rc == AL_OK && f != SQLITE_OK)
        rc = dbs_err(db, f, "finalize");
    return rc;
}

/* Bind helpers: chain with "if (rc == AL_OK)". NULL text binds NULL. */
static int dbs_bind_text(struct db *db, sqlite3_stmt *st, int i, const char *v)
{
    int rc = v ? sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
    return rc == SQLITE_OK ? AL_OK : dbs_err(db, rc, "bind");
}

static int dbs_bind_i64(struct db *db, sqlite3_stmt *st, int i, int64_t v)
{
    int rc = sqlite3_bind_int64(st, i, (sqlite3_int64)v);
    return rc == SQLITE_OK ? AL_OK : dbs_err(db, rc, "bind");
}

int dbs_step(struct db *db, sqlite3_stmt *st, bool *row, int *raw)
{
    int rc = sqlite3_step(st);
    if (raw)
        *raw = rc;
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
        if (row)
            *row = rc == SQLITE_ROW;
        return AL_OK;
    }
    return dbs_err(db, rc, "step");
}

int dbs_exec(struct db *db, const char *sql)
{
    struct dbs *s = dbs_of(db);
    const char *p = sql;
    while (*p != '\0') {
        sqlite3_stmt *st = NULL;
        const char *tail = NULL;
        int rc = sqlite3_prepare_v2(s->h, p, -1, &st, &tail);
        if (rc != SQLITE_OK) {
            (void)sqlite3_finalize(st);
            return dbs_err(db, rc, "prepare");
        }
        if (!st)
            break; /* only white space or comments left */
        bool row = true;
        int arc = AL_OK;
        while (arc == AL_OK && row)
            arc = dbs_step(db, st, &row, NULL);
        if ((arc = dbs_finish(db, st, arc)) != AL_OK)
            return arc;
        if (!tail || tail == p)
            break;
        p = tail;
    }
    return AL_OK;
}

/* The one value a PRAGMA or query answers: an integer into *num, or (num
 * NULL) text into buf[cap] (truncation is fine). */
static int dbs_query(struct db *db, const char *sql, int64_t *num, char *buf, size_t cap)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db, sql, &st);
    if (rc != AL_OK)
        return rc;
    bool row = false;
    rc = dbs_step(db, st, &row, NULL);
    if (rc == AL_OK && num) {
        if (!row || sqlite3_column_type(st, 0) != SQLITE_INTEGER)
            rc = db_fail(db, AL_E_IO, "%s: '%s' gave no integer", dbs_of(db)->path, sql);
        else
            *num = (int64_t)sqlite3_column_int64(st, 0);
    } else if (rc == AL_OK) {
        const unsigned char *t = row ? sqlite3_column_text(st, 0) : NULL;
        if (!t)
            rc = db_fail(db, AL_E_IO, "%s: '%s' gave no text", dbs_of(db)->path, sql);
        else
            (void)snprintf(buf, cap, "%s", (const char *)t);
    }
    return dbs_finish(db, st, rc);
}

int dbs_query_int(struct db *db, const char *sql, int64_t *out)
{
    return dbs_query(db, sql, out, NULL, 0);
}

int dbs_query_text(struct db *db, const char *sql, char *buf, size_t cap)
{
    return dbs_query(db, sql, NULL, buf, cap);
}

void dbs_rollback(struct db *db)
{
    struct dbs *s = dbs_of(db);
    if (sqlite3_get_autocommit(s->h))
        return; /* SQLite already rolled back (I/O error, full disk, ...) */
    char first[DB_MSG_MAX];
    (void)snprintf(first, sizeof first, "%s", db->msg);
    if (dbs_exec(db, "ROLLBACK") != AL_OK) {
        char why[DB_MSG_MAX];
        (void)snprintf(why, sizeof why, "%s", db->msg);
        (void)db_fail(db, AL_E_IO, "%s (rollback failed too: %s)", first, why);
        return;
    }
    (void)snprintf(db->msg, sizeof db->msg, "%s", first);
}

/* Changes made by the last statement: whether exactly one row changed. */
static bool dbs_one_changed(struct db *db)
{
    return sqlite3_changes(dbs_of(db)->h) == 1;
}

/* ---- column readers ------------------------------------------------------- */

/* Text column col into buf[cap]; a NULL reads as "" when null_ok. */
static int dbs_col_text(struct db *db, sqlite3_stmt *st, int col, char *buf, size_t cap,
                        bool null_ok)
{
    int type = sqlite3_column_type(st, col);
    if (type == SQLITE_NULL && null_ok) {
        buf[0] = '\0';
        return AL_OK;
    }
    if (type != SQLITE_TEXT)
        return db_fail(db, AL_E_FORMAT, "%s: corrupt row: column %s is not text", dbs_of(db)->path,
                       sqlite3_column_name(st, col));
    const unsigned char *t = sqlite3_column_text(st, col);
    int n = sqlite3_column_bytes(st, col);
    if (!t)
        return dbs_err(db, SQLITE_NOMEM, "read");
    if (n < 0 || (size_t)n >= cap || memchr(t, '\0', (size_t)n))
        return db_fail(db, AL_E_FORMAT, "%s: corrupt row: column %s is too long or holds NUL",
                       dbs_of(db)->path, sqlite3_column_name(st, col));
    memcpy(buf, t, (size_t)n);
    buf[n] = '\0';
    return AL_OK;
}

/* Integer column col in [lo, hi]; a NULL reads as null_value when given. */
static int dbs_col_i64(struct db *db, sqlite3_stmt *st, int col, int64_t lo, int64_t hi,
                       const int64_t *null_value, int64_t *out)
{
    int type = sqlite3_column_type(st, col);
    if (type == SQLITE_NULL && null_value) {
        *out = *null_value;
        return AL_OK;
    }
    int64_t v = (int64_t)sqlite3_column_int64(st, col);
    if (type != SQLITE_INTEGER || v < lo || v > hi)
        return db_fail(db, AL_E_FORMAT, "%s: corrupt row: column %s out of range", dbs_of(db)->path,
                       sqlite3_column_name(st, col));
    *out = v;
    return AL_OK;
}

/* An enumeration stored as its name. */
static int dbs_col_enum(struct db *db, sqlite3_stmt *st, int col, int (*parse)(const char *, int *),
                        int *out)
{
    char buf[DB_NAME_MAX + 1];
    int rc = dbs_col_text(db, st, col, buf, sizeof buf, false);
    if (rc == AL_OK && parse(buf, out) != AL_OK)
        rc = db_fail(db, AL_E_FORMAT, "%s: corrupt row: unknown %s", dbs_of(db)->path,
                     sqlite3_column_name(st, col));
    return rc;
}

/* The row readers of struct db_row: res is the statement, on its row. */
static int dbs_op_text(const struct db_row *r, int col, char *buf, size_t cap, bool null_ok)
{
    return dbs_col_text(r->db, r->res, col, buf, cap, null_ok);
}

static int dbs_op_i64(const struct db_row *r, int col, int64_t lo, int64_t hi,
                      const int64_t *null_value, int64_t *out)
{
    return dbs_col_i64(r->db, r->res, col, lo, hi, null_value, out);
}

/* A boolean is an INTEGER 0 or 1 (CHECKed by the schema). */
static int dbs_op_flag(const struct db_row *r, int col, bool *out)
{
    int64_t v = 0;
    int rc = dbs_col_i64(r->db, r->res, col, 0, 1, NULL, &v);
    *out = v == 1;
    return rc;
}

static int dbs_op_enum(const struct db_row *r, int col, int (*parse)(const char *, int *), int *out)
{
    return dbs_col_enum(r->db, r->res, col, parse, out);
}

static const struct db_row_ops dbs_row_ops = {
    .text = dbs_op_text,
    .i64 = dbs_op_i64,
    .flag = dbs_op_flag,
    .enumv = dbs_op_enum,
};

/* ---- whole statements ------------------------------------------------------- */

/* Prepare sql and bind its n args as ?1..?n. */
static int dbs_start(struct db *db, const char *sql, const struct dbs_arg *a, int n,
                     sqlite3_stmt **st)
{
    int rc = dbs_prepare(db, sql, st);
    for (int i = 0; rc == AL_OK && i < n; i++)
        rc = a[i].is_int ? dbs_bind_i64(db, *st, i + 1, a[i].i64)
                         : dbs_bind_text(db, *st, i + 1, a[i].text);
    return rc;
}

int dbs_run(struct db *db, const char *sql, const struct dbs_arg *a, int n, int *raw, bool *one)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_start(db, sql, a, n, &st);
    if (rc == AL_OK)
        rc = dbs_step(db, st, NULL, raw);
    if (one)
        *one = rc == AL_OK && dbs_one_changed(db);
    return st ? dbs_finish(db, st, rc) : rc;
}

int dbs_rerun(struct db *db, sqlite3_stmt *st, const struct dbs_arg *a, int n)
{
    /* reset's code repeats the last step's, which was reported then */
    (void)sqlite3_reset(st);
    int rc = AL_OK;
    for (int i = 0; rc == AL_OK && i < n; i++)
        rc = a[i].is_int ? dbs_bind_i64(db, st, i + 1, a[i].i64)
                         : dbs_bind_text(db, st, i + 1, a[i].text);
    return rc == AL_OK ? dbs_step(db, st, NULL, NULL) : rc;
}

int dbs_change(struct db *db, const char *sql, const struct dbs_arg *a, int n, const char *what,
               const char *key, int *raw)
{
    bool one = false;
    int rc = dbs_run(db, sql, a, n, raw, &one);
    if (rc == AL_OK && !one)
        rc = db_fail(db, AL_E_NOENT, "no %s %s", what, key);
    return rc;
}

int dbs_one(struct db *db, const char *sql, const struct dbs_arg *a, int n, db_row_fn fn, void *out,
            bool *found)
{
    sqlite3_stmt *st = NULL;
    *found = false;
    int rc = dbs_start(db, sql, a, n, &st);
    if (rc == AL_OK)
        rc = dbs_step(db, st, found, NULL);
    if (rc == AL_OK && *found) {
        const struct db_row r = {.db = db, .ops = &dbs_row_ops, .res = st};
        rc = fn(&r, out);
    }
    return st ? dbs_finish(db, st, rc) : rc;
}

int dbs_list(struct db *db, const char *sql, const struct dbs_arg *a, int n, db_row_fn fn,
             void *ctx)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_start(db, sql, a, n, &st);
    const struct db_row r = {.db = db, .ops = &dbs_row_ops, .res = st};
    bool row = true;
    while (rc == AL_OK) {
        rc = dbs_step(db, st, &row, NULL);
        if (rc != AL_OK || !row)
            break;
        rc = fn(&r, ctx);
    }
    return st ? dbs_finish(db, st, rc) : rc;
}
