/*
 * db_pg_exec: the PostgreSQL backend's messages and statements (db_pg.h):
 * secrets masked in every message, libpq's text on one line, SQLSTATE as
 * AL_E_* (dbp_code); the column readers behind struct db_row (db_row.h);
 * the session's settings, the reconnect before a statement on a broken
 * connection, statements with text parameters (dbp_exec, dbp_run,
 * dbp_one), transactions, and listings through a cursor (dbp_list). Not
 * here: opening the connection and the schema (db_pg.c), any table's SQL
 * (db_pg_tables.c).
 *
 * Errors: SQLSTATE to AL_E_* as db_sqlite_stmt.c maps SQLite's codes:
 * unique violations AL_E_EXISTS (23505), other constraints AL_E_INVAL, lock
 * and statement timeouts AL_E_TIMEOUT, privileges AL_E_PERM, the
 * connection AL_E_IO. Messages carry PostgreSQL's primary message only,
 * never its DETAIL (which can quote a row).
 */
#include "al_err.h"
#include "db.h"
#include "db_backend.h"
#include "db_pg.h"
#include "db_row.h"

#include <errno.h>
#include <libpq-fe.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    DBP_STATEMENT_TIMEOUT_MS = 30000, /* any one statement */
    DBP_RECONNECT_MS = 1000,          /* between reconnect attempts, at least */
    DBP_FETCH_ROWS = 64,              /* rows a list fetches at a time */
    DBP_CURSOR_NAME_MAX = 32,         /* "airlock_list_N" */
    DBP_CURSOR_SQL_MAX = 80,          /* FETCH and CLOSE statements */
    DBP_LIST_SQL_MAX = 1024,          /* DECLARE ... FOR <a list query> */
};

#define DBP_MASK "***"

/* ---- messages ------------------------------------------------------------- */

struct dbp *dbp_of(struct db *db)
{
    return (struct dbp *)db->impl;
}

/* msg with every secret replaced by DBP_MASK, in place (cap bytes). */
void dbp_mask(const struct dbp *p, char *msg, size_t cap)
{
    char out[DB_MSG_MAX];
    size_t o = 0;
    for (size_t i = 0; msg[i] != '\0' && o + 1 < sizeof out;) {
        size_t hit = 0;
        for (size_t k = 0; p && k < DBP_SECRETS && !hit; k++) {
            size_t sl = p->secret[k] ? strlen(p->secret[k]) : 0;
            if (sl > 0 && strncmp(msg + i, p->secret[k], sl) == 0)
                hit = sl;
        }
        if (hit) {
            for (const char *m = DBP_MASK; *m != '\0' && o + 1 < sizeof out; m++)
                out[o++] = *m;
            i += hit;
        } else {
            out[o++] = msg[i++];
        }
    }
    out[o] = '\0';
    (void)snprintf(msg, cap, "%s", out);
    OPENSSL_cleanse(out, sizeof out);
}

/* As db_fail, then masked. */
int dbp_fail(struct db *db, int code, const char *fmt, ...)
{
    char buf[DB_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): see keys_reason in keys.c
    if (vsnprintf(buf, sizeof buf, fmt, ap) < 0)
        buf[0] = '\0';
    va_end(ap);
    (void)db_fail(db, code, "%s", buf);
    OPENSSL_cleanse(buf, sizeof buf);
    dbp_mask(dbp_of(db), db->msg, sizeof db->msg);
    return code;
}

/* libpq's multi-line text on one line: a line break before an indented
 * continuation becomes a space, other breaks "; ", runs of blanks one
 * space; control characters go. */
void dbp_one_line(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    bool space = false;
    const char *s = in ? in : "";
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    for (; *s != '\0' && o + 3 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\n') {
            while (s[1] == '\r' || s[1] == '\n')
                s++;
            if (s[1] == '\0')
                break;
            if (s[1] == '\t' || s[1] == ' ') {
                space = true;
            } else {
                out[o++] = ';';
                space = true;
            }
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r') {
            space = true;
            continue;
        }
        if (c < 0x20 || c == 0x7f)
            continue;
        if (space && o > 0)
            out[o++] = ' ';
        space = false;
        out[o++] = (char)c;
    }
    while (o > 0 && (out[o - 1] == ';' || out[o - 1] == ' '))
        o--;
    out[o] = '\0';
}

/* The connection's own error text, on one line. */
void dbp_conn_reason(const struct dbp *p, char *out, size_t cap)
{
    dbp_one_line(p->conn ? PQerrorMessage(p->conn) : "out of memory", out, cap);
    if (out[0] == '\0')
        (void)snprintf(out, cap, "unknown libpq failure");
}

/* The connection broke during `what`: AL_E_IO with libpq's reason, kept
 * for the calls that follow until a reconnect. */
static int dbp_lost(struct db *db, const char *what)
{
    struct dbp *p = dbp_of(db);
    dbp_conn_reason(p, p->lost, sizeof p->lost);
    dbp_mask(p, p->lost, sizeof p->lost);
    p->in_tx = false; /* the server rolled it back */
    return dbp_fail(db, AL_E_IO, "%s: %s: connection lost: %s", p->label, what, p->lost);
}

bool dbp_state_is(const char *state, const char *want)
{
    return state && strcmp(state, want) == 0;
}

bool dbp_class_is(const char *state, const char *cls)
{
    return state && strlen(state) == DBP_STATE_LEN && strncmp(state, cls, 2) == 0;
}

/* SQLSTATE to AL_E_*, as dbs_code maps SQLite's result codes. */
static int dbp_code(const char *state)
{
    static const struct {
        const char *state;
        int code;
    } exact[] = {
        {"23505", AL_E_EXISTS},  {"53200", AL_E_NOMEM},   {"40001", AL_E_TIMEOUT},
        {"40P01", AL_E_TIMEOUT}, {"55P03", AL_E_TIMEOUT}, {"57014", AL_E_TIMEOUT},
        {"42501", AL_E_PERM},    {"25006", AL_E_PERM},    {"54000", AL_E_TOOBIG},
        {"54001", AL_E_TOOBIG},  {"22001", AL_E_TOOBIG},  {"XX001", AL_E_FORMAT},
        {"XX002", AL_E_FORMAT},
    };
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (dbp_state_is(state, exact[i].state))
            return exact[i].code;
    if (dbp_class_is(state, "23") || dbp_class_is(state, "22"))
        return AL_E_INVAL; /* constraints, bad data: as SQLITE_CONSTRAINT */
    if (dbp_class_is(state, "28"))
        return AL_E_PERM;
    return AL_E_IO;
}

/* A statement of `what` failed with res (may be NULL). */
static int dbp_res_fail(struct db *db, const char *what, const PGresult *res, struct dbp_res *r)
{
    struct dbp *p = dbp_of(db);
    if (PQstatus(p->conn) != CONNECTION_OK)
        return dbp_lost(db, what);
    if (!res)
        return dbp_fail(db, AL_E_NOMEM, "%s: %s: out of memory", p->label, what);
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *cons = PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME);
    if (r) {
        (void)snprintf(r->state, sizeof r->state, "%s", state ? state : "");
        (void)snprintf(r->constraint, sizeof r->constraint, "%s", cons ? cons : "");
    }
    char why[DBP_REASON_MAX];
    const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    dbp_one_line(primary ? primary : PQresultErrorMessage(res), why, sizeof why);
    if (why[0] == '\0')
        (void)snprintf(why, sizeof why, "%s", PQresStatus(PQresultStatus(res)));
    return dbp_fail(db, dbp_code(state), "%s: %s: %s%s%s%s", p->label, what, why,
                    state ? " (SQLSTATE " : "", state ? state : "", state ? ")" : "");
}

/* ---- column readers ------------------------------------------------------------ */

/* Text column col of a row into buf[cap]; a NULL reads as "" when null_ok. */
static int dbp_col_text(struct db *db, const PGresult *res, int row, int col, char *buf, size_t cap,
                        bool null_ok)
{
    if (PQgetisnull(res, row, col)) {
        if (!null_ok)
            return dbp_fail(db, AL_E_FORMAT, "%s: corrupt row: column %s is NULL",
                            dbp_of(db)->label, PQfname(res, col));
        buf[0] = '\0';
        return AL_OK;
    }
    const char *t = PQgetvalue(res, row, col);
    int n = PQgetlength(res, row, col);
    if (n < 0 || (size_t)n >= cap || memchr(t, '\0', (size_t)n))
        return dbp_fail(db, AL_E_FORMAT, "%s: corrupt row: column %s is too long or holds NUL",
                        dbp_of(db)->label, PQfname(res, col));
    memcpy(buf, t, (size_t)n);
    buf[n] = '\0';
    return AL_OK;
}

/* Whole decimal int64 text. */
static bool dbp_parse_i64(const char *s, int64_t *out)
{
    if (!s || s[0] == '\0')
        return false;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || !end || *end != '\0')
        return false;
    *out = (int64_t)v;
    return true;
}

/* Integer column col of a row in [lo, hi]; a NULL reads as *null_value
 * when given. */
int dbp_col_i64(struct db *db, const PGresult *res, int row, int col, int64_t lo, int64_t hi,
                const int64_t *null_value, int64_t *out)
{
    if (PQgetisnull(res, row, col) && null_value) {
        *out = *null_value;
        return AL_OK;
    }
    int64_t v = 0;
    if (PQgetisnull(res, row, col) || !dbp_parse_i64(PQgetvalue(res, row, col), &v) || v < lo ||
        v > hi)
        return dbp_fail(db, AL_E_FORMAT, "%s: corrupt row: column %s out of range",
                        dbp_of(db)->label, PQfname(res, col));
    *out = v;
    return AL_OK;
}

int dbp_col_bool(struct db *db, const PGresult *res, int row, int col, bool *out)
{
    const char *v = PQgetisnull(res, row, col) ? "" : PQgetvalue(res, row, col);
    if (strcmp(v, "t") != 0 && strcmp(v, "f") != 0)
        return dbp_fail(db, AL_E_FORMAT, "%s: corrupt row: column %s is not a boolean",
                        dbp_of(db)->label, PQfname(res, col));
    *out = v[0] == 't';
    return AL_OK;
}

/* An enumeration stored as its name. */
static int dbp_col_enum(struct db *db, const PGresult *res, int row, int col,
                        int (*parse)(const char *, int *), int *out)
{
    char buf[DB_NAME_MAX + 1];
    int rc = dbp_col_text(db, res, row, col, buf, sizeof buf, false);
    if (rc == AL_OK && parse(buf, out) != AL_OK)
        rc = dbp_fail(db, AL_E_FORMAT, "%s: corrupt row: unknown %s", dbp_of(db)->label,
                      PQfname(res, col));
    return rc;
}

void dbp_i64_text(char *buf, size_t cap, int64_t v)
{
    (void)snprintf(buf, cap, "%lld", (long long)v);
}

/* The row readers of struct db_row: res is the PGresult, row its row. */
static int dbp_op_text(const struct db_row *r, int col, char *buf, size_t cap, bool null_ok)
{
    return dbp_col_text(r->db, r->res, r->row, col, buf, cap, null_ok);
}

static int dbp_op_i64(const struct db_row *r, int col, int64_t lo, int64_t hi,
                      const int64_t *null_value, int64_t *out)
{
    return dbp_col_i64(r->db, r->res, r->row, col, lo, hi, null_value, out);
}

static int dbp_op_flag(const struct db_row *r, int col, bool *out)
{
    return dbp_col_bool(r->db, r->res, r->row, col, out);
}

static int dbp_op_enum(const struct db_row *r, int col, int (*parse)(const char *, int *), int *out)
{
    return dbp_col_enum(r->db, r->res, r->row, col, parse, out);
}

static const struct db_row_ops dbp_row_ops = {
    .text = dbp_op_text,
    .i64 = dbp_op_i64,
    .flag = dbp_op_flag,
    .enumv = dbp_op_enum,
};

/* ---- connection and statements -------------------------------------------- */

void dbp_notice(void *arg, const PGresult *res)
{
    (void)arg; /* notices and warnings are not ours to print */
    (void)res;
}

/* lock_timeout, statement_timeout, synchronous_commit (see the top). */
int dbp_session(struct db *db)
{
    struct dbp *p = dbp_of(db);
    char lock[DBP_INT_TEXT], stmt[DBP_INT_TEXT];
    (void)snprintf(lock, sizeof lock, "%d", DB_BUSY_TIMEOUT_MS);
    (void)snprintf(stmt, sizeof stmt, "%d", DBP_STATEMENT_TIMEOUT_MS);
    const char *const v[] = {lock, stmt};
    PGresult *res = PQexecParams(p->conn,
                                 "SELECT set_config('lock_timeout', $1, false),"
                                 " set_config('statement_timeout', $2, false),"
                                 " set_config('synchronous_commit', 'on', false),"
                                 " set_config('client_min_messages', 'warning', false)",
                                 2, NULL, v, NULL, NULL, 0);
    int rc = AL_OK;
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        rc = dbp_res_fail(db, "session settings", res, NULL);
    PQclear(res);
    return rc;
}

/* Before each statement: a broken connection is re-established, unless a
 * transaction was under way or an attempt failed under DBP_RECONNECT_MS
 * ago. */
static int dbp_ready(struct db *db, const char *what)
{
    struct dbp *p = dbp_of(db);
    if (PQstatus(p->conn) == CONNECTION_OK)
        return AL_OK;
    if (p->in_tx)
        return dbp_lost(db, what);
    int64_t now = 0;
    if (db_now(&now) != AL_OK)
        return dbp_fail(db, AL_E_IO, "cannot read the clock");
    if (p->last_try != 0 && now - p->last_try < DBP_RECONNECT_MS)
        return dbp_fail(db, AL_E_IO,
                        "%s: %s: connection lost: %s (reconnecting at most every %d ms)", p->label,
                        what, p->lost, DBP_RECONNECT_MS);
    p->last_try = now;
    PQreset(p->conn);
    if (PQstatus(p->conn) != CONNECTION_OK) {
        dbp_conn_reason(p, p->lost, sizeof p->lost);
        dbp_mask(p, p->lost, sizeof p->lost);
        return dbp_fail(db, AL_E_IO, "%s: %s: cannot reconnect: %s", p->label, what, p->lost);
    }
    p->last_try = 0;
    p->lost[0] = '\0';
    return dbp_session(db);
}

/* Run sql with n text parameters (NULL: SQL NULL). On success r->res holds
 * the result (the caller PQclear's it); on failure AL_E_* with the message
 * set and r->state / r->constraint telling what was violated. */
int dbp_exec(struct db *db, const char *what, const char *sql, int n, const char *const *params,
             struct dbp_res *r)
{
    memset(r, 0, sizeof *r);
    int rc = dbp_ready(db, what);
    if (rc != AL_OK)
        return rc;
    PGresult *res = PQexecParams(dbp_of(db)->conn, sql, n, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(res); /* PGRES_FATAL_ERROR for NULL */
    if (res && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)) {
        r->res = res;
        return AL_OK;
    }
    rc = dbp_res_fail(db, what, res, r);
    PQclear(res);
    return rc;
}

/* A statement whose result is not needed. */
int dbp_run(struct db *db, const char *what, const char *sql, int n, const char *const *params)
{
    struct dbp_res r;
    int rc = dbp_exec(db, what, sql, n, params, &r);
    PQclear(r.res);
    return rc;
}

/* Whether exactly one row was inserted, updated or deleted. */
bool dbp_one_changed(PGresult *res)
{
    return strcmp(PQcmdTuples(res), "1") == 0;
}

int dbp_begin(struct db *db)
{
    int rc = dbp_run(db, "begin", "BEGIN", 0, NULL);
    dbp_of(db)->in_tx = rc == AL_OK;
    return rc;
}

int dbp_commit(struct db *db)
{
    int rc = dbp_run(db, "commit", "COMMIT", 0, NULL);
    dbp_of(db)->in_tx = false;
    return rc;
}

/* Roll back an open transaction after an error, keeping its message. */
void dbp_rollback(struct db *db)
{
    struct dbp *p = dbp_of(db);
    if (PQstatus(p->conn) != CONNECTION_OK || PQtransactionStatus(p->conn) == PQTRANS_IDLE) {
        p->in_tx = false; /* nothing open any more */
        return;
    }
    char first[DB_MSG_MAX];
    (void)snprintf(first, sizeof first, "%s", db->msg);
    int rc = dbp_run(db, "rollback", "ROLLBACK", 0, NULL);
    p->in_tx = false;
    if (rc != AL_OK) {
        char why[DB_MSG_MAX];
        (void)snprintf(why, sizeof why, "%s", db->msg);
        (void)dbp_fail(db, AL_E_IO, "%s (rollback failed too: %s)", first, why);
        return;
    }
    (void)snprintf(db->msg, sizeof db->msg, "%s", first);
}

/* Run a query and hand each row to fn until it returns non-zero, which is
 * then returned as is. The rows come through a cursor WITH HOLD (the
 * result is kept by the server) DBP_FETCH_ROWS at a time, so memory stays
 * bounded and the connection is idle while fn runs: db.h forbids a
 * callback to use the same db, but one that does (the relay audits from
 * one) must not cut the listing short, as a nested statement would a
 * stream in libpq's single-row mode. */
int dbp_list(struct db *db, const char *what, const char *sql, int n, const char *const *params,
             db_row_fn fn, void *ctx)
{
    struct dbp *p = dbp_of(db);
    /* The cursor's name and the query are our own text, not input. */
    char name[DBP_CURSOR_NAME_MAX], decl[DBP_LIST_SQL_MAX], fetch[DBP_CURSOR_SQL_MAX],
        close_sql[DBP_CURSOR_SQL_MAX];
    (void)snprintf(name, sizeof name, "airlock_list_%u", ++p->cursors); /* nested: new name */
    int dn = snprintf(decl, sizeof decl, "DECLARE %s NO SCROLL CURSOR WITH HOLD FOR %s", name, sql);
    if (dn < 0 || (size_t)dn >= sizeof decl)
        return dbp_fail(db, AL_E_TOOBIG, "%s: %s: query too long", p->label, what);
    (void)snprintf(fetch, sizeof fetch, "FETCH FORWARD %d FROM %s", DBP_FETCH_ROWS, name);
    (void)snprintf(close_sql, sizeof close_sql, "CLOSE %s", name);
    int rc = dbp_run(db, what, decl, n, params);
    if (rc != AL_OK)
        return rc;
    for (bool more = true; rc == AL_OK && more;) {
        struct dbp_res r;
        rc = dbp_exec(db, what, fetch, 0, NULL, &r);
        int rows = rc == AL_OK ? PQntuples(r.res) : 0;
        for (int i = 0; rc == AL_OK && i < rows; i++) {
            const struct db_row row = {.db = db, .ops = &dbp_row_ops, .res = r.res, .row = i};
            rc = fn(&row, ctx);
        }
        more = rows == DBP_FETCH_ROWS;
        PQclear(r.res);
    }
    if (PQstatus(p->conn) == CONNECTION_OK) { /* else the server dropped it */
        char first[DB_MSG_MAX];
        (void)snprintf(first, sizeof first, "%s", db->msg);
        int crc = dbp_run(db, what, close_sql, 0, NULL);
        if (rc == AL_OK)
            rc = crc;
        else
            (void)snprintf(db->msg, sizeof db->msg, "%s", first);
    }
    return rc;
}

int dbp_one(struct db *db, const char *what, const char *sql, int n, const char *const *params,
            db_row_fn fn, void *out, bool *found)
{
    struct dbp_res r;
    int rc = dbp_exec(db, what, sql, n, params, &r);
    *found = rc == AL_OK && PQntuples(r.res) > 0;
    if (*found) {
        const struct db_row row = {.db = db, .ops = &dbp_row_ops, .res = r.res, .row = 0};
        rc = fn(&row, out);
    }
    PQclear(r.res);
    return rc;
}

int dbp_rows(struct db *db, PGresult *res, db_row_fn fn, void *ctx)
{
    int rc = AL_OK;
    int rows = PQntuples(res);
    for (int i = 0; rc == AL_OK && i < rows; i++) {
        const struct db_row row = {.db = db, .ops = &dbp_row_ops, .res = res, .row = i};
        rc = fn(&row, ctx);
    }
    return rc;
}
