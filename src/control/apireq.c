/*
 * apireq: airlockd's API request bodies, parsed with jansson and checked
 * member by member. See apireq.h for the JSON each function accepts.
 *
 * Data model: a body is parsed once into a jansson tree (held only during
 * the call), the members are checked in a fixed order (unknown members
 * first, then each field as listed in apireq.h), and the results copied
 * out. struct apireq_terminal owns heap copies of its strings and arrays,
 * all allocated with jansson's allocator (json_get_alloc_funcs), since
 * argv_json/env_json come from json_dumps: one free function for all.
 * Sizes are bytes of UTF-8 (jansson guarantees valid UTF-8 and gives each
 * string's length, so an embedded NUL is caught by comparing it with
 * strlen). Error reasons name the field as a JSON path: "argv"[2],
 * "env"."NAME".
 */
#include "apireq.h"

#include "al_err.h"
#include "al_limits.h"
#include "db.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    AR_PATH_MAX = APIREQ_SHOW_MAX + 32, /* a field path in a reason */
    AR_LOAD_FLAGS = JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY,
};

static int ar_fail(char *err, size_t cap, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Write the reason (one line) and return rc. */
static int ar_fail(char *err, size_t cap, int rc, const char *fmt, ...)
{
    if (err && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        if (vsnprintf(err, cap, fmt, ap) < 0)
            err[0] = '\0';
        va_end(ap);
    }
    return rc;
}

/* Body text for a reason: at most APIREQ_SHOW_MAX bytes of s[0..n), each
 * byte outside printable ASCII shown as '?', "..." if cut.
 * buf holds APIREQ_SHOW_MAX + 4 bytes. */
static const char *ar_show(const char *s, size_t n, char *buf)
{
    size_t m = n > APIREQ_SHOW_MAX ? APIREQ_SHOW_MAX : n;
    for (size_t i = 0; i < m; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (m < n) {
        memcpy(buf + m, "...", 3);
        m += 3;
    }
    buf[m] = '\0';
    return buf;
}

/* ---- memory (jansson's allocator) ------------------------------------------ */

static void *ar_alloc(size_t n)
{
    json_malloc_t m = NULL;
    json_free_t f = NULL;
    json_get_alloc_funcs(&m, &f);
    return m(n);
}

static void ar_free(void *p)
{
    json_malloc_t m = NULL;
    json_free_t f = NULL;
    json_get_alloc_funcs(&m, &f);
    if (p)
        f(p);
}

/* s[0..n) + NUL, in a new allocation. */
static char *ar_dup(const char *s, size_t n)
{
    char *p = ar_alloc(n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* An array of n + 1 NULL string pointers. */
static char **ar_vec(size_t n)
{
    char **v = ar_alloc((n + 1) * sizeof *v);
    if (v)
        memset(v, 0, (n + 1) * sizeof *v);
    return v;
}

static void ar_vec_free(char **v)
{
    if (!v)
        return;
    for (size_t i = 0; v[i]; i++)
        ar_free(v[i]);
    ar_free(v);
}

/* ---- parsing ------------------------------------------------------------- */

static bool ar_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
            return false;
    return true;
}

/* Parse body[0..len) into a JSON object (*out, the caller's to decref).
 * empty_ok: a blank body gives *out = NULL. */
static int ar_load(const char *body, size_t len, bool empty_ok, json_t **out, char *err, size_t cap)
{
    *out = NULL;
    if (!body && len > 0)
        return ar_fail(err, cap, AL_E_INVAL, "request body is missing");
    if (len > APIREQ_MAX_BODY)
        return ar_fail(err, cap, AL_E_TOOBIG, "request body is larger than %d bytes",
                       APIREQ_MAX_BODY);
    if (!body)
        body = "";
    if (ar_blank(body, len))
        return empty_ok ? AL_OK
                        : ar_fail(err, cap, AL_E_INVAL,
                                  "request body is empty (expected a JSON object)");
    json_error_t e;
    json_t *j = json_loadb(body, len, AR_LOAD_FLAGS, &e);
    if (!j) {
        /* jansson 2.14 returns without any error text when the lexer's
         * first buffer cannot be allocated. */
        if (json_error_code(&e) == json_error_out_of_memory || e.text[0] == '\0')
            return ar_fail(err, cap, AL_E_NOMEM, "out of memory");
        char show[APIREQ_SHOW_MAX + 4];
        return ar_fail(
            err, cap, AL_E_INVAL, "request body is not valid JSON: %s (line %d, column %d)",
            ar_show(e.text, strnlen(e.text, APIREQ_SHOW_MAX + 1), show), e.line, e.column);
    }
    if (!json_is_object(j)) {
        json_decref(j);
        return ar_fail(err, cap, AL_E_INVAL, "request body must be a JSON object");
    }
    *out = j;
    return AL_OK;
}

/* Every member of o is one of known[] (NULL-terminated). */
static int ar_members(json_t *o, const char *const *known, char *err, size_t cap)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        size_t i = 0;
        while (known[i] && strcmp(known[i], k) != 0)
            i++;
        if (!known[i]) {
            char show[APIREQ_SHOW_MAX + 4];
            return ar_fail(err, cap, AL_E_INVAL, "\"%s\": unknown member",
                           ar_show(k, strlen(k), show));
        }
    }
    return AL_OK;
}

/* v is a JSON string of min..max bytes without NUL: *s and *n. */
static int ar_str(const json_t *v, const char *path, size_t min, size_t max, const char **s,
                  size_t *n, char *err, size_t cap)
{
    const char *p = json_is_string(v) ? json_string_value(v) : NULL;
    if (!p)
        return ar_fail(err, cap, AL_E_INVAL, "%s: must be a string", path);
    size_t len = json_string_length(v);
    if (strlen(p) != len)
        return ar_fail(err, cap, AL_E_INVAL, "%s: must not contain a NUL byte", path);
    if (len > max)
        return ar_fail(err, cap, AL_E_TOOBIG, "%s: is longer than %zu bytes", path, max);
    if (len < min)
        return ar_fail(err, cap, AL_E_INVAL, "%s: must not be empty", path);
    *s = p;
    *n = len;
    return AL_OK;
}

/* An id member (sandbox ids): required, db_name_valid; copied to out. */
static int ar_id(const json_t *o, const char *name, char out[DB_NAME_MAX + 1], char *err,
                 size_t cap)
{
    const json_t *v = json_object_get(o, name);
    if (!v)
        return ar_fail(err, cap, AL_E_INVAL, "\"%s\": is required", name);
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    if (!s || strlen(s) != json_string_length(v) || !db_name_valid(s))
        return ar_fail(err, cap, AL_E_INVAL,
                       "\"%s\": must be 1 to %d of a-z 0-9 . _ - starting with a letter or digit",
                       name, DB_NAME_MAX);
    memcpy(out, s, json_string_length(v) + 1);
    return AL_OK;
}

/* An integer member in min..max; def when absent (required: refused). */
static int ar_int(const json_t *o, const char *name, bool required, long long min, long long max,
                  long long def, long long *out, char *err, size_t cap)
{
    const json_t *v = json_object_get(o, name);
    if (!v && required)
        return ar_fail(err, cap, AL_E_INVAL, "\"%s\": is required (an integer from %lld to %lld)",
                       name, min, max);
    if (!v) {
        *out = def;
        return AL_OK;
    }
    long long x = json_is_integer(v) ? (long long)json_integer_value(v) : min - 1;
    if (x < min || x > max)
        return ar_fail(err, cap, AL_E_INVAL, "\"%s\": must be an integer from %lld to %lld", name,
                       min, max);
    *out = x;
    return AL_OK;
}

/* ---- POST /v1/terminals ---------------------------------------------------- */

/* In the order they are checked (after the unknown ones). */
static const char *const ar_terminal_members[] = {
    "sandbox", "argv", "cwd", "env", "cols", "rows", "mode", "term", "record_input", "proxy", NULL,
};

static int ar_argv(const json_t *o, struct apireq_terminal *t, char *err, size_t cap)
{
    const json_t *a = json_object_get(o, "argv");
    if (!a)
        return ar_fail(err, cap, AL_E_INVAL,
                       "\"argv\": is required (a non-empty array of strings)");
    size_t n = json_is_array(a) ? json_array_size(a) : 0;
    if (n == 0)
        return ar_fail(err, cap, AL_E_INVAL, "\"argv\": must be a non-empty array of strings");
    if (n > AL_MAX_ARGV)
        return ar_fail(err, cap, AL_E_TOOBIG, "\"argv\": has %zu entries, at most %d", n,
                       AL_MAX_ARGV);
    for (size_t i = 0; i < n; i++) {
        char path[AR_PATH_MAX];
        (void)snprintf(path, sizeof path, "\"argv\"[%zu]", i);
        const char *s = NULL;
        size_t len = 0;
        int rc = ar_str(json_array_get(a, i), path, i == 0 ? 1 : 0, AL_MAX_STR, &s, &len, err, cap);
        if (rc != AL_OK)
            return rc;
    }
    t->argv_json = json_dumps(a, JSON_COMPACT);
    if (!t->argv_json)
        return ar_fail(err, cap, AL_E_NOMEM, "out of memory");
    size_t jn = strlen(t->argv_json);
    if (jn > DB_ARGV_JSON_MAX)
        return ar_fail(err, cap, AL_E_TOOBIG, "\"argv\": is %zu bytes as JSON, at most %d", jn,
                       DB_ARGV_JSON_MAX);
    t->argv = ar_vec(n);
    if (!t->argv)
        return ar_fail(err, cap, AL_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(a, i);
        t->argv[i] = ar_dup(json_string_value(v), json_string_length(v));
        if (!t->argv[i])
            return ar_fail(err, cap, AL_E_NOMEM, "out of memory");
    }
    t->argc = n;
    return AL_OK;
}

/* No control character: C0, DEL, or C1 (U+0080..U+009F, UTF-8 C2 80..C2 9F). */
static bool ar_no_controls(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return false;
        if (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] < 0xa0)
            return false;
    }
    return true;
}

static int ar_cwd(const json_t *o, struct apireq_terminal *t, char *err, size_t cap)
{
    const json_t *v = json_object_get(o, "cwd");
    const char *s = "";
    size_t n = 0;
    if (v) {
        int rc = ar_str(v, "\"cwd\"", 0, AL_MAX_STR, &s, &n, err, cap);
        if (rc != AL_OK)
            return rc;
        if (!ar_no_controls(s, n))
            return ar_fail(err, cap, AL_E_INVAL, "\"cwd\": must not contain control characters");
    }
    t->cwd = ar_dup(s, n);
    return t->cwd ? AL_OK : ar_fail(err, cap, AL_E_NOMEM, "out of memory");
}

/* [A-Za-z_][A-Za-z0-9_]* */
static bool ar_env_name_ok(const char *s)
{
    if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
        return false;
    for (size_t i = 1; s[i]; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

static int ar_cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int ar_env(const json_t *o, struct apireq_terminal *t, char *err, size_t cap)
{
    json_t *e = json_object_get(o, "env");
    if (!e) {
        t->env_json = ar_dup("{}", 2);
        t->env = ar_vec(0);
        return t->env_json && t->env ? AL_OK : ar_fail(err, cap, AL_E_NOMEM, "out of memory");
    }
    if (!json_is_object(e))
        return ar_fail(err, cap, AL_E_INVAL, "\"env\": must be an object of strings");
    size_t n = json_object_size(e);
    if (n > AL_MAX_ENV)
        return ar_fail(err, cap, AL_E_TOOBIG, "\"env\": has %zu entries, at most %d", n,
                       AL_MAX_ENV);
    const char *names[AL_MAX_ENV];
    size_t count = 0;
    const char *k;
    json_t *v;
    json_object_foreach(e, k, v)
    {
        char show[APIREQ_SHOW_MAX + 4];
        char path[AR_PATH_MAX];
        size_t kn = strlen(k);
        (void)snprintf(path, sizeof path, "\"env\".\"%s\"", ar_show(k, kn, show));
        if (!ar_env_name_ok(k))
            return ar_fail(err, cap, AL_E_INVAL, "%s: name must match [A-Za-z_][A-Za-z0-9_]*",
                           path);
        const char *s = NULL;
        size_t vn = 0;
        int rc = ar_str(v, path, 0, AL_MAX_STR, &s, &vn, err, cap);
        if (rc != AL_OK)
            return rc;
        if (kn + 1 + vn > AL_MAX_STR)
            return ar_fail(err, cap, AL_E_TOOBIG, "%s: \"NAME=value\" is longer than %d bytes",
                           path, AL_MAX_STR);
        if (count < AL_MAX_ENV)
            names[count++] = k;
    }
    t->env_json = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);
    if (!t->env_json)
        return ar_fail(err, cap, AL_E_NOMEM, "out of memory");
    size_t jn = strlen(t->env_json);
    if (jn > DB_ENV_JSON_MAX)
        return ar_fail(err, cap, AL_E_TOOBIG, "\"env\": is %zu bytes as JSON, at most %d", jn,
                       DB_ENV_JSON_MAX);
    /* The same order as JSON_SORT_KEYS (strcmp). */
    qsort(names, count, sizeof names[0], ar_cmp_names);
    t->env = ar_vec(count);
    if (!t->env)
        return ar_fail(err, cap, AL_E_NOMEM, "out of memory");
    for (size_t i = 0; i < count; i++) {
        const json_t *val = json_object_get(e, names[i]);
        size_t kn = strlen(names[i]);
        size_t vn = json_string_length(val);
        char *entry = ar_alloc(kn + 1 + vn + 1);
        if (!entry)
            return ar_fail(err, cap, AL_E_NOMEM, "out of memory");
        memcpy(entry, names[i], kn);
        entry[kn] = '=';
        memcpy(entry + kn + 1, json_string_value(val), vn);
        entry[kn + 1 + vn] = '\0';
        t->env[i] = entry;
    }
    t->envc = count;
    return AL_OK;
}

static int ar_mode(const json_t *o, struct apireq_terminal *t, char *err, size_t cap)
{
    const json_t *v = json_object_get(o, "mode");
    t->mode = DB_MODE_PTY;
    if (!v)
        return AL_OK;
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    if (!s || strlen(s) != json_string_length(v) || db_term_mode_parse(s, &t->mode) != AL_OK)
        return ar_fail(err, cap, AL_E_INVAL, "\"mode\": must be \"pty\" or \"pipes\"");
    return AL_OK;
}

static int ar_term(const json_t *o, struct apireq_terminal *t, char *err, size_t cap)
{
    const json_t *v = json_object_get(o, "term");
    const char *s = APIREQ_DEFAULT_TERM;
    size_t n = sizeof APIREQ_DEFAULT_TERM - 1;
    if (v) {
        int rc = ar_str(v, "\"term\"", 1, AL_MAX_TERM, &s, &n, err, cap);
        if (rc != AL_OK)
            return rc;
        for (size_t i = 0; i < n; i++)
            if (s[i] <= 0x20 || s[i] >= 0x7f)
                return ar_fail(err, cap, AL_E_INVAL,
                               "\"term\": must be printable ASCII without spaces");
    }
    memcpy(t->term, s, n);
    t->term[n] = '\0';
    return AL_OK;
}

static int ar_record(const json_t *o, struct apireq_terminal *t, char *err, size_t cap)
{
    const json_t *v = json_object_get(o, "record_input");
    t->record_input = true;
    if (!v)
        return AL_OK;
    if (!json_is_boolean(v))
        return ar_fail(err, cap, AL_E_INVAL, "\"record_input\": must be true or false");
    t->record_input = json_is_true(v);
    return AL_OK;
}

static int ar_proxy(const json_t *o, struct apireq_terminal *t, char *err, size_t cap)
{
    const json_t *a = json_object_get(o, "proxy");
    t->nproxy = 0;
    if (!a)
        return AL_OK;
    if (!json_is_array(a))
        return ar_fail(err, cap, AL_E_INVAL, "\"proxy\": must be an array of upstream names");
    size_t n = json_array_size(a);
    if (n > APIREQ_PROXY_MAX)
        return ar_fail(err, cap, AL_E_TOOBIG, "\"proxy\": has %zu entries, at most %d", n,
                       APIREQ_PROXY_MAX);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(a, i);
        const char *s = json_is_string(v) ? json_string_value(v) : NULL;
        size_t len = s ? json_string_length(v) : 0;
        if (!s || strlen(s) != len || !db_proxy_name_valid(s, len))
            return ar_fail(err, cap, AL_E_INVAL, "\"proxy\"[%zu]: must be 1 to %d of a-z 0-9 _ -",
                           i, DB_PROXY_NAME_MAX);
        for (size_t j = 0; j < t->nproxy; j++)
            if (strcmp(t->proxy[j], s) == 0)
                return ar_fail(err, cap, AL_E_INVAL, "\"proxy\"[%zu]: %s is named twice", i, s);
        memcpy(t->proxy[t->nproxy++], s, len + 1);
    }
    return AL_OK;
}

int apireq_terminal(const char *body, size_t len, struct apireq_terminal *out, char *err,
                    size_t cap)
{
    if (err && cap > 0)
        err[0] = '\0';
    if (!out)
        return ar_fail(err, cap, AL_E_INVAL, "no output structure");
    memset(out, 0, sizeof *out);
    json_t *o = NULL;
    int rc = ar_load(body, len, false, &o, err, cap);
    if (rc == AL_OK)
        rc = ar_members(o, ar_terminal_members, err, cap);
    if (rc == AL_OK)
        rc = ar_id(o, "sandbox", out->sandbox, err, cap);
    if (rc == AL_OK)
        rc = ar_argv(o, out, err, cap);
    if (rc == AL_OK)
        rc = ar_cwd(o, out, err, cap);
    if (rc == AL_OK)
        rc = ar_env(o, out, err, cap);
    long long cols = 0, rows = 0;
    if (rc == AL_OK)
        rc = ar_int(o, "cols", false, 1, AL_MAX_COLS, APIREQ_DEFAULT_COLS, &cols, err, cap);
    if (rc == AL_OK)
        rc = ar_int(o, "rows", false, 1, AL_MAX_ROWS, APIREQ_DEFAULT_ROWS, &rows, err, cap);
    out->cols = (uint16_t)cols;
    out->rows = (uint16_t)rows;
    if (rc == AL_OK)
        rc = ar_mode(o, out, err, cap);
    if (rc == AL_OK)
        rc = ar_term(o, out, err, cap);
    if (rc == AL_OK)
        rc = ar_record(o, out, err, cap);
    if (rc == AL_OK)
        rc = ar_proxy(o, out, err, cap);
    json_decref(o);
    if (rc != AL_OK)
        apireq_terminal_free(out);
    return rc;
}

void apireq_terminal_free(struct apireq_terminal *t)
{
    if (!t)
        return;
    ar_free(t->argv_json);
    ar_free(t->env_json);
    ar_free(t->cwd);
    ar_vec_free(t->argv);
    ar_vec_free(t->env);
    memset(t, 0, sizeof *t);
}

/* ---- POST /v1/sandboxes ------------------------------------------------------ */

static const char *const ar_sandbox_members[] = {"id",      "kind",     "url", "record_input",
                                                 "network", "platform", NULL};

static int ar_kind(const json_t *o, enum db_sandbox_kind *kind, char *err, size_t cap)
{
    const json_t *v = json_object_get(o, "kind");
    if (!v)
        return ar_fail(err, cap, AL_E_INVAL,
                       "\"kind\": is required (\"local\", \"static\", \"reverse\" or \"aca\")");
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    if (!s || strlen(s) != json_string_length(v) || db_sandbox_kind_parse(s, kind) != AL_OK)
        return ar_fail(err, cap, AL_E_INVAL,
                       "\"kind\": must be \"local\", \"static\", \"reverse\" or \"aca\"");
    return AL_OK;
}

static int ar_url(const json_t *o, struct apireq_sandbox *sb, char *err, size_t cap)
{
    const json_t *v = json_object_get(o, "url");
    const int aca = sb->kind == DB_SANDBOX_ACA;
    if (sb->kind != DB_SANDBOX_STATIC && !aca)
        return v ? ar_fail(err, cap, AL_E_INVAL, "\"url\": only a static or aca sandbox has a url")
                 : AL_OK;
    if (!v)
        return ar_fail(err, cap, AL_E_INVAL,
                       aca ? "\"url\": is required for an aca sandbox (its pool's endpoint)"
                           : "\"url\": is required for a static sandbox");
    const char *s = "";
    size_t n = 0;
    int rc = ar_str(v, "\"url\"", 0, DB_SANDBOX_URL_MAX, &s, &n, err, cap);
    if (rc != AL_OK)
        return rc;
    size_t skip = 0;
    if (aca)
        skip = strncmp(s, "https://", 8) == 0 ? 8 : strncmp(s, "http://", 7) == 0 ? 7 : 0;
    else
        skip = strncmp(s, "wss://", 6) == 0 ? 6 : strncmp(s, "ws://", 5) == 0 ? 5 : 0;
    if (skip == 0 || n == skip)
        return ar_fail(err, cap, AL_E_INVAL,
                       aca ? "\"url\": must be the pool's endpoint, https://HOST[/PATH]"
                           : "\"url\": must be ws://HOST... or wss://HOST...");
    for (size_t i = skip; i < n; i++)
        if (s[i] <= 0x20 || s[i] >= 0x7f || (aca && (s[i] == '?' || s[i] == '#')))
            return ar_fail(err, cap, AL_E_INVAL,
                           aca ? "\"url\": must be printable ASCII without spaces, query or "
                                 "fragment"
                               : "\"url\": must be printable ASCII without spaces");
    memcpy(sb->url, s, n + 1);
    return AL_OK;
}

/* An aca sandbox's platform: a name of airlockd's --config (the API
 * checks it is there); no other kind has one. */
static int ar_platform(const json_t *o, struct apireq_sandbox *sb, char *err, size_t cap)
{
    const json_t *v = json_object_get(o, "platform");
    if (sb->kind != DB_SANDBOX_ACA)
        return v ? ar_fail(err, cap, AL_E_INVAL, "\"platform\": only an aca sandbox has one")
                 : AL_OK;
    if (!v)
        return ar_fail(err, cap, AL_E_INVAL,
                       "\"platform\": is required for an aca sandbox (a platform of "
                       "airlockd's --config)");
    const char *s = "";
    size_t n = 0;
    int rc = ar_str(v, "\"platform\"", 1, DB_PLATFORM_MAX, &s, &n, err, cap);
    if (rc != AL_OK)
        return rc;
    if (strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") != n)
        return ar_fail(err, cap, AL_E_INVAL, "\"platform\": must be of [a-z0-9_-]");
    memcpy(sb->platform, s, n + 1);
    return AL_OK;
}

/* "host" or "none", for a local sandbox only; absent: the default. */
static int ar_network(const json_t *o, struct apireq_sandbox *sb, char *err, size_t cap)
{
    const json_t *v = json_object_get(o, "network");
    sb->network = DB_NETWORK_DEFAULT;
    if (!v)
        return AL_OK;
    if (sb->kind != DB_SANDBOX_LOCAL)
        return ar_fail(err, cap, AL_E_INVAL,
                       "\"network\": only a local sandbox has one (airlockd does not start the "
                       "runners of static and reverse sandboxes)");
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    enum db_sandbox_network n = DB_NETWORK_DEFAULT;
    if (!s || strlen(s) != json_string_length(v) || db_sandbox_network_parse(s, &n) != AL_OK ||
        n == DB_NETWORK_DEFAULT)
        return ar_fail(err, cap, AL_E_INVAL, "\"network\": must be \"host\" or \"none\"");
    sb->network = n;
    return AL_OK;
}

int apireq_sandbox(const char *body, size_t len, struct apireq_sandbox *out, char *err, size_t cap)
{
    if (err && cap > 0)
        err[0] = '\0';
    if (!out)
        return ar_fail(err, cap, AL_E_INVAL, "no output structure");
    memset(out, 0, sizeof *out);
    json_t *o = NULL;
    int rc = ar_load(body, len, false, &o, err, cap);
    if (rc == AL_OK)
        rc = ar_members(o, ar_sandbox_members, err, cap);
    if (rc == AL_OK)
        rc = ar_id(o, "id", out->id, err, cap);
    if (rc == AL_OK)
        rc = ar_kind(o, &out->kind, err, cap);
    if (rc == AL_OK)
        rc = ar_url(o, out, err, cap);
    if (rc == AL_OK)
        rc = ar_network(o, out, err, cap);
    if (rc == AL_OK)
        rc = ar_platform(o, out, err, cap);
    const json_t *rec = o ? json_object_get(o, "record_input") : NULL;
    if (rc == AL_OK && rec && !json_is_boolean(rec))
        rc = ar_fail(err, cap, AL_E_INVAL, "\"record_input\": must be true or false");
    out->record_input = rc == AL_OK && json_is_true(rec);
    json_decref(o);
    if (rc != AL_OK)
        memset(out, 0, sizeof *out);
    return rc;
}

/* ---- POST /v1/terminals/{id}/resize ------------------------------------------ */

static const char *const ar_resize_members[] = {"cols", "rows", NULL};

int apireq_resize(const char *body, size_t len, uint16_t *cols, uint16_t *rows, char *err,
                  size_t cap)
{
    if (err && cap > 0)
        err[0] = '\0';
    if (!cols || !rows)
        return ar_fail(err, cap, AL_E_INVAL, "no output");
    json_t *o = NULL;
    long long c = 0, r = 0;
    int rc = ar_load(body, len, false, &o, err, cap);
    if (rc == AL_OK)
        rc = ar_members(o, ar_resize_members, err, cap);
    if (rc == AL_OK)
        rc = ar_int(o, "cols", true, 1, AL_MAX_COLS, 0, &c, err, cap);
    if (rc == AL_OK)
        rc = ar_int(o, "rows", true, 1, AL_MAX_ROWS, 0, &r, err, cap);
    json_decref(o);
    if (rc == AL_OK) {
        *cols = (uint16_t)c;
        *rows = (uint16_t)r;
    }
    return rc;
}

/* ---- POST /v1/terminals/{id}/signal ------------------------------------------ */

static const char *const ar_signal_members[] = {"signal", NULL};

/* The signals the protocol carries (fr_signal_ok), Linux numbers. */
static const struct {
    const char *name;
    unsigned signo;
} ar_signals[] = {
    {"HUP", 1},   {"INT", 2},   {"QUIT", 3},  {"KILL", 9},  {"USR1", 10},  {"USR2", 12},
    {"TERM", 15}, {"CONT", 18}, {"STOP", 19}, {"TSTP", 20}, {"WINCH", 28},
};

int apireq_signal(const char *body, size_t len, unsigned *signo, char *err, size_t cap)
{
    if (err && cap > 0)
        err[0] = '\0';
    if (!signo)
        return ar_fail(err, cap, AL_E_INVAL, "no output");
    json_t *o = NULL;
    int rc = ar_load(body, len, true, &o, err, cap);
    if (rc == AL_OK && o)
        rc = ar_members(o, ar_signal_members, err, cap);
    const json_t *v = o ? json_object_get(o, "signal") : NULL;
    unsigned found = APIREQ_DEFAULT_SIGNAL;
    if (rc == AL_OK && v) {
        const char *s = json_is_string(v) ? json_string_value(v) : NULL;
        found = 0;
        for (size_t i = 0; s && strlen(s) == json_string_length(v) &&
                           i < sizeof ar_signals / sizeof ar_signals[0];
             i++)
            if (strcmp(ar_signals[i].name, s) == 0)
                found = ar_signals[i].signo;
        if (found == 0)
            rc = ar_fail(err, cap, AL_E_INVAL,
                         "\"signal\": must be one of HUP INT QUIT KILL USR1 USR2 TERM CONT STOP "
                         "TSTP WINCH");
    }
    json_decref(o);
    if (rc == AL_OK)
        *signo = found;
    return rc;
}

/* ---- POST /v1/sandboxes/{id}/enroll ------------------------------------------ */

static const char *const ar_enroll_members[] = {"ttl", NULL};

int apireq_enroll(const char *body, size_t len, unsigned *ttl_s, char *err, size_t cap)
{
    if (err && cap > 0)
        err[0] = '\0';
    if (!ttl_s)
        return ar_fail(err, cap, AL_E_INVAL, "no output");
    json_t *o = NULL;
    long long ttl = APIREQ_ENROLL_TTL_DEFAULT;
    int rc = ar_load(body, len, true, &o, err, cap);
    if (rc == AL_OK && o)
        rc = ar_members(o, ar_enroll_members, err, cap);
    if (rc == AL_OK && o)
        rc = ar_int(o, "ttl", false, APIREQ_ENROLL_TTL_MIN, APIREQ_ENROLL_TTL_MAX,
                    APIREQ_ENROLL_TTL_DEFAULT, &ttl, err, cap);
    json_decref(o);
    if (rc == AL_OK)
        *ttl_s = (unsigned)ttl;
    return rc;
}
