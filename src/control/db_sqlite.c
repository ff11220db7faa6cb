/*
 * db_sqlite: the SQLite backend of db.h ("sqlite:PATH").
 *
 * Data model: struct dbs owns one sqlite3 connection to one file. The file
 * is created here with mode 0600 before SQLite opens it (SQLite gives its
 * -wal and -shm files the database file's mode), and an existing file, WAL
 * or shm that group or others may access is refused, as is a symbolic link.
 *
 * Connection settings: WAL, synchronous=NORMAL, foreign keys on, a busy
 * timeout, defensive mode, untrusted schema, no double-quoted strings.
 * In WAL mode NORMAL syncs only at checkpoints: a commit survives a crash
 * of airlockd (kill -9) but the last commits may roll back after a power
 * loss or kernel crash. That is fine for everything here except the
 * terminal offsets: airlockd acknowledges bytes to the runner (which then
 * drops them from its ring) once their offsets are committed, so an offset
 * commit that a power loss undoes would be a gap that nobody can fill. The
 * offsets update therefore runs with synchronous=FULL (the WAL is fsync'ed
 * at that commit); it happens at the recording's bounded fsync interval,
 * so its cost stays small.
 *
 * Schema: PRAGMA user_version is the version of the schema (0 = empty);
 * dbs_migrations[i] takes it from i to i + 1, each in one IMMEDIATE
 * transaction that also records itself in schema_migrations, re-reading
 * user_version under the lock so that two processes opening together apply
 * each step once. application_id marks the file as Airlock's; a file with
 * another application's id or tables without ours is refused, and so is a
 * schema newer than DB_SCHEMA_VERSION. Tables are STRICT and repeat the
 * rules of db.c as CHECK constraints.
 *
 * Every statement is prepared, bound and finalized in the function that
 * uses it; values only ever go in as bound parameters.
 */
#include "al_err.h"
#include "al_limits.h"
#include "db.h"
#include "db_backend.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    DBS_APP_ID = 0x41724c6b,   /* "ArLk" in the file header */
    DBS_FILE_MODE = 0600,      /* the database file */
    DBS_SIDE_PATH_EXTRA = 8,   /* room for "-wal", "-shm" and "./" */
    DBS_PRAGMA_SQL_MAX = 64,   /* "PRAGMA user_version = N" */
    DBS_LINK_UP_MAX = 1,       /* link_up is 0 or 1 */
    DBS_EXIT_CODE_MAX = 255,   /* as the EXIT frame */
    DBS_EXIT_SIGNAL_MAX = 127, /* as the EXIT frame */
};

struct dbs {
    sqlite3 *h;
    char path[DB_PATH_MAX + DBS_SIDE_PATH_EXTRA];
};

/* ---- schema ------------------------------------------------------------- */

/* Names and ids as db.c checks them: [a-z0-9._-]{1,64}, first [a-z0-9].
 * A sandbox that terminals name cannot be deleted (foreign key, NO ACTION:
 * SQLite then reports SQLITE_CONSTRAINT_FOREIGNKEY). A channel number is
 * unique among a sandbox's live terminals only, so it is free again once
 * its terminal is closed or lost. */
// clang-format off
static const char dbs_schema_v1[] =
    "CREATE TABLE schema_migrations ("
    "  version INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL,"
    "  applied_at INTEGER NOT NULL"
    ") STRICT;"
    "CREATE TABLE users ("
    "  name TEXT PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 64"
    "    AND name GLOB '[a-z0-9]*' AND name NOT GLOB '*[^a-z0-9._-]*'),"
    "  role TEXT NOT NULL CHECK (role IN ('admin', 'operator', 'viewer')),"
    "  key_sha256 TEXT NOT NULL UNIQUE"
    "    CHECK (length(key_sha256) = 64 AND key_sha256 NOT GLOB '*[^0-9a-f]*'),"
    "  created_at INTEGER NOT NULL"
    ") STRICT;"
    "CREATE TABLE sandboxes ("
    "  id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64"
    "    AND id GLOB '[a-z0-9]*' AND id NOT GLOB '*[^a-z0-9._-]*'),"
    "  kind TEXT NOT NULL CHECK (kind IN ('local', 'static', 'reverse')),"
    "  url TEXT CHECK ((kind = 'static') = (url IS NOT NULL)),"
    "  created_at INTEGER NOT NULL,"
    "  link_up INTEGER NOT NULL DEFAULT 0 CHECK (link_up IN (0, 1)),"
    "  link_since INTEGER NOT NULL CHECK (link_since >= 0),"
    "  link_rtt_us INTEGER NOT NULL DEFAULT -1 CHECK (link_rtt_us >= -1)"
    ") STRICT;"
    "CREATE TABLE terminals ("
    "  id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64"
    "    AND id GLOB '[a-z0-9]*' AND id NOT GLOB '*[^a-z0-9._-]*'),"
    "  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id),"
    "  channel INTEGER NOT NULL CHECK (channel BETWEEN 1 AND 4294967295),"
    "  argv TEXT NOT NULL,"
    "  cwd TEXT NOT NULL,"
    "  env TEXT NOT NULL,"
    "  cols INTEGER NOT NULL CHECK (cols BETWEEN 1 AND 4096),"
    "  rows INTEGER NOT NULL CHECK (rows BETWEEN 1 AND 4096),"
    "  mode TEXT NOT NULL CHECK (mode IN ('pty', 'pipes')),"
    "  state TEXT NOT NULL"
    "    CHECK (state IN ('opening', 'running', 'exited', 'closed', 'lost')),"
    "  exit_code INTEGER,"
    "  exit_signal INTEGER,"
    "  created_at INTEGER NOT NULL,"
    "  ended_at INTEGER,"
    "  out_offset INTEGER NOT NULL DEFAULT 0 CHECK (out_offset >= 0),"
    "  err_offset INTEGER NOT NULL DEFAULT 0 CHECK (err_offset >= 0),"
    "  rec_bytes INTEGER NOT NULL DEFAULT 0 CHECK (rec_bytes >= 0),"
    "  CHECK ((exit_code IS NULL AND exit_signal IS NULL)"
    "    OR (exit_signal = 0 AND exit_code BETWEEN 0 AND 255)"
    "    OR (exit_signal BETWEEN 1 AND 127 AND exit_code = -1))"
    ") STRICT;"
    "CREATE UNIQUE INDEX terminals_live_channel ON terminals (sandbox_id, channel)"
    "  WHERE state IN ('opening', 'running', 'exited');"
    "CREATE INDEX terminals_sandbox ON terminals (sandbox_id, created_at);"
    "CREATE TABLE audit ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  at INTEGER NOT NULL CHECK (at >= 0),"
    "  actor TEXT NOT NULL,"
    "  action TEXT NOT NULL,"
    "  target TEXT NOT NULL DEFAULT '',"
    "  detail TEXT NOT NULL DEFAULT '{}'"
    ") STRICT;"
    "CREATE INDEX audit_at ON audit (at, id);"
    "CREATE INDEX audit_actor ON audit (actor, at);"
    "CREATE INDEX audit_action ON audit (action, at);"
    "PRAGMA application_id = 1098009707;"; /* DBS_APP_ID */

/* Schema 2: who made a terminal (its recording's reader, with admins), and
 * whether recordings keep input: per sandbox, off by default, and fixed on
 * each terminal when it is made. */
static const char dbs_schema_v2[] =
    "ALTER TABLE sandboxes ADD COLUMN record_input INTEGER NOT NULL DEFAULT 0"
    "  CHECK (record_input IN (0, 1));"
    "ALTER TABLE terminals ADD COLUMN creator TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE terminals ADD COLUMN record_input INTEGER NOT NULL DEFAULT 0"
    "  CHECK (record_input IN (0, 1));";

/* Web sessions (db.h): only hashes of the secrets; a user's removal
 * removes their sessions. */
static const char dbs_schema_v3[] =
    "CREATE TABLE sessions ("
    "  id_sha256 TEXT PRIMARY KEY"
    "    CHECK (length(id_sha256) = 64 AND id_sha256 NOT GLOB '*[^0-9a-f]*'),"
    "  csrf_sha256 TEXT NOT NULL"
    "    CHECK (length(csrf_sha256) = 64 AND csrf_sha256 NOT GLOB '*[^0-9a-f]*'),"
    "  user_name TEXT NOT NULL REFERENCES users (name) ON DELETE CASCADE,"
    "  created_at INTEGER NOT NULL CHECK (created_at >= 0),"
    "  last_seen INTEGER NOT NULL CHECK (last_seen >= created_at),"
    "  expires_at INTEGER NOT NULL CHECK (expires_at > created_at)"
    ") STRICT;"
    "CREATE INDEX sessions_user ON sessions (user_name);"
    "CREATE INDEX sessions_expires ON sessions (expires_at);";

/* Schema 4: a local sandbox's agents' network; rows from before follow
 * the server-wide setting, as they did. */
static const char dbs_schema_v4[] =
    "ALTER TABLE sandboxes ADD COLUMN network TEXT NOT NULL DEFAULT 'default'"
    "  CHECK (network IN ('default', 'host', 'none')"
    "    AND (network = 'default' OR kind = 'local'));";
// clang-format on

struct dbs_migration {
    const char *name;
    const char *sql;
};

/* dbs_migrations[i] upgrades the schema from version i to i + 1. Append
 * only: a released migration never changes. */
static const struct dbs_migration dbs_migrations[] = {
    {"users, sandboxes, terminals, audit", dbs_schema_v1},
    {"terminal creator, record_input", dbs_schema_v2},
    {"web sessions", dbs_schema_v3},
    {"sandbox network", dbs_schema_v4},
};

_Static_assert(sizeof dbs_migrations / sizeof dbs_migrations[0] == DB_SCHEMA_VERSION,
               "one migration per schema version");
_Static_assert(DBS_APP_ID == 1098009707, "the application_id in dbs_schema_v1");
_Static_assert(AL_MAX_COLS == 4096 && AL_MAX_ROWS == 4096, "the CHECKs on cols and rows");

/* ---- errors and statements ------------------------------------------------- */

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

static struct dbs *dbs_of(struct db *db)
{
    return (struct dbs *)db->impl;
}

/* Report SQLite error rc during `what`. */
static int dbs_err(struct db *db, int rc, const char *what)
{
    struct dbs *s = dbs_of(db);
    const char *m = s && s->h ? sqlite3_errmsg(s->h) : sqlite3_errstr(rc);
    return db_fail(db, dbs_code(rc), "%s: %s: %s", s ? s->path : "sqlite", what, m);
}

static int dbs_prepare(struct db *db, const char *sql, sqlite3_stmt **st)
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

/* Finalize st, keeping the first error (rc). */
static int dbs_finish(struct db *db, sqlite3_stmt *st, int rc)
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

/* One step: *row true for SQLITE_ROW, false for SQLITE_DONE; anything else
 * is an error whose raw (extended) code goes to *raw when not NULL. */
static int dbs_step(struct db *db, sqlite3_stmt *st, bool *row, int *raw)
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

/* Run every statement of sql (no parameters), discarding rows. */
static int dbs_exec(struct db *db, const char *sql)
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

/* The one integer a PRAGMA (or query) answers. */
static int dbs_query_int(struct db *db, const char *sql, int64_t *out)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db, sql, &st);
    if (rc != AL_OK)
        return rc;
    bool row = false;
    rc = dbs_step(db, st, &row, NULL);
    if (rc == AL_OK && (!row || sqlite3_column_type(st, 0) != SQLITE_INTEGER))
        rc = db_fail(db, AL_E_IO, "%s: '%s' gave no integer", dbs_of(db)->path, sql);
    if (rc == AL_OK)
        *out = (int64_t)sqlite3_column_int64(st, 0);
    return dbs_finish(db, st, rc);
}

/* The one text a PRAGMA answers, into buf. */
static int dbs_query_text(struct db *db, const char *sql, char *buf, size_t cap)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db, sql, &st);
    if (rc != AL_OK)
        return rc;
    bool row = false;
    rc = dbs_step(db, st, &row, NULL);
    const unsigned char *t = rc == AL_OK && row ? sqlite3_column_text(st, 0) : NULL;
    if (rc == AL_OK && !t)
        rc = db_fail(db, AL_E_IO, "%s: '%s' gave no text", dbs_of(db)->path, sql);
    if (rc == AL_OK)
        (void)snprintf(buf, cap, "%s", (const char *)t); /* truncation is fine */
    return dbs_finish(db, st, rc);
}

/* Roll back an open transaction after an error, keeping its message. */
static void dbs_rollback(struct db *db)
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

/* ---- column readers ---------------------------------------------------------- */

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

/* ---- open, migrate, close --------------------------------------------------- */

/* path must be a regular file (not a symlink) only its owner may access;
 * a missing file is fine when missing_ok. */
static int dbs_check_file(struct db *db, const char *path, bool missing_ok)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        int e = errno;
        if (e == ENOENT && missing_ok)
            return AL_OK;
        return db_fail(db, al_err_from_errno(e), "%s: %s", path, strerror(e));
    }
    if (S_ISLNK(st.st_mode))
        return db_fail(db, AL_E_PERM, "%s is a symbolic link; refusing to follow it", path);
    if (!S_ISREG(st.st_mode))
        return db_fail(db, AL_E_IO, "%s is not a regular file", path);
    if ((st.st_mode & 077) != 0)
        return db_fail(db, AL_E_PERM,
                       "%s has mode 0%03o: group or others may access it (chmod 600 it)", path,
                       (unsigned)(st.st_mode & 0777));
    return AL_OK;
}

/* Create the database file 0600 if missing; check it, its WAL and shm. */
static int dbs_prepare_file(struct db *db)
{
    struct dbs *s = dbs_of(db);
    int fd = open(s->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, DBS_FILE_MODE);
    if (fd >= 0) {
        int rc = AL_OK;
        if (fchmod(fd, DBS_FILE_MODE) != 0) /* exactly 0600 whatever the umask */
            rc = db_fail(db, AL_E_IO, "%s: chmod: %s", s->path, strerror(errno));
        if (close(fd) != 0 && rc == AL_OK)
            rc = db_fail(db, AL_E_IO, "%s: close: %s", s->path, strerror(errno));
        return rc;
    }
    int e = errno;
    if (e != EEXIST)
        return db_fail(db, al_err_from_errno(e), "cannot create %s: %s", s->path, strerror(e));
    int rc = dbs_check_file(db, s->path, false);
    static const char *const sides[] = {"-wal", "-shm"};
    for (size_t i = 0; rc == AL_OK && i < sizeof sides / sizeof sides[0]; i++) {
        char side[sizeof s->path];
        if (snprintf(side, sizeof side, "%s%s", s->path, sides[i]) >= (int)sizeof side)
            return db_fail(db, AL_E_TOOBIG, "database path too long");
        rc = dbs_check_file(db, side, true);
    }
    return rc;
}

static int dbs_config(struct db *db, int op, int value, const char *what)
{
    int got = -1;
    int rc = sqlite3_db_config(dbs_of(db)->h, op, value, &got);
    if (rc != SQLITE_OK)
        return dbs_err(db, rc, what);
    if (got != value)
        return db_fail(db, AL_E_IO, "%s: cannot set %s", dbs_of(db)->path, what);
    return AL_OK;
}

/* Refuse a file that is not ours, or ours from a newer airlockd. */
static int dbs_check_identity(struct db *db, int64_t *version)
{
    struct dbs *s = dbs_of(db);
    int64_t app = 0, objects = 0;
    int rc = dbs_query_int(db, "PRAGMA application_id", &app);
    if (rc == AL_OK)
        rc = dbs_query_int(db, "PRAGMA user_version", version);
    if (rc == AL_OK)
        rc = dbs_query_int(db, "SELECT count(*) FROM sqlite_master", &objects);
    if (rc == AL_E_FORMAT)
        return db_fail(db, rc, "%s is not an SQLite database", s->path);
    if (rc != AL_OK)
        return rc;
    if (app != DBS_APP_ID && (app != 0 || *version != 0 || objects != 0))
        return db_fail(db, AL_E_FORMAT, "%s is an SQLite database of another application", s->path);
    if (*version > DB_SCHEMA_VERSION)
        return db_fail(db, AL_E_VERSION,
                       "%s has schema version %lld, newer than this airlockd knows (%d): "
                       "run a newer airlockd",
                       s->path, (long long)*version, DB_SCHEMA_VERSION);
    return AL_OK;
}

/* Apply the one migration that follows the schema found under the lock. */
static int dbs_migrate_step(struct db *db, bool *done)
{
    int64_t v = 0;
    int rc = dbs_exec(db, "BEGIN IMMEDIATE");
    if (rc != AL_OK)
        return rc;
    rc = dbs_query_int(db, "PRAGMA user_version", &v);
    if (rc == AL_OK && (v < 0 || v > DB_SCHEMA_VERSION))
        rc = db_fail(db, AL_E_VERSION,
                     "%s has schema version %lld, newer than this airlockd knows (%d): "
                     "run a newer airlockd",
                     dbs_of(db)->path, (long long)v, DB_SCHEMA_VERSION);
    if (rc == AL_OK && v == DB_SCHEMA_VERSION) {
        *done = true; /* another process got there first */
        return dbs_exec(db, "COMMIT");
    }
    const struct dbs_migration *m = &dbs_migrations[rc == AL_OK ? v : 0];
    if (rc == AL_OK)
        rc = dbs_exec(db, m->sql);
    int64_t now = 0;
    if (rc == AL_OK && db_now(&now) != AL_OK)
        rc = db_fail(db, AL_E_IO, "cannot read the clock");
    sqlite3_stmt *st = NULL;
    if (rc == AL_OK)
        rc = dbs_prepare(db,
                         "INSERT INTO schema_migrations (version, name, applied_at)"
                         " VALUES (?1, ?2, ?3)",
                         &st);
    if (rc == AL_OK) {
        rc = dbs_bind_i64(db, st, 1, v + 1);
        if (rc == AL_OK)
            rc = dbs_bind_text(db, st, 2, m->name);
        if (rc == AL_OK)
            rc = dbs_bind_i64(db, st, 3, now);
        if (rc == AL_OK)
            rc = dbs_step(db, st, NULL, NULL);
        rc = dbs_finish(db, st, rc);
    }
    if (rc == AL_OK) {
        /* A PRAGMA takes no parameters; v + 1 is our own small integer. */
        char sql[DBS_PRAGMA_SQL_MAX];
        (void)snprintf(sql, sizeof sql, "PRAGMA user_version = %lld", (long long)v + 1);
        rc = dbs_exec(db, sql);
    }
    if (rc == AL_OK)
        rc = dbs_exec(db, "COMMIT");
    if (rc != AL_OK) {
        dbs_rollback(db);
        return rc;
    }
    *done = v + 1 == DB_SCHEMA_VERSION;
    return AL_OK;
}

static int dbs_close(struct db *db)
{
    struct dbs *s = dbs_of(db);
    if (!s)
        return AL_OK;
    int rc = AL_OK;
    if (s->h) {
        int src = sqlite3_close(s->h);
        if (src != SQLITE_OK) {
            rc = dbs_err(db, src, "close");
            (void)sqlite3_close_v2(s->h); /* unfinalized statements: close when they go */
        }
    }
    free(s);
    db->impl = NULL;
    return rc;
}

static int dbs_open(struct db *db, const char *where)
{
    if (where[0] == '\0')
        return db_fail(db, AL_E_INVAL, "sqlite: needs a path (sqlite:PATH)");
    if (where[0] == '/' && where[1] == '/')
        return db_fail(db, AL_E_INVAL, "use sqlite:/absolute/path or sqlite:relative/path");
    if (strlen(where) > DB_PATH_MAX)
        return db_fail(db, AL_E_TOOBIG, "database path longer than %d bytes", DB_PATH_MAX);
    struct dbs *s = calloc(1, sizeof *s);
    if (!s)
        return db_fail(db, AL_E_NOMEM, "out of memory");
    db->impl = s;
    /* "./" keeps a relative path from reading as a URI or ":memory:". */
    (void)snprintf(s->path, sizeof s->path, "%s%s", where[0] == '/' ? "" : "./", where);

    int rc = dbs_prepare_file(db);
    if (rc == AL_OK) {
        /* Not SQLITE_OPEN_NOFOLLOW: it refuses a symbolic link anywhere in
         * the path (a data directory under a linked /home), not only the
         * file itself, which dbs_prepare_file has already refused. */
        int src =
            sqlite3_open_v2(s->path, &s->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_EXRESCODE, NULL);
        if (src != SQLITE_OK)
            rc = dbs_err(db, src, "open");
    }
    if (rc == AL_OK) {
        int src = sqlite3_busy_timeout(s->h, DB_BUSY_TIMEOUT_MS);
        if (src != SQLITE_OK)
            rc = dbs_err(db, src, "busy_timeout");
    }
    if (rc == AL_OK)
        rc = dbs_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, "defensive mode");
    if (rc == AL_OK)
        rc = dbs_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, "untrusted schema");
    if (rc == AL_OK)
        rc = dbs_config(db, SQLITE_DBCONFIG_DQS_DDL, 0, "no double-quoted strings");
    if (rc == AL_OK)
        rc = dbs_config(db, SQLITE_DBCONFIG_DQS_DML, 0, "no double-quoted strings");
    if (rc == AL_OK)
        rc = dbs_config(db, SQLITE_DBCONFIG_ENABLE_FKEY, 1, "foreign keys");

    int64_t version = 0;
    if (rc == AL_OK)
        rc = dbs_check_identity(db, &version);
    char mode[16];
    if (rc == AL_OK)
        rc = dbs_query_text(db, "PRAGMA journal_mode = WAL", mode, sizeof mode);
    if (rc == AL_OK && strcmp(mode, "wal") != 0)
        rc = db_fail(db, AL_E_IO, "%s: cannot use WAL (journal_mode is %s)", s->path, mode);
    if (rc == AL_OK)
        rc = dbs_exec(db, "PRAGMA synchronous = NORMAL");
    int64_t fk = 0;
    if (rc == AL_OK)
        rc = dbs_query_int(db, "PRAGMA foreign_keys", &fk);
    if (rc == AL_OK && fk != 1)
        rc = db_fail(db, AL_E_IO, "%s: foreign keys are off", s->path);
    for (bool done = version == DB_SCHEMA_VERSION; rc == AL_OK && !done;)
        rc = dbs_migrate_step(db, &done);

    if (rc != AL_OK) {
        char keep[DB_MSG_MAX];
        (void)snprintf(keep, sizeof keep, "%s", db->msg);
        (void)dbs_close(db); /* the open's error is the one to report */
        (void)snprintf(db->msg, sizeof db->msg, "%s", keep);
    }
    return rc;
}

/* ---- users ---------------------------------------------------------------------- */

#define DBS_USER_COLS "name, role, created_at"

static int dbs_row_user(struct db *db, sqlite3_stmt *st, struct db_user *u)
{
    int role = 0;
    int rc = dbs_col_text(db, st, 0, u->name, sizeof u->name, false);
    if (rc == AL_OK)
        rc = dbs_col_enum(db, st, 1, db_parse_role_int, &role);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 2, 0, INT64_MAX, NULL, &u->created_at);
    u->role = (enum db_role)role;
    return rc;
}

static int dbs_user_add(struct db *db, const char *name, enum db_role role, const char *key_sha256,
                        int64_t now)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(
        db, "INSERT INTO users (name, role, key_sha256, created_at) VALUES (?1, ?2, ?3, ?4)", &st);
    if (rc != AL_OK)
        return rc;
    int raw = SQLITE_OK;
    rc = dbs_bind_text(db, st, 1, name);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 2, db_role_name(role));
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 3, key_sha256);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 4, now);
    if (rc == AL_OK)
        rc = dbs_step(db, st, NULL, &raw);
    if (raw == SQLITE_CONSTRAINT_PRIMARYKEY)
        rc = db_fail(db, AL_E_EXISTS, "user %s already exists", name);
    else if (raw == SQLITE_CONSTRAINT_UNIQUE)
        rc = db_fail(db, AL_E_EXISTS, "API key collision; try again");
    return dbs_finish(db, st, rc);
}

static int dbs_user_by_hash(struct db *db, const char *key_sha256, struct db_user *out)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db, "SELECT " DBS_USER_COLS " FROM users WHERE key_sha256 = ?1", &st);
    if (rc != AL_OK)
        return rc;
    bool row = false;
    rc = dbs_bind_text(db, st, 1, key_sha256);
    if (rc == AL_OK)
        rc = dbs_step(db, st, &row, NULL);
    if (rc == AL_OK && !row)
        rc = db_fail(db, AL_E_NOENT, "no user holds this API key");
    if (rc == AL_OK)
        rc = dbs_row_user(db, st, out);
    return dbs_finish(db, st, rc);
}

static int dbs_user_list(struct db *db, db_user_cb cb, void *ctx)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db, "SELECT " DBS_USER_COLS " FROM users ORDER BY name", &st);
    if (rc != AL_OK)
        return rc;
    bool row = true;
    while (rc == AL_OK) {
        rc = dbs_step(db, st, &row, NULL);
        if (rc != AL_OK || !row)
            break;
        struct db_user u;
        rc = dbs_row_user(db, st, &u);
        if (rc == AL_OK)
            rc = cb(ctx, &u);
    }
    return dbs_finish(db, st, rc);
}

/* DELETE or UPDATE ... WHERE <key> = ?1 with the key bound; AL_E_NOENT
 * (with "no <what> <key>") when no row matched. */
static int dbs_change_one(struct db *db, sqlite3_stmt *st, const char *what, const char *key,
                          int *raw)
{
    int rc = dbs_step(db, st, NULL, raw);
    if (rc == AL_OK && !dbs_one_changed(db))
        rc = db_fail(db, AL_E_NOENT, "no %s %s", what, key);
    return rc;
}

static int dbs_user_remove(struct db *db, const char *name)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db, "DELETE FROM users WHERE name = ?1", &st);
    if (rc != AL_OK)
        return rc;
    rc = dbs_bind_text(db, st, 1, name);
    if (rc == AL_OK)
        rc = dbs_change_one(db, st, "user named", name, NULL);
    return dbs_finish(db, st, rc);
}

/* ---- sandboxes ---------------------------------------------------------------- */

#define DBS_SANDBOX_COLS                                                                           \
    "id, kind, url, created_at, link_up, link_since, link_rtt_us, record_input, network"

static int dbs_row_sandbox(struct db *db, sqlite3_stmt *st, struct db_sandbox *sb)
{
    int kind = 0;
    int64_t up = 0;
    int rc = dbs_col_text(db, st, 0, sb->id, sizeof sb->id, false);
    if (rc == AL_OK)
        rc = dbs_col_enum(db, st, 1, db_parse_kind_int, &kind);
    if (rc == AL_OK)
        rc = dbs_col_text(db, st, 2, sb->url, sizeof sb->url, true);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 3, 0, INT64_MAX, NULL, &sb->created_at);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 4, 0, DBS_LINK_UP_MAX, NULL, &up);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 5, 0, INT64_MAX, NULL, &sb->link_since);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 6, -1, INT64_MAX, NULL, &sb->rtt_us);
    int64_t rec = 0;
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 7, 0, 1, NULL, &rec);
    int net = DB_NETWORK_DEFAULT;
    if (rc == AL_OK)
        rc = dbs_col_enum(db, st, 8, db_parse_network_int, &net);
    sb->kind = (enum db_sandbox_kind)kind;
    sb->network = (enum db_sandbox_network)net;
    sb->link_up = up == 1;
    sb->record_input = rec == 1;
    return rc;
}

static int dbs_sandbox_add(struct db *db, const struct db_sandbox_spec *sp, int64_t now)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db,
                         "INSERT INTO sandboxes (id, kind, url, created_at, link_up, link_since,"
                         " link_rtt_us, record_input, network)"
                         " VALUES (?1, ?2, ?3, ?4, 0, ?4, -1, ?5, ?6)",
                         &st);
    if (rc != AL_OK)
        return rc;
    int raw = SQLITE_OK;
    rc = dbs_bind_text(db, st, 1, sp->id);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 2, db_sandbox_kind_name(sp->kind));
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 3, sp->url);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 4, now);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 5, sp->record_input ? 1 : 0);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 6, db_sandbox_network_name(sp->network));
    if (rc == AL_OK)
        rc = dbs_step(db, st, NULL, &raw);
    if (raw == SQLITE_CONSTRAINT_PRIMARYKEY)
        rc = db_fail(db, AL_E_EXISTS, "sandbox %s already exists", sp->id);
    return dbs_finish(db, st, rc);
}

static int dbs_sandbox_get(struct db *db, const char *id, struct db_sandbox *out)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db, "SELECT " DBS_SANDBOX_COLS " FROM sandboxes WHERE id = ?1", &st);
    if (rc != AL_OK)
        return rc;
    bool row = false;
    rc = dbs_bind_text(db, st, 1, id);
    if (rc == AL_OK)
        rc = dbs_step(db, st, &row, NULL);
    if (rc == AL_OK && !row)
        rc = db_fail(db, AL_E_NOENT, "no sandbox %s", id);
    if (rc == AL_OK)
        rc = dbs_row_sandbox(db, st, out);
    return dbs_finish(db, st, rc);
}

static int dbs_sandbox_list(struct db *db, db_sandbox_cb cb, void *ctx)
{
    sqlite3_stmt *st = NULL;
    struct db_sandbox *sb = malloc(sizeof *sb); /* the URL buffer is large */
    if (!sb)
        return db_fail(db, AL_E_NOMEM, "out of memory");
    int rc = dbs_prepare(db, "SELECT " DBS_SANDBOX_COLS " FROM sandboxes ORDER BY id", &st);
    if (rc != AL_OK) {
        free(sb);
        return rc;
    }
    bool row = true;
    while (rc == AL_OK) {
        rc = dbs_step(db, st, &row, NULL);
        if (rc != AL_OK || !row)
            break;
        rc = dbs_row_sandbox(db, st, sb);
        if (rc == AL_OK)
            rc = cb(ctx, sb);
    }
    free(sb);
    return dbs_finish(db, st, rc);
}

static int dbs_sandbox_set_link(struct db *db, const char *id, bool up, int64_t since,
                                int64_t rtt_us)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db,
                         "UPDATE sandboxes SET link_up = ?2, link_since = ?3, link_rtt_us = ?4"
                         " WHERE id = ?1",
                         &st);
    if (rc != AL_OK)
        return rc;
    rc = dbs_bind_text(db, st, 1, id);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 2, up ? 1 : 0);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 3, since);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 4, rtt_us);
    if (rc == AL_OK)
        rc = dbs_change_one(db, st, "sandbox", id, NULL);
    return dbs_finish(db, st, rc);
}

static int dbs_sandbox_set_record_input(struct db *db, const char *id, bool on)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db, "UPDATE sandboxes SET record_input = ?2 WHERE id = ?1", &st);
    if (rc != AL_OK)
        return rc;
    rc = dbs_bind_text(db, st, 1, id);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 2, on ? 1 : 0);
    if (rc == AL_OK)
        rc = dbs_change_one(db, st, "sandbox", id, NULL);
    return dbs_finish(db, st, rc);
}

static int dbs_sandbox_remove(struct db *db, const char *id)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db, "DELETE FROM sandboxes WHERE id = ?1", &st);
    if (rc != AL_OK)
        return rc;
    int raw = SQLITE_OK;
    rc = dbs_bind_text(db, st, 1, id);
    if (rc == AL_OK)
        rc = dbs_change_one(db, st, "sandbox", id, &raw);
    if (raw == SQLITE_CONSTRAINT_FOREIGNKEY)
        rc = db_fail(db, AL_E_STATE, "sandbox %s still has terminals; remove them first", id);
    return dbs_finish(db, st, rc);
}

/* ---- terminals -------------------------------------------------------------- */

#define DBS_TERM_COLS                                                                              \
    "id, sandbox_id, channel, argv, cwd, env, cols, rows, mode, state, exit_code, exit_signal,"    \
    " created_at, ended_at, out_offset, err_offset, rec_bytes, creator, record_input"

static int dbs_row_terminal(struct db *db, sqlite3_stmt *st, struct db_terminal *t)
{
    static const int64_t no_code = -1, zero = 0;
    int mode = 0, state = 0;
    int64_t v[6] = {0};
    int rc = dbs_col_text(db, st, 0, t->id, sizeof t->id, false);
    if (rc == AL_OK)
        rc = dbs_col_text(db, st, 1, t->sandbox_id, sizeof t->sandbox_id, false);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 2, 1, (int64_t)UINT32_MAX, NULL, &v[0]);
    if (rc == AL_OK)
        rc = dbs_col_text(db, st, 3, t->argv_json, sizeof t->argv_json, false);
    if (rc == AL_OK)
        rc = dbs_col_text(db, st, 4, t->cwd, sizeof t->cwd, false);
    if (rc == AL_OK)
        rc = dbs_col_text(db, st, 5, t->env_json, sizeof t->env_json, false);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 6, 1, AL_MAX_COLS, NULL, &v[1]);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 7, 1, AL_MAX_ROWS, NULL, &v[2]);
    if (rc == AL_OK)
        rc = dbs_col_enum(db, st, 8, db_parse_mode_int, &mode);
    if (rc == AL_OK)
        rc = dbs_col_enum(db, st, 9, db_parse_state_int, &state);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 10, -1, DBS_EXIT_CODE_MAX, &no_code, &v[3]);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 11, 0, DBS_EXIT_SIGNAL_MAX, &zero, &v[4]);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 12, 0, INT64_MAX, NULL, &t->created_at);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 13, 0, INT64_MAX, &zero, &t->ended_at);
    int64_t out = 0, err = 0, rec = 0;
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 14, 0, INT64_MAX, NULL, &out);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 15, 0, INT64_MAX, NULL, &err);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 16, 0, INT64_MAX, NULL, &rec);
    if (rc == AL_OK)
        rc = dbs_col_text(db, st, 17, t->creator, sizeof t->creator, false);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 18, 0, 1, NULL, &v[5]);
    t->record_input = v[5] == 1;
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

static int dbs_terminal_add(struct db *db, const char *id, const struct db_terminal_spec *sp,
                            int64_t now)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db,
                         "INSERT INTO terminals (id, sandbox_id, channel, argv, cwd, env, cols,"
                         " rows, mode, state, created_at, creator, record_input)"
                         " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'opening', ?10, ?11, ?12)",
                         &st);
    if (rc != AL_OK)
        return rc;
    int raw = SQLITE_OK;
    rc = dbs_bind_text(db, st, 1, id);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 2, sp->sandbox_id);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 3, (int64_t)sp->channel);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 4, sp->argv_json);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 5, sp->cwd);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 6, sp->env_json);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 7, sp->cols);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 8, sp->rows);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 9, db_term_mode_name(sp->mode));
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 10, now);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 11, sp->creator);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 12, sp->record_input ? 1 : 0);
    if (rc == AL_OK)
        rc = dbs_step(db, st, NULL, &raw);
    if (raw == SQLITE_CONSTRAINT_FOREIGNKEY)
        rc = db_fail(db, AL_E_NOENT, "no sandbox %s", sp->sandbox_id);
    else if (raw == SQLITE_CONSTRAINT_UNIQUE)
        rc = db_fail(db, AL_E_EXISTS, "channel %lu is in use on sandbox %s",
                     (unsigned long)sp->channel, sp->sandbox_id);
    else if (raw == SQLITE_CONSTRAINT_PRIMARYKEY)
        rc = db_fail(db, AL_E_EXISTS, "terminal %s already exists", id);
    return dbs_finish(db, st, rc);
}

static int dbs_terminal_get(struct db *db, const char *id, struct db_terminal *out)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db, "SELECT " DBS_TERM_COLS " FROM terminals WHERE id = ?1", &st);
    if (rc != AL_OK)
        return rc;
    bool row = false;
    rc = dbs_bind_text(db, st, 1, id);
    if (rc == AL_OK)
        rc = dbs_step(db, st, &row, NULL);
    if (rc == AL_OK && !row)
        rc = db_fail(db, AL_E_NOENT, "no terminal %s", id);
    if (rc == AL_OK)
        rc = dbs_row_terminal(db, st, out);
    return dbs_finish(db, st, rc);
}

static int dbs_terminal_list(struct db *db, const char *sandbox_id, db_terminal_cb cb, void *ctx)
{
    struct db_terminal *t = malloc(sizeof *t); /* large: argv and env buffers */
    if (!t)
        return db_fail(db, AL_E_NOMEM, "out of memory");
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db,
                         "SELECT " DBS_TERM_COLS " FROM terminals"
                         " WHERE ?1 IS NULL OR sandbox_id = ?1 ORDER BY created_at, rowid",
                         &st);
    if (rc != AL_OK) {
        free(t);
        return rc;
    }
    rc = dbs_bind_text(db, st, 1, sandbox_id);
    bool row = true;
    while (rc == AL_OK) {
        rc = dbs_step(db, st, &row, NULL);
        if (rc != AL_OK || !row)
            break;
        rc = dbs_row_terminal(db, st, t);
        if (rc == AL_OK)
            rc = cb(ctx, t);
    }
    free(t);
    return dbs_finish(db, st, rc);
}

/* After a compare-and-set matched no row: gone, or changed meanwhile. */
static int dbs_cas_missed(struct db *db, const char *id)
{
    int64_t n = 0;
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db, "SELECT count(*) FROM terminals WHERE id = ?1", &st);
    if (rc != AL_OK)
        return rc;
    bool row = false;
    rc = dbs_bind_text(db, st, 1, id);
    if (rc == AL_OK)
        rc = dbs_step(db, st, &row, NULL);
    if (rc == AL_OK && row)
        n = (int64_t)sqlite3_column_int64(st, 0);
    rc = dbs_finish(db, st, rc);
    if (rc != AL_OK)
        return rc;
    if (n == 0)
        return db_fail(db, AL_E_NOENT, "no terminal %s", id);
    return db_fail(db, AL_E_STATE, "terminal %s changed meanwhile; read it again", id);
}

static bool dbs_final(enum db_term_state s)
{
    return s == DB_TERM_EXITED || s == DB_TERM_CLOSED || s == DB_TERM_LOST;
}

static int dbs_terminal_cas_state(struct db *db, const char *id, enum db_term_state from,
                                  enum db_term_state to, int64_t now)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db,
                         "UPDATE terminals SET state = ?3,"
                         " ended_at = CASE WHEN ?5 THEN coalesce(ended_at, ?4) ELSE ended_at END"
                         " WHERE id = ?1 AND state = ?2",
                         &st);
    if (rc != AL_OK)
        return rc;
    bool changed = false;
    rc = dbs_bind_text(db, st, 1, id);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 2, db_term_state_name(from));
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 3, db_term_state_name(to));
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 4, now);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 5, dbs_final(to) ? 1 : 0);
    if (rc == AL_OK)
        rc = dbs_step(db, st, NULL, NULL);
    if (rc == AL_OK)
        changed = dbs_one_changed(db);
    rc = dbs_finish(db, st, rc);
    return rc == AL_OK && !changed ? dbs_cas_missed(db, id) : rc;
}

static int dbs_terminal_cas_exit(struct db *db, const char *id, enum db_term_state from, int code,
                                 int signo, int64_t now)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db,
                         "UPDATE terminals SET state = 'exited', exit_code = ?3,"
                         " exit_signal = ?4, ended_at = coalesce(ended_at, ?5)"
                         " WHERE id = ?1 AND state = ?2",
                         &st);
    if (rc != AL_OK)
        return rc;
    bool changed = false;
    rc = dbs_bind_text(db, st, 1, id);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 2, db_term_state_name(from));
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 3, code);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 4, signo);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 5, now);
    if (rc == AL_OK)
        rc = dbs_step(db, st, NULL, NULL);
    if (rc == AL_OK)
        changed = dbs_one_changed(db);
    rc = dbs_finish(db, st, rc);
    return rc == AL_OK && !changed ? dbs_cas_missed(db, id) : rc;
}

/* After an offsets update matched no row: gone, or a value would shrink. */
static int dbs_offsets_missed(struct db *db, const char *id)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(
        db, "SELECT out_offset, err_offset, rec_bytes FROM terminals WHERE id = ?1", &st);
    if (rc != AL_OK)
        return rc;
    bool row = false;
    rc = dbs_bind_text(db, st, 1, id);
    if (rc == AL_OK)
        rc = dbs_step(db, st, &row, NULL);
    if (rc == AL_OK && !row)
        rc = db_fail(db, AL_E_NOENT, "no terminal %s", id);
    else if (rc == AL_OK)
        rc =
            db_fail(db, AL_E_STATE,
                    "offsets of terminal %s may not go backwards (stored: out %lld, err %lld, "
                    "recording %lld bytes)",
                    id, (long long)sqlite3_column_int64(st, 0),
                    (long long)sqlite3_column_int64(st, 1), (long long)sqlite3_column_int64(st, 2));
    return dbs_finish(db, st, rc);
}

static int dbs_terminal_set_offsets(struct db *db, const char *id, uint64_t out_offset,
                                    uint64_t err_offset, uint64_t rec_bytes)
{
    /* FULL: this one commit is fsync'ed (see the top of this file). */
    int rc = dbs_exec(db, "PRAGMA synchronous = FULL");
    if (rc != AL_OK)
        return rc;
    sqlite3_stmt *st = NULL;
    bool changed = false;
    rc = dbs_prepare(db,
                     "UPDATE terminals SET out_offset = ?2, err_offset = ?3, rec_bytes = ?4"
                     " WHERE id = ?1 AND out_offset <= ?2 AND err_offset <= ?3"
                     " AND rec_bytes <= ?4",
                     &st);
    if (rc == AL_OK) {
        rc = dbs_bind_text(db, st, 1, id);
        if (rc == AL_OK)
            rc = dbs_bind_i64(db, st, 2, (int64_t)out_offset);
        if (rc == AL_OK)
            rc = dbs_bind_i64(db, st, 3, (int64_t)err_offset);
        if (rc == AL_OK)
            rc = dbs_bind_i64(db, st, 4, (int64_t)rec_bytes);
        if (rc == AL_OK)
            rc = dbs_step(db, st, NULL, NULL);
        if (rc == AL_OK)
            changed = dbs_one_changed(db);
        rc = dbs_finish(db, st, rc);
    }
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
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db, "DELETE FROM terminals WHERE id = ?1 AND state = ?2", &st);
    if (rc != AL_OK)
        return rc;
    bool changed = false;
    rc = dbs_bind_text(db, st, 1, id);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 2, db_term_state_name(from));
    if (rc == AL_OK)
        rc = dbs_step(db, st, NULL, NULL);
    if (rc == AL_OK)
        changed = dbs_one_changed(db);
    rc = dbs_finish(db, st, rc);
    return rc == AL_OK && !changed ? dbs_cas_missed(db, id) : rc;
}

/* ---- audit ---------------------------------------------------------------------- */

static int dbs_audit_add(struct db *db, int64_t at, const char *actor, const char *action,
                         const char *target, const char *detail_json)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db,
                         "INSERT INTO audit (at, actor, action, target, detail)"
                         " VALUES (?1, ?2, ?3, ?4, ?5)",
                         &st);
    if (rc != AL_OK)
        return rc;
    rc = dbs_bind_i64(db, st, 1, at);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 2, actor);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 3, action);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 4, target);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 5, detail_json);
    if (rc == AL_OK)
        rc = dbs_step(db, st, NULL, NULL);
    return dbs_finish(db, st, rc);
}

static int dbs_row_audit(struct db *db, sqlite3_stmt *st, struct db_audit *a)
{
    int rc = dbs_col_i64(db, st, 0, 1, INT64_MAX, NULL, &a->id);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 1, 0, INT64_MAX, NULL, &a->at);
    if (rc == AL_OK)
        rc = dbs_col_text(db, st, 2, a->actor, sizeof a->actor, false);
    if (rc == AL_OK)
        rc = dbs_col_text(db, st, 3, a->action, sizeof a->action, false);
    if (rc == AL_OK)
        rc = dbs_col_text(db, st, 4, a->target, sizeof a->target, false);
    if (rc == AL_OK)
        rc = dbs_col_text(db, st, 5, a->detail, sizeof a->detail, false);
    return rc;
}

static int dbs_audit_query(struct db *db, const struct db_audit_filter *f, db_audit_cb cb,
                           void *ctx)
{
    struct db_audit *a = malloc(sizeof *a);
    if (!a)
        return db_fail(db, AL_E_NOMEM, "out of memory");
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db,
                         "SELECT id, at, actor, action, target, detail FROM audit"
                         " WHERE at >= ?1 AND (?2 IS NULL OR actor = ?2)"
                         " AND (?3 IS NULL OR action = ?3)"
                         " ORDER BY at DESC, id DESC LIMIT ?4",
                         &st);
    if (rc != AL_OK) {
        free(a);
        return rc;
    }
    rc = dbs_bind_i64(db, st, 1, f->since);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 2, f->actor);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 3, f->action);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 4, (int64_t)f->limit);
    bool row = true;
    while (rc == AL_OK) {
        rc = dbs_step(db, st, &row, NULL);
        if (rc != AL_OK || !row)
            break;
        rc = dbs_row_audit(db, st, a);
        if (rc == AL_OK)
            rc = cb(ctx, a);
    }
    free(a);
    return dbs_finish(db, st, rc);
}

static int dbs_audit_prune(struct db *db, int64_t before_at, uint64_t keep_rows)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db,
                         "DELETE FROM audit WHERE (?1 > 0 AND at < ?1) OR (?2 > 0 AND id <= "
                         "(SELECT id FROM audit ORDER BY id DESC LIMIT 1 OFFSET ?2))",
                         &st);
    if (rc != AL_OK)
        return rc;
    rc = dbs_bind_i64(db, st, 1, before_at);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 2, (int64_t)keep_rows);
    if (rc == AL_OK)
        rc = dbs_step(db, st, NULL, NULL);
    return dbs_finish(db, st, rc);
}

/* ---- web sessions ------------------------------------------------------------ */

static int dbs_session_add(struct db *db, const char *id_sha256, const char *csrf_sha256,
                           const char *user, int64_t now, int64_t expires_at, unsigned max)
{
    sqlite3_stmt *st = NULL;
    /* one statement: the count and the insert cannot be split by another writer */
    int rc = dbs_prepare(db,
                         "INSERT INTO sessions (id_sha256, csrf_sha256, user_name, created_at,"
                         " last_seen, expires_at) SELECT ?1, ?2, ?3, ?4, ?4, ?5"
                         " WHERE (SELECT count(*) FROM sessions WHERE user_name = ?3) < ?6",
                         &st);
    if (rc != AL_OK)
        return rc;
    int raw = SQLITE_OK;
    rc = dbs_bind_text(db, st, 1, id_sha256);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 2, csrf_sha256);
    if (rc == AL_OK)
        rc = dbs_bind_text(db, st, 3, user);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 4, now);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 5, expires_at);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 6, (int64_t)max);
    if (rc == AL_OK)
        rc = dbs_step(db, st, NULL, &raw);
    if (raw == SQLITE_CONSTRAINT_FOREIGNKEY)
        rc = db_fail(db, AL_E_NOENT, "no user named %s", user);
    else if (raw == SQLITE_CONSTRAINT_PRIMARYKEY)
        rc = db_fail(db, AL_E_EXISTS, "session collision; try again");
    else if (rc == AL_OK && !dbs_one_changed(db))
        rc = db_fail(db, AL_E_LIMIT, "user %s has %u sessions already", user, max);
    return dbs_finish(db, st, rc);
}

static int dbs_session_get(struct db *db, const char *id_sha256, struct db_session *out,
                           char *csrf_hex)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db,
                         "SELECT u.name, u.role, u.created_at, s.csrf_sha256, s.created_at,"
                         " s.last_seen, s.expires_at FROM sessions s"
                         " JOIN users u ON u.name = s.user_name WHERE s.id_sha256 = ?1",
                         &st);
    if (rc != AL_OK)
        return rc;
    bool row = false;
    rc = dbs_bind_text(db, st, 1, id_sha256);
    if (rc == AL_OK)
        rc = dbs_step(db, st, &row, NULL);
    if (rc == AL_OK && !row)
        rc = db_fail(db, AL_E_NOENT, "no such session");
    if (rc == AL_OK)
        rc = dbs_row_user(db, st, &out->user);
    if (rc == AL_OK)
        rc = dbs_col_text(db, st, 3, csrf_hex, DB_HASH_HEX + 1, false);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 4, 0, INT64_MAX, NULL, &out->created_at);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 5, 0, INT64_MAX, NULL, &out->last_seen);
    if (rc == AL_OK)
        rc = dbs_col_i64(db, st, 6, 0, INT64_MAX, NULL, &out->expires_at);
    return dbs_finish(db, st, rc);
}

static int dbs_session_touch(struct db *db, const char *id_sha256, int64_t now)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(
        db, "UPDATE sessions SET last_seen = max(last_seen, ?2) WHERE id_sha256 = ?1", &st);
    if (rc != AL_OK)
        return rc;
    rc = dbs_bind_text(db, st, 1, id_sha256);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 2, now);
    if (rc == AL_OK)
        rc = dbs_change_one(db, st, "session", "(signed out meanwhile)", NULL);
    return dbs_finish(db, st, rc);
}

static int dbs_session_remove(struct db *db, const char *id_sha256)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db, "DELETE FROM sessions WHERE id_sha256 = ?1", &st);
    if (rc != AL_OK)
        return rc;
    rc = dbs_bind_text(db, st, 1, id_sha256);
    if (rc == AL_OK)
        rc = dbs_change_one(db, st, "session", "to sign out", NULL);
    return dbs_finish(db, st, rc);
}

static int dbs_session_expire(struct db *db, int64_t now, int64_t idle_ms)
{
    sqlite3_stmt *st = NULL;
    int rc = dbs_prepare(db,
                         "DELETE FROM sessions WHERE expires_at <= ?1"
                         " OR (?2 > 0 AND last_seen <= ?1 - ?2)",
                         &st);
    if (rc != AL_OK)
        return rc;
    rc = dbs_bind_i64(db, st, 1, now);
    if (rc == AL_OK)
        rc = dbs_bind_i64(db, st, 2, idle_ms);
    if (rc == AL_OK)
        rc = dbs_step(db, st, NULL, NULL);
    return dbs_finish(db, st, rc);
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
    .session_add = dbs_session_add,
    .session_get = dbs_session_get,
    .session_touch = dbs_session_touch,
    .session_remove = dbs_session_remove,
    .session_expire = dbs_session_expire,
    .audit_add = dbs_audit_add,
    .audit_query = dbs_audit_query,
    .audit_prune = dbs_audit_prune,
};
