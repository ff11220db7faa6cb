/*
 * db_pg: the PostgreSQL backend of db.h ("postgres://..." or
 * "postgresql://...", handed whole to libpq, which parses it).
 *
 * Data model: struct dbp owns one libpq connection (PGconn) to one
 * database, used by one thread at a time like struct db itself. Each call
 * runs its statements synchronously with PQexecParams: values only ever go
 * in as parameters (text format), the SQL is constant. Lists read their
 * rows through a cursor, a batch at a time (dbp_list), so memory stays
 * bounded whatever the table holds.
 *
 * Connection: the URL's own settings win, except client_encoding (always
 * UTF8: names, cwd and JSON are UTF-8 text). Defaults it may override: a
 * connect timeout, TCP keepalives and a TCP user timeout (a vanished server
 * is noticed instead of waited for), application_name "airlockd". Each
 * session then sets lock_timeout (DB_BUSY_TIMEOUT_MS, as SQLite's busy
 * timeout), a statement_timeout, and synchronous_commit = on: airlockd
 * acknowledges bytes to the runner once their offsets are committed, so a
 * commit must be durable when PostgreSQL says it is done, whatever the
 * server's default (the SQLite backend syncs that one update with FULL;
 * here every commit is synchronous, which costs little at our write rate).
 *
 * Connection loss: the call that meets it fails with AL_E_IO and libpq's
 * reason on one line; the next call reconnects (PQreset) first, at most
 * once per DBP_RECONNECT_MS, so a restarted PostgreSQL is picked up again
 * and a dead one costs each call a fast failure, not a connect timeout.
 * Never inside a transaction: a transaction cut off fails as a whole.
 *
 * Secrets: no message ever holds the password of the URL. Every spelling of
 * it (as written in the URL, percent-decoded, as a "password=" parameter)
 * is kept from open to close and masked as "***" in every message this
 * file writes, libpq's included (libpq quotes a malformed URL's parts).
 * API keys never reach this file (only their SHA-256), and messages carry
 * PostgreSQL's primary message only, never its DETAIL (which can quote a
 * row).
 *
 * Schema: the same tables and rules as db_sqlite.c's dbs_schema_v1, in
 * PostgreSQL types: bigint for times, offsets and channels, boolean for
 * link_up, identity columns for audit ids and for terminals.seq, which
 * keeps creation order as SQLite's rowid does. The version lives in table
 * schema_version (app = 'airlock', version), which SQLite keeps in
 * user_version; a schema_version table without our row or columns belongs
 * to another application and is refused (AL_E_FORMAT), so is a schema
 * newer than DB_SCHEMA_VERSION (AL_E_VERSION). dbp_migrations[i] takes the
 * schema from i to i + 1 in one transaction, begun under an advisory lock
 * and re-reading the version, so several airlockd starting together apply
 * each step once; a failed step leaves nothing behind (DDL is
 * transactional). The migrations are the only multi-statement
 * transactions, as in the SQLite backend; every other call is one
 * statement, committed on its own.
 * Text order (user and sandbox lists) is by bytes (COLLATE "C"), as in
 * SQLite, whatever the database's collation.
 *
 * Errors: SQLSTATE to AL_E_* as db_sqlite.c maps SQLite's codes: unique
 * violations AL_E_EXISTS (23505), other constraints AL_E_INVAL, a foreign
 * key as the SQLite backend reports it (no sandbox: AL_E_NOENT; a sandbox
 * still used by terminals: AL_E_STATE), lock and statement timeouts
 * AL_E_TIMEOUT, privileges AL_E_PERM, the connection AL_E_IO.
 */
#include "al_err.h"
#include "al_limits.h"
#include "db.h"
#include "db_backend.h"

#include <errno.h>
#include <libpq-fe.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    DBP_CONNECT_TIMEOUT_S = 5,        /* libpq connect_timeout (default) */
    DBP_STATEMENT_TIMEOUT_MS = 30000, /* any one statement */
    DBP_RECONNECT_MS = 1000,          /* between reconnect attempts, at least */
    DBP_LOCK_KEY = 0x41724c6b,        /* "ArLk": the migration advisory lock */
    DBP_SECRETS = 3,                  /* spellings of the URL's password */
    DBP_LABEL_MAX = 96,               /* "PostgreSQL database NAME" */
    DBP_REASON_MAX = 320,             /* a libpq reason on one line */
    DBP_STATE_LEN = 5,                /* an SQLSTATE */
    DBP_CONSTRAINT_MAX = 64,          /* a constraint's name */
    DBP_INT_TEXT = 24,                /* an int64 in decimal, with NUL */
    DBP_EXIT_CODE_MAX = 255,          /* as the EXIT frame */
    DBP_EXIT_SIGNAL_MAX = 127,        /* as the EXIT frame */
    DBP_VERSION_MAX = 1000000,        /* a sane schema_version.version */
    DBP_FETCH_ROWS = 64,              /* rows a list fetches at a time */
    DBP_CURSOR_NAME_MAX = 32,         /* "airlock_list_N" */
    DBP_CURSOR_SQL_MAX = 80,          /* FETCH and CLOSE statements */
    DBP_LIST_SQL_MAX = 1024,          /* DECLARE ... FOR <a list query> */
};

#define DBP_SCHEME "postgres://"
#define DBP_SCHEME_LONG "postgresql://"
#define DBP_MASK "***"

struct dbp {
    PGconn *conn;
    char label[DBP_LABEL_MAX]; /* names the database in messages */
    char *secret[DBP_SECRETS]; /* masked in every message; cleansed */
    bool in_tx;                /* between BEGIN and COMMIT/ROLLBACK */
    int64_t last_try;          /* last reconnect attempt (Unix ms), 0: none */
    char lost[DBP_REASON_MAX]; /* why the connection went, for later calls */
    unsigned cursors;          /* lists run so far: names their cursors */
};

/* What a failed statement said, for callers that map constraints. */
struct dbp_res {
    PGresult *res; /* on success; the caller PQclear's it */
    char state[DBP_STATE_LEN + 1];
    char constraint[DBP_CONSTRAINT_MAX];
};

/* ---- schema ------------------------------------------------------------- */

/* Names and ids as db.c checks them. NO ACTION foreign key: deleting a
 * sandbox that terminals name fails with 23503. A channel is unique among
 * a sandbox's live terminals only (a partial unique index). Constraint
 * names are given where a violation is told apart by name. */
// clang-format off
#define DBP_NAME_CHECK(col) "CHECK (" col " ~ '^[a-z0-9][a-z0-9._-]{0,63}$')"
static const char *const dbp_schema_v1[] = {
    "CREATE TABLE schema_migrations ("
    "  version integer PRIMARY KEY,"
    "  name text NOT NULL,"
    "  applied_at bigint NOT NULL)",
    "CREATE TABLE users ("
    "  name text CONSTRAINT users_pkey PRIMARY KEY " DBP_NAME_CHECK("name") ","
    "  role text NOT NULL CHECK (role IN ('admin', 'operator', 'viewer')),"
    "  key_sha256 text NOT NULL CONSTRAINT users_key_sha256_key UNIQUE"
    "    CHECK (key_sha256 ~ '^[0-9a-f]{64}$'),"
    "  created_at bigint NOT NULL)",
    "CREATE TABLE sandboxes ("
    "  id text CONSTRAINT sandboxes_pkey PRIMARY KEY " DBP_NAME_CHECK("id") ","
    "  kind text NOT NULL CHECK (kind IN ('local', 'static', 'reverse')),"
    "  url text CHECK ((kind = 'static') = (url IS NOT NULL)),"
    "  created_at bigint NOT NULL,"
    "  link_up boolean NOT NULL DEFAULT false,"
    "  link_since bigint NOT NULL CHECK (link_since >= 0),"
    "  link_rtt_us bigint NOT NULL DEFAULT -1 CHECK (link_rtt_us >= -1))",
    "CREATE TABLE terminals ("
    "  seq bigint GENERATED ALWAYS AS IDENTITY CONSTRAINT terminals_seq_key UNIQUE,"
    "  id text CONSTRAINT terminals_pkey PRIMARY KEY " DBP_NAME_CHECK("id") ","
    "  sandbox_id text NOT NULL CONSTRAINT terminals_sandbox_fkey REFERENCES sandboxes (id),"
    "  channel bigint NOT NULL CHECK (channel BETWEEN 1 AND 4294967295),"
    "  argv text NOT NULL,"
    "  cwd text NOT NULL,"
    "  env text NOT NULL,"
    "  cols integer NOT NULL CHECK (cols BETWEEN 1 AND 4096),"
    "  rows integer NOT NULL CHECK (rows BETWEEN 1 AND 4096),"
    "  mode text NOT NULL CHECK (mode IN ('pty', 'pipes')),"
    "  state text NOT NULL"
    "    CHECK (state IN ('opening', 'running', 'exited', 'closed', 'lost')),"
    "  exit_code integer,"
    "  exit_signal integer,"
    "  created_at bigint NOT NULL,"
    "  ended_at bigint,"
    "  out_offset bigint NOT NULL DEFAULT 0 CHECK (out_offset >= 0),"
    "  err_offset bigint NOT NULL DEFAULT 0 CHECK (err_offset >= 0),"
    "  rec_bytes bigint NOT NULL DEFAULT 0 CHECK (rec_bytes >= 0),"
    "  CHECK ((exit_code IS NULL AND exit_signal IS NULL)"
    "    OR (exit_signal = 0 AND exit_code BETWEEN 0 AND 255)"
    "    OR (exit_signal BETWEEN 1 AND 127 AND exit_code = -1)))",
    "CREATE UNIQUE INDEX terminals_live_channel ON terminals (sandbox_id, channel)"
    "  WHERE state IN ('opening', 'running', 'exited')",
    "CREATE INDEX terminals_sandbox ON terminals (sandbox_id, created_at, seq)",
    "CREATE TABLE audit ("
    "  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    "  at bigint NOT NULL CHECK (at >= 0),"
    "  actor text NOT NULL,"
    "  action text NOT NULL,"
    "  target text NOT NULL DEFAULT '',"
    "  detail text NOT NULL DEFAULT '{}')",
    "CREATE INDEX audit_at ON audit (at, id)",
    "CREATE INDEX audit_actor ON audit (actor, at)",
    "CREATE INDEX audit_action ON audit (action, at)",
    NULL,
};

/* Schema 2, as db_sqlite.c's dbs_schema_v2. */
static const char *const dbp_schema_v2[] = {
    "ALTER TABLE sandboxes ADD COLUMN record_input boolean NOT NULL DEFAULT false",
    "ALTER TABLE terminals ADD COLUMN creator text NOT NULL DEFAULT ''",
    "ALTER TABLE terminals ADD COLUMN record_input boolean NOT NULL DEFAULT false",
    NULL,
};

/* Web sessions: the same table as db_sqlite.c's dbs_schema_v3. */
#define DBP_HEX64_CHECK(col) "CHECK (" col " ~ '^[0-9a-f]{64}$')"
static const char *const dbp_schema_v3[] = {
    "CREATE TABLE sessions ("
    "  id_sha256 text CONSTRAINT sessions_pkey PRIMARY KEY " DBP_HEX64_CHECK("id_sha256") ","
    "  csrf_sha256 text NOT NULL " DBP_HEX64_CHECK("csrf_sha256") ","
    "  user_name text NOT NULL CONSTRAINT sessions_user_fkey REFERENCES users (name)"
    "    ON DELETE CASCADE,"
    "  created_at bigint NOT NULL CHECK (created_at >= 0),"
    "  last_seen bigint NOT NULL CHECK (last_seen >= created_at),"
    "  expires_at bigint NOT NULL CHECK (expires_at > created_at))",
    "CREATE INDEX sessions_user ON sessions (user_name)",
    "CREATE INDEX sessions_expires ON sessions (expires_at)",
    NULL,
};

/* Schema 4, as db_sqlite.c's dbs_schema_v4. */
static const char *const dbp_schema_v4[] = {
    "ALTER TABLE sandboxes ADD COLUMN network text NOT NULL DEFAULT 'default'"
    "  CONSTRAINT sandboxes_network_check CHECK (network IN ('default', 'host', 'none'))",
    "ALTER TABLE sandboxes ADD CONSTRAINT sandboxes_network_local_check"
    "  CHECK (network = 'default' OR kind = 'local')",
    NULL,
};
// clang-format on

struct dbp_migration {
    const char *name;
    const char *const *sql; /* statements, NULL-terminated */
};

/* dbp_migrations[i] upgrades the schema from version i to i + 1, with the
 * same name as the SQLite backend's step. Append only. */
static const struct dbp_migration dbp_migrations[] = {
    {"users, sandboxes, terminals, audit", dbp_schema_v1},
    {"terminal creator, record_input", dbp_schema_v2},
    {"web sessions", dbp_schema_v3},
    {"sandbox network", dbp_schema_v4},
};

_Static_assert(sizeof dbp_migrations / sizeof dbp_migrations[0] == DB_SCHEMA_VERSION,
               "one migration per schema version");
_Static_assert(AL_MAX_COLS == 4096 && AL_MAX_ROWS == 4096, "the CHECKs on cols and rows");

/* Where the version lives; created with the first migration, in its
 * transaction. */
static const char dbp_version_table[] = "CREATE TABLE schema_version ("
                                        "  app text PRIMARY KEY CHECK (app = 'airlock'),"
                                        "  version integer NOT NULL CHECK (version >= 0))";

/* ---- messages ------------------------------------------------------------- */

static struct dbp *dbp_of(struct db *db)
{
    return (struct dbp *)db->impl;
}

/* msg with every secret replaced by DBP_MASK, in place (cap bytes). */
static void dbp_mask(const struct dbp *p, char *msg, size_t cap)
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
__attribute__((format(printf, 3, 4))) static int dbp_fail(struct db *db, int code, const char *fmt,
                                                          ...)
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
static void dbp_one_line(const char *in, char *out, size_t cap)
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
static void dbp_conn_reason(const struct dbp *p, char *out, size_t cap)
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

static bool dbp_state_is(const char *state, const char *want)
{
    return state && strcmp(state, want) == 0;
}

static bool dbp_class_is(const char *state, const char *cls)
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

/* ---- connection and statements -------------------------------------------- */

static void dbp_notice(void *arg, const PGresult *res)
{
    (void)arg; /* notices and warnings are not ours to print */
    (void)res;
}

/* lock_timeout, statement_timeout, synchronous_commit (see the top). */
static int dbp_session(struct db *db)
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
static int dbp_exec(struct db *db, const char *what, const char *sql, int n,
                    const char *const *params, struct dbp_res *r)
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
static int dbp_run(struct db *db, const char *what, const char *sql, int n,
                   const char *const *params)
{
    struct dbp_res r;
    int rc = dbp_exec(db, what, sql, n, params, &r);
    PQclear(r.res);
    return rc;
}

/* Whether exactly one row was inserted, updated or deleted. */
static bool dbp_one_changed(PGresult *res)
{
    return strcmp(PQcmdTuples(res), "1") == 0;
}

static int dbp_begin(struct db *db)
{
    int rc = dbp_run(db, "begin", "BEGIN", 0, NULL);
    dbp_of(db)->in_tx = rc == AL_OK;
    return rc;
}

static int dbp_commit(struct db *db)
{
    int rc = dbp_run(db, "commit", "COMMIT", 0, NULL);
    dbp_of(db)->in_tx = false;
    return rc;
}

/* Roll back an open transaction after an error, keeping its message. */
static void dbp_rollback(struct db *db)
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

typedef int (*dbp_row_fn)(struct db *db, const PGresult *res, int row, void *ctx);

/* Run a query and hand each row to fn until it returns non-zero, which is
 * then returned as is. The rows come through a cursor WITH HOLD (the
 * result is kept by the server) DBP_FETCH_ROWS at a time, so memory stays
 * bounded and the connection is idle while fn runs: db.h forbids a
 * callback to use the same db, but one that does (the relay audits from
 * one) must not cut the listing short, as a nested statement would a
 * stream in libpq's single-row mode. */
static int dbp_list(struct db *db, const char *what, const char *sql, int n,
                    const char *const *params, dbp_row_fn fn, void *ctx)
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
        for (int i = 0; rc == AL_OK && i < rows; i++)
            rc = fn(db, r.res, i, ctx);
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
static int dbp_col_i64(struct db *db, const PGresult *res, int row, int col, int64_t lo, int64_t hi,
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

static int dbp_col_bool(struct db *db, const PGresult *res, int row, int col, bool *out)
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

static void dbp_i64_text(char *buf, size_t cap, int64_t v)
{
    (void)snprintf(buf, cap, "%lld", (long long)v);
}

/* ---- open, migrate, close ------------------------------------------------------ */

/* Keep a copy of secret s (len bytes) to mask. */
static int dbp_keep_secret(struct db *db, const char *s, size_t len)
{
    struct dbp *p = dbp_of(db);
    if (len == 0)
        return AL_OK;
    for (size_t k = 0; k < DBP_SECRETS; k++) {
        if (p->secret[k] && strlen(p->secret[k]) == len && memcmp(p->secret[k], s, len) == 0)
            return AL_OK;
        if (!p->secret[k]) {
            p->secret[k] = strndup(s, len);
            return p->secret[k] ? AL_OK : db_fail(db, AL_E_NOMEM, "out of memory");
        }
    }
    return AL_OK; /* three spellings are all there are */
}

/* The password as the URL spells it, before libpq sees it: in the user
 * part (postgres://user:PASSWORD@host; libpq ends it at the first '@'
 * before any '/') and as a "password=" query parameter. */
static int dbp_raw_secrets(struct db *db, const char *url)
{
    const char *s = strstr(url, "://");
    if (!s)
        return AL_OK;
    s += 3;
    size_t n = strcspn(s, "@/");
    if (s[n] == '@') {
        const char *colon = memchr(s, ':', n);
        if (colon) {
            int rc = dbp_keep_secret(db, colon + 1, (size_t)(s + n - colon - 1));
            if (rc != AL_OK)
                return rc;
        }
    }
    const char *q = strchr(s, '?');
    for (const char *kv = q ? q + 1 : NULL; kv && *kv != '\0';) {
        size_t len = strcspn(kv, "&");
        static const char key[] = "password=";
        if (len >= sizeof key - 1 && strncmp(kv, key, sizeof key - 1) == 0) {
            int rc = dbp_keep_secret(db, kv + sizeof key - 1, len - (sizeof key - 1));
            if (rc != AL_OK)
                return rc;
        }
        kv = kv[len] == '&' ? kv + len + 1 : NULL;
    }
    return AL_OK;
}

/* Check the URL with libpq's own parser (AL_E_INVAL with its reason) and
 * keep the password it decodes. */
static int dbp_parse_url(struct db *db, const char *url)
{
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(url, &perr);
    if (!opts) {
        char why[DBP_REASON_MAX];
        dbp_one_line(perr ? perr : "out of memory", why, sizeof why);
        int rc = perr ? dbp_fail(db, AL_E_INVAL, "PostgreSQL URL: %s", why)
                      : dbp_fail(db, AL_E_NOMEM, "out of memory");
        OPENSSL_cleanse(why, sizeof why);
        PQfreemem(perr);
        return rc;
    }
    int rc = AL_OK;
    for (const PQconninfoOption *o = opts; o->keyword && rc == AL_OK; o++)
        if (strcmp(o->keyword, "password") == 0 && o->val)
            rc = dbp_keep_secret(db, o->val, strlen(o->val));
    for (PQconninfoOption *o = opts; o->keyword; o++)
        if (o->val)
            OPENSSL_cleanse(o->val, strlen(o->val));
    PQconninfoFree(opts);
    return rc;
}

/* Whether the version table exists (in the search path). */
static int dbp_version_exists(struct db *db, bool *exists)
{
    struct dbp_res r;
    int rc = dbp_exec(db, "read the schema version",
                      "SELECT to_regclass('schema_version') IS NOT NULL", 0, NULL, &r);
    if (rc == AL_OK)
        rc = dbp_col_bool(db, r.res, 0, 0, exists);
    PQclear(r.res);
    return rc;
}

/* The schema version (0: none yet); AL_E_FORMAT for another
 * application's schema_version table, AL_E_VERSION for a newer one. */
static int dbp_read_version(struct db *db, bool *exists, int64_t *version)
{
    struct dbp *p = dbp_of(db);
    *version = 0;
    int rc = dbp_version_exists(db, exists);
    if (rc != AL_OK || !*exists)
        return rc;
    struct dbp_res r;
    rc = dbp_exec(db, "read the schema version",
                  "SELECT version FROM schema_version WHERE app = 'airlock'", 0, NULL, &r);
    if (rc == AL_OK && PQntuples(r.res) != 1)
        rc = AL_E_FORMAT;
    else if (rc == AL_OK)
        rc = dbp_col_i64(db, r.res, 0, 0, 0, DBP_VERSION_MAX, NULL, version);
    PQclear(r.res);
    if (rc == AL_E_FORMAT || dbp_class_is(r.state, "42"))
        return dbp_fail(db, AL_E_FORMAT,
                        "%s: its table schema_version is another application's "
                        "(use a database or schema of Airlock's own)",
                        p->label);
    if (rc == AL_OK && *version > DB_SCHEMA_VERSION)
        rc = dbp_fail(db, AL_E_VERSION,
                      "%s has schema version %lld, newer than this airlockd knows (%d): "
                      "run a newer airlockd",
                      p->label, (long long)*version, DB_SCHEMA_VERSION);
    return rc;
}

/* Apply the one migration that follows the version found under the lock:
 * a session advisory lock, taken before the transaction begins so that the
 * transaction sees the catalog as whoever held the lock left it (a lock
 * taken inside would leave this session's cached "no schema_version" from
 * before, which to_regclass trusts). */
static int dbp_migrate_step(struct db *db, bool *done)
{
    char key[DBP_INT_TEXT];
    dbp_i64_text(key, sizeof key, DBP_LOCK_KEY);
    const char *const lock[] = {key};
    int rc = dbp_run(db, "lock for migrations", "SELECT pg_advisory_lock($1::bigint)", 1, lock);
    if (rc != AL_OK)
        return rc;
    rc = dbp_begin(db);
    bool exists = false;
    int64_t v = 0;
    if (rc == AL_OK)
        rc = dbp_read_version(db, &exists, &v);
    if (rc == AL_OK && !exists) {
        rc = dbp_run(db, "create schema_version", dbp_version_table, 0, NULL);
        if (rc == AL_OK)
            rc =
                dbp_run(db, "create schema_version",
                        "INSERT INTO schema_version (app, version) VALUES ('airlock', 0)", 0, NULL);
    }
    bool step = rc == AL_OK && v < DB_SCHEMA_VERSION; /* else another process got there first */
    const struct dbp_migration *m = &dbp_migrations[step ? v : 0];
    char what[64];
    (void)snprintf(what, sizeof what, "migrate to schema version %lld", (long long)v + 1);
    for (size_t i = 0; step && rc == AL_OK && m->sql[i]; i++)
        rc = dbp_run(db, what, m->sql[i], 0, NULL);
    int64_t now = 0;
    if (step && rc == AL_OK && db_now(&now) != AL_OK)
        rc = dbp_fail(db, AL_E_IO, "cannot read the clock");
    char next[DBP_INT_TEXT], at[DBP_INT_TEXT];
    dbp_i64_text(next, sizeof next, v + 1);
    dbp_i64_text(at, sizeof at, now);
    const char *const rec[] = {next, m->name, at};
    if (step && rc == AL_OK)
        rc = dbp_run(db, what,
                     "INSERT INTO schema_migrations (version, name, applied_at)"
                     " VALUES ($1, $2, $3)",
                     3, rec);
    if (step && rc == AL_OK)
        rc = dbp_run(db, what, "UPDATE schema_version SET version = $1 WHERE app = 'airlock'", 1,
                     rec);
    if (rc == AL_OK)
        rc = dbp_commit(db);
    if (rc != AL_OK)
        dbp_rollback(db);
    /* Unlocked with the connection if that is what failed; else by hand,
     * keeping the first error. */
    if (PQstatus(dbp_of(db)->conn) == CONNECTION_OK) {
        char first[DB_MSG_MAX];
        (void)snprintf(first, sizeof first, "%s", db->msg);
        int urc =
            dbp_run(db, "unlock after migrating", "SELECT pg_advisory_unlock($1::bigint)", 1, lock);
        if (rc == AL_OK)
            rc = urc;
        else
            (void)snprintf(db->msg, sizeof db->msg, "%s", first);
    }
    if (rc == AL_OK)
        *done = !step || v + 1 == DB_SCHEMA_VERSION;
    return rc;
}

static int dbp_close(struct db *db)
{
    struct dbp *p = dbp_of(db);
    if (!p)
        return AL_OK;
    PQfinish(p->conn); /* NULL is fine */
    for (size_t k = 0; k < DBP_SECRETS; k++) {
        if (p->secret[k]) {
            OPENSSL_cleanse(p->secret[k], strlen(p->secret[k]));
            free(p->secret[k]);
        }
    }
    free(p);
    db->impl = NULL;
    return AL_OK;
}

static int dbp_open(struct db *db, const char *url)
{
    if (strncmp(url, DBP_SCHEME, strlen(DBP_SCHEME)) != 0 &&
        strncmp(url, DBP_SCHEME_LONG, strlen(DBP_SCHEME_LONG)) != 0)
        return db_fail(db, AL_E_INVAL,
                       "a PostgreSQL URL is postgres://[USER[:PASSWORD]@][HOST][:PORT][/DBNAME]"
                       "[?PARAM=VALUE&...]");
    struct dbp *p = calloc(1, sizeof *p);
    if (!p)
        return db_fail(db, AL_E_NOMEM, "out of memory");
    db->impl = p;
    (void)snprintf(p->label, sizeof p->label, "PostgreSQL");

    int rc = dbp_raw_secrets(db, url);
    if (rc == AL_OK)
        rc = dbp_parse_url(db, url);
    if (rc == AL_OK) {
        char timeout[DBP_INT_TEXT];
        (void)snprintf(timeout, sizeof timeout, "%d", DBP_CONNECT_TIMEOUT_S);
        /* Before dbname: defaults the URL may override; after it: ours. */
        const char *const kw[] = {"connect_timeout",
                                  "fallback_application_name",
                                  "keepalives_idle",
                                  "keepalives_interval",
                                  "keepalives_count",
                                  "tcp_user_timeout",
                                  "dbname",
                                  "client_encoding",
                                  NULL};
        const char *const val[] = {timeout, "airlockd", "30",   "10", "3",
                                   "30000", url,        "UTF8", NULL};
        p->conn = PQconnectdbParams(kw, val, 1);
        if (!p->conn) {
            rc = db_fail(db, AL_E_NOMEM, "out of memory");
        } else if (PQstatus(p->conn) != CONNECTION_OK) {
            char why[DBP_REASON_MAX];
            dbp_conn_reason(p, why, sizeof why);
            rc = dbp_fail(db, PQconnectionNeedsPassword(p->conn) ? AL_E_PERM : AL_E_IO,
                          "PostgreSQL: cannot connect: %s", why);
        }
    }
    if (rc == AL_OK) {
        (void)PQsetNoticeReceiver(p->conn, dbp_notice, NULL);
        (void)snprintf(p->label, sizeof p->label, "PostgreSQL database %s", PQdb(p->conn));
        dbp_mask(p, p->label, sizeof p->label);
        rc = dbp_session(db);
    }
    bool exists = false;
    int64_t version = 0;
    if (rc == AL_OK)
        rc = dbp_read_version(db, &exists, &version);
    for (bool done = version == DB_SCHEMA_VERSION; rc == AL_OK && !done;)
        rc = dbp_migrate_step(db, &done);

    if (rc != AL_OK) {
        char keep[DB_MSG_MAX];
        (void)snprintf(keep, sizeof keep, "%s", db->msg);
        (void)dbp_close(db); /* the open's error is the one to report */
        (void)snprintf(db->msg, sizeof db->msg, "%s", keep);
    }
    return rc;
}

/* ---- users ---------------------------------------------------------------------- */

#define DBP_USER_COLS "name, role, created_at"

static int dbp_row_user(struct db *db, const PGresult *res, int row, struct db_user *u)
{
    int role = 0;
    int rc = dbp_col_text(db, res, row, 0, u->name, sizeof u->name, false);
    if (rc == AL_OK)
        rc = dbp_col_enum(db, res, row, 1, db_parse_role_int, &role);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 2, 0, INT64_MAX, NULL, &u->created_at);
    u->role = (enum db_role)role;
    return rc;
}

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
    struct dbp_res r;
    int rc = dbp_exec(db, "find user", "SELECT " DBP_USER_COLS " FROM users WHERE key_sha256 = $1",
                      1, v, &r);
    if (rc == AL_OK && PQntuples(r.res) == 0)
        rc = db_fail(db, AL_E_NOENT, "no user holds this API key");
    if (rc == AL_OK)
        rc = dbp_row_user(db, r.res, 0, out);
    PQclear(r.res);
    return rc;
}

/* A listing in progress: the caller's callback and context, and the row
 * handed to it (on the heap: struct db_terminal is large). */
struct dbp_list {
    union {
        db_user_cb user;
        db_sandbox_cb sandbox;
        db_terminal_cb terminal;
        db_audit_cb audit;
    } cb;
    void *ctx;
    void *row;
};

static int dbp_user_row(struct db *db, const PGresult *res, int row, void *ctx)
{
    struct dbp_list *l = ctx;
    struct db_user u;
    int rc = dbp_row_user(db, res, row, &u);
    return rc == AL_OK ? l->cb.user(l->ctx, &u) : rc;
}

static int dbp_user_list(struct db *db, db_user_cb cb, void *ctx)
{
    struct dbp_list l = {.cb.user = cb, .ctx = ctx};
    return dbp_list(db, "list users",
                    "SELECT " DBP_USER_COLS " FROM users ORDER BY name COLLATE \"C\"", 0, NULL,
                    dbp_user_row, &l);
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

#define DBP_SANDBOX_COLS                                                                           \
    "id, kind, url, created_at, link_up, link_since, link_rtt_us, record_input, network"

static int dbp_row_sandbox(struct db *db, const PGresult *res, int row, struct db_sandbox *sb)
{
    int kind = 0;
    int rc = dbp_col_text(db, res, row, 0, sb->id, sizeof sb->id, false);
    if (rc == AL_OK)
        rc = dbp_col_enum(db, res, row, 1, db_parse_kind_int, &kind);
    if (rc == AL_OK)
        rc = dbp_col_text(db, res, row, 2, sb->url, sizeof sb->url, true);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 3, 0, INT64_MAX, NULL, &sb->created_at);
    if (rc == AL_OK)
        rc = dbp_col_bool(db, res, row, 4, &sb->link_up);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 5, 0, INT64_MAX, NULL, &sb->link_since);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 6, -1, INT64_MAX, NULL, &sb->rtt_us);
    if (rc == AL_OK)
        rc = dbp_col_bool(db, res, row, 7, &sb->record_input);
    int net = DB_NETWORK_DEFAULT;
    if (rc == AL_OK)
        rc = dbp_col_enum(db, res, row, 8, db_parse_network_int, &net);
    sb->kind = (enum db_sandbox_kind)kind;
    sb->network = (enum db_sandbox_network)net;
    return rc;
}

static int dbp_sandbox_add(struct db *db, const struct db_sandbox_spec *sp, int64_t now)
{
    char at[DBP_INT_TEXT];
    dbp_i64_text(at, sizeof at, now);
    const char *const v[] = {
        sp->id, db_sandbox_kind_name(sp->kind),      sp->url,
        at,     sp->record_input ? "true" : "false", db_sandbox_network_name(sp->network)};
    struct dbp_res r;
    int rc = dbp_exec(db, "add sandbox",
                      "INSERT INTO sandboxes (id, kind, url, created_at, link_up, link_since,"
                      " link_rtt_us, record_input, network)"
                      " VALUES ($1, $2, $3, $4, false, $4, -1, $5, $6)",
                      6, v, &r);
    PQclear(r.res);
    if (dbp_state_is(r.state, "23505"))
        rc = db_fail(db, AL_E_EXISTS, "sandbox %s already exists", sp->id);
    return rc;
}

static int dbp_sandbox_get(struct db *db, const char *id, struct db_sandbox *out)
{
    const char *const v[] = {id};
    struct dbp_res r;
    int rc = dbp_exec(db, "get sandbox", "SELECT " DBP_SANDBOX_COLS " FROM sandboxes WHERE id = $1",
                      1, v, &r);
    if (rc == AL_OK && PQntuples(r.res) == 0)
        rc = db_fail(db, AL_E_NOENT, "no sandbox %s", id);
    if (rc == AL_OK)
        rc = dbp_row_sandbox(db, r.res, 0, out);
    PQclear(r.res);
    return rc;
}

static int dbp_sandbox_row(struct db *db, const PGresult *res, int row, void *ctx)
{
    struct dbp_list *l = ctx;
    int rc = dbp_row_sandbox(db, res, row, l->row);
    return rc == AL_OK ? l->cb.sandbox(l->ctx, l->row) : rc;
}

static int dbp_sandbox_list(struct db *db, db_sandbox_cb cb, void *ctx)
{
    struct dbp_list l = {.cb.sandbox = cb, .ctx = ctx, .row = malloc(sizeof(struct db_sandbox))};
    if (!l.row) /* the URL buffer is large */
        return db_fail(db, AL_E_NOMEM, "out of memory");
    int rc = dbp_list(db, "list sandboxes",
                      "SELECT " DBP_SANDBOX_COLS " FROM sandboxes ORDER BY id COLLATE \"C\"", 0,
                      NULL, dbp_sandbox_row, &l);
    free(l.row);
    return rc;
}

static int dbp_sandbox_set_link(struct db *db, const char *id, bool up, int64_t since,
                                int64_t rtt_us)
{
    char s[DBP_INT_TEXT], rtt[DBP_INT_TEXT];
    dbp_i64_text(s, sizeof s, since);
    dbp_i64_text(rtt, sizeof rtt, rtt_us);
    const char *const v[] = {id, up ? "true" : "false", s, rtt};
    struct dbp_res r;
    int rc = dbp_exec(db, "set sandbox link",
                      "UPDATE sandboxes SET link_up = $2, link_since = $3, link_rtt_us = $4"
                      " WHERE id = $1",
                      4, v, &r);
    if (rc == AL_OK && !dbp_one_changed(r.res))
        rc = db_fail(db, AL_E_NOENT, "no sandbox %s", id);
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

#define DBP_TERM_COLS                                                                              \
    "id, sandbox_id, channel, argv, cwd, env, cols, rows, mode, state, exit_code, exit_signal,"    \
    " created_at, ended_at, out_offset, err_offset, rec_bytes, creator, record_input"

static int dbp_row_terminal(struct db *db, const PGresult *res, int row, struct db_terminal *t)
{
    static const int64_t no_code = -1, zero = 0;
    int mode = 0, state = 0;
    int64_t v[5] = {0};
    int rc = dbp_col_text(db, res, row, 0, t->id, sizeof t->id, false);
    if (rc == AL_OK)
        rc = dbp_col_text(db, res, row, 1, t->sandbox_id, sizeof t->sandbox_id, false);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 2, 1, (int64_t)UINT32_MAX, NULL, &v[0]);
    if (rc == AL_OK)
        rc = dbp_col_text(db, res, row, 3, t->argv_json, sizeof t->argv_json, false);
    if (rc == AL_OK)
        rc = dbp_col_text(db, res, row, 4, t->cwd, sizeof t->cwd, false);
    if (rc == AL_OK)
        rc = dbp_col_text(db, res, row, 5, t->env_json, sizeof t->env_json, false);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 6, 1, AL_MAX_COLS, NULL, &v[1]);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 7, 1, AL_MAX_ROWS, NULL, &v[2]);
    if (rc == AL_OK)
        rc = dbp_col_enum(db, res, row, 8, db_parse_mode_int, &mode);
    if (rc == AL_OK)
        rc = dbp_col_enum(db, res, row, 9, db_parse_state_int, &state);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 10, -1, DBP_EXIT_CODE_MAX, &no_code, &v[3]);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 11, 0, DBP_EXIT_SIGNAL_MAX, &zero, &v[4]);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 12, 0, INT64_MAX, NULL, &t->created_at);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 13, 0, INT64_MAX, &zero, &t->ended_at);
    int64_t out = 0, err = 0, rec = 0;
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 14, 0, INT64_MAX, NULL, &out);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 15, 0, INT64_MAX, NULL, &err);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 16, 0, INT64_MAX, NULL, &rec);
    if (rc == AL_OK)
        rc = dbp_col_text(db, res, row, 17, t->creator, sizeof t->creator, false);
    if (rc == AL_OK)
        rc = dbp_col_bool(db, res, row, 18, &t->record_input);
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
    struct dbp_res r;
    int rc = dbp_exec(db, "get terminal", "SELECT " DBP_TERM_COLS " FROM terminals WHERE id = $1",
                      1, v, &r);
    if (rc == AL_OK && PQntuples(r.res) == 0)
        rc = db_fail(db, AL_E_NOENT, "no terminal %s", id);
    if (rc == AL_OK)
        rc = dbp_row_terminal(db, r.res, 0, out);
    PQclear(r.res);
    return rc;
}

static int dbp_terminal_row(struct db *db, const PGresult *res, int row, void *ctx)
{
    struct dbp_list *l = ctx;
    int rc = dbp_row_terminal(db, res, row, l->row);
    return rc == AL_OK ? l->cb.terminal(l->ctx, l->row) : rc;
}

static int dbp_terminal_list(struct db *db, const char *sandbox_id, db_terminal_cb cb, void *ctx)
{
    struct dbp_list l = {.cb.terminal = cb, .ctx = ctx, .row = malloc(sizeof(struct db_terminal))};
    if (!l.row) /* large: argv and env buffers */
        return db_fail(db, AL_E_NOMEM, "out of memory");
    const char *const v[] = {sandbox_id};
    int rc = dbp_list(db, "list terminals",
                      "SELECT " DBP_TERM_COLS " FROM terminals"
                      " WHERE $1::text IS NULL OR sandbox_id = $1 ORDER BY created_at, seq",
                      1, v, dbp_terminal_row, &l);
    free(l.row);
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

static int dbp_terminal_cas_state(struct db *db, const char *id, enum db_term_state from,
                                  enum db_term_state to, int64_t now)
{
    char at[DBP_INT_TEXT];
    dbp_i64_text(at, sizeof at, now);
    const char *const v[] = {id, db_term_state_name(from), db_term_state_name(to), at,
                             dbp_final(to) ? "true" : "false"};
    return dbp_cas(db, "set terminal state", id,
                   "UPDATE terminals SET state = $3, ended_at = CASE WHEN $5::boolean"
                   " THEN coalesce(ended_at, $4::bigint) ELSE ended_at END"
                   " WHERE id = $1 AND state = $2",
                   5, v);
}

static int dbp_terminal_cas_exit(struct db *db, const char *id, enum db_term_state from, int code,
                                 int signo, int64_t now)
{
    char c[DBP_INT_TEXT], s[DBP_INT_TEXT], at[DBP_INT_TEXT];
    dbp_i64_text(c, sizeof c, code);
    dbp_i64_text(s, sizeof s, signo);
    dbp_i64_text(at, sizeof at, now);
    const char *const v[] = {id, db_term_state_name(from), c, s, at};
    return dbp_cas(db, "set terminal exit", id,
                   "UPDATE terminals SET state = 'exited', exit_code = $3, exit_signal = $4,"
                   " ended_at = coalesce(ended_at, $5) WHERE id = $1 AND state = $2",
                   5, v);
}

/* After an offsets update matched no row: gone, or a value would shrink. */
static int dbp_offsets_missed(struct db *db, const char *id)
{
    const char *const v[] = {id};
    struct dbp_res r;
    int rc =
        dbp_exec(db, "read offsets",
                 "SELECT out_offset, err_offset, rec_bytes FROM terminals WHERE id = $1", 1, v, &r);
    if (rc == AL_OK && PQntuples(r.res) == 0)
        rc = db_fail(db, AL_E_NOENT, "no terminal %s", id);
    else if (rc == AL_OK)
        rc = db_fail(db, AL_E_STATE,
                     "offsets of terminal %s may not go backwards (stored: out %s, err %s, "
                     "recording %s bytes)",
                     id, PQgetvalue(r.res, 0, 0), PQgetvalue(r.res, 0, 1), PQgetvalue(r.res, 0, 2));
    PQclear(r.res);
    return rc;
}

static int dbp_terminal_set_offsets(struct db *db, const char *id, uint64_t out_offset,
                                    uint64_t err_offset, uint64_t rec_bytes)
{
    /* One statement, one commit, synchronous (see the top of this file). */
    char o[DBP_INT_TEXT], e[DBP_INT_TEXT], rb[DBP_INT_TEXT];
    dbp_i64_text(o, sizeof o, (int64_t)out_offset);
    dbp_i64_text(e, sizeof e, (int64_t)err_offset);
    dbp_i64_text(rb, sizeof rb, (int64_t)rec_bytes);
    const char *const v[] = {id, o, e, rb};
    struct dbp_res r;
    int rc = dbp_exec(db, "set offsets",
                      "UPDATE terminals SET out_offset = $2, err_offset = $3, rec_bytes = $4"
                      " WHERE id = $1 AND out_offset <= $2 AND err_offset <= $3"
                      " AND rec_bytes <= $4",
                      4, v, &r);
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
                         const char *target, const char *detail_json)
{
    char a[DBP_INT_TEXT];
    dbp_i64_text(a, sizeof a, at);
    const char *const v[] = {a, actor, action, target, detail_json};
    return dbp_run(db, "add audit",
                   "INSERT INTO audit (at, actor, action, target, detail)"
                   " VALUES ($1, $2, $3, $4, $5)",
                   5, v);
}

static int dbp_row_audit(struct db *db, const PGresult *res, int row, struct db_audit *a)
{
    int rc = dbp_col_i64(db, res, row, 0, 1, INT64_MAX, NULL, &a->id);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, res, row, 1, 0, INT64_MAX, NULL, &a->at);
    if (rc == AL_OK)
        rc = dbp_col_text(db, res, row, 2, a->actor, sizeof a->actor, false);
    if (rc == AL_OK)
        rc = dbp_col_text(db, res, row, 3, a->action, sizeof a->action, false);
    if (rc == AL_OK)
        rc = dbp_col_text(db, res, row, 4, a->target, sizeof a->target, false);
    if (rc == AL_OK)
        rc = dbp_col_text(db, res, row, 5, a->detail, sizeof a->detail, false);
    return rc;
}

static int dbp_audit_row(struct db *db, const PGresult *res, int row, void *ctx)
{
    struct dbp_list *l = ctx;
    int rc = dbp_row_audit(db, res, row, l->row);
    return rc == AL_OK ? l->cb.audit(l->ctx, l->row) : rc;
}

static int dbp_audit_query(struct db *db, const struct db_audit_filter *f, db_audit_cb cb,
                           void *ctx)
{
    struct dbp_list l = {.cb.audit = cb, .ctx = ctx, .row = malloc(sizeof(struct db_audit))};
    if (!l.row)
        return db_fail(db, AL_E_NOMEM, "out of memory");
    char since[DBP_INT_TEXT], limit[DBP_INT_TEXT];
    dbp_i64_text(since, sizeof since, f->since);
    dbp_i64_text(limit, sizeof limit, (int64_t)f->limit);
    const char *const v[] = {since, f->actor, f->action, limit};
    int rc = dbp_list(db, "query audit",
                      "SELECT id, at, actor, action, target, detail FROM audit"
                      " WHERE at >= $1::bigint AND ($2::text IS NULL OR actor = $2)"
                      " AND ($3::text IS NULL OR action = $3)"
                      " ORDER BY at DESC, id DESC LIMIT $4::bigint",
                      4, v, dbp_audit_row, &l);
    free(l.row);
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
    struct dbp_res r;
    int rc = dbp_exec(db, "find session",
                      "SELECT u.name, u.role, u.created_at, s.csrf_sha256, s.created_at,"
                      " s.last_seen, s.expires_at FROM sessions s"
                      " JOIN users u ON u.name = s.user_name WHERE s.id_sha256 = $1",
                      1, v, &r);
    if (rc == AL_OK && PQntuples(r.res) == 0)
        rc = db_fail(db, AL_E_NOENT, "no such session");
    if (rc == AL_OK)
        rc = dbp_row_user(db, r.res, 0, &out->user);
    if (rc == AL_OK)
        rc = dbp_col_text(db, r.res, 0, 3, csrf_hex, DB_HASH_HEX + 1, false);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, r.res, 0, 4, 0, INT64_MAX, NULL, &out->created_at);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, r.res, 0, 5, 0, INT64_MAX, NULL, &out->last_seen);
    if (rc == AL_OK)
        rc = dbp_col_i64(db, r.res, 0, 6, 0, INT64_MAX, NULL, &out->expires_at);
    PQclear(r.res);
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
    .session_add = dbp_session_add,
    .session_get = dbp_session_get,
    .session_touch = dbp_session_touch,
    .session_remove = dbp_session_remove,
    .session_expire = dbp_session_expire,
    .audit_add = dbp_audit_add,
    .audit_query = dbp_audit_query,
    .audit_prune = dbp_audit_prune,
};
