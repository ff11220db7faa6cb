/*
 * db: the data layer's handle and vocabulary. db_open picks a backend by
 * URL scheme; db_close, db_errmsg; the error and clock helpers every file
 * of the data layer shares (db_backend.h); names (db_name_valid) and the
 * enumerations stored and shown by name. See db.h.
 *
 * Data model: struct db (db_backend.h) = the chosen backend's function
 * table, its state, and the last error message. The public calls on an
 * open db live with their tables: db_user.c, db_session.c, db_sandbox.c,
 * db_terminal.c, db_proxy.c, db_audit.c; each checks every input (db_check.c,
 * db_secret.c) before a backend sees it, so that a backend only stores
 * what the rules allow:
 *   names       [a-z0-9._-]{1,64}, first character a letter or digit (so
 *               never ".", "..", a hidden file or a command-line flag);
 *   API keys    "alk_" + base64url (strict, canonical) of DB_KEY_RAW_LEN
 *               random bytes; only hex(SHA-256(key text)) is stored;
 *   JSON        argv: an array of 1..AL_MAX_ARGV strings; env: an object of
 *               at most AL_MAX_ENV strings, names without '='; each string,
 *               and each "NAME=value", at most AL_MAX_STR bytes; an audit
 *               detail: an object. Duplicate keys are refused (jansson);
 *   free text   (cwd, audit target) valid UTF-8 without control characters;
 *   states      the transitions listed in db.h, checked by db_terminal.c
 *               and applied by the backend as a compare-and-set on the
 *               state it read.
 */
#include "db.h"

#include "al_err.h"
#include "db_backend.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Backends by URL scheme (the text before the first ':'). "sqlite:PATH"
 * hands PATH to its backend; a PostgreSQL URL goes whole to libpq, which
 * parses it (postgres:// and postgresql:// alike). DB_WITH_PG: al_control
 * links libpq (CMakeLists.txt); a program compiling db.c on its own, as
 * fuzz_apireq.c does, has SQLite only. */
#define DB_URL_SQLITE "sqlite:PATH"
#ifdef DB_WITH_PG
#define DB_URL_EXPECTED "expected " DB_URL_SQLITE " or postgres://..."
#else
#define DB_URL_EXPECTED "expected " DB_URL_SQLITE
#endif

static const struct {
    const char *scheme;
    const struct db_backend *be;
    bool whole_url; /* the backend gets the URL, not what follows "scheme:" */
} db_schemes[] = {
    {"sqlite", &db_sqlite_backend, false},
#ifdef DB_WITH_PG
    {"postgres", &db_pg_backend, true},
    {"postgresql", &db_pg_backend, true},
#endif
};

int db_fail(struct db *db, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): see keys_reason in keys.c
    if (vsnprintf(db->msg, sizeof db->msg, fmt, ap) < 0)
        db->msg[0] = '\0';
    va_end(ap);
    return code;
}

int db_parse_role_int(const char *s, int *out)
{
    enum db_role v = DB_ROLE_VIEWER;
    int rc = db_role_parse(s, &v);
    *out = (int)v;
    return rc;
}

int db_parse_kind_int(const char *s, int *out)
{
    enum db_sandbox_kind v = DB_SANDBOX_LOCAL;
    int rc = db_sandbox_kind_parse(s, &v);
    *out = (int)v;
    return rc;
}

int db_parse_network_int(const char *s, int *out)
{
    enum db_sandbox_network v = DB_NETWORK_DEFAULT;
    int rc = db_sandbox_network_parse(s, &v);
    *out = (int)v;
    return rc;
}

int db_parse_mode_int(const char *s, int *out)
{
    enum db_term_mode v = DB_MODE_PTY;
    int rc = db_term_mode_parse(s, &v);
    *out = (int)v;
    return rc;
}

int db_parse_state_int(const char *s, int *out)
{
    enum db_term_state v = DB_TERM_OPENING;
    int rc = db_term_state_parse(s, &v);
    *out = (int)v;
    return rc;
}

int db_now(int64_t *out)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return AL_E_IO;
    *out = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    return AL_OK;
}

/* The start of every public call on an open db. */
int db_begin(struct db *db)
{
    if (!db)
        return AL_E_INVAL;
    db->msg[0] = '\0';
    return AL_OK;
}

int db_now_or_fail(struct db *db, int64_t *now)
{
    if (db_now(now) != AL_OK)
        return db_fail(db, AL_E_IO, "cannot read the clock");
    return AL_OK;
}

/* ---- names and enumerations --------------------------------------------- */

static bool db_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

bool db_name_valid(const char *s)
{
    if (!s || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
        return false;
    size_t n = 0;
    for (; s[n] != '\0'; n++)
        if (n >= DB_NAME_MAX || !db_name_char(s[n]))
            return false;
    return true;
}

static const char *const db_role_names[] = {"viewer", "operator", "admin"};
static const char *const db_kind_names[] = {"local", "static", "reverse", "aca"};
static const char *const db_network_names[] = {"default", "host", "none"};
static const char *const db_mode_names[] = {"pty", "pipes"};
static const char *const db_state_names[] = {"opening", "running", "exited", "closed", "lost"};

#define DB_COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *db_enum_name(const char *const *names, size_t n, int v)
{
    return v >= 0 && (size_t)v < n ? names[v] : NULL;
}

static int db_enum_parse(const char *const *names, size_t n, const char *s, int *out)
{
    if (!s || !out)
        return AL_E_INVAL;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(names[i], s) == 0) {
            *out = (int)i;
            return AL_OK;
        }
    }
    return AL_E_INVAL;
}

const char *db_role_name(enum db_role r)
{
    return db_enum_name(db_role_names, DB_COUNT(db_role_names), (int)r);
}

int db_role_parse(const char *s, enum db_role *out)
{
    int v = 0;
    int rc = db_enum_parse(db_role_names, DB_COUNT(db_role_names), s, &v);
    if (rc == AL_OK)
        *out = (enum db_role)v;
    return rc;
}

const char *db_sandbox_kind_name(enum db_sandbox_kind k)
{
    return db_enum_name(db_kind_names, DB_COUNT(db_kind_names), (int)k);
}

int db_sandbox_kind_parse(const char *s, enum db_sandbox_kind *out)
{
    int v = 0;
    int rc = db_enum_parse(db_kind_names, DB_COUNT(db_kind_names), s, &v);
    if (rc == AL_OK)
        *out = (enum db_sandbox_kind)v;
    return rc;
}

const char *db_sandbox_network_name(enum db_sandbox_network n)
{
    return db_enum_name(db_network_names, DB_COUNT(db_network_names), (int)n);
}

int db_sandbox_network_parse(const char *s, enum db_sandbox_network *out)
{
    int v = 0;
    int rc = db_enum_parse(db_network_names, DB_COUNT(db_network_names), s, &v);
    if (rc == AL_OK)
        *out = (enum db_sandbox_network)v;
    return rc;
}

const char *db_term_mode_name(enum db_term_mode m)
{
    return db_enum_name(db_mode_names, DB_COUNT(db_mode_names), (int)m);
}

int db_term_mode_parse(const char *s, enum db_term_mode *out)
{
    int v = 0;
    int rc = db_enum_parse(db_mode_names, DB_COUNT(db_mode_names), s, &v);
    if (rc == AL_OK)
        *out = (enum db_term_mode)v;
    return rc;
}

const char *db_term_state_name(enum db_term_state s)
{
    return db_enum_name(db_state_names, DB_COUNT(db_state_names), (int)s);
}

int db_term_state_parse(const char *s, enum db_term_state *out)
{
    int v = 0;
    int rc = db_enum_parse(db_state_names, DB_COUNT(db_state_names), s, &v);
    if (rc == AL_OK)
        *out = (enum db_term_state)v;
    return rc;
}

/* ---- open and close ----------------------------------------------------- */

static void db_copy_msg(char *err, size_t cap, const char *msg)
{
    if (err && cap > 0)
        (void)snprintf(err, cap, "%s", msg);
}

int db_open(const char *url, struct db **out, char *err, size_t cap)
{
    db_copy_msg(err, cap, "");
    if (!out) {
        db_copy_msg(err, cap, "db_open: no output");
        return AL_E_INVAL;
    }
    *out = NULL;
    if (!url || url[0] == '\0') {
        db_copy_msg(err, cap, "database URL is missing (" DB_URL_EXPECTED ")");
        return AL_E_INVAL;
    }
    if (strnlen(url, DB_URL_MAX + 1) > DB_URL_MAX) {
        db_copy_msg(err, cap, "database URL is too long");
        return AL_E_TOOBIG;
    }
    /* Never echo the URL: a postgres URL may hold a password. */
    const struct db_backend *be = NULL;
    const char *where = NULL;
    for (size_t i = 0; i < DB_COUNT(db_schemes); i++) {
        size_t sl = strlen(db_schemes[i].scheme);
        if (strncmp(url, db_schemes[i].scheme, sl) == 0 && url[sl] == ':') {
            be = db_schemes[i].be;
            where = db_schemes[i].whole_url ? url : url + sl + 1;
        }
    }
    if (!be) {
        bool pg = strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0;
        db_copy_msg(err, cap,
                    pg ? "the PostgreSQL backend is not built in (use " DB_URL_SQLITE ")"
                       : "unknown database URL scheme (" DB_URL_EXPECTED ")");
        return AL_E_INVAL;
    }
    struct db *db = calloc(1, sizeof *db);
    if (!db) {
        db_copy_msg(err, cap, "out of memory");
        return AL_E_NOMEM;
    }
    db->be = be;
    int rc = be->open(db, where);
    if (rc != AL_OK) {
        db_copy_msg(err, cap, db->msg[0] ? db->msg : al_strerror(rc));
        (void)be->close(db); /* a failed open leaves nothing behind */
        free(db);
        return rc;
    }
    db->msg[0] = '\0';
    *out = db;
    return AL_OK;
}

int db_close(struct db *db)
{
    if (!db)
        return AL_OK;
    int rc = db->be->close(db);
    free(db);
    return rc;
}

const char *db_errmsg(const struct db *db)
{
    return db ? db->msg : "no database";
}
