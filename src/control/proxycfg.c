/*
 * proxycfg: parsing and checking the credential proxy's upstreams.
 *
 * A key is "upstream.NAME.FIELD"; the fields are the rows of fields[]
 * below, each with the function that parses its value. An upstream comes
 * into being with the first key that names it. Values are checked here
 * (URL shape, numbers in range, names from fixed lists) so that a bad
 * config stops airlockd at start with the key in the message, never at
 * the first request.
 */
#include "proxycfg.h"

#include "al_err.h"
#include "db.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert((int)PROXY_NAME_MAX == (int)DB_PROXY_NAME_MAX,
               "one rule for upstream names (db_proxy_name_valid)");

#define KEY_PREFIX "upstream."

/* Largest number a numeric field takes (timeouts, counts); byte limits
 * take up to BYTES_MAX. */
#define NUM_MAX 100000000ull
#define BYTES_MAX (1ull << 50)

void proxycfg_init(struct proxycfg *c)
{
    memset(c, 0, sizeof *c);
}

int proxycfg_is_key(const char *key)
{
    return key && strncmp(key, KEY_PREFIX, strlen(KEY_PREFIX)) == 0;
}

/* ---- value parsers: one per kind of field ---- */

static int parse_u64(const char *v, uint64_t max, uint64_t *out)
{
    if (!v[0] || v[0] < '0' || v[0] > '9')
        return 0;
    uint64_t x = 0;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        x = x * 10 + (uint64_t)(*p - '0');
        if (x > max)
            return 0;
    }
    *out = x;
    return 1;
}

/* "https://host[:port][/path]" or "http://..." without query, fragment,
 * user info or spaces; the trailing '/' is dropped. */
static int set_url(struct proxy_upstream *u, const char *v, char *why, size_t cap)
{
    size_t n = strlen(v);
    int http = strncmp(v, "http://", 7) == 0;
    int https = strncmp(v, "https://", 8) == 0;
    if (!http && !https) {
        al_errf(why, cap, "must start with https:// (or http:// for tests)");
        return AL_E_INVAL;
    }
    if (n > PROXY_URL_MAX) {
        al_errf(why, cap, "longer than %d bytes", PROXY_URL_MAX);
        return AL_E_INVAL;
    }
    const char *host = v + (https ? 8 : 7);
    if (!*host || *host == '/') {
        al_errf(why, cap, "has no host");
        return AL_E_INVAL;
    }
    for (const char *p = v; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch <= ' ' || ch >= 0x7f || ch == '?' || ch == '#' || ch == '@' || ch == '\\') {
            al_errf(why, cap,
                    "has a character a base URL may not hold (space, control, ?, #, @ or \\)");
            return AL_E_INVAL;
        }
    }
    memcpy(u->url, v, n + 1);
    while (n > 0 && u->url[n - 1] == '/')
        u->url[--n] = '\0';
    u->insecure_http = http;
    return AL_OK;
}

struct word {
    const char *name;
    int value;
};

static const struct word kinds[] = {
    {"http", PROXY_KIND_HTTP},
    {"anthropic", PROXY_KIND_ANTHROPIC},
    {"openai", PROXY_KIND_OPENAI},
    {"git", PROXY_KIND_GIT},
};

static const struct word headers[] = {
    {"bearer", PROXY_HEADER_BEARER},
    {"x-api-key", PROXY_HEADER_XAPIKEY},
    {"basic", PROXY_HEADER_BASIC},
};

static const struct word methods[] = {
    {"GET", PROXY_M_GET},         {"HEAD", PROXY_M_HEAD},   {"POST", PROXY_M_POST},
    {"PUT", PROXY_M_PUT},         {"PATCH", PROXY_M_PATCH}, {"DELETE", PROXY_M_DELETE},
    {"OPTIONS", PROXY_M_OPTIONS},
};

#define NWORDS(t) (sizeof(t) / sizeof((t)[0]))

static int word_of(const struct word *t, size_t n, const char *s, size_t len, int *out)
{
    for (size_t i = 0; i < n; i++) {
        if (strlen(t[i].name) == len && strncmp(t[i].name, s, len) == 0) {
            *out = t[i].value;
            return 1;
        }
    }
    return 0;
}

const char *proxycfg_kind_name(enum proxy_kind k)
{
    for (size_t i = 0; i < NWORDS(kinds); i++)
        if (kinds[i].value == (int)k)
            return kinds[i].name;
    return "?";
}

unsigned proxycfg_method_bit(const char *method)
{
    int v = 0;
    if (method && word_of(methods, NWORDS(methods), method, strlen(method), &v))
        return (unsigned)v;
    return 0;
}

/* A value that must be one word of a table; `choices` says which, for the
 * reason. */
static int one_word(const struct word *t, size_t n, const char *v, const char *choices, int *out,
                    char *why, size_t cap)
{
    if (word_of(t, n, v, strlen(v), out))
        return AL_OK;
    al_errf(why, cap, "must be %s", choices);
    return AL_E_INVAL;
}

static int set_kind(struct proxy_upstream *u, const char *v, char *why, size_t cap)
{
    int k = 0;
    int rc = one_word(kinds, NWORDS(kinds), v, "anthropic, openai, git or http", &k, why, cap);
    u->kind = rc == AL_OK ? (enum proxy_kind)k : u->kind;
    return rc;
}

static int set_header(struct proxy_upstream *u, const char *v, char *why, size_t cap)
{
    int h = 0;
    int rc = one_word(headers, NWORDS(headers), v, "bearer, x-api-key or basic", &h, why, cap);
    u->header = rc == AL_OK ? (enum proxy_header)h : u->header;
    return rc;
}

static int set_path(char *dst, size_t dcap, const char *v, char *why, size_t cap)
{
    size_t n = strlen(v);
    if (n == 0 || v[0] != '/' || n >= dcap) {
        al_errf(why, cap, "must be an absolute path of at most %zu bytes", dcap - 1);
        return AL_E_INVAL;
    }
    memcpy(dst, v, n + 1);
    return AL_OK;
}

static int set_secret_file(struct proxy_upstream *u, const char *v, char *why, size_t cap)
{
    return set_path(u->secret_file, sizeof u->secret_file, v, why, cap);
}

static int set_ca_file(struct proxy_upstream *u, const char *v, char *why, size_t cap)
{
    return set_path(u->ca_file, sizeof u->ca_file, v, why, cap);
}

static int set_secret_command(struct proxy_upstream *u, const char *v, char *why, size_t cap)
{
    size_t n = strlen(v);
    if (n == 0 || n > PROXY_COMMAND_MAX) {
        al_errf(why, cap, "must be a command of 1..%d bytes", PROXY_COMMAND_MAX);
        return AL_E_INVAL;
    }
    memcpy(u->secret_command, v, n + 1);
    return AL_OK;
}

static int set_user(struct proxy_upstream *u, const char *v, char *why, size_t cap)
{
    size_t n = strlen(v);
    if (n == 0 || n > PROXY_USER_MAX || strchr(v, ':')) {
        al_errf(why, cap, "must be 1..%d bytes without ':'", PROXY_USER_MAX);
        return AL_E_INVAL;
    }
    memcpy(u->basic_user, v, n + 1);
    return AL_OK;
}

/* The next item of a comma-separated list at *rest, its spaces trimmed:
 * its start, its length in *n; *rest moves past it (NULL after the last). */
static const char *list_next(const char **rest, size_t *n)
{
    const char *p = *rest;
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    while (len > 0 && *p == ' ') {
        p++;
        len--;
    }
    while (len > 0 && p[len - 1] == ' ')
        len--;
    *rest = e ? e + 1 : NULL;
    *n = len;
    return p;
}

/* "/v1/,/other/": each an absolute path prefix, '/'-terminated (one is
 * added), without '.' or '..' segments, '%' or '\\'. */
static int set_paths(struct proxy_upstream *u, const char *v, char *why, size_t cap)
{
    u->nprefixes = 0;
    for (const char *rest = v; rest;) {
        size_t n;
        const char *p = list_next(&rest, &n);
        if (u->nprefixes == PROXY_MAX_PREFIXES) {
            al_errf(why, cap, "more than %d prefixes", PROXY_MAX_PREFIXES);
            return AL_E_INVAL;
        }
        char *dst = u->prefixes[u->nprefixes];
        if (n == 0 || p[0] != '/' || n + 1 > PROXY_PREFIX_MAX) {
            al_errf(why, cap, "each prefix must start with '/' and be at most %d bytes",
                    PROXY_PREFIX_MAX - 1);
            return AL_E_INVAL;
        }
        memcpy(dst, p, n);
        dst[n] = '\0';
        if (dst[n - 1] != '/') {
            dst[n] = '/';
            dst[n + 1] = '\0';
        }
        if (strstr(dst, "/./") || strstr(dst, "/../") || strchr(dst, '%') || strchr(dst, '\\') ||
            strchr(dst, '?') || strstr(dst, "//")) {
            al_errf(why, cap, "prefix %s holds '.', '..', '//', '%%', '?' or '\\'", dst);
            return AL_E_INVAL;
        }
        u->nprefixes++;
    }
    return AL_OK;
}

static int set_methods(struct proxy_upstream *u, const char *v, char *why, size_t cap)
{
    unsigned bits = 0;
    for (const char *rest = v; rest;) {
        size_t n;
        const char *p = list_next(&rest, &n);
        int m;
        if (!word_of(methods, NWORDS(methods), p, n, &m)) {
            al_errf(why, cap,
                    "methods are GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS "
                    "(upper case, comma-separated)");
            return AL_E_INVAL;
        }
        bits |= (unsigned)m;
    }
    u->methods = bits;
    return AL_OK;
}

#define NUM_SETTER(fn, field, lo, hi)                                                              \
    static int fn(struct proxy_upstream *u, const char *v, char *why, size_t cap)                  \
    {                                                                                              \
        uint64_t x;                                                                                \
        if (!parse_u64(v, (hi), &x) || x < (lo)) {                                                 \
            al_errf(why, cap, "must be an integer in %llu..%llu", (unsigned long long)(lo),        \
                    (unsigned long long)(hi));                                                     \
            return AL_E_INVAL;                                                                     \
        }                                                                                          \
        u->field = x;                                                                              \
        return AL_OK;                                                                              \
    }

NUM_SETTER(set_ttl, secret_ttl_s, 1, NUM_MAX)
NUM_SETTER(set_connect, connect_timeout_ms, 1, NUM_MAX)
NUM_SETTER(set_response, response_timeout_s, 1, NUM_MAX)
NUM_SETTER(set_rpm, rpm, 1, NUM_MAX)
NUM_SETTER(set_concurrent, concurrent, 1, 1024)
NUM_SETTER(set_max_body, max_body, 1, BYTES_MAX)
NUM_SETTER(set_max_bytes, max_bytes, 1, BYTES_MAX)

typedef int setter_fn(struct proxy_upstream *u, const char *v, char *why, size_t cap);

/* The fields of an upstream: the key after "upstream.NAME.", its parser,
 * and the bit that says it was given (each at most once). */
static const struct field {
    const char *name;
    setter_fn *set;
} fields[] = {
    {"url", set_url},
    {"kind", set_kind},
    {"header", set_header},
    {"user", set_user},
    {"secret-file", set_secret_file},
    {"secret-command", set_secret_command},
    {"secret-ttl", set_ttl},
    {"ca-file", set_ca_file},
    {"paths", set_paths},
    {"methods", set_methods},
    {"connect-timeout-ms", set_connect},
    {"response-timeout", set_response},
    {"requests-per-minute", set_rpm},
    {"concurrent", set_concurrent},
    {"max-body", set_max_body},
    {"max-bytes", set_max_bytes},
};

#define NFIELDS (sizeof fields / sizeof fields[0])

int proxycfg_set(struct proxycfg *c, const char *key, const char *value, char *why, size_t cap)
{
    if (!c || !key || !value)
        return AL_E_INVAL;
    if (!proxycfg_is_key(key)) {
        al_errf(why, cap, "%s: not an upstream key", key);
        return AL_E_INVAL;
    }
    const char *name = key + strlen(KEY_PREFIX);
    const char *dot = strchr(name, '.');
    if (!dot || !db_proxy_name_valid(name, (size_t)(dot - name))) {
        al_errf(why, cap, "%s: the key is upstream.NAME.FIELD, NAME 1..%d of [a-z0-9_-]", key,
                PROXY_NAME_MAX);
        return AL_E_INVAL;
    }
    size_t nlen = (size_t)(dot - name);
    const char *fname = dot + 1;
    size_t f = 0;
    while (f < NFIELDS && strcmp(fields[f].name, fname) != 0)
        f++;
    if (f == NFIELDS) {
        al_errf(why, cap, "%s: unknown field \"%s\" (docs/proxy.md lists them)", key, fname);
        return AL_E_INVAL;
    }
    unsigned i = 0;
    while (i < c->n && !(strlen(c->up[i].name) == nlen && strncmp(c->up[i].name, name, nlen) == 0))
        i++;
    if (i == c->n) {
        if (c->n == PROXY_MAX_UPSTREAMS) {
            al_errf(why, cap, "%s: more than %d upstreams", key, PROXY_MAX_UPSTREAMS);
            return AL_E_LIMIT;
        }
        memset(&c->up[i], 0, sizeof c->up[i]);
        memcpy(c->up[i].name, name, nlen);
        c->up[i].name[nlen] = '\0';
        c->n++;
    }
    struct proxy_upstream *u = &c->up[i];
    if (u->given & (1u << f)) {
        al_errf(why, cap, "%s: given twice", key);
        return AL_E_EXISTS;
    }
    char detail[256] = "";
    int rc = fields[f].set(u, value, detail, sizeof detail);
    if (rc != AL_OK) {
        al_errf(why, cap, "%s: %s", key, detail);
        return rc;
    }
    u->given |= 1u << f;
    return AL_OK;
}

int proxycfg_finish(struct proxycfg *c, char *why, size_t cap)
{
    if (!c)
        return AL_E_INVAL;
    for (unsigned i = 0; i < c->n; i++) {
        struct proxy_upstream *u = &c->up[i];
        if (!u->url[0]) {
            al_errf(why, cap, "upstream %s has no url", u->name);
            return AL_E_INVAL;
        }
        if (!!u->secret_file[0] == !!u->secret_command[0]) {
            al_errf(why, cap, "upstream %s needs exactly one of secret-file and secret-command",
                    u->name);
            return AL_E_INVAL;
        }
        if (u->basic_user[0] && u->header != PROXY_HEADER_BASIC) {
            al_errf(why, cap, "upstream %s: user is only for header = basic", u->name);
            return AL_E_INVAL;
        }
        if (u->header == PROXY_HEADER_BASIC && !u->basic_user[0])
            memcpy(u->basic_user, "x-access-token", sizeof "x-access-token");
        if (u->nprefixes == 0) {
            u->prefixes[0][0] = '/';
            u->prefixes[0][1] = '\0';
            u->nprefixes = 1;
        }
        if (u->methods == 0)
            u->methods = u->kind == PROXY_KIND_GIT ? (PROXY_M_GET | PROXY_M_POST)
                                                   : (PROXY_M_GET | PROXY_M_POST | PROXY_M_HEAD);
        if (!u->secret_ttl_s)
            u->secret_ttl_s = PROXY_DEFAULT_SECRET_TTL_S;
        if (!u->connect_timeout_ms)
            u->connect_timeout_ms = PROXY_DEFAULT_CONNECT_MS;
        if (!u->response_timeout_s)
            u->response_timeout_s = PROXY_DEFAULT_RESPONSE_TIMEOUT_S;
        if (!u->rpm)
            u->rpm = PROXY_DEFAULT_RPM;
        if (!u->concurrent)
            u->concurrent = PROXY_DEFAULT_CONCURRENT;
        if (!u->max_body)
            u->max_body = PROXY_DEFAULT_MAX_BODY;
        if (!u->max_bytes)
            u->max_bytes = PROXY_DEFAULT_MAX_BYTES;
    }
    return AL_OK;
}

const struct proxy_upstream *proxycfg_find(const struct proxycfg *c, const char *name)
{
    if (!c || !name)
        return NULL;
    for (unsigned i = 0; i < c->n; i++)
        if (strcmp(c->up[i].name, name) == 0)
            return &c->up[i];
    return NULL;
}
