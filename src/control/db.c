/*
 * db: the backend-independent half of the data layer. See db.h.
 *
 * Data model: struct db (db_backend.h) = the chosen backend's function
 * table, its state, and the last error message. This file checks every
 * input before a backend sees it, so that a backend only stores what the
 * rules allow:
 *   names       [a-z0-9._-]{1,64}, first character a letter or digit (so
 *               never ".", "..", a hidden file or a command-line flag);
 *   API keys    "alk_" + base64url (strict, canonical) of DB_KEY_RAW_LEN
 *               random bytes; only hex(SHA-256(key text)) is stored;
 *   JSON        argv: an array of 1..AL_MAX_ARGV strings; env: an object of
 *               at most AL_MAX_ENV strings, names without '='; each string,
 *               and each "NAME=value", at most AL_MAX_STR bytes; an audit
 *               detail: an object. Duplicate keys are refused (jansson);
 *   free text   (cwd, audit target) valid UTF-8 without control characters;
 *   states      the transitions listed in db.h, checked here and applied by
 *               the backend as a compare-and-set on the state it read.
 */
#include "db.h"

#include "al_err.h"
#include "al_limits.h"
#include "b64url.h"
#include "db_backend.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    DB_HASH_LEN = 32,         /* SHA-256 */
    DB_TERM_ID_RANDOM = 12,   /* random bytes in a terminal id */
    DB_TERM_ID_PREFIX_LEN = 2 /* "t-" */
};

#define DB_TERM_ID_PREFIX "t-"

_Static_assert(DB_KEY_LEN == sizeof DB_KEY_PREFIX - 1 + B64U_ENC_LEN(DB_KEY_RAW_LEN),
               "DB_KEY_LEN matches the key's text form");
_Static_assert(DB_SESSION_LEN == DB_KEY_LEN && DB_SESSION_RAW_LEN == DB_KEY_RAW_LEN &&
                   sizeof DB_SESSION_PREFIX == sizeof DB_KEY_PREFIX &&
                   sizeof DB_CSRF_PREFIX == sizeof DB_KEY_PREFIX,
               "session secrets and CSRF tokens have the form of API keys");
_Static_assert(DB_TERM_ID_PREFIX_LEN + 2 * DB_TERM_ID_RANDOM <= DB_NAME_MAX,
               "terminal ids are names");

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
static int db_begin(struct db *db)
{
    if (!db)
        return AL_E_INVAL;
    db->msg[0] = '\0';
    return AL_OK;
}

static int db_now_or_fail(struct db *db, int64_t *now)
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
static const char *const db_kind_names[] = {"local", "static", "reverse"};
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

/* ---- input checks --------------------------------------------------------- */

/* A name argument: NULL, empty, too long or outside the alphabet. */
static int db_check_name(struct db *db, const char *what, const char *s)
{
    if (db_name_valid(s))
        return AL_OK;
    if (!s || s[0] == '\0')
        return db_fail(db, AL_E_INVAL, "%s is missing", what);
    if (strnlen(s, DB_NAME_MAX + 1) > DB_NAME_MAX)
        return db_fail(db, AL_E_INVAL, "%s is longer than %d characters", what, DB_NAME_MAX);
    return db_fail(db, AL_E_INVAL,
                   "%s must be 1 to %d of a-z 0-9 . _ - starting with a letter or digit", what,
                   DB_NAME_MAX);
}

/* Length of s if at most max, else AL_E_TOOBIG via db_fail. */
static int db_check_len(struct db *db, const char *what, const char *s, size_t max, size_t *len)
{
    size_t n = strnlen(s, max + 1);
    if (n > max)
        return db_fail(db, AL_E_TOOBIG, "%s is longer than %zu bytes", what, max);
    *len = n;
    return AL_OK;
}

/* Valid UTF-8 (no overlong form, surrogate or value above U+10FFFF) and no
 * control character (C0, DEL, C1). */
static bool db_text_ok(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x20 || c == 0x7f)
            return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned cp, min;
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2, cp = c & 0x1f, min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3, cp = c & 0x0f, min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp < 0xa0)
            return false; /* cp < 0xa0 here: a C1 control */
        i += len;
    }
    return true;
}

static int db_check_text(struct db *db, const char *what, const char *s, size_t max)
{
    size_t n = 0;
    int rc = db_check_len(db, what, s, max, &n);
    if (rc != AL_OK)
        return rc;
    if (!db_text_ok((const unsigned char *)s, n))
        return db_fail(db, AL_E_INVAL, "%s must be UTF-8 text without control characters", what);
    return AL_OK;
}

/* Parse JSON text of at most max bytes into *out (caller json_decref's). */
static int db_json_load(struct db *db, const char *what, const char *s, size_t max, json_t **out)
{
    size_t n = 0;
    int rc = db_check_len(db, what, s, max, &n);
    if (rc != AL_OK)
        return rc;
    json_error_t e;
    *out = json_loadb(s, n, JSON_REJECT_DUPLICATES, &e);
    if (!*out)
        return db_fail(db, AL_E_INVAL, "%s is not valid JSON: %s (at byte %d)", what, e.text,
                       e.position);
    return AL_OK;
}

static int db_check_argv(struct db *db, const char *s)
{
    if (!s)
        return db_fail(db, AL_E_INVAL, "argv is missing");
    json_t *j = NULL;
    int rc = db_json_load(db, "argv", s, DB_ARGV_JSON_MAX, &j);
    if (rc != AL_OK)
        return rc;
    size_t n = json_is_array(j) ? json_array_size(j) : 0;
    if (!json_is_array(j) || n == 0) {
        rc = db_fail(db, AL_E_INVAL, "argv must be a non-empty JSON array of strings");
    } else if (n > AL_MAX_ARGV) {
        rc = db_fail(db, AL_E_TOOBIG, "argv has %zu entries; at most %d", n, AL_MAX_ARGV);
    } else {
        for (size_t i = 0; i < n && rc == AL_OK; i++) {
            const json_t *v = json_array_get(j, i);
            if (!json_is_string(v))
                rc = db_fail(db, AL_E_INVAL, "argv[%zu] is not a string", i);
            else if (json_string_length(v) > AL_MAX_STR)
                rc = db_fail(db, AL_E_TOOBIG, "argv[%zu] is longer than %d bytes", i, AL_MAX_STR);
            else if (i == 0 && json_string_length(v) == 0)
                rc = db_fail(db, AL_E_INVAL, "argv[0] is empty");
        }
    }
    json_decref(j);
    return rc;
}

static int db_check_env(struct db *db, const char *s)
{
    json_t *j = NULL;
    int rc = db_json_load(db, "env", s, DB_ENV_JSON_MAX, &j);
    if (rc != AL_OK)
        return rc;
    if (!json_is_object(j)) {
        rc = db_fail(db, AL_E_INVAL, "env must be a JSON object of strings");
    } else if (json_object_size(j) > AL_MAX_ENV) {
        rc = db_fail(db, AL_E_TOOBIG, "env has %zu entries; at most %d", json_object_size(j),
                     AL_MAX_ENV);
    } else {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v)
        {
            if (k[0] == '\0' || strchr(k, '=')) {
                rc = db_fail(db, AL_E_INVAL, "env names must be non-empty and without '='");
                break;
            }
            if (!json_is_string(v)) {
                rc = db_fail(db, AL_E_INVAL, "env value of %.64s is not a string", k);
                break;
            }
            if (strlen(k) + 1 + json_string_length(v) > AL_MAX_STR) {
                rc = db_fail(db, AL_E_TOOBIG, "env entry %.64s is longer than %d bytes", k,
                             AL_MAX_STR);
                break;
            }
        }
    }
    json_decref(j);
    return rc;
}

static int db_check_detail(struct db *db, const char *s)
{
    json_t *j = NULL;
    int rc = db_json_load(db, "audit detail", s, DB_DETAIL_MAX, &j);
    if (rc != AL_OK)
        return rc;
    if (!json_is_object(j))
        rc = db_fail(db, AL_E_INVAL, "audit detail must be a JSON object");
    json_decref(j);
    return rc;
}

static bool db_action_valid(const char *s)
{
    if (!s || s[0] < 'a' || s[0] > 'z')
        return false;
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        char c = s[n];
        if (n >= DB_ACTION_MAX || !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    return true;
}

static int db_check_action(struct db *db, const char *s)
{
    if (db_action_valid(s))
        return AL_OK;
    return db_fail(db, AL_E_INVAL,
                   "audit action must be 1 to %d of a-z 0-9 _ starting with a letter",
                   DB_ACTION_MAX);
}

/* A static sandbox's URL: ws:// or wss://, then printable ASCII. */
static int db_check_url(struct db *db, const char *url)
{
    size_t n = 0;
    int rc = db_check_len(db, "sandbox url", url, DB_SANDBOX_URL_MAX, &n);
    if (rc != AL_OK)
        return rc;
    size_t skip = strncmp(url, "wss://", 6) == 0 ? 6 : strncmp(url, "ws://", 5) == 0 ? 5 : 0;
    if (skip == 0 || n == skip)
        return db_fail(db, AL_E_INVAL, "sandbox url must be ws://HOST... or wss://HOST...");
    for (size_t i = skip; i < n; i++)
        if (url[i] <= 0x20 || url[i] >= 0x7f)
            return db_fail(db, AL_E_INVAL, "sandbox url must be printable ASCII without spaces");
    return AL_OK;
}

/* ---- API keys ------------------------------------------------------------ */

/* hex(SHA-256(key text)) into hex[DB_HASH_HEX + 1]. */
static int db_key_hash(struct db *db, const char *key, char *hex)
{
    unsigned char md[DB_HASH_LEN];
    unsigned int mdlen = 0;
    if (EVP_Digest(key, strlen(key), md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != DB_HASH_LEN)
        return db_fail(db, AL_E_CRYPTO, "SHA-256 failed");
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < DB_HASH_LEN; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 0xf];
    }
    hex[DB_HASH_HEX] = '\0';
    return AL_OK;
}

/* Whether s is prefix (4 characters) + base64url of 32 bytes: the text
 * form of API keys, session secrets and CSRF tokens. Never echoes it. */
static bool db_secret_wellformed(const char *key, const char *prefix)
{
    size_t plen = strlen(prefix);
    if (!key || strnlen(key, DB_KEY_LEN + 1) != DB_KEY_LEN || strncmp(key, prefix, plen) != 0)
        return false;
    uint8_t raw[DB_KEY_RAW_LEN];
    size_t n = 0;
    int rc = b64u_decode(key + plen, DB_KEY_LEN - plen, raw, sizeof raw, &n);
    OPENSSL_cleanse(raw, sizeof raw);
    return rc == AL_OK && n == DB_KEY_RAW_LEN;
}

/* A new secret prefix + base64url(DB_KEY_RAW_LEN random bytes) into
 * out[DB_KEY_LEN + 1], and its hash into hex[DB_HASH_HEX + 1]. */
static int db_secret_new(struct db *db, const char *prefix, char *out, char *hex)
{
    uint8_t raw[DB_KEY_RAW_LEN];
    size_t plen = strlen(prefix);
    memcpy(out, prefix, plen + 1); /* with its NUL: out is a string at every step */
    int rc = AL_OK;
    if (RAND_bytes(raw, (int)sizeof raw) != 1)
        rc = db_fail(db, AL_E_CRYPTO, "no random bytes for a secret");
    else if (b64u_encode(raw, sizeof raw, out + plen, DB_KEY_LEN + 1 - plen, NULL) != AL_OK)
        rc = db_fail(db, AL_E_CRYPTO, "cannot encode a secret");
    else
        rc = db_key_hash(db, out, hex);
    OPENSSL_cleanse(raw, sizeof raw);
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
        free(db); /* a failed open leaves nothing behind */
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

/* ---- users ---------------------------------------------------------------- */

int db_user_add(struct db *db, const char *name, enum db_role role, char *key_out, size_t cap)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (key_out && cap > 0)
        key_out[0] = '\0';
    if ((rc = db_check_name(db, "user name", name)) != AL_OK)
        return rc;
    if (!db_role_name(role))
        return db_fail(db, AL_E_INVAL, "role must be admin, operator or viewer");
    if (!key_out || cap < DB_KEY_LEN + 1)
        return db_fail(db, AL_E_INVAL, "no room for the API key (%d bytes)", DB_KEY_LEN + 1);
    int64_t now = 0;
    if ((rc = db_now_or_fail(db, &now)) != AL_OK)
        return rc;

    char key[DB_KEY_LEN + 1], hex[DB_HASH_HEX + 1];
    rc = db_secret_new(db, DB_KEY_PREFIX, key, hex);
    if (rc == AL_OK)
        rc = db->be->user_add(db, name, role, hex, now);
    if (rc == AL_OK)
        memcpy(key_out, key, DB_KEY_LEN + 1);
    OPENSSL_cleanse(key, sizeof key);
    return rc;
}

int db_user_by_key(struct db *db, const char *key, struct db_user *out)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!out)
        return db_fail(db, AL_E_INVAL, "no output");
    if (!db_secret_wellformed(key, DB_KEY_PREFIX))
        return db_fail(db, AL_E_INVAL, "malformed API key (expected %s + %d base64url characters)",
                       DB_KEY_PREFIX, DB_KEY_LEN - (int)(sizeof DB_KEY_PREFIX - 1));
    char hex[DB_HASH_HEX + 1];
    if ((rc = db_key_hash(db, key, hex)) != AL_OK)
        return rc;
    return db->be->user_by_hash(db, hex, out);
}

int db_user_list(struct db *db, db_user_cb cb, void *ctx)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!cb)
        return db_fail(db, AL_E_INVAL, "no callback");
    return db->be->user_list(db, cb, ctx);
}

int db_user_remove(struct db *db, const char *name)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if ((rc = db_check_name(db, "user name", name)) != AL_OK)
        return rc;
    return db->be->user_remove(db, name);
}

/* ---- sandboxes ------------------------------------------------------------ */

int db_sandbox_create(struct db *db, const struct db_sandbox_spec *spec)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!spec)
        return db_fail(db, AL_E_INVAL, "no sandbox");
    struct db_sandbox_spec sp = *spec;
    if ((rc = db_check_name(db, "sandbox id", sp.id)) != AL_OK)
        return rc;
    if (!db_sandbox_kind_name(sp.kind))
        return db_fail(db, AL_E_INVAL, "sandbox kind must be local, static or reverse");
    if (sp.url && sp.url[0] == '\0')
        sp.url = NULL;
    if (sp.kind == DB_SANDBOX_STATIC && !sp.url)
        return db_fail(db, AL_E_INVAL, "a static sandbox needs a url");
    if (sp.kind != DB_SANDBOX_STATIC && sp.url)
        return db_fail(db, AL_E_INVAL, "only a static sandbox has a url");
    if (sp.url && (rc = db_check_url(db, sp.url)) != AL_OK)
        return rc;
    if (!db_sandbox_network_name(sp.network))
        return db_fail(db, AL_E_INVAL, "sandbox network must be default, host or none");
    if (sp.kind != DB_SANDBOX_LOCAL && sp.network != DB_NETWORK_DEFAULT)
        return db_fail(db, AL_E_INVAL,
                       "only a local sandbox has a network setting (airlockd starts its runner)");
    int64_t now = 0;
    if ((rc = db_now_or_fail(db, &now)) != AL_OK)
        return rc;
    return db->be->sandbox_add(db, &sp, now);
}

int db_sandbox_add(struct db *db, const char *id, enum db_sandbox_kind kind, const char *url)
{
    const struct db_sandbox_spec sp = {.id = id, .kind = kind, .url = url};
    return db_sandbox_create(db, &sp);
}

int db_sandbox_get(struct db *db, const char *id, struct db_sandbox *out)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!out)
        return db_fail(db, AL_E_INVAL, "no output");
    if ((rc = db_check_name(db, "sandbox id", id)) != AL_OK)
        return rc;
    return db->be->sandbox_get(db, id, out);
}

int db_sandbox_list(struct db *db, db_sandbox_cb cb, void *ctx)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!cb)
        return db_fail(db, AL_E_INVAL, "no callback");
    return db->be->sandbox_list(db, cb, ctx);
}

int db_sandbox_set_record_input(struct db *db, const char *id, bool on)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if ((rc = db_check_name(db, "sandbox id", id)) != AL_OK)
        return rc;
    return db->be->sandbox_set_record_input(db, id, on);
}

int db_sandbox_set_link(struct db *db, const char *id, bool up, int64_t since, int64_t rtt_us)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if ((rc = db_check_name(db, "sandbox id", id)) != AL_OK)
        return rc;
    if (since < 0)
        return db_fail(db, AL_E_INVAL, "link time must not be negative");
    if (rtt_us < -1)
        return db_fail(db, AL_E_INVAL, "rtt must be -1 (unknown) or more");
    return db->be->sandbox_set_link(db, id, up, since, rtt_us);
}

int db_sandbox_remove(struct db *db, const char *id)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if ((rc = db_check_name(db, "sandbox id", id)) != AL_OK)
        return rc;
    return db->be->sandbox_remove(db, id);
}

/* ---- terminals ------------------------------------------------------------ */

static int db_check_spec(struct db *db, const struct db_terminal_spec *s)
{
    int rc = db_check_name(db, "sandbox id", s->sandbox_id);
    if (rc != AL_OK)
        return rc;
    if (s->channel == 0)
        return db_fail(db, AL_E_INVAL, "channel must be 1 or more");
    if ((rc = db_check_argv(db, s->argv_json)) != AL_OK)
        return rc;
    if (s->cwd && (rc = db_check_text(db, "cwd", s->cwd, DB_CWD_MAX)) != AL_OK)
        return rc;
    if (s->env_json && (rc = db_check_env(db, s->env_json)) != AL_OK)
        return rc;
    if (s->cols < 1 || s->cols > AL_MAX_COLS || s->rows < 1 || s->rows > AL_MAX_ROWS)
        return db_fail(db, AL_E_INVAL, "terminal size must be 1..%d columns and 1..%d rows",
                       AL_MAX_COLS, AL_MAX_ROWS);
    if (!db_term_mode_name(s->mode))
        return db_fail(db, AL_E_INVAL, "mode must be pty or pipes");
    return AL_OK;
}

int db_terminal_add(struct db *db, const struct db_terminal_spec *spec, char *id_out, size_t cap)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (id_out && cap > 0)
        id_out[0] = '\0';
    if (!spec)
        return db_fail(db, AL_E_INVAL, "no terminal");
    if (!id_out || cap < DB_NAME_MAX + 1)
        return db_fail(db, AL_E_INVAL, "no room for the terminal id (%d bytes)", DB_NAME_MAX + 1);
    if ((rc = db_check_spec(db, spec)) != AL_OK)
        return rc;
    int64_t now = 0;
    if ((rc = db_now_or_fail(db, &now)) != AL_OK)
        return rc;

    uint8_t raw[DB_TERM_ID_RANDOM];
    if (RAND_bytes(raw, (int)sizeof raw) != 1)
        return db_fail(db, AL_E_CRYPTO, "no random bytes for the terminal id");
    char id[DB_NAME_MAX + 1];
    static const char digits[] = "0123456789abcdef";
    memcpy(id, DB_TERM_ID_PREFIX, DB_TERM_ID_PREFIX_LEN);
    for (size_t i = 0; i < sizeof raw; i++) {
        id[DB_TERM_ID_PREFIX_LEN + 2 * i] = digits[raw[i] >> 4];
        id[DB_TERM_ID_PREFIX_LEN + 2 * i + 1] = digits[raw[i] & 0xf];
    }
    id[DB_TERM_ID_PREFIX_LEN + 2 * sizeof raw] = '\0';

    struct db_terminal_spec s = *spec;
    if (!s.cwd)
        s.cwd = "";
    if (!s.env_json)
        s.env_json = "{}";
    if (!s.creator)
        s.creator = "";
    else if (s.creator[0] && (rc = db_check_name(db, "creator", s.creator)) != AL_OK)
        return rc;
    rc = db->be->terminal_add(db, id, &s, now);
    if (rc == AL_OK)
        (void)snprintf(id_out, cap, "%s", id); /* fits: cap > DB_NAME_MAX */
    return rc;
}

int db_terminal_get(struct db *db, const char *id, struct db_terminal *out)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!out)
        return db_fail(db, AL_E_INVAL, "no output");
    if ((rc = db_check_name(db, "terminal id", id)) != AL_OK)
        return rc;
    return db->be->terminal_get(db, id, out);
}

int db_terminal_list(struct db *db, const char *sandbox_id, db_terminal_cb cb, void *ctx)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!cb)
        return db_fail(db, AL_E_INVAL, "no callback");
    if (sandbox_id && (rc = db_check_name(db, "sandbox id", sandbox_id)) != AL_OK)
        return rc;
    return db->be->terminal_list(db, sandbox_id, cb, ctx);
}

static bool db_transition_ok(enum db_term_state from, enum db_term_state to)
{
    switch (to) {
    case DB_TERM_RUNNING:
        return from == DB_TERM_OPENING;
    case DB_TERM_EXITED:
        return from == DB_TERM_OPENING || from == DB_TERM_RUNNING;
    case DB_TERM_CLOSED:
        return from != DB_TERM_LOST && from != DB_TERM_CLOSED;
    case DB_TERM_LOST:
        return from != DB_TERM_CLOSED && from != DB_TERM_LOST;
    case DB_TERM_OPENING:
        break;
    }
    return false;
}

/* The current state (and exit status) of terminal id, read for a
 * compare-and-set. struct db_terminal is large (argv and env buffers), so
 * it lives on the heap for the read. */
static int db_term_read(struct db *db, const char *id, enum db_term_state *state, int *code,
                        int *signo)
{
    int rc = db_check_name(db, "terminal id", id);
    if (rc != AL_OK)
        return rc;
    struct db_terminal *t = malloc(sizeof *t);
    if (!t)
        return db_fail(db, AL_E_NOMEM, "out of memory");
    rc = db->be->terminal_get(db, id, t);
    if (rc == AL_OK) {
        *state = t->state;
        *code = t->exit_code;
        *signo = t->exit_signal;
    }
    free(t);
    return rc;
}

int db_terminal_set_state(struct db *db, const char *id, enum db_term_state state)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (state != DB_TERM_RUNNING && state != DB_TERM_CLOSED && state != DB_TERM_LOST)
        return db_fail(db, AL_E_INVAL,
                       "a terminal can be set running, closed or lost (exited: "
                       "db_terminal_set_exit)");
    enum db_term_state from = DB_TERM_OPENING;
    int code = 0, signo = 0;
    if ((rc = db_term_read(db, id, &from, &code, &signo)) != AL_OK)
        return rc;
    if (from == state)
        return AL_OK;
    if (!db_transition_ok(from, state))
        return db_fail(db, AL_E_STATE, "terminal %s is %s and cannot become %s", id,
                       db_term_state_name(from), db_term_state_name(state));
    int64_t now = 0;
    if ((rc = db_now_or_fail(db, &now)) != AL_OK)
        return rc;
    return db->be->terminal_cas_state(db, id, from, state, now);
}

int db_terminal_set_exit(struct db *db, const char *id, int code, int signo)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!((signo == 0 && code >= 0 && code <= 255) || (signo >= 1 && signo <= 127 && code == -1)))
        return db_fail(db, AL_E_INVAL,
                       "exit status must be a code 0..255 without signal, or signal 1..127 "
                       "with code -1");
    enum db_term_state from = DB_TERM_OPENING;
    int had_code = 0, had_signo = 0;
    if ((rc = db_term_read(db, id, &from, &had_code, &had_signo)) != AL_OK)
        return rc;
    if (from == DB_TERM_EXITED && had_code == code && had_signo == signo)
        return AL_OK; /* a repeated EXIT after a resume */
    if (!db_transition_ok(from, DB_TERM_EXITED))
        return db_fail(db, AL_E_STATE, "terminal %s is %s%s and cannot exit again", id,
                       db_term_state_name(from),
                       from == DB_TERM_EXITED ? " with another status" : "");
    int64_t now = 0;
    if ((rc = db_now_or_fail(db, &now)) != AL_OK)
        return rc;
    return db->be->terminal_cas_exit(db, id, from, code, signo, now);
}

int db_terminal_set_offsets(struct db *db, const char *id, uint64_t out_offset, uint64_t err_offset,
                            uint64_t rec_bytes)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if ((rc = db_check_name(db, "terminal id", id)) != AL_OK)
        return rc;
    if (out_offset > INT64_MAX || err_offset > INT64_MAX || rec_bytes > INT64_MAX)
        return db_fail(db, AL_E_TOOBIG, "offsets are limited to 2^63-1");
    return db->be->terminal_set_offsets(db, id, out_offset, err_offset, rec_bytes);
}

int db_terminal_remove(struct db *db, const char *id)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    enum db_term_state from = DB_TERM_OPENING;
    int code = 0, signo = 0;
    if ((rc = db_term_read(db, id, &from, &code, &signo)) != AL_OK)
        return rc;
    if (from != DB_TERM_CLOSED && from != DB_TERM_LOST)
        return db_fail(db, AL_E_STATE, "terminal %s is %s: close it before removing it", id,
                       db_term_state_name(from));
    return db->be->terminal_cas_remove(db, id, from);
}

/* ---- web sessions ------------------------------------------------------------ */

static int db_check_policy(struct db *db, const struct db_session_policy *p)
{
    if (!p || p->ttl_ms < 1 || p->ttl_ms > DB_SESSION_TTL_MAX_MS || p->idle_ms < 0 ||
        p->idle_ms > p->ttl_ms)
        return db_fail(db, AL_E_INVAL, "session lifetime must be 1 ms..30 days, idle 0..lifetime");
    return AL_OK;
}

int db_session_add(struct db *db, const char *user, int64_t now, const struct db_session_policy *p,
                   char *id_out, size_t id_cap, char *csrf_out, size_t csrf_cap)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (id_out && id_cap > 0)
        id_out[0] = '\0';
    if (csrf_out && csrf_cap > 0)
        csrf_out[0] = '\0';
    if ((rc = db_check_name(db, "user name", user)) != AL_OK ||
        (rc = db_check_policy(db, p)) != AL_OK)
        return rc;
    if (now < 0)
        return db_fail(db, AL_E_INVAL, "time before 1970");
    if (!id_out || id_cap < DB_SESSION_LEN + 1 || !csrf_out || csrf_cap < DB_SESSION_LEN + 1)
        return db_fail(db, AL_E_INVAL, "no room for the session (%d bytes each)",
                       DB_SESSION_LEN + 1);
    /* expired rows go first, so that they never count against the limit */
    if ((rc = db->be->session_expire(db, now, p->idle_ms)) != AL_OK)
        return rc;
    char id[DB_SESSION_LEN + 1], csrf[DB_SESSION_LEN + 1];
    char id_hex[DB_HASH_HEX + 1], csrf_hex[DB_HASH_HEX + 1];
    rc = db_secret_new(db, DB_SESSION_PREFIX, id, id_hex);
    if (rc == AL_OK)
        rc = db_secret_new(db, DB_CSRF_PREFIX, csrf, csrf_hex);
    if (rc == AL_OK)
        rc = db->be->session_add(db, id_hex, csrf_hex, user, now, now + p->ttl_ms,
                                 DB_SESSIONS_PER_USER_MAX);
    if (rc == AL_OK) {
        memcpy(id_out, id, DB_SESSION_LEN + 1);
        memcpy(csrf_out, csrf, DB_SESSION_LEN + 1);
    }
    OPENSSL_cleanse(id, sizeof id);
    OPENSSL_cleanse(csrf, sizeof csrf);
    return rc;
}

static bool db_session_expired(const struct db_session *s, int64_t now,
                               const struct db_session_policy *p)
{
    return now >= s->expires_at || (p->idle_ms > 0 && now - s->last_seen >= p->idle_ms);
}

int db_session_use(struct db *db, const char *id, const char *csrf, int64_t now,
                   const struct db_session_policy *p, struct db_session *out)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!out)
        return db_fail(db, AL_E_INVAL, "no output");
    if ((rc = db_check_policy(db, p)) != AL_OK)
        return rc;
    if (!db_secret_wellformed(id, DB_SESSION_PREFIX))
        return db_fail(db, AL_E_NOENT, "malformed session");
    char id_hex[DB_HASH_HEX + 1], csrf_hex[DB_HASH_HEX + 1], want[DB_HASH_HEX + 1];
    if ((rc = db_key_hash(db, id, id_hex)) != AL_OK ||
        (rc = db->be->session_get(db, id_hex, out, want)) != AL_OK)
        return rc;
    if (db_session_expired(out, now, p)) {
        (void)db->be->session_remove(db, id_hex);
        return db_fail(db, AL_E_NOENT, "session expired");
    }
    if (!db_secret_wellformed(csrf, DB_CSRF_PREFIX))
        return db_fail(db, AL_E_PERM, "session used without its CSRF token");
    if ((rc = db_key_hash(db, csrf, csrf_hex)) != AL_OK)
        return rc;
    if (CRYPTO_memcmp(csrf_hex, want, DB_HASH_HEX) != 0)
        return db_fail(db, AL_E_PERM, "session used with a wrong CSRF token");
    if ((rc = db->be->session_touch(db, id_hex, now)) != AL_OK)
        return rc;
    out->last_seen = now;
    return AL_OK;
}

int db_session_remove(struct db *db, const char *id)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!db_secret_wellformed(id, DB_SESSION_PREFIX))
        return db_fail(db, AL_E_NOENT, "malformed session");
    char hex[DB_HASH_HEX + 1];
    if ((rc = db_key_hash(db, id, hex)) != AL_OK)
        return rc;
    return db->be->session_remove(db, hex);
}

int db_session_expire(struct db *db, int64_t now, const struct db_session_policy *p)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if ((rc = db_check_policy(db, p)) != AL_OK)
        return rc;
    return db->be->session_expire(db, now, p->idle_ms);
}

/* ---- audit ---------------------------------------------------------------- */

int db_audit_add(struct db *db, int64_t at, const char *actor, const char *action,
                 const char *target, const char *detail_json)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (at < 0)
        return db_fail(db, AL_E_INVAL, "audit time must not be negative");
    if ((rc = db_check_name(db, "audit actor", actor)) != AL_OK)
        return rc;
    if ((rc = db_check_action(db, action)) != AL_OK)
        return rc;
    if (!target)
        target = "";
    if ((rc = db_check_text(db, "audit target", target, DB_TARGET_MAX)) != AL_OK)
        return rc;
    if (!detail_json)
        detail_json = "{}";
    if ((rc = db_check_detail(db, detail_json)) != AL_OK)
        return rc;
    if (at == 0 && (rc = db_now_or_fail(db, &at)) != AL_OK)
        return rc;
    return db->be->audit_add(db, at, actor, action, target, detail_json);
}

int db_audit_query(struct db *db, const struct db_audit_filter *f, db_audit_cb cb, void *ctx)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!f || !cb)
        return db_fail(db, AL_E_INVAL, "no filter or no callback");
    if (f->since < 0)
        return db_fail(db, AL_E_INVAL, "since must not be negative");
    if (f->actor && (rc = db_check_name(db, "audit actor", f->actor)) != AL_OK)
        return rc;
    if (f->action && (rc = db_check_action(db, f->action)) != AL_OK)
        return rc;
    if (f->limit == 0)
        return db_fail(db, AL_E_INVAL, "limit must be 1 or more");
    if (f->limit > DB_AUDIT_LIMIT_MAX)
        return db_fail(db, AL_E_TOOBIG, "limit must be at most %d", DB_AUDIT_LIMIT_MAX);
    return db->be->audit_query(db, f, cb, ctx);
}

int db_audit_prune(struct db *db, int64_t before_at, uint64_t keep_rows)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (before_at < 0)
        return db_fail(db, AL_E_INVAL, "audit retention time must not be negative");
    if (keep_rows > (uint64_t)INT64_MAX)
        return db_fail(db, AL_E_INVAL, "audit retention count too large");
    return db->be->audit_prune(db, before_at, keep_rows);
}
