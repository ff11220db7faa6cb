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
 * backend writes, libpq's included (libpq quotes a malformed URL's parts).
 * API keys never reach this backend (only their SHA-256), and messages carry
 * PostgreSQL's primary message only, never its DETAIL (which can quote a
 * row).
 *
 * Schema: the same tables and rules as db_sqlite_schema.c's dbs_schema_v1, in
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
 * transactions; every other call is one statement, committed on its own,
 * a batch of audit rows too (one INSERT of many rows, where the SQLite
 * backend runs one statement per row in one transaction).
 * Text order (user and sandbox lists) is by bytes (COLLATE "C"), as in
 * SQLite, whatever the database's collation.
 *
 * Errors: SQLSTATE to AL_E_* as db_sqlite_stmt.c maps SQLite's codes:
 * unique violations AL_E_EXISTS (23505), other constraints AL_E_INVAL, a
 * foreign key as the SQLite backend reports it (no sandbox: AL_E_NOENT; a
 * sandbox still used by terminals: AL_E_STATE), lock and statement
 * timeouts AL_E_TIMEOUT, privileges AL_E_PERM, the connection AL_E_IO.
 *
 * Files: this one opens the connection (the URL checked by libpq, its
 * password's spellings kept for masking, the connection's settings),
 * closes it, and keeps the schema (version, migrations under the advisory
 * lock); the schema text is db_pg_schema.c, messages, statements and
 * column readers db_pg_exec.c, the backend's calls table by table and its
 * function table (db_pg_backend) db_pg_tables.c.
 */
#include "al_err.h"
#include "db.h"
#include "db_backend.h"
#include "db_pg.h"

#include <libpq-fe.h>
#include <openssl/crypto.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    DBP_CONNECT_TIMEOUT_S = 5, /* libpq connect_timeout (default) */
    DBP_LOCK_KEY = 0x41724c6b, /* "ArLk": the migration advisory lock */
    DBP_VERSION_MAX = 1000000, /* a sane schema_version.version */
};

#define DBP_SCHEME "postgres://"
#define DBP_SCHEME_LONG "postgresql://"

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

int dbp_close(struct db *db)
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

int dbp_open(struct db *db, const char *url)
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
    return rc; /* on failure db_open closes what this made */
}
