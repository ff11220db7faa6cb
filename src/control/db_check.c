/*
 * db_check: the checks the data layer's public calls make on their inputs
 * before a backend sees them (db_check.h). Not here: the names' alphabet
 * (db_name_valid, db.c), secrets (db_secret.c), and the rules of one call
 * only (a terminal's spec, a session policy: with their calls).
 *
 * Data model: each check takes what it names in its message ("sandbox
 * id", "cwd") and returns AL_OK, or a negative AL_E_* with db->msg set by
 * db_fail (AL_E_TOOBIG for a size over its limit, AL_E_INVAL otherwise):
 *   JSON        argv: an array of 1..AL_MAX_ARGV strings; env: an object of
 *               at most AL_MAX_ENV strings, names without '='; each string,
 *               and each "NAME=value", at most AL_MAX_STR bytes; an audit
 *               detail: an object. Duplicate keys are refused (jansson);
 *   free text   (cwd, audit target) valid UTF-8 without control characters;
 *   actions     [a-z][a-z0-9_]*, at most DB_ACTION_MAX;
 *   urls        a static sandbox's: ws:// or wss://, then printable ASCII.
 */
#include "db_check.h"

#include "al_err.h"
#include "al_limits.h"
#include "db_backend.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* A name argument: NULL, empty, too long or outside the alphabet. */
int db_check_name(struct db *db, const char *what, const char *s)
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

int db_check_text(struct db *db, const char *what, const char *s, size_t max)
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

int db_check_argv(struct db *db, const char *s)
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

int db_check_env(struct db *db, const char *s)
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

int db_check_detail(struct db *db, const char *s)
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

int db_check_action(struct db *db, const char *s)
{
    if (db_action_valid(s))
        return AL_OK;
    return db_fail(db, AL_E_INVAL,
                   "audit action must be 1 to %d of a-z 0-9 _ starting with a letter",
                   DB_ACTION_MAX);
}

/* The two kinds of sandbox URL, as a table: their schemes, what their
 * text may not hold beyond spaces and controls, and the reasons. */
static const struct url_rule {
    const char *what; /* for the length's reason */
    const char *schemes[2];
    const char *banned; /* characters refused after the scheme */
    const char *bad_scheme, *bad_char;
} url_rules[] = {
    {"sandbox url",
     {"wss://", "ws://"},
     "",
     "sandbox url must be ws://HOST... or wss://HOST...",
     "sandbox url must be printable ASCII without spaces"},
    {"pool endpoint",
     {"https://", "http://"},
     "?#",
     "an aca sandbox's url is its pool's endpoint: https://HOST[/PATH]",
     "a pool endpoint is printable ASCII without spaces, query or fragment"},
};

static int check_url_by(struct db *db, const struct url_rule *u, const char *url)
{
    size_t n = 0;
    int rc = db_check_len(db, u->what, url, DB_SANDBOX_URL_MAX, &n);
    if (rc != AL_OK)
        return rc;
    size_t skip = 0;
    for (size_t i = 0; i < 2 && !skip; i++)
        if (strncmp(url, u->schemes[i], strlen(u->schemes[i])) == 0)
            skip = strlen(u->schemes[i]);
    if (skip == 0 || n == skip)
        return db_fail(db, AL_E_INVAL, "%s", u->bad_scheme);
    for (size_t i = skip; i < n; i++)
        if (url[i] <= 0x20 || url[i] >= 0x7f || strchr(u->banned, url[i]))
            return db_fail(db, AL_E_INVAL, "%s", u->bad_char);
    return AL_OK;
}

int db_check_url(struct db *db, const char *url)
{
    return check_url_by(db, &url_rules[0], url);
}

int db_check_endpoint(struct db *db, const char *url)
{
    return check_url_by(db, &url_rules[1], url);
}
