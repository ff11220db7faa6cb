/*
 * Unit tests for db (the data layer), run on each backend: `test_db` on
 * SQLite, `test_db pg` on PostgreSQL (ctest: unit/test_db, unit/test_db_pg).
 *
 * SQLite: a real database file in a fresh mkdtemp directory (umask 022),
 * removed after each test: the file's mode, WAL, files that are not ours,
 * a relative path, the key absent from the file and its WAL.
 * PostgreSQL: a throw-away server that main() starts with
 * tests/tools/pg-temp.sh (unix socket only, its own temp dir, stopped and
 * removed at the end, or by the script's watcher if this process dies) and
 * a fresh database per test, dropped after it. Missing PostgreSQL binaries
 * are a failure, not a skip. Every URL carries a password (the server
 * trusts local connections, so it is never checked) that no message may
 * hold; also: a schema_version table of another application, an
 * unreachable server, a connection cut by the server (AL_E_IO with the
 * reason on one line, then a reconnect, at most one attempt a second),
 * concurrent opens migrating once, the key absent from every file of the
 * server.
 *
 * Both: migrations and their idempotence, a schema from the future, a
 * migration that fails leaving nothing; users and API keys (the key never
 * stored in clear); sandboxes, terminals with their foreign key, channel
 * and state rules; offsets that survive a reopen; the audit log with its
 * filters and limit, rows added in one batch (one transaction); proxy
 * credentials (bound to a live terminal and its
 * upstreams, revoked, removed with their terminal); and a clear error for
 * every bad input.
 * Every db_close must return AL_OK: SQLite refuses to close a connection
 * with a statement left unfinalized.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <libpq-fe.h>
#include <openssl/evp.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"
#include "b64url.h"
#include "db.h"
#include "testutil.h"

enum { FX_PATH_MAX = 256, MSG_CAP = DB_MSG_MAX, BIG = 70000, PG_URL_MAX = 512 };

/* The password every PostgreSQL URL of these tests carries. */
#define PG_PASSWORD "pw-S3cret-x9"

/* The PostgreSQL run: its server, and how many databases it has made. */
static struct {
    bool on;
    char dir[FX_PATH_MAX]; /* pg-temp.sh's directory */
    char url[PG_URL_MAX];  /* its URL, database "postgres", no password */
    unsigned ndb;
} pg;

struct fx {
    char dir[64];
    char path[FX_PATH_MAX]; /* SQLite: the file; PostgreSQL: the database name */
    char url[PG_URL_MAX];
    struct db *db;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Remove dir and what is in it (files, and empty subdirectories). */
static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        const struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char p[FX_PATH_MAX + 256];
            (void)snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (unlink(p) != 0)
                (void)rmdir(p);
        }
        (void)closedir(d);
    }
    (void)rmdir(dir);
}

/* ---- the throw-away PostgreSQL server --------------------------------------- */

/* out: pg.url with database name and the test password. */
static void pg_url_for(const char *dbname, char *out, size_t cap)
{
    static const char user[] = "postgresql://postgres@/postgres?";
    assert_memory_equal(pg.url, user, sizeof user - 1);
    int n = snprintf(out, cap, "postgresql://postgres:%s@/%s?%s", PG_PASSWORD, dbname,
                     pg.url + sizeof user - 1);
    if (n < 0 || (size_t)n >= cap)
        fail_msg("URL for %s too long", dbname);
}

/* A raw connection to database dbname, for looking behind the interface. */
static PGconn *pg_raw(const char *dbname)
{
    char url[PG_URL_MAX];
    pg_url_for(dbname, url, sizeof url);
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("connect to %s: %s", dbname, PQerrorMessage(c));
    return c;
}

/* Run sql (with at most one parameter) on dbname; the result, checked. */
static PGresult *pg_query(const char *dbname, const char *sql, const char *param)
{
    PGconn *c = pg_raw(dbname);
    const char *const v[] = {param};
    PGresult *r = PQexecParams(c, sql, param ? 1 : 0, NULL, param ? v : NULL, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQfinish(c);
    return r;
}

static void pg_exec(const char *dbname, const char *sql)
{
    PQclear(pg_query(dbname, sql, NULL));
}

static void pg_create_db(const char *name)
{
    char sql[128];
    int n = snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
    if (n < 0 || (size_t)n >= sizeof sql)
        fail_msg("database name %s too long", name);
    pg_exec("postgres", sql);
}

static void pg_drop_db(const char *name)
{
    char sql[128];
    int n = snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
    if (n < 0 || (size_t)n >= sizeof sql)
        fail_msg("database name %s too long", name);
    pg_exec("postgres", sql);
}

/* A new database name. */
static void pg_new_name(char *out, size_t cap)
{
    (void)snprintf(out, cap, "al_t%u", ++pg.ndb);
}

/* Start the server (main, before the tests). Missing binaries, or a server
 * that will not start, fail the run with the script's reason. */
static int pg_start(void)
{
    const char *src = getenv("AL_SRC");
    if (!src || !src[0] || strchr(src, '\'')) {
        (void)fprintf(stderr, "test_db pg: AL_SRC (the source tree) is not set; run it through "
                              "ctest\n");
        return -1;
    }
    (void)snprintf(pg.dir, sizeof pg.dir, "/tmp/al-db-pg.XXXXXX");
    if (!mkdtemp(pg.dir)) {
        perror("test_db pg: mkdtemp");
        return -1;
    }
    char cmd[FX_PATH_MAX * 3];
    (void)snprintf(cmd, sizeof cmd, "bash '%s/tests/tools/pg-temp.sh' start '%s' %ld", src, pg.dir,
                   (long)getpid());
    FILE *p = popen(cmd, "r");
    if (!p) {
        perror("test_db pg: popen");
        return -1;
    }
    char *line = fgets(pg.url, sizeof pg.url, p);
    int st = pclose(p);
    if (!line || st != 0 || strncmp(pg.url, "postgresql://postgres@/postgres?", 32) != 0) {
        (void)fprintf(stderr, "test_db pg: FAILED: cannot start a throw-away PostgreSQL server "
                              "(reason above); the PostgreSQL suite needs the Debian package "
                              "postgresql (tools/deps.sh installs it)\n");
        (void)rmdir(pg.dir);
        return -1;
    }
    pg.url[strcspn(pg.url, "\n")] = '\0';
    pg.on = true;
    return 0;
}

static int pg_stop(void)
{
    const char *src = getenv("AL_SRC");
    char cmd[FX_PATH_MAX * 3];
    (void)snprintf(cmd, sizeof cmd, "bash '%s/tests/tools/pg-temp.sh' stop '%s'", src, pg.dir);
    int st = system(cmd);
    if (st != 0 || access(pg.dir, F_OK) == 0) {
        (void)fprintf(stderr, "test_db pg: stopping the server in %s failed\n", pg.dir);
        return -1;
    }
    return 0;
}

/* ---- fixture -------------------------------------------------------------------- */

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    (void)snprintf(f->dir, sizeof f->dir, "/tmp/al-db.XXXXXX");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    (void)umask(022);
    if (pg.on) {
        pg_new_name(f->path, sizeof f->path);
        pg_create_db(f->path);
        pg_url_for(f->path, f->url, sizeof f->url);
    } else {
        (void)snprintf(f->path, sizeof f->path, "%s/%s", f->dir, DB_FILE_NAME);
        (void)snprintf(f->url, sizeof f->url, "%s%s", DB_SQLITE_PREFIX, f->path);
    }
    char err[MSG_CAP];
    if (db_open(f->url, &f->db, err, sizeof err) != AL_OK) {
        (void)fprintf(stderr, "db_open: %s\n", err);
        rm_tree(f->dir);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    int rc = db_close(f->db);
    if (pg.on)
        pg_drop_db(f->path);
    rm_tree(f->dir);
    free(f);
    return rc == AL_OK ? 0 : -1;
}

static void reopen(struct fx *f)
{
    assert_int_equal(db_close(f->db), AL_OK);
    f->db = NULL;
    char err[MSG_CAP];
    int rc = db_open(f->url, &f->db, err, sizeof err);
    if (rc != AL_OK)
        fail_msg("reopen: %s", err);
}

/* ---- raw SQLite access, to look behind the interface ---------------------- */

static int64_t sq_int(const char *path, const char *sql)
{
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    assert_int_equal(sqlite3_finalize(st), SQLITE_OK);
    assert_int_equal(sqlite3_close(h), SQLITE_OK);
    return v;
}

static void sq_text(const char *path, const char *sql, char *out, size_t cap)
{
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    (void)snprintf(out, cap, "%s", (const char *)sqlite3_column_text(st, 0));
    assert_int_equal(sqlite3_finalize(st), SQLITE_OK);
    assert_int_equal(sqlite3_close(h), SQLITE_OK);
}

static void sq_exec(const char *path, const char *sql)
{
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
                     SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(h, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        fail_msg("%s: %s", sql, msg ? msg : "?");
    sqlite3_free(msg);
    assert_int_equal(sqlite3_close(h), SQLITE_OK);
}

/* ---- either backend: an integer query (SQL both understand) ------------------ */

static int64_t pg_int(const char *dbname, const char *sql)
{
    PGresult *r = pg_query(dbname, sql, NULL);
    assert_int_equal(PQntuples(r), 1);
    assert_false(PQgetisnull(r, 0, 0));
    int64_t v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return v;
}

static int64_t raw_int(const struct fx *f, const char *sql)
{
    return pg.on ? pg_int(f->path, sql) : sq_int(f->path, sql);
}

/* The stored schema version, and setting it behind the interface. */
static int64_t raw_version(const struct fx *f)
{
    return pg.on ? pg_int(f->path, "SELECT version FROM schema_version WHERE app = 'airlock'")
                 : sq_int(f->path, "PRAGMA user_version");
}

static void raw_set_version(const struct fx *f, int v)
{
    char sql[96];
    if (pg.on) {
        (void)snprintf(sql, sizeof sql, "UPDATE schema_version SET version = %d", v);
        pg_exec(f->path, sql);
    } else {
        (void)snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v);
        sq_exec(f->path, sql);
    }
}

/* Whole file into a malloc'd buffer (NULL, 0 if missing). */
static uint8_t *slurp(const char *path, size_t *len)
{
    *len = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            uint8_t *nb = realloc(buf, cap);
            assert_non_null(nb);
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (got == 0)
            break;
    }
    assert_int_equal(fclose(fp), 0);
    *len = n;
    return buf;
}

static bool file_has(const char *path, const void *needle, size_t nlen)
{
    size_t len = 0;
    uint8_t *buf = slurp(path, &len);
    bool has = buf && memmem(buf, len, needle, nlen) != NULL;
    free(buf);
    return has;
}

static mode_t file_mode(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_mode & 07777;
}

/* ---- open, schema, files ------------------------------------------------------ */

static void test_open_creates_0600_wal_schema(void **state)
{
    struct fx *f = *state;
    assert_int_equal(file_mode(f->path), 0600);
    char mode[16];
    sq_text(f->path, "PRAGMA journal_mode", mode, sizeof mode);
    assert_string_equal(mode, "wal");
    assert_int_equal(sq_int(f->path, "PRAGMA user_version"), DB_SCHEMA_VERSION);
    assert_int_equal(sq_int(f->path, "SELECT count(*) FROM schema_migrations"), DB_SCHEMA_VERSION);
    assert_int_equal(sq_int(f->path, "SELECT max(version) FROM schema_migrations"),
                     DB_SCHEMA_VERSION);
    assert_int_equal(sq_int(f->path, "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                                     " AND name IN ('users', 'sandboxes', 'terminals', 'audit',"
                                     " 'sessions', 'proxy_credentials')"),
                     6);
    /* A write makes the WAL; it gets the database file's mode. */
    char key[DB_KEY_LEN + 1];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, key, sizeof key), AL_OK);
    char wal[FX_PATH_MAX + 8];
    (void)snprintf(wal, sizeof wal, "%s-wal", f->path);
    assert_int_equal(file_mode(wal), 0600);
    assert_string_equal(db_errmsg(f->db), "");
}

static void test_reopen_is_idempotent(void **state)
{
    struct fx *f = *state;
    char key[DB_KEY_LEN + 1];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_OPERATOR, key, sizeof key), AL_OK);
    int64_t applied = raw_int(f, "SELECT applied_at FROM schema_migrations WHERE version = 1");
    for (int i = 0; i < 3; i++)
        reopen(f);
    assert_int_equal(raw_version(f), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations"), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT applied_at FROM schema_migrations WHERE version = 1"),
                     applied);
    struct db_user u;
    assert_int_equal(db_user_by_key(f->db, key, &u), AL_OK);
    assert_string_equal(u.name, "alice");
    assert_int_equal(u.role, DB_ROLE_OPERATOR);
    if (!pg.on)
        assert_int_equal(file_mode(f->path), 0600);
}

static void test_future_schema_refused(void **state)
{
    struct fx *f = *state;
    assert_int_equal(db_close(f->db), AL_OK);
    f->db = NULL;
    raw_set_version(f, DB_SCHEMA_VERSION + 1);
    char err[MSG_CAP];
    struct db *db = (struct db *)&err; /* must be reset to NULL */
    assert_int_equal(db_open(f->url, &db, err, sizeof err), AL_E_VERSION);
    assert_null(db);
    assert_non_null(strstr(err, "newer than this airlockd knows"));
    assert_non_null(strstr(err, f->path));
    assert_null(strstr(err, PG_PASSWORD));
    /* Nothing was changed: back to the known version, it opens again. */
    raw_set_version(f, DB_SCHEMA_VERSION);
    reopen(f);
}

static void test_files_not_ours_refused(void **state)
{
    struct fx *f = *state;
    char p[FX_PATH_MAX + 32], url[FX_PATH_MAX + 64], err[MSG_CAP];
    struct db *db = NULL;

    /* Not SQLite at all. */
    (void)snprintf(p, sizeof p, "%s/text.db", f->dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    static const char junk[] = "this is not a database, just some text that is long enough....."
                               "................................................................";
    assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    assert_int_equal(close(fd), 0);
    (void)snprintf(url, sizeof url, "sqlite:%s", p);
    assert_int_equal(db_open(url, &db, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "not an SQLite database"));
    assert_null(db);

    /* Another application's SQLite database. */
    (void)snprintf(p, sizeof p, "%s/other.db", f->dir);
    sq_exec(p, "CREATE TABLE t (x)");
    assert_int_equal(chmod(p, 0600), 0);
    (void)snprintf(url, sizeof url, "sqlite:%s", p);
    assert_int_equal(db_open(url, &db, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "another application"));

    /* Ours, but readable by the group. */
    assert_int_equal(db_close(f->db), AL_OK);
    f->db = NULL;
    assert_int_equal(chmod(f->path, 0640), 0);
    assert_int_equal(db_open(f->url, &db, err, sizeof err), AL_E_PERM);
    assert_non_null(strstr(err, "mode 0640"));
    assert_int_equal(chmod(f->path, 0600), 0);
    /* Or whose WAL is. */
    (void)snprintf(p, sizeof p, "%s-wal", f->path);
    fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    assert_int_equal(close(fd), 0);
    assert_int_equal(db_open(f->url, &db, err, sizeof err), AL_E_PERM);
    assert_non_null(strstr(err, "-wal has mode 0644"));
    assert_int_equal(unlink(p), 0);
    reopen(f);

    /* A symbolic link to it. */
    (void)snprintf(p, sizeof p, "%s/link.db", f->dir);
    assert_int_equal(symlink(f->path, p), 0);
    (void)snprintf(url, sizeof url, "sqlite:%s", p);
    assert_int_equal(db_open(url, &db, err, sizeof err), AL_E_PERM);
    assert_non_null(strstr(err, "symbolic link"));

    /* A symbolic link to the directory is fine. */
    (void)snprintf(p, sizeof p, "%s/linkdir", f->dir);
    assert_int_equal(symlink(f->dir, p), 0);
    (void)snprintf(url, sizeof url, "sqlite:%s/linkdir/%s", f->dir, DB_FILE_NAME);
    assert_int_equal(db_open(url, &db, err, sizeof err), AL_OK);
    assert_int_equal(db_close(db), AL_OK);
    db = NULL;

    /* A directory; a missing parent directory. */
    (void)snprintf(p, sizeof p, "%s/adir", f->dir);
    assert_int_equal(mkdir(p, 0700), 0);
    (void)snprintf(url, sizeof url, "sqlite:%s", p);
    assert_int_equal(db_open(url, &db, err, sizeof err), AL_E_IO);
    assert_non_null(strstr(err, "not a regular file"));
    (void)snprintf(url, sizeof url, "sqlite:%s/no/such/airlock.db", f->dir);
    assert_int_equal(db_open(url, &db, err, sizeof err), AL_E_NOENT);
    assert_non_null(strstr(err, "No such file or directory"));
    assert_null(db);
}

/* A migration that fails leaves nothing of itself behind: it ran in one
 * transaction, rolled back. Here a database of ours at version 0 (SQLite:
 * Airlock-marked; PostgreSQL: any database) already has a "users" table,
 * so migration 1 fails half-way. */
static void test_failed_migration_rolls_back(void **state)
{
    struct fx *f = *state;
    char p[FX_PATH_MAX + 32], url[PG_URL_MAX], err[MSG_CAP];
    if (pg.on) {
        pg_new_name(p, sizeof p);
        pg_create_db(p);
        pg_exec(p, "CREATE TABLE users (x integer)");
        pg_url_for(p, url, sizeof url);
    } else {
        (void)snprintf(p, sizeof p, "%s/half.db", f->dir);
        sq_exec(p, "PRAGMA application_id = 1098009707; CREATE TABLE users (x)");
        assert_int_equal(chmod(p, 0600), 0);
        (void)snprintf(url, sizeof url, "sqlite:%s", p);
    }
    struct db *db = NULL;
    assert_int_equal(db_open(url, &db, err, sizeof err), AL_E_IO);
    assert_non_null(strstr(err, "users"));
    assert_non_null(strstr(err, "already exists"));
    assert_null(db);
    if (pg.on) {
        assert_null(strstr(err, PG_PASSWORD));
        assert_int_equal(pg_int(p, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                                   " AND tablename IN ('schema_version', 'schema_migrations',"
                                   " 'sandboxes', 'terminals', 'audit')"),
                         0);
        assert_int_equal(pg_int(p, "SELECT count(*) FROM pg_tables WHERE tablename = 'users'"), 1);
        pg_drop_db(p);
        return;
    }
    assert_int_equal(sq_int(p, "PRAGMA user_version"), 0);
    assert_int_equal(sq_int(p, "SELECT count(*) FROM sqlite_master WHERE name IN"
                               " ('schema_migrations', 'sandboxes', 'terminals', 'audit')"),
                     0);
    assert_int_equal(sq_int(p, "SELECT count(*) FROM sqlite_master WHERE name = 'users'"), 1);
}

static void test_open_bad_urls(void **state)
{
    struct fx *f = *state;
    char err[MSG_CAP];
    struct db *db = NULL;
    assert_int_equal(db_open(NULL, &db, err, sizeof err), AL_E_INVAL);
    assert_non_null(strstr(err, "missing"));
    assert_int_equal(db_open("", &db, err, sizeof err), AL_E_INVAL);
    assert_int_equal(db_open(f->url, NULL, err, sizeof err), AL_E_INVAL);
    assert_int_equal(db_open("sqlite:", &db, err, sizeof err), AL_E_INVAL);
    assert_non_null(strstr(err, "needs a path"));
    assert_int_equal(db_open("sqlite://host/x.db", &db, err, sizeof err), AL_E_INVAL);
    assert_int_equal(db_open("mysql://x", &db, err, sizeof err), AL_E_INVAL);
    assert_non_null(strstr(err, "unknown database URL scheme"));
    /* PostgreSQL: a URL libpq refuses, a server that is not there; no
     * message holds the password, however it was spelled. */
    assert_int_equal(db_open("postgres:db", &db, err, sizeof err), AL_E_INVAL);
    assert_non_null(strstr(err, "postgres://"));
    assert_int_equal(db_open("postgres://u:s3cret@127.0.0.1:1/db", &db, err, sizeof err), AL_E_IO);
    assert_non_null(strstr(err, "cannot connect"));
    assert_null(strstr(err, "s3cret")); /* never echo a URL */
    assert_null(strchr(err, '\n'));
    assert_int_equal(db_open("postgresql://u:s3%zzcret@127.0.0.1:1/db", &db, err, sizeof err),
                     AL_E_INVAL);
    assert_non_null(strstr(err, "percent"));
    assert_null(strstr(err, "zzcret"));
    assert_int_equal(db_open("postgresql://127.0.0.1:1/db?password=hunter2hunter&nosuch=1", &db,
                             err, sizeof err),
                     AL_E_INVAL);
    assert_non_null(strstr(err, "nosuch"));
    assert_null(strstr(err, "hunter2"));
    assert_int_equal(db_open("postgresql://127.0.0.1:1/db?password=a=b%zz", &db, err, sizeof err),
                     AL_E_INVAL);
    assert_null(strstr(err, "a=b"));
    assert_int_equal(db_open("/plain/path.db", &db, err, sizeof err), AL_E_INVAL);
    char *big = malloc(DB_URL_MAX + 2);
    assert_non_null(big);
    memcpy(big, "sqlite:/", 8);
    memset(big + 8, 'a', DB_URL_MAX - 6);
    big[DB_URL_MAX + 1] = '\0';
    assert_int_equal(db_open(big, &db, err, sizeof err), AL_E_TOOBIG);
    big[DB_PATH_MAX + 8] = '\0'; /* a path of DB_PATH_MAX + 1 */
    assert_int_equal(db_open(big, &db, err, sizeof err), AL_E_TOOBIG);
    free(big);
    assert_null(db);
    /* A tiny or absent error buffer is fine. */
    assert_int_equal(db_open("", &db, NULL, 0), AL_E_INVAL);
    char one[1];
    assert_int_equal(db_open("", &db, one, sizeof one), AL_E_INVAL);
    assert_int_equal(one[0], '\0');
}

static void test_relative_path(void **state)
{
    struct fx *f = *state;
    char cwd[FX_PATH_MAX * 4];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(f->dir), 0);
    char err[MSG_CAP];
    struct db *db = NULL;
    int rc = db_open("sqlite:rel.db", &db, err, sizeof err);
    int crc = db_close(db);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(rc, AL_OK);
    assert_int_equal(crc, AL_OK);
    char p[FX_PATH_MAX + 16];
    (void)snprintf(p, sizeof p, "%s/rel.db", f->dir);
    assert_int_equal(file_mode(p), 0600);
}

static void test_two_connections(void **state)
{
    struct fx *f = *state;
    char err[MSG_CAP], key[DB_KEY_LEN + 1];
    struct db *other = NULL;
    assert_int_equal(db_open(f->url, &other, err, sizeof err), AL_OK);
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_VIEWER, key, sizeof key), AL_OK);
    struct db_user u;
    assert_int_equal(db_user_by_key(other, key, &u), AL_OK);
    assert_string_equal(u.name, "alice");
    assert_int_equal(db_close(other), AL_OK);
}

/* ---- users and API keys ---------------------------------------------------------- */

static void test_user_add_and_lookup(void **state)
{
    struct fx *f = *state;
    char key[DB_KEY_LEN + 1], key2[DB_KEY_LEN + 1];
    int64_t before = now_ms();
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, key, sizeof key), AL_OK);
    int64_t after = now_ms();
    assert_int_equal(strlen(key), DB_KEY_LEN);
    assert_memory_equal(key, DB_KEY_PREFIX, 4);
    uint8_t raw[DB_KEY_RAW_LEN];
    size_t n = 0;
    assert_int_equal(b64u_decode(key + 4, DB_KEY_LEN - 4, raw, sizeof raw, &n), AL_OK);
    assert_int_equal(n, DB_KEY_RAW_LEN);
    assert_int_equal(db_user_add(f->db, "bob.b-2_x", DB_ROLE_VIEWER, key2, sizeof key2), AL_OK);
    assert_string_not_equal(key, key2);

    struct db_user u;
    assert_int_equal(db_user_by_key(f->db, key, &u), AL_OK);
    assert_string_equal(u.name, "alice");
    assert_int_equal(u.role, DB_ROLE_ADMIN);
    assert_true(u.created_at >= before && u.created_at <= after);
    assert_int_equal(db_user_by_key(f->db, key2, &u), AL_OK);
    assert_string_equal(u.name, "bob.b-2_x");
    assert_int_equal(u.role, DB_ROLE_VIEWER);

    /* A well-formed key nobody holds. */
    char wrong[DB_KEY_LEN + 1];
    memcpy(wrong, key, sizeof wrong);
    wrong[10] = wrong[10] == 'A' ? 'B' : 'A';
    assert_int_equal(db_user_by_key(f->db, wrong, &u), AL_E_NOENT);
    assert_non_null(strstr(db_errmsg(f->db), "no user"));
    assert_null(strstr(db_errmsg(f->db), wrong + 4));
}

static void test_user_malformed_keys(void **state)
{
    struct fx *f = *state;
    char key[DB_KEY_LEN + 1];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, key, sizeof key), AL_OK);
    struct db_user u;
    char bad[DB_KEY_LEN + 8];

    const char *fixed[] = {"", "alk_", "alk", "Bearer x", DB_KEY_PREFIX "AAAA"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        assert_int_equal(db_user_by_key(f->db, fixed[i], &u), AL_E_INVAL);
        assert_non_null(strstr(db_errmsg(f->db), "malformed API key"));
    }
    assert_int_equal(db_user_by_key(f->db, NULL, &u), AL_E_INVAL);
    assert_int_equal(db_user_by_key(f->db, key, NULL), AL_E_INVAL);

    /* One character more, one less. */
    (void)snprintf(bad, sizeof bad, "%sA", key);
    assert_int_equal(db_user_by_key(f->db, bad, &u), AL_E_INVAL);
    (void)snprintf(bad, sizeof bad, "%.*s", DB_KEY_LEN - 1, key);
    assert_int_equal(db_user_by_key(f->db, bad, &u), AL_E_INVAL);
    /* Wrong prefix, same length. */
    (void)snprintf(bad, sizeof bad, "ALK_%s", key + 4);
    assert_int_equal(db_user_by_key(f->db, bad, &u), AL_E_INVAL);
    /* Characters outside base64url: '+', '/', '=', space. */
    const char subst[] = {'+', '/', '=', ' ', '.'};
    for (size_t i = 0; i < sizeof subst; i++) {
        (void)snprintf(bad, sizeof bad, "%s", key);
        bad[20] = subst[i];
        assert_int_equal(db_user_by_key(f->db, bad, &u), AL_E_INVAL);
    }
    /* Non-zero unused bits in the last character: a second spelling of the
     * same bytes is refused (43 characters carry 258 bits for 256). */
    (void)snprintf(bad, sizeof bad, "%s", key);
    static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const char *pos = strchr(alpha, bad[DB_KEY_LEN - 1]);
    assert_non_null(pos);
    bad[DB_KEY_LEN - 1] = alpha[(pos - alpha) ^ 1];
    assert_int_equal(db_user_by_key(f->db, bad, &u), AL_E_INVAL);
    /* The message never holds the key. */
    assert_null(strstr(db_errmsg(f->db), bad + 4));
}

static void test_user_bad_inputs(void **state)
{
    struct fx *f = *state;
    char key[DB_KEY_LEN + 1];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, key, sizeof key), AL_OK);

    /* Duplicate name: nothing written, no key handed out. */
    memset(key, 'x', sizeof key);
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_VIEWER, key, sizeof key), AL_E_EXISTS);
    assert_string_equal(key, "");
    assert_non_null(strstr(db_errmsg(f->db), "user alice already exists"));
    assert_int_equal(raw_int(f, "SELECT count(*) FROM users"), 1);

    /* Roles. */
    assert_int_equal(db_user_add(f->db, "bob", (enum db_role)7, key, sizeof key), AL_E_INVAL);
    assert_non_null(strstr(db_errmsg(f->db), "role must be"));
    assert_int_equal(db_user_add(f->db, "bob", (enum db_role) - 1, key, sizeof key), AL_E_INVAL);

    /* Names. */
    char n64[DB_NAME_MAX + 1], n65[DB_NAME_MAX + 2];
    memset(n64, 'a', DB_NAME_MAX);
    n64[DB_NAME_MAX] = '\0';
    memset(n65, 'a', DB_NAME_MAX + 1);
    n65[DB_NAME_MAX + 1] = '\0';
    const char *bad[] = {"",   "Alice", "a b",         "-rf",  ".hidden", "..",
                         "_x", "a/b",   "caf\xc3\xa9", "a\nb", "a;drop",  n65};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(db_user_add(f->db, bad[i], DB_ROLE_VIEWER, key, sizeof key), AL_E_INVAL);
        assert_non_null(strstr(db_errmsg(f->db), "user name"));
    }
    assert_int_equal(db_user_add(f->db, NULL, DB_ROLE_VIEWER, key, sizeof key), AL_E_INVAL);
    assert_non_null(strstr(db_errmsg(f->db), "missing"));
    assert_int_equal(db_user_add(f->db, n64, DB_ROLE_VIEWER, key, sizeof key), AL_OK);
    assert_int_equal(db_user_add(f->db, "0", DB_ROLE_VIEWER, key, sizeof key), AL_OK);

    /* Key buffer. */
    assert_int_equal(db_user_add(f->db, "carol", DB_ROLE_VIEWER, key, DB_KEY_LEN), AL_E_INVAL);
    assert_int_equal(db_user_add(f->db, "carol", DB_ROLE_VIEWER, NULL, 0), AL_E_INVAL);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM users"), 3);
}

struct names {
    char v[8][DB_NAME_MAX + 1];
    int roles[8];
    size_t n;
    size_t stop_after; /* 0: never */
};

static int collect_user(void *ctx, const struct db_user *u)
{
    struct names *c = ctx;
    if (c->n < 8) {
        (void)snprintf(c->v[c->n], sizeof c->v[c->n], "%s", u->name);
        c->roles[c->n] = (int)u->role;
    }
    c->n++;
    return c->stop_after && c->n >= c->stop_after ? 42 : 0;
}

static void test_user_list_and_remove(void **state)
{
    struct fx *f = *state;
    char kc[DB_KEY_LEN + 1], kb[DB_KEY_LEN + 1], ka[DB_KEY_LEN + 1];
    assert_int_equal(db_user_add(f->db, "carol", DB_ROLE_OPERATOR, kc, sizeof kc), AL_OK);
    assert_int_equal(db_user_add(f->db, "bob", DB_ROLE_VIEWER, kb, sizeof kb), AL_OK);
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, ka, sizeof ka), AL_OK);

    struct names c = {0};
    assert_int_equal(db_user_list(f->db, collect_user, &c), AL_OK);
    assert_int_equal(c.n, 3);
    assert_string_equal(c.v[0], "alice");
    assert_int_equal(c.roles[0], DB_ROLE_ADMIN);
    assert_string_equal(c.v[1], "bob");
    assert_string_equal(c.v[2], "carol");
    assert_int_equal(c.roles[2], DB_ROLE_OPERATOR);

    struct names stop = {.stop_after = 2};
    assert_int_equal(db_user_list(f->db, collect_user, &stop), 42);
    assert_int_equal(stop.n, 2);
    assert_int_equal(db_user_list(f->db, NULL, NULL), AL_E_INVAL);

    assert_int_equal(db_user_remove(f->db, "bob"), AL_OK);
    struct db_user u;
    assert_int_equal(db_user_by_key(f->db, kb, &u), AL_E_NOENT);
    assert_int_equal(db_user_remove(f->db, "bob"), AL_E_NOENT);
    assert_non_null(strstr(db_errmsg(f->db), "no user named bob"));
    assert_int_equal(db_user_remove(f->db, "Bob"), AL_E_INVAL);
    assert_int_equal(db_user_remove(f->db, NULL), AL_E_INVAL);
    memset(&c, 0, sizeof c);
    assert_int_equal(db_user_list(f->db, collect_user, &c), AL_OK);
    assert_int_equal(c.n, 2);
    /* The name is free again, with a new key. */
    assert_int_equal(db_user_add(f->db, "bob", DB_ROLE_ADMIN, kb, sizeof kb), AL_OK);
    assert_int_equal(db_user_by_key(f->db, kb, &u), AL_OK);
    assert_int_equal(u.role, DB_ROLE_ADMIN);
}

/* A key's handle: its hash, which finds its user until the user is removed
 * (what keeps an API key's WebSockets open, api_wsess.c). */
static void test_user_key_handle(void **state)
{
    struct fx *f = *state;
    char ka[DB_KEY_LEN + 1], kb[DB_KEY_LEN + 1];
    char ha[DB_KEY_HANDLE_LEN + 1], hb[DB_KEY_HANDLE_LEN + 1];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, ka, sizeof ka), AL_OK);
    assert_int_equal(db_user_add(f->db, "bob", DB_ROLE_VIEWER, kb, sizeof kb), AL_OK);
    assert_int_equal(db_user_key_handle(f->db, ka, ha, sizeof ha), AL_OK);
    assert_int_equal(db_user_key_handle(f->db, kb, hb, sizeof hb), AL_OK);
    assert_int_equal(strlen(ha), DB_KEY_HANDLE_LEN);
    assert_string_not_equal(ha, hb);
    assert_null(strstr(ha, ka + 4)); /* not the key */

    struct db_user u;
    assert_int_equal(db_user_by_handle(f->db, ha, &u), AL_OK);
    assert_string_equal(u.name, "alice");
    assert_int_equal(u.role, DB_ROLE_ADMIN);
    assert_int_equal(db_user_by_handle(f->db, hb, &u), AL_OK);
    assert_string_equal(u.name, "bob");

    /* the user removed: the handle finds nobody, the other still its own */
    assert_int_equal(db_user_remove(f->db, "bob"), AL_OK);
    assert_int_equal(db_user_by_handle(f->db, hb, &u), AL_E_NOENT);
    assert_int_equal(db_user_by_handle(f->db, ha, &u), AL_OK);
    /* a new bob has a new key: the old handle stays dead */
    assert_int_equal(db_user_add(f->db, "bob", DB_ROLE_VIEWER, kb, sizeof kb), AL_OK);
    assert_int_equal(db_user_by_handle(f->db, hb, &u), AL_E_NOENT);

    /* bad inputs: not a handle (the key itself, upper case, short), no room,
     * a malformed key */
    assert_int_equal(db_user_by_handle(f->db, ka, &u), AL_E_INVAL);
    char up[DB_KEY_HANDLE_LEN + 1];
    memcpy(up, ha, sizeof up);
    for (char *p = up; *p; p++)
        if (*p >= 'a' && *p <= 'f')
            *p = (char)(*p - 'a' + 'A');
    assert_int_equal(db_user_by_handle(f->db, strcmp(up, ha) ? up : "A", &u), AL_E_INVAL);
    ha[10] = 0;
    assert_int_equal(db_user_by_handle(f->db, ha, &u), AL_E_INVAL);
    assert_int_equal(db_user_by_handle(f->db, NULL, &u), AL_E_INVAL);
    assert_int_equal(db_user_by_handle(f->db, hb, NULL), AL_E_INVAL);
    assert_int_equal(db_user_key_handle(f->db, ka, ha, DB_KEY_HANDLE_LEN), AL_E_INVAL);
    assert_int_equal(db_user_key_handle(f->db, "alk_short", ha, sizeof ha), AL_E_INVAL);
    assert_string_equal(ha, "");
}

static void hex_sha256(const char *s, char hex[65])
{
    unsigned char md[32];
    unsigned int len = 0;
    assert_int_equal(EVP_Digest(s, strlen(s), md, &len, EVP_sha256(), NULL), 1);
    for (size_t i = 0; i < 32; i++)
        (void)snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static void test_key_not_stored_in_clear(void **state)
{
    struct fx *f = *state;
    char key[DB_KEY_LEN + 1], hex[65];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, key, sizeof key), AL_OK);
    uint8_t raw[DB_KEY_RAW_LEN];
    size_t n = 0;
    assert_int_equal(b64u_decode(key + 4, DB_KEY_LEN - 4, raw, sizeof raw, &n), AL_OK);
    hex_sha256(key, hex);

    char wal[FX_PATH_MAX + 8];
    (void)snprintf(wal, sizeof wal, "%s-wal", f->path);
    /* While open the row is in the WAL; after close, in the main file. */
    for (int pass = 0; pass < 2; pass++) {
        const char *files[] = {f->path, wal};
        bool hash_seen = false;
        for (size_t i = 0; i < 2; i++) {
            assert_false(file_has(files[i], key, DB_KEY_LEN));
            assert_false(file_has(files[i], key + 4, DB_KEY_LEN - 4));
            assert_false(file_has(files[i], key + 4, 20)); /* not even a part */
            assert_false(file_has(files[i], raw, sizeof raw));
            hash_seen = hash_seen || file_has(files[i], hex, 64);
        }
        assert_true(hash_seen); /* what is stored instead */
        if (pass == 0) {
            assert_int_equal(db_close(f->db), AL_OK);
            f->db = NULL;
            assert_int_equal(access(wal, F_OK), -1); /* checkpointed and removed */
            reopen(f);
        }
    }
}

/* PostgreSQL: the key is in no file of the server (tables, WAL, logs),
 * its hash is. Every file under the server's directory is read after a
 * checkpoint. */
struct scan {
    const char *key;
    const uint8_t *raw;
    const char *hex;
    bool key_seen, hash_seen;
    size_t files;
};

static struct scan *scan_now; /* nftw has no context argument */

static int scan_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type != FTW_F || !S_ISREG(st->st_mode))
        return 0;
    struct scan *c = scan_now;
    size_t len = 0;
    uint8_t *buf = slurp(path, &len);
    if (!buf)
        return 0;
    c->files++;
    if (memmem(buf, len, c->key, DB_KEY_LEN) || memmem(buf, len, c->key + 4, 20) ||
        memmem(buf, len, c->raw, DB_KEY_RAW_LEN))
        c->key_seen = true;
    if (memmem(buf, len, c->hex, 64))
        c->hash_seen = true;
    free(buf);
    return 0;
}

static void test_pg_key_not_stored_in_clear(void **state)
{
    struct fx *f = *state;
    char key[DB_KEY_LEN + 1], hex[65];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, key, sizeof key), AL_OK);
    uint8_t raw[DB_KEY_RAW_LEN];
    size_t n = 0;
    assert_int_equal(b64u_decode(key + 4, DB_KEY_LEN - 4, raw, sizeof raw, &n), AL_OK);
    hex_sha256(key, hex);
    struct db_user u;
    assert_int_equal(db_user_by_key(f->db, key, &u), AL_OK); /* logged nowhere either */
    pg_exec("postgres", "CHECKPOINT");
    struct scan c = {.key = key, .raw = raw, .hex = hex};
    scan_now = &c;
    assert_int_equal(nftw(pg.dir, scan_file, 16, FTW_PHYS), 0);
    scan_now = NULL;
    assert_true(c.files > 100);
    assert_false(c.key_seen);
    assert_true(c.hash_seen); /* what is stored instead */
}

/* ---- sandboxes ---------------------------------------------------------------- */

static int collect_sandbox(void *ctx, const struct db_sandbox *sb)
{
    struct names *c = ctx;
    if (c->n < 8)
        (void)snprintf(c->v[c->n], sizeof c->v[c->n], "%s", sb->id);
    c->n++;
    return 0;
}

static void test_sandboxes(void **state)
{
    struct fx *f = *state;
    int64_t before = now_ms();
    assert_int_equal(db_sandbox_add(f->db, "sb-local", DB_SANDBOX_LOCAL, NULL), AL_OK);
    assert_int_equal(
        db_sandbox_add(f->db, "sb-static", DB_SANDBOX_STATIC,
                       "wss://aca.example/?identifier=sb&api-version=2024-02-02-preview"),
        AL_OK);
    assert_int_equal(db_sandbox_add(f->db, "sb-rev", DB_SANDBOX_REVERSE, ""), AL_OK);

    struct db_sandbox sb;
    assert_int_equal(db_sandbox_get(f->db, "sb-static", &sb), AL_OK);
    assert_string_equal(sb.id, "sb-static");
    assert_int_equal(sb.kind, DB_SANDBOX_STATIC);
    assert_string_equal(sb.url, "wss://aca.example/?identifier=sb&api-version=2024-02-02-preview");
    assert_true(sb.created_at >= before);
    assert_false(sb.link_up);
    assert_int_equal(sb.link_since, sb.created_at);
    assert_int_equal(sb.rtt_us, -1);
    assert_int_equal(db_sandbox_get(f->db, "sb-local", &sb), AL_OK);
    assert_int_equal(sb.kind, DB_SANDBOX_LOCAL);
    assert_string_equal(sb.url, "");

    /* Link state. */
    assert_int_equal(db_sandbox_set_link(f->db, "sb-local", true, 1234567, 850), AL_OK);
    assert_int_equal(db_sandbox_get(f->db, "sb-local", &sb), AL_OK);
    assert_true(sb.link_up);
    assert_int_equal(sb.link_since, 1234567);
    assert_int_equal(sb.rtt_us, 850);
    assert_int_equal(db_sandbox_set_link(f->db, "sb-local", false, 1234999, -1), AL_OK);
    assert_int_equal(db_sandbox_get(f->db, "sb-local", &sb), AL_OK);
    assert_false(sb.link_up);
    assert_int_equal(sb.rtt_us, -1);
    assert_int_equal(db_sandbox_set_link(f->db, "nope", true, 1, 1), AL_E_NOENT);
    assert_int_equal(db_sandbox_set_link(f->db, "sb-local", true, -1, 1), AL_E_INVAL);
    assert_int_equal(db_sandbox_set_link(f->db, "sb-local", true, 1, -2), AL_E_INVAL);

    /* Bad input. */
    assert_int_equal(db_sandbox_add(f->db, "sb-local", DB_SANDBOX_LOCAL, NULL), AL_E_EXISTS);
    assert_non_null(strstr(db_errmsg(f->db), "already exists"));
    assert_int_equal(db_sandbox_add(f->db, "x", DB_SANDBOX_STATIC, NULL), AL_E_INVAL);
    assert_non_null(strstr(db_errmsg(f->db), "needs a url"));
    assert_int_equal(db_sandbox_add(f->db, "x", DB_SANDBOX_LOCAL, "wss://h/"), AL_E_INVAL);
    assert_non_null(strstr(db_errmsg(f->db), "only a static or aca sandbox"));
    const char *urls[] = {"http://h/", "wss://", "wss://h /x", "wss://h/\x7f", "ws:/h", "WSS://h"};
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++)
        assert_int_equal(db_sandbox_add(f->db, "x", DB_SANDBOX_STATIC, urls[i]), AL_E_INVAL);
    char *big = malloc(DB_SANDBOX_URL_MAX + 2);
    assert_non_null(big);
    memcpy(big, "wss://", 6);
    memset(big + 6, 'a', DB_SANDBOX_URL_MAX - 5);
    big[DB_SANDBOX_URL_MAX + 1] = '\0';
    assert_int_equal(db_sandbox_add(f->db, "x", DB_SANDBOX_STATIC, big), AL_E_TOOBIG);
    big[DB_SANDBOX_URL_MAX] = '\0'; /* exactly the limit */
    assert_int_equal(db_sandbox_add(f->db, "x", DB_SANDBOX_STATIC, big), AL_OK);
    assert_int_equal(db_sandbox_get(f->db, "x", &sb), AL_OK);
    assert_string_equal(sb.url, big);
    free(big);
    assert_int_equal(db_sandbox_add(f->db, "y", (enum db_sandbox_kind)4, NULL), AL_E_INVAL);
    assert_int_equal(db_sandbox_add(f->db, "Y", DB_SANDBOX_LOCAL, NULL), AL_E_INVAL);
    assert_int_equal(db_sandbox_add(f->db, NULL, DB_SANDBOX_LOCAL, NULL), AL_E_INVAL);
    assert_int_equal(db_sandbox_get(f->db, "nope", &sb), AL_E_NOENT);
    assert_int_equal(db_sandbox_get(f->db, "sb-local", NULL), AL_E_INVAL);
    assert_int_equal(db_sandbox_get(f->db, "../x", &sb), AL_E_INVAL);

    struct names c = {0};
    assert_int_equal(db_sandbox_list(f->db, collect_sandbox, &c), AL_OK);
    assert_int_equal(c.n, 4);
    assert_string_equal(c.v[0], "sb-local");
    assert_string_equal(c.v[1], "sb-rev");
    assert_string_equal(c.v[2], "sb-static");
    assert_string_equal(c.v[3], "x");
    assert_int_equal(db_sandbox_list(f->db, NULL, NULL), AL_E_INVAL);

    assert_int_equal(db_sandbox_remove(f->db, "sb-rev"), AL_OK);
    assert_int_equal(db_sandbox_remove(f->db, "sb-rev"), AL_E_NOENT);
    assert_int_equal(db_sandbox_remove(f->db, ""), AL_E_INVAL);
}

/* ---- terminals ---------------------------------------------------------------- */

static struct db_terminal_spec spec_on(const char *sandbox, uint32_t channel)
{
    struct db_terminal_spec s = {
        .sandbox_id = sandbox,
        .channel = channel,
        .argv_json = "[\"bash\", \"-lc\", \"echo hi\"]",
        .cwd = "/work/repo",
        .env_json = "{\"TERM\": \"xterm-256color\", \"LANG\": \"C.UTF-8\"}",
        .cols = 120,
        .rows = 40,
        .mode = DB_MODE_PTY,
    };
    return s;
}

static void add_term(struct fx *f, const char *sandbox, uint32_t channel, char *id)
{
    struct db_terminal_spec s = spec_on(sandbox, channel);
    assert_int_equal(db_terminal_add(f->db, &s, id, DB_NAME_MAX + 1), AL_OK);
}

static void test_terminal_add_get(void **state)
{
    struct fx *f = *state;
    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    char id[DB_NAME_MAX + 1];
    int64_t before = now_ms();
    add_term(f, "sb1", 7, id);
    assert_int_equal(strlen(id), 26);
    assert_memory_equal(id, "t-", 2);
    assert_true(db_name_valid(id));

    struct db_terminal *t = malloc(sizeof *t);
    assert_non_null(t);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_string_equal(t->id, id);
    assert_string_equal(t->sandbox_id, "sb1");
    assert_int_equal(t->channel, 7);
    assert_string_equal(t->argv_json, "[\"bash\", \"-lc\", \"echo hi\"]");
    assert_string_equal(t->cwd, "/work/repo");
    assert_string_equal(t->env_json, "{\"TERM\": \"xterm-256color\", \"LANG\": \"C.UTF-8\"}");
    assert_int_equal(t->cols, 120);
    assert_int_equal(t->rows, 40);
    assert_int_equal(t->mode, DB_MODE_PTY);
    assert_int_equal(t->state, DB_TERM_OPENING);
    assert_int_equal(t->exit_code, -1);
    assert_int_equal(t->exit_signal, 0);
    assert_true(t->created_at >= before);
    assert_int_equal(t->ended_at, 0);
    assert_int_equal(t->out_offset, 0);
    assert_int_equal(t->err_offset, 0);
    assert_int_equal(t->rec_bytes, 0);

    /* Defaults: no cwd, no env; pipes; the largest channel and size. */
    struct db_terminal_spec s = spec_on("sb1", UINT32_MAX);
    s.cwd = NULL;
    s.env_json = NULL;
    s.mode = DB_MODE_PIPES;
    s.cols = AL_MAX_COLS;
    s.rows = AL_MAX_ROWS;
    char id2[DB_NAME_MAX + 1];
    assert_int_equal(db_terminal_add(f->db, &s, id2, sizeof id2), AL_OK);
    assert_string_not_equal(id, id2);
    assert_int_equal(db_terminal_get(f->db, id2, t), AL_OK);
    assert_string_equal(t->cwd, "");
    assert_string_equal(t->env_json, "{}");
    assert_int_equal(t->mode, DB_MODE_PIPES);
    assert_int_equal(t->channel, UINT32_MAX);
    assert_int_equal(t->cols, AL_MAX_COLS);

    assert_int_equal(db_terminal_get(f->db, "t-000000000000000000000000", t), AL_E_NOENT);
    assert_int_equal(db_terminal_get(f->db, "T-1", t), AL_E_INVAL);
    assert_int_equal(db_terminal_get(f->db, id, NULL), AL_E_INVAL);
    free(t);
}

static void test_terminal_foreign_key_and_channels(void **state)
{
    struct fx *f = *state;
    char id[DB_NAME_MAX + 1], id2[DB_NAME_MAX + 1], id3[DB_NAME_MAX + 1];
    struct db_terminal_spec s = spec_on("ghost", 1);
    assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_E_NOENT);
    assert_non_null(strstr(db_errmsg(f->db), "no sandbox ghost"));
    assert_string_equal(id, "");

    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    assert_int_equal(db_sandbox_add(f->db, "sb2", DB_SANDBOX_REVERSE, NULL), AL_OK);
    add_term(f, "sb1", 1, id);
    /* The channel is taken on sb1, free on sb2. */
    s = spec_on("sb1", 1);
    assert_int_equal(db_terminal_add(f->db, &s, id2, sizeof id2), AL_E_EXISTS);
    assert_non_null(strstr(db_errmsg(f->db), "channel 1 is in use on sandbox sb1"));
    add_term(f, "sb2", 1, id2);

    /* A sandbox with terminals stays. */
    assert_int_equal(db_sandbox_remove(f->db, "sb1"), AL_E_STATE);
    assert_non_null(strstr(db_errmsg(f->db), "still has terminals"));

    /* Once closed, the channel number is free again. */
    assert_int_equal(db_terminal_set_exit(f->db, id, 0, 0), AL_OK);
    s = spec_on("sb1", 1);
    assert_int_equal(db_terminal_add(f->db, &s, id3, sizeof id3), AL_E_EXISTS); /* exited: live */
    assert_int_equal(db_terminal_set_state(f->db, id, DB_TERM_CLOSED), AL_OK);
    add_term(f, "sb1", 1, id3);

    /* Remove terminals, then the sandbox. */
    assert_int_equal(db_terminal_remove(f->db, id3), AL_E_STATE);
    assert_non_null(strstr(db_errmsg(f->db), "close it before removing"));
    assert_int_equal(db_terminal_set_state(f->db, id3, DB_TERM_LOST), AL_OK);
    assert_int_equal(db_terminal_remove(f->db, id3), AL_OK);
    assert_int_equal(db_terminal_remove(f->db, id3), AL_E_NOENT);
    assert_int_equal(db_terminal_remove(f->db, id), AL_OK);
    assert_int_equal(db_sandbox_remove(f->db, "sb1"), AL_OK);
    assert_int_equal(db_sandbox_remove(f->db, "sb2"), AL_E_STATE);
}

static void test_terminal_states(void **state)
{
    struct fx *f = *state;
    char id[DB_NAME_MAX + 1], id2[DB_NAME_MAX + 1];
    struct db_terminal *t = malloc(sizeof *t);
    assert_non_null(t);
    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    add_term(f, "sb1", 1, id);

    assert_int_equal(db_terminal_set_state(f->db, id, DB_TERM_OPENING), AL_E_INVAL);
    assert_int_equal(db_terminal_set_state(f->db, id, DB_TERM_EXITED), AL_E_INVAL);
    assert_int_equal(db_terminal_set_state(f->db, id, (enum db_term_state)9), AL_E_INVAL);
    assert_int_equal(db_terminal_set_state(f->db, id, DB_TERM_RUNNING), AL_OK);
    assert_int_equal(db_terminal_set_state(f->db, id, DB_TERM_RUNNING), AL_OK); /* no-op */
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_int_equal(t->state, DB_TERM_RUNNING);
    assert_int_equal(t->ended_at, 0);

    /* Exit statuses as the EXIT frame allows them. */
    const int bad[][2] = {{256, 0}, {-1, 0}, {-2, 0}, {3, 9}, {0, 9}, {-1, 128}, {-1, -1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(db_terminal_set_exit(f->db, id, bad[i][0], bad[i][1]), AL_E_INVAL);
    int64_t before = now_ms();
    assert_int_equal(db_terminal_set_exit(f->db, id, 3, 0), AL_OK);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_int_equal(t->state, DB_TERM_EXITED);
    assert_int_equal(t->exit_code, 3);
    assert_int_equal(t->exit_signal, 0);
    assert_true(t->ended_at >= before);
    int64_t ended = t->ended_at;
    assert_int_equal(db_terminal_set_exit(f->db, id, 3, 0), AL_OK); /* a repeated EXIT */
    assert_int_equal(db_terminal_set_exit(f->db, id, 4, 0), AL_E_STATE);
    assert_non_null(strstr(db_errmsg(f->db), "another status"));
    assert_int_equal(db_terminal_set_state(f->db, id, DB_TERM_RUNNING), AL_E_STATE);
    assert_non_null(strstr(db_errmsg(f->db), "is exited and cannot become running"));
    assert_int_equal(db_terminal_set_state(f->db, id, DB_TERM_CLOSED), AL_OK);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_int_equal(t->state, DB_TERM_CLOSED);
    assert_int_equal(t->ended_at, ended); /* set once */
    assert_int_equal(t->exit_code, 3);    /* kept */
    assert_int_equal(db_terminal_set_state(f->db, id, DB_TERM_LOST), AL_E_STATE);
    assert_int_equal(db_terminal_set_exit(f->db, id, 3, 0), AL_E_STATE);

    /* Killed by a signal straight from opening; then lost, which is final. */
    add_term(f, "sb1", 2, id2);
    assert_int_equal(db_terminal_set_exit(f->db, id2, -1, 9), AL_OK);
    assert_int_equal(db_terminal_get(f->db, id2, t), AL_OK);
    assert_int_equal(t->exit_code, -1);
    assert_int_equal(t->exit_signal, 9);
    assert_int_equal(db_terminal_set_state(f->db, id2, DB_TERM_LOST), AL_OK);
    assert_int_equal(db_terminal_set_state(f->db, id2, DB_TERM_CLOSED), AL_E_STATE);
    assert_int_equal(db_terminal_set_state(f->db, id2, DB_TERM_RUNNING), AL_E_STATE);

    assert_int_equal(db_terminal_set_state(f->db, "t-nope", DB_TERM_RUNNING), AL_E_NOENT);
    assert_int_equal(db_terminal_set_exit(f->db, "t-nope", 0, 0), AL_E_NOENT);
    assert_int_equal(db_terminal_set_state(f->db, NULL, DB_TERM_RUNNING), AL_E_INVAL);
    free(t);
}

struct tlist {
    char ids[8][DB_NAME_MAX + 1];
    size_t n;
};

static int collect_term(void *ctx, const struct db_terminal *t)
{
    struct tlist *c = ctx;
    if (c->n < 8)
        (void)snprintf(c->ids[c->n], sizeof c->ids[c->n], "%s", t->id);
    c->n++;
    return c->n == 8 ? 7 : 0;
}

static void test_terminal_list(void **state)
{
    struct fx *f = *state;
    char ids[9][DB_NAME_MAX + 1];
    assert_int_equal(db_sandbox_add(f->db, "a", DB_SANDBOX_LOCAL, NULL), AL_OK);
    assert_int_equal(db_sandbox_add(f->db, "b", DB_SANDBOX_LOCAL, NULL), AL_OK);
    add_term(f, "b", 1, ids[0]);
    add_term(f, "a", 1, ids[1]);
    add_term(f, "b", 2, ids[2]);

    struct tlist c = {0};
    assert_int_equal(db_terminal_list(f->db, NULL, collect_term, &c), AL_OK);
    assert_int_equal(c.n, 3);
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(c.ids[i], ids[i]); /* creation order */
    memset(&c, 0, sizeof c);
    assert_int_equal(db_terminal_list(f->db, "b", collect_term, &c), AL_OK);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.ids[0], ids[0]);
    assert_string_equal(c.ids[1], ids[2]);
    memset(&c, 0, sizeof c);
    assert_int_equal(db_terminal_list(f->db, "zzz", collect_term, &c), AL_OK);
    assert_int_equal(c.n, 0);
    assert_int_equal(db_terminal_list(f->db, "B", collect_term, &c), AL_E_INVAL);
    assert_int_equal(db_terminal_list(f->db, NULL, NULL, NULL), AL_E_INVAL);

    /* The callback stops the listing with its own value. */
    for (uint32_t ch = 3; ch < 9; ch++)
        add_term(f, "b", ch, ids[ch]);
    memset(&c, 0, sizeof c);
    assert_int_equal(db_terminal_list(f->db, NULL, collect_term, &c), 7);
    assert_int_equal(c.n, 8);
}

/* db.h tells a list callback not to use the same db, but airlockd's relay
 * audits from one (a recording that fails while terminals are loaded):
 * the listing must still deliver every row, on both backends. 70 rows:
 * more than the PostgreSQL backend fetches at a time. */
struct nested {
    struct db *db;
    size_t n;
};

static int nested_audit(void *ctx, const struct db_terminal *t)
{
    struct nested *c = ctx;
    c->n++;
    return db_audit_add(c->db, 0, "system", "recording_failed", t->id, NULL);
}

static void test_list_callback_uses_db(void **state)
{
    struct fx *f = *state;
    enum { N = 70 };
    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    char id[DB_NAME_MAX + 1];
    for (uint32_t ch = 1; ch <= N; ch++)
        add_term(f, "sb1", ch, id);
    struct nested c = {.db = f->db};
    assert_int_equal(db_terminal_list(f->db, NULL, nested_audit, &c), AL_OK);
    assert_int_equal(c.n, N);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM audit"), N);
    /* And a listing stopped by its callback leaves the db usable. */
    struct tlist t = {0};
    assert_int_equal(db_terminal_list(f->db, NULL, collect_term, &t), 7);
    assert_int_equal(db_terminal_list(f->db, "sb1", nested_audit, &c), AL_OK);
    assert_int_equal(c.n, 2 * N);
}

static void test_terminal_bad_specs(void **state)
{
    struct fx *f = *state;
    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    char id[DB_NAME_MAX + 1];
    struct db_terminal_spec s;

    assert_int_equal(db_terminal_add(f->db, NULL, id, sizeof id), AL_E_INVAL);
    s = spec_on("sb1", 1);
    assert_int_equal(db_terminal_add(f->db, &s, id, DB_NAME_MAX), AL_E_INVAL);
    assert_int_equal(db_terminal_add(f->db, &s, NULL, 0), AL_E_INVAL);

    struct {
        const char *argv;
        int rc;
        const char *msg;
    } argvs[] = {
        {NULL, AL_E_INVAL, "argv is missing"},
        {"", AL_E_INVAL, "not valid JSON"},
        {"bash", AL_E_INVAL, "not valid JSON"},
        {"[\"bash\"", AL_E_INVAL, "not valid JSON"},
        {"[\"bash\"] x", AL_E_INVAL, "not valid JSON"},
        {"[]", AL_E_INVAL, "non-empty JSON array"},
        {"{\"a\": \"b\"}", AL_E_INVAL, "non-empty JSON array"},
        {"[\"bash\", 1]", AL_E_INVAL, "argv[1] is not a string"},
        {"[\"\"]", AL_E_INVAL, "argv[0] is empty"},
        {"[\"a\\u0000b\"]", AL_E_INVAL, "not valid JSON"},
        {"[\"\xff\"]", AL_E_INVAL, "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof argvs / sizeof argvs[0]; i++) {
        s = spec_on("sb1", 1);
        s.argv_json = argvs[i].argv;
        assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), argvs[i].rc);
        if (!strstr(db_errmsg(f->db), argvs[i].msg))
            fail_msg("argv %zu: '%s' lacks '%s'", i, db_errmsg(f->db), argvs[i].msg);
    }

    struct {
        const char *env;
        const char *msg;
    } envs[] = {
        {"[]", "JSON object of strings"},
        {"{\"A=B\": \"x\"}", "without '='"},
        {"{\"\": \"x\"}", "without '='"},
        {"{\"A\": 1}", "not a string"},
        {"{\"A\": \"1\", \"A\": \"2\"}", "duplicate"},
    };
    for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++) {
        s = spec_on("sb1", 1);
        s.env_json = envs[i].env;
        assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_E_INVAL);
        if (!strstr(db_errmsg(f->db), envs[i].msg))
            fail_msg("env %zu: '%s' lacks '%s'", i, db_errmsg(f->db), envs[i].msg);
    }

    /* Sizes: entries, strings, whole texts. */
    char *big = malloc(BIG);
    assert_non_null(big);
    size_t n = 0;
    big[n++] = '[';
    for (int i = 0; i <= AL_MAX_ARGV; i++)
        n += (size_t)snprintf(big + n, BIG - n, "%s\"a\"", i ? "," : "");
    big[n++] = ']';
    big[n] = '\0';
    s = spec_on("sb1", 1);
    s.argv_json = big;
    assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_E_TOOBIG);
    assert_non_null(strstr(db_errmsg(f->db), "at most 256"));
    (void)snprintf(big, BIG, "[\"%0*d\"]", AL_MAX_STR + 1, 0);
    assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_E_TOOBIG);
    (void)snprintf(big, BIG, "[\"%0*d\"]", AL_MAX_STR, 0);
    assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_OK);
    assert_int_equal(db_terminal_set_state(f->db, id, DB_TERM_CLOSED), AL_OK);
    memset(big, ' ', DB_ARGV_JSON_MAX + 1);
    memcpy(big, "[\"a\"]", 5);
    big[DB_ARGV_JSON_MAX + 1] = '\0';
    assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_E_TOOBIG);
    big[DB_ARGV_JSON_MAX] = '\0'; /* exactly the limit (trailing spaces) */
    assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_OK);
    assert_int_equal(db_terminal_set_state(f->db, id, DB_TERM_CLOSED), AL_OK);
    s = spec_on("sb1", 1);
    (void)snprintf(big, BIG, "{\"A\": \"%0*d\"}", AL_MAX_STR - 1, 0); /* "A=" + value: 1 over */
    s.env_json = big;
    assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_E_TOOBIG);

    s = spec_on("sb1", 1);
    memset(big, 'a', DB_CWD_MAX + 1);
    big[DB_CWD_MAX + 1] = '\0';
    s.cwd = big;
    assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_E_TOOBIG);
    free(big);
    const char *cwds[] = {"/tmp/a\nb",     "/tmp/\x1b[31m", "/tmp/\xff",
                          "/tmp/\xc0\xaf", "/\xc2\x85",     "/\xed\xa0\x80"};
    for (size_t i = 0; i < sizeof cwds / sizeof cwds[0]; i++) {
        s.cwd = cwds[i];
        assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_E_INVAL);
        assert_non_null(strstr(db_errmsg(f->db), "UTF-8 text without control"));
    }
    s.cwd = "/home/ren\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x98\x80";
    assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_OK);

    const struct {
        uint16_t cols, rows;
    } sizes[] = {{0, 24}, {80, 0}, {AL_MAX_COLS + 1, 24}, {80, AL_MAX_ROWS + 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        s = spec_on("sb1", 9);
        s.cols = sizes[i].cols;
        s.rows = sizes[i].rows;
        assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_E_INVAL);
    }
    s = spec_on("sb1", 0);
    assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_E_INVAL);
    s = spec_on("sb1", 9);
    s.mode = (enum db_term_mode)2;
    assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_E_INVAL);
    s = spec_on(NULL, 9);
    assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_E_INVAL);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM terminals"), 3);
}

/* db_terminal_set_offsets with its struct. */
static int set_off(struct db *db, const char *id, uint64_t out, uint64_t err, uint64_t rec,
                   int64_t time_us, bool exited)
{
    const struct db_term_offsets o = {out, err, rec, time_us, exited};
    return db_terminal_set_offsets(db, id, &o);
}

static void test_offsets_survive_reopen(void **state)
{
    struct fx *f = *state;
    char id[DB_NAME_MAX + 1];
    struct db_terminal *t = malloc(sizeof *t);
    assert_non_null(t);
    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    add_term(f, "sb1", 1, id);
    assert_int_equal(db_terminal_set_state(f->db, id, DB_TERM_RUNNING), AL_OK);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_int_equal(t->rec_time_us, -1); /* nothing recorded yet */
    assert_false(t->rec_exited);

    assert_int_equal(set_off(f->db, id, 100, 5, 1234, 5000, false), AL_OK);
    assert_int_equal(set_off(f->db, id, 100, 5, 1234, 5000, false), AL_OK); /* same: fine */
    assert_int_equal(set_off(f->db, id, 20000000, 70, 20100000, 9000000, false), AL_OK);
    /* Any one of them going back is refused, and nothing changes. */
    assert_int_equal(set_off(f->db, id, 19999999, 80, 20200000, 9000001, false), AL_E_STATE);
    assert_non_null(strstr(db_errmsg(f->db), "may not go backwards"));
    assert_non_null(
        strstr(db_errmsg(f->db), "out 20000000, err 70, recording 20100000 bytes, time 9000000"));
    assert_int_equal(set_off(f->db, id, 20000001, 69, 20200000, 9000001, false), AL_E_STATE);
    assert_int_equal(set_off(f->db, id, 20000001, 80, 20099999, 9000001, false), AL_E_STATE);
    assert_int_equal(set_off(f->db, id, 20000001, 80, 20200000, 8999999, false), AL_E_STATE);
    assert_int_equal(set_off(f->db, id, (uint64_t)INT64_MAX + 1, 80, 1, 0, false), AL_E_TOOBIG);
    assert_int_equal(set_off(f->db, "t-nope", 1, 1, 1, 0, false), AL_E_NOENT);
    assert_int_equal(set_off(f->db, "", 1, 1, 1, 0, false), AL_E_INVAL);
    /* A time is >= 0 or -1 (not known), and an exit needs a time. */
    assert_int_equal(set_off(f->db, id, 20000001, 80, 20200000, -2, false), AL_E_INVAL);
    assert_int_equal(set_off(f->db, id, 20000001, 80, 20200000, -1, true), AL_E_INVAL);
    assert_non_null(strstr(db_errmsg(f->db), "exit is stored with its time"));
    assert_int_equal(db_terminal_set_offsets(f->db, id, NULL), AL_E_INVAL);

    reopen(f);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_int_equal(t->out_offset, 20000000);
    assert_int_equal(t->err_offset, 70);
    assert_int_equal(t->rec_bytes, 20100000);
    assert_int_equal(t->rec_time_us, 9000000);
    assert_false(t->rec_exited);
    assert_int_equal(t->state, DB_TERM_RUNNING);
    /* A time not known is stored as such (the resume reads the recording
     * whole), and a known one may follow. */
    assert_int_equal(set_off(f->db, id, 20000000, 70, 20100000, -1, false), AL_OK);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_int_equal(t->rec_time_us, -1);
    assert_int_equal(set_off(f->db, id, 20000000, 70, 20100100, 9500000, true), AL_OK);
    /* Large values round-trip; the connection is back to NORMAL afterwards
     * (checked indirectly: later writes still work). */
    assert_int_equal(
        set_off(f->db, id, (uint64_t)INT64_MAX, (uint64_t)INT64_MAX, 1ULL << 40, INT64_MAX, true),
        AL_OK);
    reopen(f);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_int_equal(t->out_offset, (uint64_t)INT64_MAX);
    assert_int_equal(t->rec_bytes, 1ULL << 40);
    assert_int_equal(t->rec_time_us, INT64_MAX);
    assert_true(t->rec_exited);
    assert_int_equal(db_audit_add(f->db, 0, "system", "link_up", "sb1", NULL), AL_OK);
    free(t);
}

/* ---- audit ---------------------------------------------------------------- */

struct arows {
    int64_t ids[16];
    int64_t at[16];
    char actor[16][DB_NAME_MAX + 1];
    char action[16][DB_ACTION_MAX + 1];
    size_t n;
    size_t stop_after;
};

static int collect_audit(void *ctx, const struct db_audit *a)
{
    struct arows *c = ctx;
    if (c->n < 16) {
        c->ids[c->n] = a->id;
        c->at[c->n] = a->at;
        (void)snprintf(c->actor[c->n], sizeof c->actor[c->n], "%s", a->actor);
        (void)snprintf(c->action[c->n], sizeof c->action[c->n], "%s", a->action);
    }
    c->n++;
    return c->stop_after && c->n >= c->stop_after ? 5 : 0;
}

static size_t audit_count(struct fx *f, int64_t since, const char *actor, const char *action,
                          unsigned limit, struct arows *c)
{
    memset(c, 0, sizeof *c);
    struct db_audit_filter flt = {.since = since, .actor = actor, .action = action, .limit = limit};
    assert_int_equal(db_audit_query(f->db, &flt, collect_audit, c), AL_OK);
    return c->n;
}

static int check_detail(void *ctx, const struct db_audit *a)
{
    (void)ctx;
    assert_string_equal(a->target, "t-1 \xc3\xa9");
    assert_string_equal(a->detail, "{\"viewers\": 2, \"mode\": \"takeover\"}");
    return 0;
}

static void test_audit(void **state)
{
    struct fx *f = *state;
    struct arows c;
    assert_int_equal(db_audit_add(f->db, 1000, "alice", "login", NULL, NULL), AL_OK);
    assert_int_equal(db_audit_add(f->db, 2000, "alice", "attach", "t-1", "{\"writer\": true}"),
                     AL_OK);
    assert_int_equal(db_audit_add(f->db, 3000, "bob", "attach", "t-1", "{}"), AL_OK);
    assert_int_equal(db_audit_add(f->db, 4000, "system", "link_down", "sb1", "{\"rtt_us\": 900}"),
                     AL_OK);
    assert_int_equal(db_audit_add(f->db, 5000, "alice", "kill", "t-1", "{\"signal\": 15}"), AL_OK);
    int64_t before = now_ms();
    assert_int_equal(db_audit_add(f->db, 0, "bob", "token_mint", "sb1", NULL), AL_OK);

    assert_int_equal(audit_count(f, 0, NULL, NULL, DB_AUDIT_LIMIT_MAX, &c), 6);
    /* Newest first. */
    assert_string_equal(c.action[0], "token_mint");
    assert_true(c.at[0] >= before);
    assert_string_equal(c.action[1], "kill");
    assert_string_equal(c.action[5], "login");
    assert_int_equal(c.at[5], 1000);
    assert_true(c.ids[0] > c.ids[1]);

    assert_int_equal(audit_count(f, 3000, NULL, NULL, 100, &c), 4);
    assert_int_equal(c.at[3], 3000); /* since is inclusive */
    assert_int_equal(audit_count(f, 0, "alice", NULL, 100, &c), 3);
    assert_int_equal(audit_count(f, 0, NULL, "attach", 100, &c), 2);
    assert_string_equal(c.actor[0], "bob");
    assert_string_equal(c.actor[1], "alice");
    assert_int_equal(audit_count(f, 2500, "alice", "attach", 100, &c), 0);
    assert_int_equal(audit_count(f, 2000, "alice", "attach", 100, &c), 1);
    assert_int_equal(audit_count(f, 0, "nobody", NULL, 100, &c), 0);
    assert_int_equal(audit_count(f, 0, NULL, NULL, 2, &c), 2);
    assert_string_equal(c.action[0], "token_mint");
    assert_string_equal(c.action[1], "kill");

    struct db_audit_filter flt = {.limit = 100};
    memset(&c, 0, sizeof c);
    c.stop_after = 3;
    assert_int_equal(db_audit_query(f->db, &flt, collect_audit, &c), 5);
    assert_int_equal(c.n, 3);

    /* Target and detail come back as stored. */
    assert_int_equal(db_audit_add(f->db, 9000, "carol", "takeover", "t-1 \xc3\xa9",
                                  "{\"viewers\": 2, \"mode\": \"takeover\"}"),
                     AL_OK);
    flt = (struct db_audit_filter){.actor = "carol", .limit = 1};
    assert_int_equal(db_audit_query(f->db, &flt, check_detail, NULL), AL_OK);
}

/* Retention: by age, then by count, newest kept; both at once; nothing
 * to prune is no error. */
static void test_audit_prune(void **state)
{
    struct fx *f = *state;
    struct arows c;
    for (int i = 0; i < 20; i++)
        assert_int_equal(db_audit_add(f->db, 1000 + i, "system", "link_up", "sb1", NULL), AL_OK);
    assert_int_equal(db_audit_prune(f->db, 0, 0), AL_OK);
    assert_int_equal(audit_count(f, 0, NULL, NULL, 100, &c), 20);
    assert_int_equal(db_audit_prune(f->db, 1005, 0), AL_OK); /* before 1005: 5 rows */
    assert_int_equal(audit_count(f, 0, NULL, NULL, 100, &c), 15);
    assert_int_equal(c.at[14], 1005);
    assert_int_equal(db_audit_prune(f->db, 0, 10), AL_OK);
    assert_int_equal(audit_count(f, 0, NULL, NULL, 100, &c), 10);
    assert_int_equal(c.at[0], 1019);
    assert_int_equal(c.at[9], 1010);
    assert_int_equal(db_audit_prune(f->db, 1012, 5), AL_OK);
    assert_int_equal(audit_count(f, 0, NULL, NULL, 100, &c), 5);
    assert_int_equal(c.at[4], 1015);
    assert_int_equal(db_audit_prune(f->db, 0, 100), AL_OK);
    assert_int_equal(audit_count(f, 0, NULL, NULL, 100, &c), 5);
    assert_int_equal(db_audit_prune(f->db, -1, 0), AL_E_INVAL);
}

static void test_audit_limit(void **state)
{
    struct fx *f = *state;
    struct arows c;
    for (int i = 0; i < DB_AUDIT_LIMIT_MAX + 5; i++)
        assert_int_equal(db_audit_add(f->db, 1000 + i, "system", "link_up", "sb1", NULL), AL_OK);
    assert_int_equal(audit_count(f, 0, NULL, NULL, DB_AUDIT_LIMIT_MAX, &c), DB_AUDIT_LIMIT_MAX);
    assert_int_equal(c.at[0], 1000 + DB_AUDIT_LIMIT_MAX + 4);
    struct db_audit_filter flt = {.limit = DB_AUDIT_LIMIT_MAX + 1};
    assert_int_equal(db_audit_query(f->db, &flt, collect_audit, &c), AL_E_TOOBIG);
    assert_non_null(strstr(db_errmsg(f->db), "at most 1000"));
    flt.limit = 0;
    assert_int_equal(db_audit_query(f->db, &flt, collect_audit, &c), AL_E_INVAL);
    assert_int_equal(audit_count(f, 1000 + DB_AUDIT_LIMIT_MAX, NULL, NULL, DB_AUDIT_LIMIT_MAX, &c),
                     5);
}

static void test_audit_bad_inputs(void **state)
{
    struct fx *f = *state;
    struct arows c;
    assert_int_equal(db_audit_add(f->db, -1, "alice", "login", NULL, NULL), AL_E_INVAL);
    assert_int_equal(db_audit_add(f->db, 1, NULL, "login", NULL, NULL), AL_E_INVAL);
    assert_int_equal(db_audit_add(f->db, 1, "Alice", "login", NULL, NULL), AL_E_INVAL);
    assert_non_null(strstr(db_errmsg(f->db), "audit actor"));
    const char *actions[] = {
        NULL, "", "Login", "1login", "log-in", "log in", "a23456789012345678901234567890123"};
    for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++) {
        assert_int_equal(db_audit_add(f->db, 1, "alice", actions[i], NULL, NULL), AL_E_INVAL);
        assert_non_null(strstr(db_errmsg(f->db), "audit action"));
    }
    assert_int_equal(
        db_audit_add(f->db, 1, "alice", "a2345678901234567890123456789012", NULL, NULL), AL_OK);
    assert_int_equal(db_audit_add(f->db, 1, "alice", "login", "a\tb", NULL), AL_E_INVAL);
    char target[DB_TARGET_MAX + 2];
    memset(target, 'x', sizeof target - 1);
    target[DB_TARGET_MAX + 1] = '\0';
    assert_int_equal(db_audit_add(f->db, 1, "alice", "login", target, NULL), AL_E_TOOBIG);
    const char *details[] = {"", "[]", "\"x\"", "{", "{\"a\": 1} {}", "{\"a\": 1, \"a\": 2}"};
    for (size_t i = 0; i < sizeof details / sizeof details[0]; i++)
        assert_int_equal(db_audit_add(f->db, 1, "alice", "login", NULL, details[i]), AL_E_INVAL);
    char *big = malloc(DB_DETAIL_MAX + 2);
    assert_non_null(big);
    memset(big, ' ', DB_DETAIL_MAX + 1);
    memcpy(big, "{}", 2);
    big[DB_DETAIL_MAX + 1] = '\0';
    assert_int_equal(db_audit_add(f->db, 1, "alice", "login", NULL, big), AL_E_TOOBIG);
    free(big);

    struct db_audit_filter flt = {.since = -5, .limit = 1};
    assert_int_equal(db_audit_query(f->db, &flt, collect_audit, &c), AL_E_INVAL);
    flt = (struct db_audit_filter){.actor = "A", .limit = 1};
    assert_int_equal(db_audit_query(f->db, &flt, collect_audit, &c), AL_E_INVAL);
    flt = (struct db_audit_filter){.action = "no such", .limit = 1};
    assert_int_equal(db_audit_query(f->db, &flt, collect_audit, &c), AL_E_INVAL);
    flt = (struct db_audit_filter){.limit = 1};
    assert_int_equal(db_audit_query(f->db, NULL, collect_audit, &c), AL_E_INVAL);
    assert_int_equal(db_audit_query(f->db, &flt, NULL, NULL), AL_E_INVAL);
    assert_int_equal(audit_count(f, 0, NULL, NULL, 10, &c), 1);
}

/* db_audit_add_batch: many rows in one transaction, in order. */
struct batch_rows {
    size_t n;
    struct db_audit r[4];
};

static int collect_batch(void *ctx, const struct db_audit *a)
{
    struct batch_rows *b = ctx;
    if (b->n < 4)
        b->r[b->n] = *a;
    b->n++;
    return 0;
}

/* Make the database refuse an insert whose target is "boom" (as a full disk
 * or a cut connection would), behind the interface. */
static void raw_refuse_boom(const struct fx *f)
{
    if (pg.on) {
        pg_exec(f->path, "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$"
                         " BEGIN IF NEW.target = 'boom' THEN"
                         " RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$");
        pg_exec(f->path, "CREATE TRIGGER boom BEFORE INSERT ON audit FOR EACH ROW"
                         " EXECUTE FUNCTION boom()");
    } else {
        sq_exec(f->path, "CREATE TRIGGER boom BEFORE INSERT ON audit WHEN NEW.target = 'boom'"
                         " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END");
    }
}

static void test_audit_batch(void **state)
{
    struct fx *f = *state;
    struct arows c;
    /* every field, in order (ids grow with the index), defaults filled in */
    const struct db_audit_row rows[] = {
        {3000, "system", "proxy_call", "t-1", "{\"status\": 200}"},
        {1000, "alice", "attach", NULL, NULL},
        {0, "bob", "kill", "t-2", "{\"signal\": 15}"},
    };
    assert_int_equal(db_audit_add_batch(f->db, rows, 3), AL_OK);
    assert_int_equal(db_audit_add_batch(f->db, rows, 0), AL_OK);
    assert_int_equal(db_audit_add_batch(f->db, NULL, 0), AL_OK);
    struct batch_rows b = {0};
    struct db_audit_filter flt = {.limit = 10};
    assert_int_equal(db_audit_query(f->db, &flt, collect_batch, &b), AL_OK);
    assert_int_equal(b.n, 3);
    /* newest first: bob's (now), then 3000, then 1000 */
    assert_string_equal(b.r[0].actor, "bob");
    assert_true(b.r[0].at > 3000);
    assert_string_equal(b.r[0].target, "t-2");
    assert_string_equal(b.r[0].detail, "{\"signal\": 15}");
    assert_int_equal(b.r[1].at, 3000);
    assert_string_equal(b.r[1].actor, "system");
    assert_string_equal(b.r[1].action, "proxy_call");
    assert_string_equal(b.r[1].target, "t-1");
    assert_string_equal(b.r[1].detail, "{\"status\": 200}");
    assert_int_equal(b.r[2].at, 1000);
    assert_string_equal(b.r[2].action, "attach");
    assert_string_equal(b.r[2].target, "");
    assert_string_equal(b.r[2].detail, "{}");
    assert_int_equal(b.r[2].id, b.r[1].id + 1);
    assert_int_equal(b.r[0].id, b.r[2].id + 1);

    /* one bad row: none stored, its index named */
    const struct db_audit_row bad[] = {
        {1, "system", "proxy_call", "t-1", NULL},
        {1, "system", "proxy_call", "t-1", NULL},
        {1, "system", "Not An Action", "t-1", NULL},
    };
    assert_int_equal(db_audit_add_batch(f->db, bad, 3), AL_E_INVAL);
    assert_non_null(strstr(db_errmsg(f->db), "audit row 2: "));
    assert_int_equal(db_audit_add_batch(f->db, NULL, 1), AL_E_INVAL);
    assert_int_equal(audit_count(f, 0, NULL, NULL, 100, &c), 3);

    /* the database refuses one row: the rows before it are not kept either
     * (one transaction), and the next batch is stored */
    raw_refuse_boom(f);
    const struct db_audit_row boom[] = {
        {1, "system", "proxy_call", "t-1", NULL},
        {1, "system", "proxy_call", "boom", NULL},
        {1, "system", "proxy_call", "t-1", NULL},
    };
    assert_int_not_equal(db_audit_add_batch(f->db, boom, 3), AL_OK);
    assert_non_null(strstr(db_errmsg(f->db), "refused by the test"));
    assert_int_equal(audit_count(f, 0, NULL, NULL, 100, &c), 3);
    assert_int_equal(db_audit_add_batch(f->db, boom, 1), AL_OK);
    assert_int_equal(audit_count(f, 0, NULL, NULL, 100, &c), 4);

    /* the limit: DB_AUDIT_BATCH_MAX rows in one batch, not one more */
    struct db_audit_row *many = calloc(DB_AUDIT_BATCH_MAX + 1, sizeof *many);
    assert_non_null(many);
    for (size_t i = 0; i <= DB_AUDIT_BATCH_MAX; i++)
        many[i] = (struct db_audit_row){(int64_t)(10 + i), "system", "proxy_call", "t-1", NULL};
    assert_int_equal(db_audit_add_batch(f->db, many, DB_AUDIT_BATCH_MAX + 1), AL_E_TOOBIG);
    assert_int_equal(db_audit_add_batch(f->db, many, DB_AUDIT_BATCH_MAX), AL_OK);
    free(many);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM audit"), 4 + DB_AUDIT_BATCH_MAX);
    assert_int_equal(raw_int(f, "SELECT max(id) - min(id) FROM audit WHERE at >= 10 AND at < 2000"
                                " AND target = 't-1'"),
                     DB_AUDIT_BATCH_MAX - 1);
}

/* ---- PostgreSQL only ------------------------------------------------------- */

static void test_pg_open_schema(void **state)
{
    struct fx *f = *state;
    assert_int_equal(raw_version(f), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations"), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT max(version) FROM schema_migrations"), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                                " AND tablename IN ('users', 'sandboxes', 'terminals', 'audit')"),
                     4);
    /* The connection says who it is (a default the URL could override). */
    PGresult *r = pg_query("postgres",
                           "SELECT count(*) FROM pg_stat_activity WHERE datname = $1"
                           " AND application_name = 'airlockd'",
                           f->path);
    assert_string_equal(PQgetvalue(r, 0, 0), "1");
    PQclear(r);
    /* The rules hold in the database too, not only in db_check.c. */
    PGconn *c = pg_raw(f->path);
    PGresult *bad = PQexec(c, "INSERT INTO users VALUES ('Bad', 'admin', repeat('a', 64), 0)");
    assert_int_equal(PQresultStatus(bad), PGRES_FATAL_ERROR);
    assert_string_equal(PQresultErrorField(bad, PG_DIAG_SQLSTATE), "23514");
    PQclear(bad);
    PQfinish(c);
    char key[DB_KEY_LEN + 1];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, key, sizeof key), AL_OK);
    assert_string_equal(db_errmsg(f->db), "");
}

static void test_pg_not_ours(void **state)
{
    struct fx *f = *state;
    (void)f;
    char name[32], url[PG_URL_MAX], err[MSG_CAP];
    struct db *db = NULL;

    /* Another application's schema_version table. */
    pg_new_name(name, sizeof name);
    pg_create_db(name);
    pg_exec(name, "CREATE TABLE schema_version (installed_rank integer, script text)");
    pg_url_for(name, url, sizeof url);
    assert_int_equal(db_open(url, &db, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "another application"));
    assert_non_null(strstr(err, name));
    assert_null(strstr(err, PG_PASSWORD));
    /* Ours in shape, without our row. */
    pg_exec(name, "DROP TABLE schema_version");
    pg_exec(name, "CREATE TABLE schema_version (app text, version integer)");
    assert_int_equal(db_open(url, &db, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "another application"));
    pg_exec(name, "DROP TABLE schema_version");
    assert_int_equal(db_open(url, &db, err, sizeof err), AL_OK); /* empty again: fine */
    assert_int_equal(db_close(db), AL_OK);
    db = NULL;
    pg_drop_db(name);

    /* No such database; no server behind the socket directory. */
    pg_url_for("al_nosuch", url, sizeof url);
    assert_int_equal(db_open(url, &db, err, sizeof err), AL_E_IO);
    assert_non_null(strstr(err, "cannot connect"));
    assert_non_null(strstr(err, "al_nosuch"));
    assert_null(strstr(err, PG_PASSWORD));
    (void)snprintf(url, sizeof url, "postgresql://postgres:%s@/x?host=%s&port=5432", PG_PASSWORD,
                   f->dir);
    assert_int_equal(db_open(url, &db, err, sizeof err), AL_E_IO);
    assert_non_null(strstr(err, "cannot connect"));
    assert_null(strstr(err, PG_PASSWORD));
    assert_null(strchr(err, '\n'));
    assert_null(db);
}

/* The server cuts our connection: the call that meets it fails with
 * AL_E_IO and the server's reason, the next one reconnects; a reconnect
 * that fails is tried again only after a second. */
static void test_pg_connection_loss(void **state)
{
    struct fx *f = *state;
    char key[DB_KEY_LEN + 1];
    struct db_user u;
    struct names c = {0};
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, key, sizeof key), AL_OK);
    static const char kill_sql[] = "SELECT count(pg_terminate_backend(pid, 5000))"
                                   " FROM pg_stat_activity WHERE datname = $1";

    PQclear(pg_query("postgres", kill_sql, f->path));
    assert_int_equal(db_user_list(f->db, collect_user, &c), AL_E_IO);
    const char *m = db_errmsg(f->db);
    assert_non_null(strstr(m, "connection lost"));
    assert_non_null(strstr(m, "terminating connection due to administrator command"));
    assert_non_null(strstr(m, f->path));
    assert_null(strchr(m, '\n'));
    assert_null(strchr(m, '\t'));
    assert_null(strstr(m, PG_PASSWORD));
    assert_int_equal(db_user_by_key(f->db, key, &u), AL_OK); /* reconnected */
    assert_string_equal(u.name, "alice");

    /* Again, with the database closed to new connections. */
    char sql[FX_PATH_MAX + 64];
    (void)snprintf(sql, sizeof sql, "ALTER DATABASE %s ALLOW_CONNECTIONS false", f->path);
    pg_exec("postgres", sql);
    PQclear(pg_query("postgres", kill_sql, f->path));
    assert_int_equal(db_user_by_key(f->db, key, &u), AL_E_IO);
    assert_non_null(strstr(db_errmsg(f->db), "connection lost"));
    assert_int_equal(db_user_by_key(f->db, key, &u), AL_E_IO);
    assert_non_null(strstr(db_errmsg(f->db), "cannot reconnect"));
    assert_non_null(strstr(db_errmsg(f->db), "not currently accepting connections"));
    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_E_IO);
    assert_non_null(strstr(db_errmsg(f->db), "reconnecting at most every"));
    assert_null(strstr(db_errmsg(f->db), PG_PASSWORD));
    (void)snprintf(sql, sizeof sql, "ALTER DATABASE %s ALLOW_CONNECTIONS true", f->path);
    pg_exec("postgres", sql);
    struct timespec ts = {.tv_sec = 1, .tv_nsec = 100000000};
    (void)nanosleep(&ts, NULL);
    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM sandboxes"), 1);
}

/* Several airlockd opening a new database at once: one migrates, the
 * others wait for it (advisory lock) and find the schema done. */
static void test_pg_concurrent_open(void **state)
{
    struct fx *f = *state;
    (void)f;
    enum { NPROC = 4 };
    char name[32], url[PG_URL_MAX];
    pg_new_name(name, sizeof name);
    pg_create_db(name);
    pg_url_for(name, url, sizeof url);
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t kids[NPROC];
    for (int i = 0; i < NPROC; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            char b;
            (void)close(go[1]);
            if (read(go[0], &b, 1) != 0) /* EOF: all started */
                _exit(3);
            struct db *db = NULL;
            char err[MSG_CAP];
            int rc = db_open(url, &db, err, sizeof err);
            if (rc != AL_OK)
                (void)fprintf(stderr, "child %d: %s\n", i, err);
            _exit(rc == AL_OK && db_close(db) == AL_OK ? 0 : 1);
        }
    }
    (void)close(go[0]);
    (void)close(go[1]);
    for (int i = 0; i < NPROC; i++) {
        int st = 0;
        assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    assert_int_equal(pg_int(name, "SELECT count(*) FROM schema_migrations"), DB_SCHEMA_VERSION);
    assert_int_equal(pg_int(name, "SELECT version FROM schema_version"), DB_SCHEMA_VERSION);
    pg_drop_db(name);
}

/* ---- names, enumerations, a NULL handle ------------------------------------- */

static void test_names_and_enums(void **state)
{
    (void)state;
    assert_true(db_name_valid("a"));
    assert_true(db_name_valid("9.x_y-z"));
    assert_false(db_name_valid(NULL));
    assert_false(db_name_valid(""));
    assert_false(db_name_valid("a.B"));
    assert_false(db_name_valid("-a"));

    static const char *roles[] = {"viewer", "operator", "admin"};
    for (int i = 0; i < 3; i++) {
        enum db_role r;
        assert_int_equal(db_role_parse(roles[i], &r), AL_OK);
        assert_string_equal(db_role_name(r), roles[i]);
    }
    enum db_role r;
    assert_int_equal(db_role_parse("root", &r), AL_E_INVAL);
    assert_int_equal(db_role_parse("Admin", &r), AL_E_INVAL);
    assert_int_equal(db_role_parse(NULL, &r), AL_E_INVAL);
    assert_null(db_role_name((enum db_role)3));
    assert_true(DB_ROLE_ADMIN > DB_ROLE_OPERATOR && DB_ROLE_OPERATOR > DB_ROLE_VIEWER);

    enum db_sandbox_kind k;
    assert_int_equal(db_sandbox_kind_parse("reverse", &k), AL_OK);
    assert_int_equal(k, DB_SANDBOX_REVERSE);
    assert_int_equal(db_sandbox_kind_parse("remote", &k), AL_E_INVAL);
    assert_string_equal(db_sandbox_kind_name(DB_SANDBOX_STATIC), "static");
    enum db_term_mode m;
    assert_int_equal(db_term_mode_parse("pipes", &m), AL_OK);
    assert_int_equal(m, DB_MODE_PIPES);
    assert_string_equal(db_term_mode_name(DB_MODE_PTY), "pty");
    enum db_term_state s;
    assert_int_equal(db_term_state_parse("lost", &s), AL_OK);
    assert_int_equal(s, DB_TERM_LOST);
    assert_string_equal(db_term_state_name(DB_TERM_EXITED), "exited");
    assert_null(db_term_state_name((enum db_term_state)5));
}

static int collect_replica(void *ctx, const struct db_replica *r);

static void test_null_db(void **state)
{
    (void)state;
    char key[DB_KEY_LEN + 1], id[DB_NAME_MAX + 1];
    struct db_user u;
    struct db_sandbox sb;
    struct db_terminal_spec s = spec_on("sb1", 1);
    struct db_audit_filter flt = {.limit = 1};
    assert_int_equal(db_close(NULL), AL_OK);
    assert_string_equal(db_errmsg(NULL), "no database");
    assert_int_equal(db_user_add(NULL, "a", DB_ROLE_ADMIN, key, sizeof key), AL_E_INVAL);
    assert_int_equal(db_user_by_key(NULL, "alk_", &u), AL_E_INVAL);
    assert_int_equal(db_user_list(NULL, collect_user, NULL), AL_E_INVAL);
    assert_int_equal(db_user_remove(NULL, "a"), AL_E_INVAL);
    assert_int_equal(db_sandbox_add(NULL, "a", DB_SANDBOX_LOCAL, NULL), AL_E_INVAL);
    assert_int_equal(db_sandbox_get(NULL, "a", &sb), AL_E_INVAL);
    assert_int_equal(db_sandbox_list(NULL, collect_sandbox, NULL), AL_E_INVAL);
    assert_int_equal(db_sandbox_set_link(NULL, "a", true, 1, 1), AL_E_INVAL);
    assert_int_equal(db_sandbox_remove(NULL, "a"), AL_E_INVAL);
    assert_int_equal(db_terminal_add(NULL, &s, id, sizeof id), AL_E_INVAL);
    assert_int_equal(db_terminal_get(NULL, "t-1", NULL), AL_E_INVAL);
    assert_int_equal(db_terminal_list(NULL, NULL, collect_term, NULL), AL_E_INVAL);
    assert_int_equal(db_terminal_set_state(NULL, "t-1", DB_TERM_CLOSED), AL_E_INVAL);
    assert_int_equal(db_terminal_set_exit(NULL, "t-1", 0, 0), AL_E_INVAL);
    const struct db_term_offsets zero_off = {0, 0, 0, -1, false};
    assert_int_equal(db_terminal_set_offsets(NULL, "t-1", &zero_off), AL_E_INVAL);
    assert_int_equal(db_terminal_remove(NULL, "t-1"), AL_E_INVAL);
    assert_int_equal(db_audit_add(NULL, 0, "a", "login", NULL, NULL), AL_E_INVAL);
    const struct db_audit_row row = {0, "a", "login", NULL, NULL};
    assert_int_equal(db_audit_add_batch(NULL, &row, 1), AL_E_INVAL);
    assert_int_equal(db_audit_query(NULL, &flt, collect_audit, NULL), AL_E_INVAL);
    char sid[DB_SESSION_LEN + 1], csrf[DB_SESSION_LEN + 1];
    struct db_session ss;
    const struct db_session_policy p = {.ttl_ms = 1000, .idle_ms = 0};
    assert_int_equal(db_session_add(NULL, "a", 0, &p, sid, sizeof sid, csrf, sizeof csrf),
                     AL_E_INVAL);
    assert_int_equal(db_session_use(NULL, "als_", "alc_", 0, &p, &ss), AL_E_INVAL);
    assert_int_equal(db_session_remove(NULL, "als_"), AL_E_INVAL);
    assert_int_equal(db_session_expire(NULL, 0, &p), AL_E_INVAL);
    char term[DB_NAME_MAX + 1];
    struct db_proxy px;
    static const char *const one[] = {"a"};
    assert_int_equal(db_proxy_add(NULL, "00", "t", one, 1), AL_E_INVAL);
    assert_int_equal(db_proxy_lookup(NULL, "00", "a", term, sizeof term), AL_E_INVAL);
    assert_int_equal(db_proxy_revoke_terminal(NULL, "t"), AL_E_INVAL);
    assert_int_equal(db_proxy_revoke_ended(NULL), AL_E_INVAL);
    assert_int_equal(db_proxy_of_terminal(NULL, "t", &px), AL_E_INVAL);
    char rid[DB_REPLICA_ID_LEN + 1];
    assert_int_equal(db_replica_new_id(NULL, rid, sizeof rid), AL_E_INVAL);
    assert_int_equal(db_replica_beat(NULL, "r-0123456789abcdef01234567", "ws://h:1"), AL_E_INVAL);
    assert_int_equal(db_replica_stop(NULL, "r-0123456789abcdef01234567"), AL_E_INVAL);
    assert_int_equal(db_replica_list(NULL, 1000, collect_replica, NULL), AL_E_INVAL);
    assert_int_equal(db_replica_prune(NULL, 1000), AL_E_INVAL);
    assert_false(db_replica_address_valid(NULL));
}

/* ---- web sessions ---------------------------------------------------------------- */

static void raw_exec(const struct fx *f, const char *sql)
{
    if (pg.on)
        pg_exec(f->path, sql);
    else
        sq_exec(f->path, sql);
}

#define T0 1700000000000LL /* a session test's clock, in Unix ms */

static const struct db_session_policy pol = {.ttl_ms = 10000, .idle_ms = 3000};

static void new_session(struct fx *f, const char *user, int64_t now, char *id, char *csrf)
{
    assert_int_equal(
        db_session_add(f->db, user, now, &pol, id, DB_SESSION_LEN + 1, csrf, DB_SESSION_LEN + 1),
        AL_OK);
}

static void test_session_lifecycle(void **state)
{
    struct fx *f = *state;
    char key[DB_KEY_LEN + 1], id[DB_SESSION_LEN + 1], csrf[DB_SESSION_LEN + 1];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_OPERATOR, key, sizeof key), AL_OK);
    new_session(f, "alice", T0, id, csrf);
    assert_int_equal(strlen(id), DB_SESSION_LEN);
    assert_int_equal(strlen(csrf), DB_SESSION_LEN);
    assert_memory_equal(id, DB_SESSION_PREFIX, 4);
    assert_memory_equal(csrf, DB_CSRF_PREFIX, 4);
    assert_string_not_equal(id + 4, csrf + 4);

    struct db_session s;
    assert_int_equal(db_session_use(f->db, id, csrf, T0 + 1000, &pol, &s), AL_OK);
    assert_string_equal(s.user.name, "alice");
    assert_int_equal(s.user.role, DB_ROLE_OPERATOR);
    assert_int_equal(s.created_at, T0);
    assert_int_equal(s.expires_at, T0 + pol.ttl_ms);
    assert_int_equal(s.last_seen, T0 + 1000);

    /* the cookie alone, or with a wrong token: refused, the session stays */
    char wrong[DB_SESSION_LEN + 1];
    memcpy(wrong, csrf, sizeof wrong);
    wrong[10] = wrong[10] == 'A' ? 'B' : 'A';
    assert_int_equal(db_session_use(f->db, id, NULL, T0 + 1000, &pol, &s), AL_E_PERM);
    assert_non_null(strstr(db_errmsg(f->db), "CSRF"));
    assert_int_equal(db_session_use(f->db, id, wrong, T0 + 1000, &pol, &s), AL_E_PERM);
    assert_int_equal(db_session_use(f->db, id, id, T0 + 1000, &pol, &s), AL_E_PERM);
    assert_null(strstr(db_errmsg(f->db), id + 4));
    assert_int_equal(db_session_use(f->db, id, csrf, T0 + 2000, &pol, &s), AL_OK);

    /* idle: each use moves last_seen; idle_ms without a use ends it for good */
    assert_int_equal(db_session_use(f->db, id, csrf, T0 + 4999, &pol, &s), AL_OK);
    assert_int_equal(db_session_use(f->db, id, csrf, T0 + 7999, &pol, &s), AL_E_EXPIRED);
    assert_non_null(strstr(db_errmsg(f->db), "expired"));
    assert_int_equal(db_session_use(f->db, id, csrf, T0 + 5000, &pol, &s), AL_E_NOENT);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM sessions"), 0);

    /* absolute: used every 2 s, it still ends at ttl_ms */
    new_session(f, "alice", T0, id, csrf);
    for (int64_t t = T0 + 2000; t < T0 + pol.ttl_ms; t += 2000)
        assert_int_equal(db_session_use(f->db, id, csrf, t, &pol, &s), AL_OK);
    assert_int_equal(db_session_use(f->db, id, csrf, T0 + pol.ttl_ms, &pol, &s), AL_E_EXPIRED);

    /* sign-out */
    new_session(f, "alice", T0, id, csrf);
    assert_int_equal(db_session_remove(f->db, id), AL_OK);
    assert_int_equal(db_session_use(f->db, id, csrf, T0 + 1, &pol, &s), AL_E_NOENT);
    assert_int_equal(db_session_remove(f->db, id), AL_E_NOENT);

    /* the user's removal ends their sessions */
    new_session(f, "alice", T0, id, csrf);
    assert_int_equal(db_user_remove(f->db, "alice"), AL_OK);
    assert_int_equal(db_session_use(f->db, id, csrf, T0 + 1, &pol, &s), AL_E_NOENT);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM sessions"), 0);

    /* malformed secrets: unknown, never echoed */
    assert_int_equal(db_session_use(f->db, key, csrf, T0, &pol, &s), AL_E_NOENT);
    assert_int_equal(db_session_use(f->db, "als_", csrf, T0, &pol, &s), AL_E_NOENT);
    assert_int_equal(db_session_use(f->db, NULL, csrf, T0, &pol, &s), AL_E_NOENT);
    assert_int_equal(db_session_remove(f->db, "als_x"), AL_E_NOENT);
}

/* Following a session by its handle (the WebSockets it opened): no CSRF
 * token, not a use; ends when the session is signed out, expires or idles
 * out, or its user goes. */
static void test_session_live(void **state)
{
    struct fx *f = *state;
    char key[DB_KEY_LEN + 1], id[DB_SESSION_LEN + 1], csrf[DB_SESSION_LEN + 1];
    char h[DB_SESSION_HANDLE_LEN + 1], h2[DB_SESSION_HANDLE_LEN + 1], hex[65];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_OPERATOR, key, sizeof key), AL_OK);
    new_session(f, "alice", T0, id, csrf);
    assert_int_equal(db_session_handle(f->db, id, h, sizeof h), AL_OK);
    hex_sha256(id, hex);
    assert_string_equal(h, hex); /* the row's key, never the secret */
    assert_null(strstr(h, id + 4));
    assert_int_equal(db_session_handle(f->db, id, h2, DB_SESSION_HANDLE_LEN), AL_E_INVAL);
    assert_int_equal(db_session_handle(f->db, "als_x", h2, sizeof h2), AL_E_NOENT);
    assert_int_equal(db_session_handle(f->db, key, h2, sizeof h2), AL_E_NOENT);

    struct db_session s;
    assert_int_equal(db_session_live(f->db, h, T0 + 1000, &pol, &s), AL_OK);
    assert_string_equal(s.user.name, "alice");
    assert_int_equal(s.expires_at, T0 + pol.ttl_ms);
    assert_int_equal(s.last_seen, T0); /* not a use */
    assert_int_equal(db_session_live(f->db, h, T0 + pol.idle_ms - 1, &pol, &s), AL_OK);
    /* idle: following it does not keep it alive; a use does */
    assert_int_equal(db_session_live(f->db, h, T0 + pol.idle_ms, &pol, &s), AL_E_EXPIRED);
    assert_int_equal(db_session_use(f->db, id, csrf, T0 + 1, &pol, &s), AL_E_NOENT);
    assert_int_equal(db_session_live(f->db, h, T0 + 1, &pol, &s), AL_E_NOENT); /* deleted */

    new_session(f, "alice", T0, id, csrf);
    assert_int_equal(db_session_handle(f->db, id, h, sizeof h), AL_OK);
    for (int64_t t = T0 + 2000; t < T0 + pol.ttl_ms; t += 2000) {
        assert_int_equal(db_session_use(f->db, id, csrf, t, &pol, &s), AL_OK);
        assert_int_equal(db_session_live(f->db, h, t + 1, &pol, &s), AL_OK);
    }
    assert_int_equal(db_session_live(f->db, h, T0 + pol.ttl_ms, &pol, &s), AL_E_EXPIRED);

    /* sign-out, and the user's removal */
    new_session(f, "alice", T0, id, csrf);
    assert_int_equal(db_session_handle(f->db, id, h, sizeof h), AL_OK);
    assert_int_equal(db_session_remove(f->db, id), AL_OK);
    assert_int_equal(db_session_live(f->db, h, T0 + 1, &pol, &s), AL_E_NOENT);
    new_session(f, "alice", T0, id, csrf);
    assert_int_equal(db_session_handle(f->db, id, h, sizeof h), AL_OK);
    assert_int_equal(db_user_remove(f->db, "alice"), AL_OK);
    assert_int_equal(db_session_live(f->db, h, T0 + 1, &pol, &s), AL_E_NOENT);

    /* not a handle: refused before the database is asked */
    assert_int_equal(db_session_live(f->db, id, T0, &pol, &s), AL_E_INVAL);
    assert_int_equal(db_session_live(f->db, "ABCDEF", T0, &pol, &s), AL_E_INVAL);
    memset(h2, 'A', DB_SESSION_HANDLE_LEN);
    h2[DB_SESSION_HANDLE_LEN] = 0;
    assert_int_equal(db_session_live(f->db, h2, T0, &pol, &s), AL_E_INVAL);
    assert_int_equal(db_session_live(f->db, NULL, T0, &pol, &s), AL_E_INVAL);
    assert_int_equal(db_session_live(f->db, hex, T0, &pol, NULL), AL_E_INVAL);
}

static void test_session_hashed_and_survives_reopen(void **state)
{
    struct fx *f = *state;
    char key[DB_KEY_LEN + 1], id[DB_SESSION_LEN + 1], csrf[DB_SESSION_LEN + 1];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, key, sizeof key), AL_OK);
    new_session(f, "alice", T0, id, csrf);
    char hid[65], hcsrf[65], sql[256];
    hex_sha256(id, hid);
    hex_sha256(csrf, hcsrf);
    (void)snprintf(sql, sizeof sql,
                   "SELECT count(*) FROM sessions WHERE id_sha256 = '%s' AND csrf_sha256 = '%s'",
                   hid, hcsrf);
    assert_int_equal(raw_int(f, sql), 1); /* only hashes: the CHECKs allow nothing else */
    reopen(f);
    struct db_session s;
    assert_int_equal(db_session_use(f->db, id, csrf, T0 + 1, &pol, &s), AL_OK);
    assert_string_equal(s.user.name, "alice");
}

static void test_session_limit_and_expire(void **state)
{
    struct fx *f = *state;
    char key[DB_KEY_LEN + 1], id[DB_SESSION_LEN + 1], csrf[DB_SESSION_LEN + 1];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, key, sizeof key), AL_OK);
    assert_int_equal(db_user_add(f->db, "bob", DB_ROLE_VIEWER, key, sizeof key), AL_OK);
    for (int i = 0; i < DB_SESSIONS_PER_USER_MAX; i++)
        new_session(f, "alice", T0, id, csrf);
    assert_int_equal(db_session_add(f->db, "alice", T0, &pol, id, sizeof id, csrf, sizeof csrf),
                     AL_E_LIMIT);
    assert_string_equal(id, "");
    new_session(f, "bob", T0, id, csrf); /* per user */
    /* once they expire they no longer count */
    new_session(f, "alice", T0 + pol.idle_ms, id, csrf);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM sessions WHERE user_name = 'alice'"), 1);
    assert_int_equal(db_session_expire(f->db, T0 + pol.ttl_ms, &pol), AL_OK);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM sessions"), 0);
    assert_int_equal(db_session_add(f->db, "nobody", T0, &pol, id, sizeof id, csrf, sizeof csrf),
                     AL_E_NOENT);
}

static void test_session_bad_inputs(void **state)
{
    struct fx *f = *state;
    char key[DB_KEY_LEN + 1], id[DB_SESSION_LEN + 1], csrf[DB_SESSION_LEN + 1];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, key, sizeof key), AL_OK);
    const struct db_session_policy bad[] = {
        {0, 0}, {-1, 0}, {DB_SESSION_TTL_MAX_MS + 1, 0}, {1000, 1001}, {1000, -1}};
    struct db_session s;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(
            db_session_add(f->db, "alice", T0, &bad[i], id, sizeof id, csrf, sizeof csrf),
            AL_E_INVAL);
        assert_int_equal(db_session_use(f->db, id, csrf, T0, &bad[i], &s), AL_E_INVAL);
        assert_int_equal(db_session_expire(f->db, T0, &bad[i]), AL_E_INVAL);
    }
    assert_int_equal(db_session_add(f->db, "alice", T0, NULL, id, sizeof id, csrf, sizeof csrf),
                     AL_E_INVAL);
    assert_int_equal(db_session_add(f->db, "Bad Name", T0, &pol, id, sizeof id, csrf, sizeof csrf),
                     AL_E_INVAL);
    assert_int_equal(db_session_add(f->db, "alice", -1, &pol, id, sizeof id, csrf, sizeof csrf),
                     AL_E_INVAL);
    assert_int_equal(
        db_session_add(f->db, "alice", T0, &pol, id, DB_SESSION_LEN, csrf, sizeof csrf),
        AL_E_INVAL);
    assert_int_equal(db_session_add(f->db, "alice", T0, &pol, id, sizeof id, NULL, 0), AL_E_INVAL);
    assert_int_equal(db_session_use(f->db, id, csrf, T0, &pol, NULL), AL_E_INVAL);
    /* no idle limit: only the lifetime counts */
    const struct db_session_policy no_idle = {.ttl_ms = 5000, .idle_ms = 0};
    assert_int_equal(db_session_add(f->db, "alice", T0, &no_idle, id, sizeof id, csrf, sizeof csrf),
                     AL_OK);
    assert_int_equal(db_session_use(f->db, id, csrf, T0 + 4999, &no_idle, &s), AL_OK);
}

/* Take a closed database back to schema 10: replicas without keys. */
static void undo_v11(const struct fx *f)
{
    raw_exec(f, "ALTER TABLE replicas DROP COLUMN jwks");
    raw_exec(f, "DELETE FROM schema_migrations WHERE version = 11");
    raw_set_version(f, 10);
}

/* Take a closed database back to schema 9: sandboxes without a pinned
 * runner key. */
static void undo_v10(const struct fx *f)
{
    undo_v11(f);
    raw_exec(f, "ALTER TABLE sandboxes DROP COLUMN runner_key");
    raw_exec(f, "DELETE FROM schema_migrations WHERE version = 10");
    raw_set_version(f, 9);
}

/* Take a closed database back to schema 8: sandboxes without leases. */
static void undo_v9(const struct fx *f)
{
    undo_v10(f);
    raw_exec(f, "DROP INDEX sandboxes_owner");
    if (pg.on)
        pg_exec(
            f->path,
            "ALTER TABLE sandboxes DROP COLUMN owner, DROP COLUMN fence, DROP COLUMN lease_until");
    else
        sq_exec(f->path, "ALTER TABLE sandboxes DROP COLUMN owner;"
                         "ALTER TABLE sandboxes DROP COLUMN fence;"
                         "ALTER TABLE sandboxes DROP COLUMN lease_until;");
    raw_exec(f, "DELETE FROM schema_migrations WHERE version = 9");
    raw_set_version(f, 8);
}

/* Take a closed database back to schema 7: terminals without their
 * recording's time and exit. */
static void undo_v8(const struct fx *f)
{
    undo_v9(f);
    if (pg.on)
        pg_exec(f->path, "ALTER TABLE terminals DROP COLUMN rec_exited, DROP COLUMN rec_time_us");
    else
        sq_exec(f->path, "ALTER TABLE terminals DROP COLUMN rec_exited;"
                         "ALTER TABLE terminals DROP COLUMN rec_time_us;");
    raw_exec(f, "DELETE FROM schema_migrations WHERE version = 8");
    raw_set_version(f, 7);
}

/* Take a closed database back to schema 6: no replicas table. */
static void undo_v7(const struct fx *f)
{
    undo_v8(f);
    raw_exec(f, "DROP TABLE replicas");
    raw_exec(f, "DELETE FROM schema_migrations WHERE version = 7");
    raw_set_version(f, 6);
}

/* Take a closed database back to schema 5: sandboxes without platform
 * (SQLite rebuilds the table as schema 5 had it; PostgreSQL drops). */
static void undo_v6(const struct fx *f)
{
    undo_v7(f);
    if (pg.on) {
        pg_exec(f->path,
                "ALTER TABLE sandboxes DROP COLUMN platform, DROP COLUMN identifier,"
                " DROP CONSTRAINT sandboxes_kind_check, DROP CONSTRAINT sandboxes_url_check,"
                " ADD CONSTRAINT sandboxes_kind_check"
                " CHECK (kind IN ('local', 'static', 'reverse')),"
                " ADD CONSTRAINT sandboxes_check CHECK ((kind = 'static') = (url IS NOT "
                "NULL))");
    } else {
        sq_exec(f->path,
                "BEGIN; PRAGMA defer_foreign_keys = ON;"
                "CREATE TABLE sb5 (id TEXT PRIMARY KEY, kind TEXT NOT NULL CHECK (kind IN"
                " ('local', 'static', 'reverse')), url TEXT CHECK ((kind = 'static') = (url IS"
                " NOT NULL)), created_at INTEGER NOT NULL, link_up INTEGER NOT NULL DEFAULT 0,"
                " link_since INTEGER NOT NULL, link_rtt_us INTEGER NOT NULL DEFAULT -1,"
                " record_input INTEGER NOT NULL DEFAULT 0, network TEXT NOT NULL DEFAULT"
                " 'default' CHECK (network IN ('default', 'host', 'none') AND (network ="
                " 'default' OR kind = 'local'))) STRICT;"
                "INSERT INTO sb5 SELECT id, kind, url, created_at, link_up, link_since,"
                " link_rtt_us, record_input, network FROM sandboxes;"
                "DROP TABLE sandboxes; ALTER TABLE sb5 RENAME TO sandboxes; COMMIT;");
    }
    raw_exec(f, "DELETE FROM schema_migrations WHERE version = 6");
    raw_set_version(f, 5);
}

/* Take a closed database back to schema 4, behind the interface: no
 * proxy credentials. */
static void undo_v5(const struct fx *f)
{
    undo_v6(f);
    raw_exec(f, "DROP TABLE proxy_credentials");
    raw_exec(f, "DELETE FROM schema_migrations WHERE version = 5");
    raw_set_version(f, 4);
}

/* Take a closed database back to schema 3, behind the interface: no
 * sandbox network (dropping the column drops its constraints). */
static void undo_v4(const struct fx *f)
{
    undo_v5(f);
    raw_exec(f, "ALTER TABLE sandboxes DROP COLUMN network");
    raw_exec(f, "DELETE FROM schema_migrations WHERE version = 4");
    raw_set_version(f, 3);
}

/* A version 2 database (before sessions) is migrated, its users kept. */
static void test_session_migration_from_v2(void **state)
{
    struct fx *f = *state;
    char key[DB_KEY_LEN + 1], id[DB_SESSION_LEN + 1], csrf[DB_SESSION_LEN + 1];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, key, sizeof key), AL_OK);
    assert_int_equal(db_close(f->db), AL_OK);
    f->db = NULL;
    undo_v4(f);
    raw_exec(f, "DROP TABLE sessions");
    raw_exec(f, "DELETE FROM schema_migrations WHERE version = 3");
    raw_set_version(f, 2);
    reopen(f);
    assert_int_equal(raw_version(f), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations"), DB_SCHEMA_VERSION);
    struct db_user u;
    assert_int_equal(db_user_by_key(f->db, key, &u), AL_OK);
    new_session(f, "alice", T0, id, csrf);
}

/* Schema 2: a sandbox's record_input (off by default, settable), and each
 * terminal's creator and record_input, kept across a reopen. */
static void test_record_input_and_creator(void **state)
{
    struct fx *f = *state;
    struct db_sandbox sb;
    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    assert_int_equal(db_sandbox_get(f->db, "sb1", &sb), AL_OK);
    assert_false(sb.record_input);
    assert_int_equal(db_sandbox_set_record_input(f->db, "sb1", true), AL_OK);
    assert_int_equal(db_sandbox_get(f->db, "sb1", &sb), AL_OK);
    assert_true(sb.record_input);
    assert_int_equal(db_sandbox_set_record_input(f->db, "nope", true), AL_E_NOENT);
    assert_int_equal(db_sandbox_set_record_input(f->db, "Bad Id", true), AL_E_INVAL);

    char id[DB_NAME_MAX + 1], id2[DB_NAME_MAX + 1], id3[DB_NAME_MAX + 1];
    struct db_terminal_spec s = spec_on("sb1", 1);
    s.creator = "alice";
    s.record_input = true;
    assert_int_equal(db_terminal_add(f->db, &s, id, sizeof id), AL_OK);
    add_term(f, "sb1", 2, id2); /* no creator, no input */
    s.channel = 3;
    s.creator = "Not A Name";
    assert_int_equal(db_terminal_add(f->db, &s, id3, sizeof id3), AL_E_INVAL);
    assert_non_null(strstr(db_errmsg(f->db), "creator"));
    reopen(f);
    struct db_terminal *t = malloc(sizeof *t);
    assert_non_null(t);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_string_equal(t->creator, "alice");
    assert_true(t->record_input);
    assert_int_equal(db_terminal_get(f->db, id2, t), AL_OK);
    assert_string_equal(t->creator, "");
    assert_false(t->record_input);
    free(t);
}

/* A schema 1 database (made here by undoing migration 2 behind the
 * interface) is migrated on open; its rows keep, with no creator and no
 * input recording. */
static void test_migration_1_to_2(void **state)
{
    struct fx *f = *state;
    char id[DB_NAME_MAX + 1];
    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    add_term(f, "sb1", 1, id);
    assert_int_equal(db_close(f->db), AL_OK);
    f->db = NULL;
    undo_v4(f);
    static const char *const undo[] = {
        "DROP TABLE sessions", /* schema 3 */
        "DELETE FROM schema_migrations WHERE version = 3",
        "ALTER TABLE sandboxes DROP COLUMN record_input",
        "ALTER TABLE terminals DROP COLUMN creator",
        "ALTER TABLE terminals DROP COLUMN record_input",
        "DELETE FROM schema_migrations WHERE version = 2",
    };
    for (size_t i = 0; i < sizeof undo / sizeof undo[0]; i++) {
        if (pg.on)
            pg_exec(f->path, undo[i]);
        else
            sq_exec(f->path, undo[i]);
    }
    raw_set_version(f, 1);
    char err[MSG_CAP];
    assert_int_equal(db_open(f->url, &f->db, err, sizeof err), AL_OK);
    assert_int_equal(raw_version(f), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations"), DB_SCHEMA_VERSION);
    struct db_sandbox sb;
    assert_int_equal(db_sandbox_get(f->db, "sb1", &sb), AL_OK);
    assert_false(sb.record_input);
    struct db_terminal *t = malloc(sizeof *t);
    assert_non_null(t);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_string_equal(t->creator, "");
    assert_false(t->record_input);
    assert_string_equal(t->sandbox_id, "sb1");
    free(t);
}

/* Run sql behind the interface: 0 if it succeeded, -1 if the database
 * refused it (a CHECK, say). */
static int raw_try(const struct fx *f, const char *sql)
{
    if (pg.on) {
        PGconn *c = pg_raw(f->path);
        PGresult *r = PQexec(c, sql);
        int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        PQfinish(c);
        return ok ? 0 : -1;
    }
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open_v2(f->path, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    int rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
    assert_int_equal(sqlite3_close(h), SQLITE_OK);
    return rc == SQLITE_OK ? 0 : -1;
}

struct nets {
    size_t n;
    enum db_sandbox_network v[8];
};

static int collect_network(void *ctx, const struct db_sandbox *sb)
{
    struct nets *c = ctx;
    if (c->n < sizeof c->v / sizeof c->v[0])
        c->v[c->n] = sb->network;
    c->n++;
    return 0;
}

/* Schema 4: a sandbox's network, stored as given and kept across a
 * reopen; only a local sandbox has one other than the default, and the
 * table refuses what db_sandbox.c refuses. */
static void test_sandbox_network(void **state)
{
    struct fx *f = *state;
    struct db_sandbox sb;
    assert_int_equal(db_sandbox_add(f->db, "plain", DB_SANDBOX_LOCAL, NULL), AL_OK);
    struct db_sandbox_spec sp = {.id = "cut", .kind = DB_SANDBOX_LOCAL, .network = DB_NETWORK_NONE};
    assert_int_equal(db_sandbox_create(f->db, &sp), AL_OK);
    sp = (struct db_sandbox_spec){
        .id = "open", .kind = DB_SANDBOX_LOCAL, .network = DB_NETWORK_HOST, .record_input = true};
    assert_int_equal(db_sandbox_create(f->db, &sp), AL_OK);
    sp = (struct db_sandbox_spec){.id = "st", .kind = DB_SANDBOX_STATIC, .url = "wss://h/"};
    assert_int_equal(db_sandbox_create(f->db, &sp), AL_OK);
    reopen(f);
    static const struct {
        const char *id;
        enum db_sandbox_network net;
        bool rec;
    } want[] = {{"cut", DB_NETWORK_NONE, false},
                {"open", DB_NETWORK_HOST, true},
                {"plain", DB_NETWORK_DEFAULT, false},
                {"st", DB_NETWORK_DEFAULT, false}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal(db_sandbox_get(f->db, want[i].id, &sb), AL_OK);
        assert_int_equal(sb.network, want[i].net);
        assert_int_equal(sb.record_input, want[i].rec);
    }
    struct nets seen = {0};
    assert_int_equal(db_sandbox_list(f->db, collect_network, &seen), AL_OK);
    assert_int_equal(seen.n, 4);
    assert_int_equal(seen.v[0], DB_NETWORK_NONE); /* by id: cut, open, plain, st */
    assert_int_equal(seen.v[1], DB_NETWORK_HOST);
    assert_int_equal(seen.v[2], DB_NETWORK_DEFAULT);
    assert_int_equal(seen.v[3], DB_NETWORK_DEFAULT);

    /* only a local sandbox, only known values */
    sp =
        (struct db_sandbox_spec){.id = "r", .kind = DB_SANDBOX_REVERSE, .network = DB_NETWORK_NONE};
    assert_int_equal(db_sandbox_create(f->db, &sp), AL_E_INVAL);
    assert_non_null(strstr(db_errmsg(f->db), "only a local sandbox has a network"));
    sp = (struct db_sandbox_spec){
        .id = "s", .kind = DB_SANDBOX_STATIC, .url = "ws://h", .network = DB_NETWORK_HOST};
    assert_int_equal(db_sandbox_create(f->db, &sp), AL_E_INVAL);
    sp = (struct db_sandbox_spec){
        .id = "l", .kind = DB_SANDBOX_LOCAL, .network = (enum db_sandbox_network)3};
    assert_int_equal(db_sandbox_create(f->db, &sp), AL_E_INVAL);
    assert_int_equal(db_sandbox_create(f->db, NULL), AL_E_INVAL);
    assert_int_equal(db_sandbox_get(f->db, "r", &sb), AL_E_NOENT);
    assert_int_equal(db_sandbox_get(f->db, "l", &sb), AL_E_NOENT);
    assert_string_equal(db_sandbox_network_name(DB_NETWORK_NONE), "none");
    enum db_sandbox_network n = DB_NETWORK_DEFAULT;
    assert_int_equal(db_sandbox_network_parse("host", &n), AL_OK);
    assert_int_equal(n, DB_NETWORK_HOST);
    assert_int_equal(db_sandbox_network_parse("NONE", &n), AL_E_INVAL);
    assert_null(db_sandbox_network_name((enum db_sandbox_network)3));
    assert_int_equal(db_close(f->db), AL_OK);
    f->db = NULL;
    /* behind the interface, the table's CHECKs say the same */
    assert_int_equal(raw_try(f, "UPDATE sandboxes SET network = 'none' WHERE id = 'st'"), -1);
    assert_int_equal(raw_try(f, "UPDATE sandboxes SET network = 'off' WHERE id = 'plain'"), -1);
    assert_int_equal(raw_try(f, "UPDATE sandboxes SET network = 'host' WHERE id = 'plain'"), 0);
    char err[MSG_CAP];
    assert_int_equal(db_open(f->url, &f->db, err, sizeof err), AL_OK);
    assert_int_equal(db_sandbox_get(f->db, "plain", &sb), AL_OK);
    assert_int_equal(sb.network, DB_NETWORK_HOST);
}

/* A schema 3 database is migrated to 4: its sandboxes, local or not, get
 * the default network (the server-wide setting, as before), and new ones
 * can have their own. */
static void test_migration_3_to_4(void **state)
{
    struct fx *f = *state;
    char id[DB_NAME_MAX + 1];
    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    assert_int_equal(db_sandbox_add(f->db, "rev", DB_SANDBOX_REVERSE, NULL), AL_OK);
    assert_int_equal(db_sandbox_set_record_input(f->db, "sb1", true), AL_OK);
    add_term(f, "sb1", 1, id);
    assert_int_equal(db_close(f->db), AL_OK);
    f->db = NULL;
    undo_v4(f);
    assert_int_equal(raw_version(f), 3);
    char err[MSG_CAP];
    assert_int_equal(db_open(f->url, &f->db, err, sizeof err), AL_OK);
    assert_int_equal(raw_version(f), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations"), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations WHERE version = 4"), 1);
    struct db_sandbox sb;
    assert_int_equal(db_sandbox_get(f->db, "sb1", &sb), AL_OK);
    assert_int_equal(sb.network, DB_NETWORK_DEFAULT);
    assert_true(sb.record_input);
    assert_int_equal(db_sandbox_get(f->db, "rev", &sb), AL_OK);
    assert_int_equal(sb.network, DB_NETWORK_DEFAULT);
    struct db_terminal *t = malloc(sizeof *t);
    assert_non_null(t);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_string_equal(t->sandbox_id, "sb1");
    free(t);
    const struct db_sandbox_spec sp = {
        .id = "sb2", .kind = DB_SANDBOX_LOCAL, .network = DB_NETWORK_NONE};
    assert_int_equal(db_sandbox_create(f->db, &sp), AL_OK);
    reopen(f);
    assert_int_equal(db_sandbox_get(f->db, "sb2", &sb), AL_OK);
    assert_int_equal(sb.network, DB_NETWORK_NONE);
}

/* ---- proxy credentials ------------------------------------------------------------ */

/* The hash a proxy credential is stored by (its text does not matter here:
 * the data layer only ever sees hashes). */
static void cred_hash(const char *cred, char hex[65])
{
    hex_sha256(cred, hex);
}

static void test_proxy_credentials(void **state)
{
    struct fx *f = *state;
    char a[DB_NAME_MAX + 1], b[DB_NAME_MAX + 1], c[DB_NAME_MAX + 1], got[DB_NAME_MAX + 1];
    char ha[65], hb[65], hc[65], hx[65];
    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    add_term(f, "sb1", 1, a);
    add_term(f, "sb1", 2, b);
    add_term(f, "sb1", 3, c);
    cred_hash("alp_a", ha);
    cred_hash("alp_b", hb);
    cred_hash("alp_c", hc);
    cred_hash("alp_never", hx);
    static const char *const ups_a[] = {"anthropic", "git-hub_2"};
    static const char *const ups_b[] = {"openai"};
    int64_t before = now_ms();
    assert_int_equal(db_proxy_add(f->db, ha, a, ups_a, 2), AL_OK);
    assert_int_equal(db_proxy_add(f->db, hb, b, ups_b, 1), AL_OK);

    /* a credential opens its own upstreams, for its own terminal only */
    assert_int_equal(db_proxy_lookup(f->db, ha, "anthropic", got, sizeof got), AL_OK);
    assert_string_equal(got, a);
    assert_int_equal(db_proxy_lookup(f->db, ha, "git-hub_2", got, sizeof got), AL_OK);
    assert_string_equal(got, a);
    assert_int_equal(db_proxy_lookup(f->db, hb, "openai", got, sizeof got), AL_OK);
    assert_string_equal(got, b);
    assert_int_equal(db_proxy_lookup(f->db, ha, "openai", got, sizeof got), AL_E_NOENT);
    assert_string_equal(got, "");
    assert_int_equal(db_proxy_lookup(f->db, hb, "anthropic", got, sizeof got), AL_E_NOENT);
    /* a prefix or a part of the list is not a name in it */
    assert_int_equal(db_proxy_lookup(f->db, ha, "anthropi", got, sizeof got), AL_E_NOENT);
    assert_int_equal(db_proxy_lookup(f->db, ha, "git", got, sizeof got), AL_E_NOENT);
    assert_int_equal(db_proxy_lookup(f->db, hx, "anthropic", got, sizeof got), AL_E_NOENT);
    assert_non_null(strstr(db_errmsg(f->db), "no such proxy credential"));

    struct db_proxy p;
    assert_int_equal(db_proxy_of_terminal(f->db, a, &p), AL_OK);
    assert_string_equal(p.terminal_id, a);
    assert_string_equal(p.upstreams, "anthropic,git-hub_2");
    assert_false(p.revoked);
    assert_int_equal(p.revoked_at, 0);
    assert_true(p.created_at >= before);
    assert_int_equal(db_proxy_of_terminal(f->db, c, &p), AL_E_NOENT);

    /* running: still open; kept across a reopen */
    assert_int_equal(db_terminal_set_state(f->db, a, DB_TERM_RUNNING), AL_OK);
    reopen(f);
    assert_int_equal(db_proxy_lookup(f->db, ha, "anthropic", got, sizeof got), AL_OK);

    /* revoked: closed for every upstream; the other terminal's stays */
    assert_int_equal(db_proxy_revoke_terminal(f->db, a), AL_OK);
    assert_int_equal(db_proxy_lookup(f->db, ha, "anthropic", got, sizeof got), AL_E_NOENT);
    assert_int_equal(db_proxy_lookup(f->db, ha, "git-hub_2", got, sizeof got), AL_E_NOENT);
    assert_int_equal(db_proxy_lookup(f->db, hb, "openai", got, sizeof got), AL_OK);
    assert_int_equal(db_proxy_of_terminal(f->db, a, &p), AL_OK);
    assert_true(p.revoked);
    assert_true(p.revoked_at >= before);
    int64_t at = p.revoked_at;
    assert_int_equal(db_proxy_revoke_terminal(f->db, a), AL_OK); /* again: no change */
    assert_int_equal(db_proxy_of_terminal(f->db, a, &p), AL_OK);
    assert_int_equal(p.revoked_at, at);
    assert_int_equal(db_proxy_revoke_terminal(f->db, c), AL_OK); /* none: fine */
    assert_int_equal(db_proxy_revoke_terminal(f->db, "t-nope"), AL_OK);
    /* a revoked terminal may get a new credential while it lives */
    assert_int_equal(db_proxy_add(f->db, hc, a, ups_b, 1), AL_OK);
    assert_int_equal(db_proxy_lookup(f->db, hc, "openai", got, sizeof got), AL_OK);
    assert_string_equal(got, a);
    assert_int_equal(db_proxy_of_terminal(f->db, a, &p), AL_OK);
    assert_string_equal(p.upstreams, "openai");
    assert_false(p.revoked);
    assert_int_equal(db_proxy_revoke_terminal(f->db, a), AL_OK);

    /* a terminal that ended opens nothing, revoked or not yet (airlockd
     * revokes at start what ended while it was down) */
    assert_int_equal(db_terminal_set_exit(f->db, b, 0, 0), AL_OK);
    assert_int_equal(db_proxy_lookup(f->db, hb, "openai", got, sizeof got), AL_E_NOENT);
    assert_non_null(strstr(db_errmsg(f->db), "no live proxy credential for upstream openai"));
    assert_int_equal(raw_int(f, "SELECT count(*) FROM proxy_credentials WHERE NOT revoked"), 1);
    assert_int_equal(db_proxy_revoke_ended(f->db), AL_OK);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM proxy_credentials WHERE NOT revoked"), 0);
    assert_int_equal(db_proxy_of_terminal(f->db, b, &p), AL_OK);
    assert_true(p.revoked);
    /* and gets no new one */
    assert_int_equal(db_proxy_add(f->db, hx, b, ups_b, 1), AL_E_STATE);
    assert_non_null(strstr(db_errmsg(f->db), "exited"));
    assert_int_equal(db_proxy_add(f->db, hx, "t-nope", ups_b, 1), AL_E_NOENT);
    /* one row per hash */
    assert_int_equal(db_proxy_add(f->db, hb, c, ups_b, 1), AL_E_EXISTS);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM proxy_credentials"), 3);

    /* removing a terminal removes its credentials */
    assert_int_equal(db_terminal_set_state(f->db, b, DB_TERM_CLOSED), AL_OK);
    assert_int_equal(db_terminal_remove(f->db, b), AL_OK);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM proxy_credentials"), 2);
    assert_int_equal(db_proxy_of_terminal(f->db, b, &p), AL_E_NOENT);
}

/* Bad inputs: a clear error, nothing stored; the table's CHECKs refuse
 * what db_proxy.c refuses (a credential in clear, a bad list). */
static void test_proxy_bad_inputs(void **state)
{
    struct fx *f = *state;
    char a[DB_NAME_MAX + 1], got[DB_NAME_MAX + 1], h[65];
    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    add_term(f, "sb1", 1, a);
    cred_hash("alp_x", h);
    static const char *const one[] = {"anthropic"};
    char upper[65];
    memcpy(upper, h, sizeof upper);
    upper[0] = 'A';
    upper[1] = 'B';
    const char *bad_hashes[] = {NULL, "", "abc", upper,
                                "alp_0123456789012345678901234567890123456789012"};
    for (size_t i = 0; i < sizeof bad_hashes / sizeof bad_hashes[0]; i++) {
        assert_int_equal(db_proxy_add(f->db, bad_hashes[i], a, one, 1), AL_E_INVAL);
        assert_non_null(strstr(db_errmsg(f->db), "hex"));
        assert_int_equal(db_proxy_lookup(f->db, bad_hashes[i], "anthropic", got, sizeof got),
                         AL_E_INVAL);
    }
    char long_name[DB_PROXY_NAME_MAX + 2];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    const char *const bad_names[] = {"", "Anthropic", "a.b", "a,b", "a b", long_name};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        const char *const l[] = {"ok", bad_names[i]};
        assert_int_equal(db_proxy_add(f->db, h, a, l, 2), AL_E_INVAL);
        assert_non_null(strstr(db_errmsg(f->db), "upstream"));
        assert_int_equal(db_proxy_lookup(f->db, h, bad_names[i], got, sizeof got), AL_E_INVAL);
    }
    const char *const with_null[] = {"ok", NULL};
    assert_int_equal(db_proxy_add(f->db, h, a, with_null, 2), AL_E_INVAL);
    const char *const twice[] = {"ok", "other", "ok"};
    assert_int_equal(db_proxy_add(f->db, h, a, twice, 3), AL_E_INVAL);
    assert_non_null(strstr(db_errmsg(f->db), "ok is named twice"));
    assert_int_equal(db_proxy_add(f->db, h, a, one, 0), AL_E_INVAL);
    assert_int_equal(db_proxy_add(f->db, h, a, NULL, 1), AL_E_INVAL);
    /* the most a credential opens, each name at its longest */
    char names[DB_PROXY_UPSTREAMS_MAX + 1][DB_PROXY_NAME_MAX + 1];
    const char *l[DB_PROXY_UPSTREAMS_MAX + 1];
    for (size_t i = 0; i <= DB_PROXY_UPSTREAMS_MAX; i++) {
        memset(names[i], 'a', DB_PROXY_NAME_MAX);
        (void)snprintf(names[i], sizeof names[i], "%02zu", i);
        names[i][2] = 'a';
        names[i][DB_PROXY_NAME_MAX] = '\0';
        l[i] = names[i];
    }
    assert_int_equal(db_proxy_add(f->db, h, a, l, DB_PROXY_UPSTREAMS_MAX + 1), AL_E_INVAL);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM proxy_credentials"), 0);
    assert_int_equal(db_proxy_add(f->db, h, a, l, DB_PROXY_UPSTREAMS_MAX), AL_OK);
    assert_int_equal(db_proxy_lookup(f->db, h, names[DB_PROXY_UPSTREAMS_MAX - 1], got, sizeof got),
                     AL_OK);
    assert_int_equal(db_proxy_lookup(f->db, h, names[DB_PROXY_UPSTREAMS_MAX], got, sizeof got),
                     AL_E_NOENT);
    struct db_proxy p;
    assert_int_equal(db_proxy_of_terminal(f->db, a, &p), AL_OK);
    assert_int_equal(strlen(p.upstreams), DB_PROXY_UPSTREAMS_TEXT_MAX);

    assert_int_equal(db_proxy_add(f->db, h, "Bad Id", one, 1), AL_E_INVAL);
    assert_int_equal(db_proxy_lookup(f->db, h, "anthropic", got, DB_NAME_MAX), AL_E_INVAL);
    assert_int_equal(db_proxy_lookup(f->db, h, "anthropic", NULL, 0), AL_E_INVAL);
    assert_int_equal(db_proxy_revoke_terminal(f->db, "Bad Id"), AL_E_INVAL);
    assert_int_equal(db_proxy_revoke_terminal(f->db, NULL), AL_E_INVAL);
    assert_int_equal(db_proxy_of_terminal(f->db, a, NULL), AL_E_INVAL);
    assert_int_equal(db_proxy_of_terminal(f->db, "", &p), AL_E_INVAL);

    /* behind the interface: only a hash, only a list of names */
    char sql[512];
    (void)snprintf(sql, sizeof sql,
                   "INSERT INTO proxy_credentials (hash_sha256, terminal_id, upstreams,"
                   " revoked, created_at) VALUES ('%s', '%s', 'x', %s, 1)",
                   "alp_0123456789012345678901234567890123456789012345678901234567890", a,
                   pg.on ? "false" : "0");
    assert_int_equal(raw_try(f, sql), -1);
    static const char *const bad_lists[] = {"", ",a", "a,", "a,,b", "A", "a b"};
    for (size_t i = 0; i < sizeof bad_lists / sizeof bad_lists[0]; i++) {
        (void)snprintf(sql, sizeof sql,
                       "INSERT INTO proxy_credentials (hash_sha256, terminal_id, upstreams,"
                       " revoked, created_at) VALUES (repeat('0', 64), '%s', '%s', %s, 1)",
                       a, bad_lists[i], pg.on ? "false" : "0");
        if (!pg.on) /* SQLite has no repeat() */
            (void)snprintf(sql, sizeof sql,
                           "INSERT INTO proxy_credentials (hash_sha256, terminal_id, upstreams,"
                           " revoked, created_at) VALUES ('%064d', '%s', '%s', 0, 1)",
                           0, a, bad_lists[i]);
        assert_int_equal(raw_try(f, sql), -1);
    }
    /* revoked and revoked_at go together */
    (void)snprintf(sql, sizeof sql, "UPDATE proxy_credentials SET revoked = %s",
                   pg.on ? "true" : "1");
    assert_int_equal(raw_try(f, sql), -1);
}

/* A schema 4 database is migrated to 5: its terminals are kept and can
 * get credentials. */
static void test_migration_4_to_5(void **state)
{
    struct fx *f = *state;
    char id[DB_NAME_MAX + 1], got[DB_NAME_MAX + 1], h[65];
    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    add_term(f, "sb1", 1, id);
    assert_int_equal(db_close(f->db), AL_OK);
    f->db = NULL;
    undo_v5(f);
    assert_int_equal(raw_version(f), 4);
    char err[MSG_CAP];
    assert_int_equal(db_open(f->url, &f->db, err, sizeof err), AL_OK);
    assert_int_equal(raw_version(f), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations"), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations WHERE version = 5"), 1);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM proxy_credentials"), 0);
    cred_hash("alp_m", h);
    static const char *const one[] = {"anthropic"};
    assert_int_equal(db_proxy_add(f->db, h, id, one, 1), AL_OK);
    reopen(f);
    assert_int_equal(db_proxy_lookup(f->db, h, "anthropic", got, sizeof got), AL_OK);
    assert_string_equal(got, id);
}

/* Tests on both backends, with a fresh database each. */
#define BOTH(t) cmocka_unit_test_setup_teardown(t, setup, teardown)

/* Schema 6: an aca sandbox has its pool's endpoint, its platform and a
 * generated session identifier nobody can guess (128 bits, unique); no
 * other kind has either. */
static void test_aca_sandbox(void **state)
{
    struct fx *f = *state;
    const struct db_sandbox_spec a = {.id = "pool-a",
                                      .kind = DB_SANDBOX_ACA,
                                      .url = "https://pool.example.io",
                                      .platform = "aca"};
    assert_int_equal(db_sandbox_create(f->db, &a), AL_OK);
    struct db_sandbox sb, sb2;
    assert_int_equal(db_sandbox_get(f->db, "pool-a", &sb), AL_OK);
    assert_int_equal(sb.kind, DB_SANDBOX_ACA);
    assert_string_equal(sb.url, "https://pool.example.io");
    assert_string_equal(sb.platform, "aca");
    assert_int_equal(strlen(sb.identifier), 3 + 32);
    assert_memory_equal(sb.identifier, "al-", 3);
    assert_int_equal(strspn(sb.identifier + 3, "0123456789abcdef"), 32);
    struct db_sandbox_spec b = a;
    b.id = "pool-b";
    assert_int_equal(db_sandbox_create(f->db, &b), AL_OK);
    assert_int_equal(db_sandbox_get(f->db, "pool-b", &sb2), AL_OK);
    assert_string_not_equal(sb.identifier, sb2.identifier);
    /* an identifier given is kept; the same one twice is refused */
    b.id = "pool-c";
    b.identifier = "Sess_1-x";
    assert_int_equal(db_sandbox_create(f->db, &b), AL_OK);
    b.id = "pool-d";
    assert_int_equal(db_sandbox_create(f->db, &b), AL_E_EXISTS);
    assert_non_null(strstr(db_errmsg(f->db), "identifier Sess_1-x is taken"));
    static const struct {
        struct db_sandbox_spec sp;
        const char *why;
    } bad[] = {
        {{.id = "x", .kind = DB_SANDBOX_ACA, .platform = "aca"}, "needs a url"},
        {{.id = "x", .kind = DB_SANDBOX_ACA, .url = "https://h"}, "needs a platform"},
        {{.id = "x", .kind = DB_SANDBOX_ACA, .url = "https://h", .platform = "A b"},
         "needs a platform"},
        {{.id = "x", .kind = DB_SANDBOX_ACA, .url = "wss://h", .platform = "aca"}, "https://HOST"},
        {{.id = "x", .kind = DB_SANDBOX_ACA, .url = "https://h/?identifier=1", .platform = "aca"},
         "without spaces, query"},
        {{.id = "x",
          .kind = DB_SANDBOX_ACA,
          .url = "https://h",
          .platform = "aca",
          .identifier = "abc"},
         "4..128"},
        {{.id = "x",
          .kind = DB_SANDBOX_ACA,
          .url = "https://h",
          .platform = "aca",
          .identifier = "a/b/c/d"},
         "4..128"},
        {{.id = "x", .kind = DB_SANDBOX_STATIC, .url = "wss://h", .platform = "aca"},
         "only an aca sandbox has a platform"},
        {{.id = "x", .kind = DB_SANDBOX_REVERSE, .identifier = "abcd"},
         "only an aca sandbox has a platform"},
        {{.id = "x",
          .kind = DB_SANDBOX_ACA,
          .url = "https://h",
          .platform = "aca",
          .network = DB_NETWORK_NONE},
         "only a local sandbox"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(db_sandbox_create(f->db, &bad[i].sp), AL_E_INVAL);
        if (!strstr(db_errmsg(f->db), bad[i].why))
            fail_msg("case %zu: %s", i, db_errmsg(f->db));
    }
    assert_int_equal(db_sandbox_get(f->db, "x", &sb), AL_E_NOENT);
    /* other kinds have neither */
    assert_int_equal(db_sandbox_add(f->db, "loc", DB_SANDBOX_LOCAL, NULL), AL_OK);
    assert_int_equal(db_sandbox_get(f->db, "loc", &sb), AL_OK);
    assert_string_equal(sb.platform, "");
    assert_string_equal(sb.identifier, "");
    reopen(f);
    assert_int_equal(db_sandbox_get(f->db, "pool-c", &sb), AL_OK);
    assert_string_equal(sb.identifier, "Sess_1-x");
}

/* A schema 5 database is migrated to 6 (SQLite rebuilds the sandboxes
 * table): its sandboxes and their settings are kept, terminals still
 * name them (the foreign key still holds), and aca sandboxes can be made. */
static void test_migration_5_to_6(void **state)
{
    struct fx *f = *state;
    char id[DB_NAME_MAX + 1];
    const struct db_sandbox_spec none = {
        .id = "sb1", .kind = DB_SANDBOX_LOCAL, .record_input = true, .network = DB_NETWORK_NONE};
    assert_int_equal(db_sandbox_create(f->db, &none), AL_OK);
    assert_int_equal(db_sandbox_add(f->db, "st", DB_SANDBOX_STATIC, "wss://h:1/x"), AL_OK);
    assert_int_equal(db_sandbox_set_link(f->db, "st", true, 77, 5), AL_OK);
    add_term(f, "sb1", 1, id);
    assert_int_equal(db_close(f->db), AL_OK);
    f->db = NULL;
    undo_v6(f);
    assert_int_equal(raw_version(f), 5);
    char err[MSG_CAP];
    if (db_open(f->url, &f->db, err, sizeof err) != AL_OK)
        fail_msg("open: %s", err);
    assert_int_equal(raw_version(f), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations WHERE version = 6"), 1);
    struct db_sandbox sb;
    assert_int_equal(db_sandbox_get(f->db, "sb1", &sb), AL_OK);
    assert_true(sb.record_input);
    assert_int_equal(sb.network, DB_NETWORK_NONE);
    assert_int_equal(db_sandbox_get(f->db, "st", &sb), AL_OK);
    assert_string_equal(sb.url, "wss://h:1/x");
    assert_true(sb.link_up);
    assert_int_equal(sb.link_since, 77);
    assert_int_equal(sb.rtt_us, 5);
    /* the terminal still names its sandbox, which cannot go */
    assert_int_equal(db_sandbox_remove(f->db, "sb1"), AL_E_STATE);
    struct db_terminal *t = malloc(sizeof *t);
    assert_non_null(t);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_string_equal(t->sandbox_id, "sb1");
    free(t);
    const struct db_sandbox_spec a = {
        .id = "pool", .kind = DB_SANDBOX_ACA, .url = "https://p", .platform = "aca"};
    assert_int_equal(db_sandbox_create(f->db, &a), AL_OK);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM sandboxes"), 3);
}

static int collect_replica(void *ctx, const struct db_replica *r)
{
    struct db_replica *out = ctx;
    size_t i = 0;
    while (i < 4 && out[i].id[0])
        i++;
    assert_true(i < 4);
    out[i] = *r;
    return 0;
}

/* Up to 4 replicas into out (zeroed first); how many. */
static size_t list_replicas(struct fx *f, int64_t stale_ms, struct db_replica *out)
{
    memset(out, 0, 4 * sizeof *out);
    assert_int_equal(db_replica_list(f->db, stale_ms, collect_replica, out), AL_OK);
    size_t n = 0;
    while (n < 4 && out[n].id[0])
        n++;
    return n;
}

/* Replicas: a random id each, a beat that makes or renews the row with
 * the database's clock, a clean stop, alive from the beat's age, and the
 * deletion of rows long gone. */
static void test_replicas(void **state)
{
    struct fx *f = *state;
    char a[DB_REPLICA_ID_LEN + 1], b[DB_REPLICA_ID_LEN + 1];
    assert_int_equal(db_replica_new_id(f->db, a, sizeof a), AL_OK);
    assert_int_equal(db_replica_new_id(f->db, b, sizeof b), AL_OK);
    assert_int_equal(strlen(a), DB_REPLICA_ID_LEN);
    assert_memory_equal(a, "r-", 2);
    assert_string_not_equal(a, b);
    struct timespec ts;
    assert_int_equal(clock_gettime(CLOCK_REALTIME, &ts), 0);
    int64_t before = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    assert_int_equal(db_replica_beat(f->db, a, "ws://127.0.0.1:1"), AL_OK);
    assert_int_equal(clock_gettime(CLOCK_REALTIME, &ts), 0);
    int64_t after = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    struct db_replica r[4];
    assert_int_equal(list_replicas(f, 60000, r), 1);
    assert_string_equal(r[0].id, a);
    assert_string_equal(r[0].address, "ws://127.0.0.1:1");
    assert_true(r[0].alive);
    assert_int_equal(r[0].stopped_at, 0);
    assert_int_equal(r[0].started_at, r[0].beat_at);
    /* the database's clock, which here is this host's */
    assert_true(r[0].beat_at >= before - 1000 && r[0].beat_at <= after + 1000);
    int64_t started = r[0].started_at;
    usleep(20000);
    assert_int_equal(db_replica_beat(f->db, a, "wss://h.example:443/x"), AL_OK);
    assert_int_equal(db_replica_beat(f->db, b, "ws://127.0.0.1:2"), AL_OK);
    assert_int_equal(list_replicas(f, 60000, r), 2);
    assert_string_equal(r[0].id, a); /* oldest start first */
    assert_int_equal(r[0].started_at, started);
    assert_true(r[0].beat_at > started);
    assert_string_equal(r[0].address, "wss://h.example:443/x");
    assert_true(r[0].alive && r[1].alive);
    /* a clean stop: gone at once, whatever its beat's age */
    assert_int_equal(db_replica_stop(f->db, b), AL_OK);
    assert_int_equal(list_replicas(f, 60000, r), 2);
    assert_true(r[0].alive);
    assert_false(r[1].alive);
    assert_true(r[1].stopped_at >= r[1].started_at);
    char c[DB_REPLICA_ID_LEN + 1];
    assert_int_equal(db_replica_new_id(f->db, c, sizeof c), AL_OK);
    assert_int_equal(db_replica_stop(f->db, c), AL_E_NOENT);
    /* a beat older than the staleness asked: not alive */
    usleep(20000);
    assert_int_equal(list_replicas(f, 5, r), 2);
    assert_false(r[0].alive || r[1].alive);
    /* a replica that stopped beating long ago (its beat moved back behind
     * the interface) is deleted; the others stay */
    char sql[160];
    (void)snprintf(sql, sizeof sql,
                   "UPDATE replicas SET beat_at = beat_at - 100000, started_at = started_at - "
                   "100000 WHERE id = '%s'",
                   a);
    raw_exec(f, sql);
    assert_int_equal(list_replicas(f, 60000, r), 2);
    assert_false(r[0].alive);
    assert_true(r[1].stopped_at > 0);
    assert_int_equal(db_replica_prune(f->db, 50000), AL_OK);
    assert_int_equal(list_replicas(f, 60000, r), 1);
    assert_string_equal(r[0].id, b);
    /* a beat after the row was deleted registers it anew */
    assert_int_equal(db_replica_beat(f->db, a, "ws://127.0.0.1:1"), AL_OK);
    assert_int_equal(list_replicas(f, 60000, r), 2);
    assert_true(r[1].alive && r[1].started_at == r[1].beat_at);
    usleep(5000);
    assert_int_equal(db_replica_prune(f->db, 1), AL_OK);
    assert_int_equal(list_replicas(f, 60000, r), 0);
}

static void test_replica_bad_inputs(void **state)
{
    struct fx *f = *state;
    char id[DB_REPLICA_ID_LEN + 1];
    assert_int_equal(db_replica_new_id(f->db, id, DB_REPLICA_ID_LEN), AL_E_INVAL);
    assert_int_equal(db_replica_new_id(f->db, id, sizeof id), AL_OK);
    static const char *const bad_ids[] = {"",
                                          "r-",
                                          "x-0123456789abcdef01234567",
                                          "r-0123456789ABCDEF01234567",
                                          "r-0123456789abcdef012345678",
                                          "r-0123456789abcdef0123456"};
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
        assert_int_equal(db_replica_beat(f->db, bad_ids[i], "ws://h:1"), AL_E_INVAL);
        assert_int_equal(db_replica_stop(f->db, bad_ids[i]), AL_E_INVAL);
    }
    assert_int_equal(db_replica_beat(f->db, NULL, "ws://h:1"), AL_E_INVAL);
    char longurl[DB_REPLICA_ADDR_MAX + 2];
    memset(longurl, 'a', sizeof longurl - 1);
    memcpy(longurl, "ws://", 5);
    longurl[sizeof longurl - 1] = '\0';
    const char *const bad_addrs[] = {NULL,        "",           "ws://",        "http://h:1",
                                     "ws://h :1", "ws://h\n:1", "ws://h\x7f:1", longurl};
    for (size_t i = 0; i < sizeof bad_addrs / sizeof bad_addrs[0]; i++)
        assert_int_equal(db_replica_beat(f->db, id, bad_addrs[i]), AL_E_INVAL);
    longurl[DB_REPLICA_ADDR_MAX] = '\0'; /* at the limit: accepted */
    assert_true(db_replica_address_valid(longurl));
    assert_int_equal(db_replica_beat(f->db, id, longurl), AL_OK);
    struct db_replica r[4];
    assert_int_equal(db_replica_list(f->db, 0, collect_replica, r), AL_E_INVAL);
    assert_int_equal(db_replica_list(f->db, 1000, NULL, NULL), AL_E_INVAL);
    assert_int_equal(db_replica_prune(f->db, 0), AL_E_INVAL);
    assert_int_equal(list_replicas(f, 60000, r), 1);
    /* the database refuses what db_replica.c would, behind the interface */
    assert_int_not_equal(raw_try(f, "INSERT INTO replicas (id, address, started_at, beat_at)"
                                    " VALUES ('r-zz', 'ws://h:1', 0, 0)"),
                         0);
    assert_int_not_equal(raw_try(f, "INSERT INTO replicas (id, address, started_at, beat_at)"
                                    " VALUES ('r-0123456789abcdef01234567', 'http://h:1', 0, 0)"),
                         0);
}

/* A schema 6 database gains the replicas table, and keeps its rows. */
static void test_migration_6_to_7(void **state)
{
    struct fx *f = *state;
    char key[DB_KEY_LEN + 1];
    assert_int_equal(db_user_add(f->db, "alice", DB_ROLE_ADMIN, key, sizeof key), AL_OK);
    assert_int_equal(db_sandbox_add(f->db, "st", DB_SANDBOX_STATIC, "wss://h:1/x"), AL_OK);
    assert_int_equal(db_close(f->db), AL_OK);
    f->db = NULL;
    undo_v7(f);
    assert_int_equal(raw_version(f), 6);
    assert_int_not_equal(raw_try(f, "DELETE FROM replicas"), 0);
    char err[MSG_CAP];
    if (db_open(f->url, &f->db, err, sizeof err) != AL_OK)
        fail_msg("open: %s", err);
    assert_int_equal(raw_version(f), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations WHERE version = 7"), 1);
    struct db_user u;
    assert_int_equal(db_user_by_key(f->db, key, &u), AL_OK);
    struct db_sandbox sb;
    assert_int_equal(db_sandbox_get(f->db, "st", &sb), AL_OK);
    char id[DB_REPLICA_ID_LEN + 1];
    assert_int_equal(db_replica_new_id(f->db, id, sizeof id), AL_OK);
    assert_int_equal(db_replica_beat(f->db, id, "ws://127.0.0.1:1"), AL_OK);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM replicas"), 1);
}

/* A schema 7 database is migrated to 8: its terminals keep their offsets
 * and recording size, have no recording time (-1: their recordings are
 * read whole on resume) until one is stored; the table refuses a negative
 * time and an exit without a time. */
static void test_migration_7_to_8(void **state)
{
    struct fx *f = *state;
    char id[DB_NAME_MAX + 1];
    assert_int_equal(db_sandbox_add(f->db, "sb1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    add_term(f, "sb1", 1, id);
    assert_int_equal(set_off(f->db, id, 300, 4, 5000, 123456, true), AL_OK);
    assert_int_equal(db_close(f->db), AL_OK);
    f->db = NULL;
    undo_v8(f);
    assert_int_equal(raw_version(f), 7);
    char err[MSG_CAP];
    if (db_open(f->url, &f->db, err, sizeof err) != AL_OK)
        fail_msg("open: %s", err);
    assert_int_equal(raw_version(f), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations WHERE version = 8"), 1);
    struct db_terminal *t = malloc(sizeof *t);
    assert_non_null(t);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_int_equal(t->out_offset, 300);
    assert_int_equal(t->err_offset, 4);
    assert_int_equal(t->rec_bytes, 5000);
    assert_int_equal(t->rec_time_us, -1);
    assert_false(t->rec_exited);
    /* the time learnt by reading the recording is stored at the same size */
    assert_int_equal(set_off(f->db, id, 300, 4, 5000, 777, false), AL_OK);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_int_equal(t->rec_time_us, 777);
    free(t);
    assert_int_equal(raw_try(f, "UPDATE terminals SET rec_time_us = -5"), -1);
    assert_int_equal(raw_try(f, pg.on ? "UPDATE terminals SET rec_time_us = NULL, rec_exited = true"
                                      : "UPDATE terminals SET rec_time_us = NULL, rec_exited = 1"),
                     -1);
    assert_int_equal(raw_try(f, "UPDATE terminals SET rec_time_us = NULL"), 0);
}

/* A schema 8 database is migrated to 9: its sandboxes are free (no
 * owner, fence 0) and can be taken; the table refuses a malformed owner
 * and a negative fence. */
static void test_migration_8_to_9(void **state)
{
    struct fx *f = *state;
    assert_int_equal(db_sandbox_add(f->db, "st", DB_SANDBOX_STATIC, "wss://h:1/x"), AL_OK);
    assert_int_equal(db_close(f->db), AL_OK);
    f->db = NULL;
    undo_v9(f);
    assert_int_equal(raw_version(f), 8);
    char err[MSG_CAP];
    if (db_open(f->url, &f->db, err, sizeof err) != AL_OK)
        fail_msg("open: %s", err);
    assert_int_equal(raw_version(f), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations WHERE version = 9"), 1);
    struct db_sandbox sb;
    assert_int_equal(db_sandbox_get(f->db, "st", &sb), AL_OK);
    assert_string_equal(sb.owner, "");
    assert_int_equal(sb.fence, 0);
    assert_int_equal(sb.lease_until, 0);
    char r[DB_REPLICA_ID_LEN + 1];
    assert_int_equal(db_replica_new_id(f->db, r, sizeof r), AL_OK);
    assert_int_equal(db_replica_beat(f->db, r, "ws://127.0.0.1:1"), AL_OK);
    int64_t fence = 0;
    assert_int_equal(db_lease_take(f->db, "st", r, 6000, 6000, &fence), AL_OK);
    assert_int_equal(fence, 1);
    assert_int_equal(raw_try(f, "UPDATE sandboxes SET owner = 'bob'"), -1);
    assert_int_equal(raw_try(f, "UPDATE sandboxes SET fence = -1"), -1);
}

/* A replica (by id) that beats now, at ws://127.0.0.1:port. */
static void live_replica(struct fx *f, char *id, int port)
{
    char addr[64];
    (void)snprintf(addr, sizeof addr, "ws://127.0.0.1:%d", port);
    assert_int_equal(db_replica_new_id(f->db, id, DB_REPLICA_ID_LEN + 1), AL_OK);
    assert_int_equal(db_replica_beat(f->db, id, addr), AL_OK);
}

struct jwks_seen {
    int n;
    char id[4][DB_REPLICA_ID_LEN + 1];
    char jwks[4][64];
    size_t len[4];
};

static int collect_jwks(void *ctx, const char *id, const char *jwks)
{
    struct jwks_seen *s = ctx;
    assert_true(s->n < 4);
    (void)snprintf(s->id[s->n], sizeof s->id[0], "%s", id);
    (void)snprintf(s->jwks[s->n], sizeof s->jwks[0], "%s", jwks);
    s->len[s->n++] = strlen(jwks);
    return 0;
}

/* A schema 9 database is migrated to 10: its sandboxes have no pinned
 * runner key (the first pin is taken); the column refuses anything but a
 * hex SHA-256. */
static void test_migration_9_to_10(void **state)
{
    struct fx *f = *state;
    assert_int_equal(db_sandbox_add(f->db, "rv", DB_SANDBOX_REVERSE, NULL), AL_OK);
    assert_int_equal(db_close(f->db), AL_OK);
    f->db = NULL;
    undo_v10(f);
    assert_int_equal(raw_version(f), 9);
    char err[MSG_CAP];
    if (db_open(f->url, &f->db, err, sizeof err) != AL_OK)
        fail_msg("open: %s", err);
    assert_int_equal(raw_version(f), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations WHERE version = 10"), 1);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM sandboxes WHERE runner_key IS NULL"), 1);
    char h[DB_RUNNER_KEY_HEX + 1], pinned[DB_RUNNER_KEY_HEX + 1];
    memset(h, 'a', DB_RUNNER_KEY_HEX);
    h[DB_RUNNER_KEY_HEX] = 0;
    assert_int_equal(db_runner_key_pin(f->db, "rv", h, pinned, sizeof pinned), AL_OK);
    assert_string_equal(pinned, h);
    assert_int_equal(raw_try(f, "UPDATE sandboxes SET runner_key = 'xyz'"), -1);
    assert_int_equal(raw_try(f, "UPDATE sandboxes SET runner_key = upper(runner_key)"), -1);
}

/* A schema 10 database is migrated to 11: its replicas have no keys (not
 * listed) until they publish them. */
static void test_migration_10_to_11(void **state)
{
    struct fx *f = *state;
    char a[DB_REPLICA_ID_LEN + 1];
    live_replica(f, a, 1);
    assert_int_equal(db_close(f->db), AL_OK);
    f->db = NULL;
    undo_v11(f);
    assert_int_equal(raw_version(f), 10);
    char err[MSG_CAP];
    if (db_open(f->url, &f->db, err, sizeof err) != AL_OK)
        fail_msg("open: %s", err);
    assert_int_equal(raw_version(f), DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations WHERE version = 11"), 1);
    struct jwks_seen seen = {0};
    assert_int_equal(db_replica_jwks_list(f->db, collect_jwks, &seen), AL_OK);
    assert_int_equal(seen.n, 0);
    assert_int_equal(db_replica_set_jwks(f->db, a, "{\"keys\":[]}"), AL_OK);
    assert_int_equal(db_replica_jwks_list(f->db, collect_jwks, &seen), AL_OK);
    assert_int_equal(seen.n, 1);
    assert_int_equal(raw_try(f, "UPDATE replicas SET jwks = ''"), -1);
}

/* Replicas' keys: published by each, listed for all (alive or not, oldest
 * start first), a row without keys skipped, replaced by a new publish;
 * the largest allowed, one byte more refused; bad inputs. */
static void test_replica_keys(void **state)
{
    struct fx *f = *state;
    char a[DB_REPLICA_ID_LEN + 1], b[DB_REPLICA_ID_LEN + 1], c[DB_REPLICA_ID_LEN + 1];
    live_replica(f, a, 1);
    usleep(5000);
    live_replica(f, b, 2);
    usleep(5000);
    live_replica(f, c, 3);
    assert_int_equal(db_replica_set_jwks(f->db, b, "{\"keys\":[\"b\"]}"), AL_OK);
    assert_int_equal(db_replica_set_jwks(f->db, a, "{\"keys\":[\"a0\"]}"), AL_OK);
    assert_int_equal(db_replica_set_jwks(f->db, a, "{\"keys\":[\"a\"]}"), AL_OK);
    assert_int_equal(db_replica_stop(f->db, a), AL_OK); /* stopped: still listed */
    struct jwks_seen seen = {0};
    assert_int_equal(db_replica_jwks_list(f->db, collect_jwks, &seen), AL_OK);
    assert_int_equal(seen.n, 2); /* c has none */
    assert_string_equal(seen.id[0], a);
    assert_string_equal(seen.jwks[0], "{\"keys\":[\"a\"]}");
    assert_string_equal(seen.id[1], b);
    assert_string_equal(seen.jwks[1], "{\"keys\":[\"b\"]}");
    /* the largest allowed; one byte more refused */
    char *big = malloc(DB_REPLICA_JWKS_MAX + 2);
    assert_non_null(big);
    memset(big, 'x', DB_REPLICA_JWKS_MAX + 1);
    big[DB_REPLICA_JWKS_MAX + 1] = 0;
    assert_int_equal(db_replica_set_jwks(f->db, c, big), AL_E_TOOBIG);
    big[DB_REPLICA_JWKS_MAX] = 0;
    assert_int_equal(db_replica_set_jwks(f->db, c, big), AL_OK);
    free(big);
    memset(&seen, 0, sizeof seen);
    assert_int_equal(db_replica_jwks_list(f->db, collect_jwks, &seen), AL_OK);
    assert_int_equal(seen.n, 3);
    assert_int_equal(seen.len[2], DB_REPLICA_JWKS_MAX);
    /* bad inputs */
    assert_int_equal(db_replica_set_jwks(f->db, "r-000000000000000000000000", "{}"), AL_E_NOENT);
    assert_int_equal(db_replica_set_jwks(f->db, "r-1", "{}"), AL_E_INVAL);
    assert_int_equal(db_replica_set_jwks(f->db, a, ""), AL_E_INVAL);
    assert_int_equal(db_replica_set_jwks(f->db, a, NULL), AL_E_INVAL);
    assert_int_equal(db_replica_set_jwks(f->db, a, "{\n}"), AL_E_INVAL);
    assert_int_equal(db_replica_jwks_list(f->db, NULL, NULL), AL_E_INVAL);
    assert_int_equal(db_replica_set_jwks(NULL, a, "{}"), AL_E_INVAL);
}

/* Runner keys: the first pin holds (a second offer gets the first back),
 * shared by every connection to the database (another replica); set by
 * the owner's fence only, unfenced for a forget; a forget lets the next
 * offer pin; bad inputs refused. */
static void test_runner_keys(void **state)
{
    struct fx *f = *state;
    char a[DB_REPLICA_ID_LEN + 1], b[DB_REPLICA_ID_LEN + 1];
    live_replica(f, a, 1);
    live_replica(f, b, 2);
    assert_int_equal(db_sandbox_add(f->db, "rv", DB_SANDBOX_REVERSE, NULL), AL_OK);
    char k1[DB_RUNNER_KEY_HEX + 1], k2[DB_RUNNER_KEY_HEX + 1], k3[DB_RUNNER_KEY_HEX + 1];
    char pinned[DB_RUNNER_KEY_HEX + 1];
    hex_sha256("one", k1);
    hex_sha256("two", k2);
    hex_sha256("three", k3);
    assert_int_equal(db_runner_key_pin(f->db, "rv", k1, pinned, sizeof pinned), AL_OK);
    assert_string_equal(pinned, k1);
    assert_int_equal(db_runner_key_pin(f->db, "rv", k2, pinned, sizeof pinned), AL_OK);
    assert_string_equal(pinned, k1); /* the first holds */
    /* another connection (another replica) sees the same pin */
    struct db *other = NULL;
    char err[MSG_CAP];
    if (db_open(f->url, &other, err, sizeof err) != AL_OK)
        fail_msg("open: %s", err);
    assert_int_equal(db_runner_key_pin(other, "rv", k2, pinned, sizeof pinned), AL_OK);
    assert_string_equal(pinned, k1);
    /* set: the owner's fence only */
    int64_t fa = 0, fb = 0;
    assert_int_equal(db_lease_take(f->db, "rv", a, 60000, 60000, &fa), AL_OK);
    assert_int_equal(db_runner_key_set(f->db, "rv", k3, fa), AL_OK);
    assert_int_equal(db_runner_key_pin(other, "rv", k2, pinned, sizeof pinned), AL_OK);
    assert_string_equal(pinned, k3);
    assert_int_equal(db_lease_move(other, "rv", b, 60000, &fb), AL_OK);
    assert_int_equal(db_runner_key_set(f->db, "rv", k1, fa), AL_E_PERM);
    assert_int_equal(db_runner_key_pin(f->db, "rv", k2, pinned, sizeof pinned), AL_OK);
    assert_string_equal(pinned, k3); /* the stale owner changed nothing */
    /* forgotten (a new enrollment): the next offer is pinned */
    assert_int_equal(db_runner_key_set(f->db, "rv", NULL, DB_NO_FENCE), AL_OK);
    assert_int_equal(db_runner_key_pin(other, "rv", k2, pinned, sizeof pinned), AL_OK);
    assert_string_equal(pinned, k2);
    assert_int_equal(db_close(other), AL_OK);
    /* bad inputs */
    assert_int_equal(db_runner_key_pin(f->db, "nope", k1, pinned, sizeof pinned), AL_E_NOENT);
    assert_int_equal(db_runner_key_set(f->db, "nope", k1, DB_NO_FENCE), AL_E_NOENT);
    assert_int_equal(db_runner_key_pin(f->db, "rv", k1, pinned, DB_RUNNER_KEY_HEX), AL_E_INVAL);
    assert_int_equal(db_runner_key_pin(f->db, "rv", NULL, pinned, sizeof pinned), AL_E_INVAL);
    assert_int_equal(db_runner_key_pin(f->db, "../x", k1, pinned, sizeof pinned), AL_E_INVAL);
    k1[3] = 'G';
    assert_int_equal(db_runner_key_pin(f->db, "rv", k1, pinned, sizeof pinned), AL_E_INVAL);
    assert_int_equal(db_runner_key_set(f->db, "rv", "abc", DB_NO_FENCE), AL_E_INVAL);
    assert_int_equal(db_runner_key_set(f->db, "rv", NULL, -2), AL_E_INVAL);
    assert_int_equal(db_runner_key_pin(NULL, "rv", k2, pinned, sizeof pinned), AL_E_INVAL);
}

struct leases {
    int n;
    char id[4][DB_NAME_MAX + 1];
    int64_t fence[4];
};

static int collect_lease(void *ctx, const char *sandbox_id, int64_t fence)
{
    struct leases *l = ctx;
    assert_true(l->n < 4);
    (void)snprintf(l->id[l->n], sizeof l->id[0], "%s", sandbox_id);
    l->fence[l->n++] = fence;
    return 0;
}

/* Leases: take a free one (fence 1), refused while a live replica holds
 * it, taken again by its owner without a new fence, taken from an
 * expired lease and from a gone owner with a grown fence, renewed in one
 * call for all of a replica's leases (a lost one no longer listed),
 * moved whoever holds it, released by a clean stop. */
static void test_leases(void **state)
{
    struct fx *f = *state;
    char a[DB_REPLICA_ID_LEN + 1], b[DB_REPLICA_ID_LEN + 1];
    live_replica(f, a, 1);
    live_replica(f, b, 2);
    assert_int_equal(db_sandbox_add(f->db, "s1", DB_SANDBOX_STATIC, "ws://h:1/"), AL_OK);
    assert_int_equal(db_sandbox_add(f->db, "s2", DB_SANDBOX_REVERSE, NULL), AL_OK);
    int64_t fa = 0, fb = 0;
    /* free: taken, fence 1 */
    assert_int_equal(db_lease_take(f->db, "s1", a, 60000, 60000, &fa), AL_OK);
    assert_int_equal(fa, 1);
    struct db_sandbox sb;
    assert_int_equal(db_sandbox_get(f->db, "s1", &sb), AL_OK);
    assert_string_equal(sb.owner, a);
    assert_int_equal(sb.fence, 1);
    assert_true(sb.lease_until > 0);
    /* held by a live replica: refused, and the message names it */
    assert_int_equal(db_lease_take(f->db, "s1", b, 60000, 60000, &fb), AL_E_STATE);
    assert_non_null(strstr(db_errmsg(f->db), a));
    /* its owner again: the same fence */
    assert_int_equal(db_lease_take(f->db, "s1", a, 60000, 60000, &fa), AL_OK);
    assert_int_equal(fa, 1);
    /* expired (its length in the past by the database's clock): taken by
     * another, fence 2 */
    raw_exec(f, "UPDATE sandboxes SET lease_until = lease_until - 120000 WHERE id = 's1'");
    assert_int_equal(db_lease_take(f->db, "s1", b, 60000, 60000, &fb), AL_OK);
    assert_int_equal(fb, 2);
    /* renew: a holds nothing any more, b holds s1 */
    struct leases la = {0}, lb = {0};
    assert_int_equal(db_lease_renew(f->db, a, 60000, collect_lease, &la), AL_OK);
    assert_int_equal(la.n, 0);
    assert_int_equal(db_lease_take(f->db, "s2", b, 60000, 60000, &fb), AL_OK);
    assert_int_equal(fb, 1);
    assert_int_equal(db_lease_renew(f->db, b, 60000, collect_lease, &lb), AL_OK);
    assert_int_equal(lb.n, 2);
    assert_int_equal(lb.fence[0] + lb.fence[1], 3); /* s1: 2, s2: 1 */
    /* the owner gone (no beat within the staleness asked; a stop): its
     * unexpired lease is taken all the same */
    assert_int_equal(db_lease_take(f->db, "s1", a, 60000, 60000, &fa), AL_E_STATE);
    assert_int_equal(db_replica_stop(f->db, b), AL_OK);
    assert_int_equal(db_lease_take(f->db, "s1", a, 60000, 60000, &fa), AL_OK);
    assert_int_equal(fa, 3);
    raw_exec(f, "UPDATE replicas SET stopped_at = NULL, beat_at = beat_at - 100000");
    assert_int_equal(db_lease_take(f->db, "s2", a, 50000, 60000, &fa), AL_OK);
    assert_int_equal(fa, 2);
    /* an owner with no row at all is gone too */
    raw_exec(f, "DELETE FROM replicas");
    assert_int_equal(db_lease_take(f->db, "s2", b, 60000, 60000, &fb), AL_OK);
    assert_int_equal(fb, 3);
    /* moved: whoever holds it, the fence grows; moving to the holder keeps it */
    assert_int_equal(db_lease_move(f->db, "s2", a, 60000, &fa), AL_OK);
    assert_int_equal(fa, 4);
    assert_int_equal(db_lease_move(f->db, "s2", a, 60000, &fa), AL_OK);
    assert_int_equal(fa, 4);
    assert_int_equal(db_lease_move(f->db, "nope", a, 60000, &fa), AL_E_NOENT);
    assert_int_equal(db_lease_take(f->db, "nope", a, 60000, 60000, &fa), AL_E_NOENT);
    /* released: free again, the fence kept, and grown by the next owner */
    assert_int_equal(db_lease_release(f->db, a), AL_OK);
    assert_int_equal(db_sandbox_get(f->db, "s2", &sb), AL_OK);
    assert_string_equal(sb.owner, "");
    assert_int_equal(sb.fence, 4);
    assert_int_equal(sb.lease_until, 0);
    live_replica(f, b, 2);
    assert_int_equal(db_lease_take(f->db, "s2", b, 60000, 60000, &fb), AL_OK);
    assert_int_equal(fb, 5);
    /* superseded: a replica registered later at the owner's address (its
     * restart: the old process no longer listens there) takes it at once */
    char c[DB_REPLICA_ID_LEN + 1];
    raw_exec(f, "UPDATE replicas SET started_at = started_at - 1000");
    assert_int_equal(db_lease_take(f->db, "s2", a, 60000, 60000, &fa), AL_E_STATE);
    live_replica(f, c, 2);
    assert_int_equal(db_lease_take(f->db, "s2", c, 60000, 60000, &fb), AL_OK);
    assert_int_equal(fb, 6);
    /* all that is free in one call: s1 (released by a) and the new s3,
     * not s2 (c's) */
    assert_int_equal(db_sandbox_add(f->db, "s3", DB_SANDBOX_LOCAL, NULL), AL_OK);
    struct leases lt = {0};
    assert_int_equal(db_lease_take_free(f->db, c, 50000, 60000, collect_lease, &lt), AL_OK);
    assert_int_equal(lt.n, 2);
    assert_string_equal(lt.id[0][1] == '1' ? lt.id[0] : lt.id[1], "s1");
    assert_int_equal(lt.id[0][1] == '1' ? lt.fence[0] : lt.fence[1], 4);
    assert_int_equal(lt.id[0][1] == '3' ? lt.fence[0] : lt.fence[1], 1);
    memset(&lt, 0, sizeof lt);
    assert_int_equal(db_lease_take_free(f->db, c, 50000, 60000, collect_lease, &lt), AL_OK);
    assert_int_equal(lt.n, 0); /* its own are not taken again */
    assert_int_equal(db_lease_take_free(f->db, b, 50000, 60000, collect_lease, &lt), AL_OK);
    assert_int_equal(lt.n, 0); /* c is alive: nothing for b */
    /* bad inputs */
    assert_int_equal(db_lease_take_free(f->db, c, 0, 60000, collect_lease, &lt), AL_E_INVAL);
    assert_int_equal(db_lease_take_free(f->db, c, 1, 60000, NULL, NULL), AL_E_INVAL);
    assert_int_equal(db_lease_take(f->db, "s1", "r-1", 60000, 60000, &fa), AL_E_INVAL);
    assert_int_equal(db_lease_take(f->db, "s1", a, 0, 60000, &fa), AL_E_INVAL);
    assert_int_equal(db_lease_take(f->db, "s1", a, 60000, 0, &fa), AL_E_INVAL);
    assert_int_equal(db_lease_take(f->db, "s1", a, 60000, 60000, NULL), AL_E_INVAL);
    assert_int_equal(db_lease_take(f->db, "../x", a, 60000, 60000, &fa), AL_E_INVAL);
    assert_int_equal(db_lease_renew(f->db, a, 60000, NULL, NULL), AL_E_INVAL);
    assert_int_equal(db_lease_release(f->db, "R-0123456789abcdef01234567"), AL_E_INVAL);
    assert_int_equal(db_lease_take(NULL, "s1", a, 60000, 60000, &fa), AL_E_INVAL);
}

/* Fenced writes: made with the sandbox's current fence, refused (AL_E_PERM,
 * nothing written) with an older one, for the link, a terminal's state,
 * exit and offsets, and an audit row; unfenced writes as before. */
static void test_fenced_writes(void **state)
{
    struct fx *f = *state;
    char a[DB_REPLICA_ID_LEN + 1], b[DB_REPLICA_ID_LEN + 1], id[DB_NAME_MAX + 1];
    live_replica(f, a, 1);
    live_replica(f, b, 2);
    assert_int_equal(db_sandbox_add(f->db, "s1", DB_SANDBOX_STATIC, "ws://h:1/"), AL_OK);
    add_term(f, "s1", 1, id);
    int64_t fa = 0, fb = 0;
    assert_int_equal(db_lease_take(f->db, "s1", a, 60000, 60000, &fa), AL_OK);
    assert_int_equal(db_sandbox_set_link_fenced(f->db, "s1", true, 5, 10, fa), AL_OK);
    assert_int_equal(db_terminal_set_state_fenced(f->db, id, DB_TERM_RUNNING, fa), AL_OK);
    const struct db_term_offsets o1 = {10, 0, 100, 5, false};
    assert_int_equal(db_terminal_set_offsets_fenced(f->db, id, &o1, fa), AL_OK);
    assert_int_equal(db_audit_add_fenced(f->db, "s1", fa, 0, "system", "link_up", "s1", NULL),
                     AL_OK);
    /* b moves the lease: a's writes are refused, nothing of them stored */
    assert_int_equal(db_lease_move(f->db, "s1", b, 60000, &fb), AL_OK);
    assert_true(fb > fa);
    int64_t audits = raw_int(f, "SELECT count(*) FROM audit");
    assert_int_equal(db_sandbox_set_link_fenced(f->db, "s1", false, 6, -1, fa), AL_E_PERM);
    const struct db_term_offsets o2 = {20, 0, 200, 6, false};
    assert_int_equal(db_terminal_set_offsets_fenced(f->db, id, &o2, fa), AL_E_PERM);
    assert_non_null(strstr(db_errmsg(f->db), "another owner"));
    assert_int_equal(db_terminal_set_exit_fenced(f->db, id, 0, 0, fa), AL_E_PERM);
    assert_int_equal(db_terminal_set_state_fenced(f->db, id, DB_TERM_LOST, fa), AL_E_PERM);
    assert_int_equal(db_audit_add_fenced(f->db, "s1", fa, 0, "system", "link_down", "s1", NULL),
                     AL_E_PERM);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM audit"), audits);
    struct db_sandbox sb;
    assert_int_equal(db_sandbox_get(f->db, "s1", &sb), AL_OK);
    assert_true(sb.link_up);
    struct db_terminal *t = malloc(sizeof *t);
    assert_non_null(t);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_int_equal(t->state, DB_TERM_RUNNING);
    assert_int_equal(t->out_offset, 10);
    assert_int_equal(t->rec_bytes, 100);
    /* the new owner's fence writes; a state error stays a state error */
    assert_int_equal(db_terminal_set_offsets_fenced(f->db, id, &o2, fb), AL_OK);
    assert_int_equal(db_terminal_set_offsets_fenced(f->db, id, &o1, fb), AL_E_STATE);
    assert_int_equal(db_terminal_set_exit_fenced(f->db, id, 3, 0, fb), AL_OK);
    assert_int_equal(db_terminal_get(f->db, id, t), AL_OK);
    assert_int_equal(t->state, DB_TERM_EXITED);
    assert_int_equal(t->exit_code, 3);
    assert_int_equal(t->out_offset, 20);
    free(t);
    /* unfenced, as before; a fence below -1 is refused */
    assert_int_equal(db_sandbox_set_link(f->db, "s1", false, 7, -1), AL_OK);
    assert_int_equal(db_sandbox_set_link_fenced(f->db, "s1", false, 7, -1, -2), AL_E_INVAL);
    assert_int_equal(db_audit_add_fenced(f->db, NULL, 0, 0, "system", "x", "s1", NULL), AL_E_INVAL);
}

int main(int argc, char **argv)
{
    bool want_pg = argc == 2 && strcmp(argv[1], "pg") == 0;
    if (argc > 2 || (argc == 2 && !want_pg)) {
        (void)fprintf(stderr, "usage: test_db [pg]\n");
        return 2;
    }
    const struct CMUnitTest both[] = {
        BOTH(test_reopen_is_idempotent),
        BOTH(test_future_schema_refused),
        BOTH(test_failed_migration_rolls_back),
        BOTH(test_open_bad_urls),
        BOTH(test_two_connections),
        BOTH(test_user_add_and_lookup),
        BOTH(test_user_malformed_keys),
        BOTH(test_user_bad_inputs),
        BOTH(test_user_list_and_remove),
        BOTH(test_user_key_handle),
        BOTH(test_sandboxes),
        BOTH(test_terminal_add_get),
        BOTH(test_terminal_foreign_key_and_channels),
        BOTH(test_terminal_states),
        BOTH(test_terminal_list),
        BOTH(test_list_callback_uses_db),
        BOTH(test_terminal_bad_specs),
        BOTH(test_offsets_survive_reopen),
        BOTH(test_record_input_and_creator),
        BOTH(test_migration_1_to_2),
        BOTH(test_sandbox_network),
        BOTH(test_migration_3_to_4),
        BOTH(test_proxy_credentials),
        BOTH(test_proxy_bad_inputs),
        BOTH(test_migration_4_to_5),
        BOTH(test_migration_5_to_6),
        BOTH(test_migration_6_to_7),
        BOTH(test_aca_sandbox),
        BOTH(test_replicas),
        BOTH(test_leases),
        BOTH(test_fenced_writes),
        BOTH(test_migration_8_to_9),
        BOTH(test_migration_9_to_10),
        BOTH(test_runner_keys),
        BOTH(test_migration_10_to_11),
        BOTH(test_replica_keys),
        BOTH(test_replica_bad_inputs),
        BOTH(test_migration_7_to_8),
        BOTH(test_audit),
        BOTH(test_audit_limit),
        BOTH(test_audit_prune),
        BOTH(test_audit_bad_inputs),
        BOTH(test_audit_batch),
        BOTH(test_session_lifecycle),
        BOTH(test_session_live),
        BOTH(test_session_hashed_and_survives_reopen),
        BOTH(test_session_limit_and_expire),
        BOTH(test_session_bad_inputs),
        BOTH(test_session_migration_from_v2),
        cmocka_unit_test(test_names_and_enums),
        cmocka_unit_test(test_null_db),
    };
    const struct CMUnitTest sqlite_only[] = {
        BOTH(test_open_creates_0600_wal_schema),
        BOTH(test_files_not_ours_refused),
        BOTH(test_relative_path),
        BOTH(test_key_not_stored_in_clear),
    };
    const struct CMUnitTest pg_only[] = {
        BOTH(test_pg_open_schema),
        BOTH(test_pg_not_ours),
        BOTH(test_pg_key_not_stored_in_clear),
        BOTH(test_pg_connection_loss),
        BOTH(test_pg_concurrent_open),
    };
    if (!want_pg) {
        int failed = cmocka_run_group_tests_name("db_sqlite", both, NULL, NULL);
        return failed + cmocka_run_group_tests_name("db_sqlite_only", sqlite_only, NULL, NULL);
    }
    if (pg_start() != 0)
        return 1;
    int failed = cmocka_run_group_tests_name("db_pg", both, NULL, NULL);
    failed += cmocka_run_group_tests_name("db_pg_only", pg_only, NULL, NULL);
    if (pg_stop() != 0)
        failed++;
    return failed;
}
