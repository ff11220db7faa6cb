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
 * each step once. Foreign keys are off during a step (a table rebuild
 * drops a table others name: SQLite's documented procedure) and the whole
 * database is checked against them before the step commits. application_id marks the file as
 * Airlock's; a file with another application's id or tables without ours is refused, and so is a
 * schema newer than DB_SCHEMA_VERSION. Tables are STRICT and repeat the
 * rules of db.c and db_check.c as CHECK constraints (db_sqlite_schema.c).
 *
 * Files: this one holds the connection (the file's checks, its settings,
 * open, close) and the schema's upkeep (identity, migrations); the schema
 * text is db_sqlite_schema.c, statements and column readers
 * db_sqlite_stmt.c, the backend's calls table by table and its function
 * table (db_sqlite_backend) db_sqlite_tables.c.
 */
#include "al_err.h"
#include "db.h"
#include "db_backend.h"
#include "db_sqlite.h"

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
    DBS_FILE_MODE = 0600,    /* the database file */
    DBS_PRAGMA_SQL_MAX = 64, /* "PRAGMA user_version = N" */
};

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
static int dbs_migrate_locked(struct db *db, bool *done)
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
    const struct dbs_arg rec[] = {dbs_int(v + 1), dbs_text(m->name), dbs_int(now)};
    if (rc == AL_OK)
        rc = dbs_run(db,
                     "INSERT INTO schema_migrations (version, name, applied_at)"
                     " VALUES (?1, ?2, ?3)",
                     rec, DBS_NARGS(rec), NULL, NULL);
    if (rc == AL_OK) {
        /* A PRAGMA takes no parameters; v + 1 is our own small integer. */
        char sql[DBS_PRAGMA_SQL_MAX];
        (void)snprintf(sql, sizeof sql, "PRAGMA user_version = %lld", (long long)v + 1);
        rc = dbs_exec(db, sql);
    }
    int64_t broken = 0;
    if (rc == AL_OK)
        rc = dbs_query_int(db, "SELECT count(*) FROM pragma_foreign_key_check", &broken);
    if (rc == AL_OK && broken)
        rc = db_fail(db, AL_E_IO, "migration to schema %lld leaves %lld rows naming missing rows",
                     (long long)v + 1, (long long)broken);
    if (rc == AL_OK)
        rc = dbs_exec(db, "COMMIT");
    if (rc != AL_OK) {
        dbs_rollback(db);
        return rc;
    }
    *done = v + 1 == DB_SCHEMA_VERSION;
    return AL_OK;
}

/* One step with foreign keys off (they cannot change inside a
 * transaction), on again whatever happened. */
static int dbs_migrate_step(struct db *db, bool *done)
{
    int rc = dbs_exec(db, "PRAGMA foreign_keys = OFF");
    if (rc == AL_OK)
        rc = dbs_migrate_locked(db, done);
    int frc = dbs_exec(db, "PRAGMA foreign_keys = ON");
    return rc != AL_OK ? rc : frc;
}

int dbs_close(struct db *db)
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

int dbs_open(struct db *db, const char *where)
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
    return rc; /* on failure db_open closes what this made */
}
