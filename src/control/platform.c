/*
 * platform: see platform.h. fields[] is the table of a platform's
 * settings; the token cache is one slot per platform.
 */
#include "platform.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "b64url.h"
#include "secret.h"

#define KEY_PREFIX "platform."
#define JWT_PAYLOAD_MAX 6144 /* bytes of a decoded JWT payload we look into */

void platforms_init(struct platforms *p)
{
    memset(p, 0, sizeof *p);
}

void platforms_clear(struct platforms *p)
{
    OPENSSL_cleanse(p->tok, sizeof p->tok);
}

int platform_is_key(const char *key)
{
    return key && strncmp(key, KEY_PREFIX, strlen(KEY_PREFIX)) == 0;
}

int platform_name_valid(const char *name, size_t len)
{
    if (!name || len == 0 || len > PLATFORM_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static int parse_secs(const char *v, unsigned lo, unsigned hi, unsigned *out, char *why, size_t cap)
{
    char *end = NULL;
    unsigned long x = v[0] >= '0' && v[0] <= '9' ? strtoul(v, &end, 10) : 0;
    if (!end || *end || x < lo || x > hi) {
        al_errf(why, cap, "must be a whole number of seconds in %u..%u", lo, hi);
        return AL_E_INVAL;
    }
    *out = (unsigned)x;
    return AL_OK;
}

static int set_token_file(struct platform_def *d, const char *v, char *why, size_t cap)
{
    size_t n = strlen(v);
    if (n == 0 || v[0] != '/' || n >= sizeof d->token_file) {
        al_errf(why, cap, "must be an absolute path of at most %zu bytes",
                sizeof d->token_file - 1);
        return AL_E_INVAL;
    }
    memcpy(d->token_file, v, n + 1);
    return AL_OK;
}

static int set_token_command(struct platform_def *d, const char *v, char *why, size_t cap)
{
    size_t n = strlen(v);
    if (n == 0 || n > PLATFORM_COMMAND_MAX) {
        al_errf(why, cap, "must be a command of 1..%d bytes", PLATFORM_COMMAND_MAX);
        return AL_E_INVAL;
    }
    memcpy(d->token_command, v, n + 1);
    return AL_OK;
}

static int set_token_ttl(struct platform_def *d, const char *v, char *why, size_t cap)
{
    return parse_secs(v, 1, PLATFORM_MAX_TTL_S, &d->token_ttl_s, why, cap);
}

static int set_ping(struct platform_def *d, const char *v, char *why, size_t cap)
{
    return parse_secs(v, 1, PLATFORM_MAX_PING_S, &d->ping_s, why, cap);
}

/* The fields of a platform: the key after "platform.NAME.", its parser. */
static const struct {
    const char *name;
    int (*set)(struct platform_def *d, const char *v, char *why, size_t cap);
} fields[] = {
    {"token-file", set_token_file},
    {"token-command", set_token_command},
    {"token-ttl", set_token_ttl},
    {"ping-interval", set_ping},
};
#define NFIELDS (sizeof fields / sizeof fields[0])

int platform_set(struct platforms *p, const char *key, const char *value, char *why, size_t cap)
{
    if (!p || !key || !value || !platform_is_key(key)) {
        al_errf(why, cap, "%s: not a platform key", key ? key : "(none)");
        return AL_E_INVAL;
    }
    const char *name = key + strlen(KEY_PREFIX);
    const char *dot = strchr(name, '.');
    if (!dot || !platform_name_valid(name, (size_t)(dot - name))) {
        al_errf(why, cap, "%s: the key is platform.NAME.FIELD, NAME 1..%d of [a-z0-9_-]", key,
                PLATFORM_NAME_MAX);
        return AL_E_INVAL;
    }
    size_t nlen = (size_t)(dot - name);
    size_t f = 0;
    while (f < NFIELDS && strcmp(fields[f].name, dot + 1) != 0)
        f++;
    if (f == NFIELDS) {
        al_errf(why, cap, "%s: unknown field \"%s\" (docs/aca.md lists them)", key, dot + 1);
        return AL_E_INVAL;
    }
    unsigned i = 0, added = 0;
    while (i < p->n &&
           !(strlen(p->def[i].name) == nlen && strncmp(p->def[i].name, name, nlen) == 0))
        i++;
    if (i == p->n) {
        if (p->n == PLATFORM_MAX) {
            al_errf(why, cap, "%s: more than %d platforms", key, PLATFORM_MAX);
            return AL_E_LIMIT;
        }
        memset(&p->def[i], 0, sizeof p->def[i]);
        memcpy(p->def[i].name, name, nlen);
        p->n++;
        added = 1;
    }
    struct platform_def *d = &p->def[i];
    if (d->given & (1u << f)) {
        al_errf(why, cap, "%s: given twice", key);
        return AL_E_EXISTS;
    }
    char detail[256] = "";
    int rc = fields[f].set(d, value, detail, sizeof detail);
    if (rc != AL_OK) {
        if (added) /* a bad first line names no platform */
            p->n--;
        al_errf(why, cap, "%s: %s", key, detail);
        return rc;
    }
    d->given |= 1u << f;
    return AL_OK;
}

int platform_finish(struct platforms *p, char *why, size_t cap)
{
    for (unsigned i = 0; i < p->n; i++) {
        struct platform_def *d = &p->def[i];
        if (!!d->token_file[0] == !!d->token_command[0]) {
            al_errf(why, cap, "platform %s needs exactly one of token-file and token-command",
                    d->name);
            return AL_E_INVAL;
        }
        if (!d->token_ttl_s)
            d->token_ttl_s = PLATFORM_DEFAULT_TTL_S;
        if (!d->ping_s)
            d->ping_s = PLATFORM_DEFAULT_PING_S;
    }
    return AL_OK;
}

const struct platform_def *platform_find(const struct platforms *p, const char *name)
{
    for (unsigned i = 0; p && name && i < p->n; i++)
        if (strcmp(p->def[i].name, name) == 0)
            return &p->def[i];
    return NULL;
}

int64_t platform_token_exp(const char *token)
{
    const char *a = token ? strchr(token, '.') : NULL;
    const char *b = a ? strchr(a + 1, '.') : NULL;
    if (!b || (size_t)(b - a - 1) > JWT_PAYLOAD_MAX * 4 / 3)
        return 0;
    uint8_t *raw = malloc(JWT_PAYLOAD_MAX);
    size_t n = 0;
    int64_t exp = 0;
    if (raw && b64u_decode(a + 1, (size_t)(b - a - 1), raw, JWT_PAYLOAD_MAX, &n) == AL_OK) {
        json_error_t jerr;
        json_t *o = json_loadb((const char *)raw, n, JSON_REJECT_DUPLICATES, &jerr);
        json_t *e = o ? json_object_get(o, "exp") : NULL;
        if (json_is_integer(e) && json_integer_value(e) > 0)
            exp = (int64_t)json_integer_value(e);
        json_decref(o);
    }
    if (raw) {
        OPENSSL_cleanse(raw, JWT_PAYLOAD_MAX);
        free(raw);
    }
    return exp;
}

int platform_token(struct platforms *p, const char *name, int64_t now_ms, int64_t unix_s, char *out,
                   size_t cap, char *why, size_t wcap)
{
    const struct platform_def *d = platform_find(p, name);
    if (!d) {
        al_errf(why, wcap, "no platform %s in airlockd's --config", name ? name : "(none)");
        return AL_E_NOENT;
    }
    struct platform_token *t = &p->tok[d - p->def];
    if (!t->until_ms || now_ms >= t->until_ms) {
        char detail[512] = "", who[PLATFORM_NAME_MAX + 16];
        (void)snprintf(who, sizeof who, "platform %s", d->name);
        int rc = d->token_file[0] ? secret_read_file(d->token_file, t->value, sizeof t->value,
                                                     detail, sizeof detail)
                                  : secret_run_command(d->token_command, t->value, sizeof t->value,
                                                       who, "token-command", detail, sizeof detail);
        if (rc == AL_OK) {
            int64_t exp = platform_token_exp(t->value);
            int64_t until = now_ms + (int64_t)d->token_ttl_s * 1000;
            if (exp && exp <= unix_s) {
                al_errf(detail, sizeof detail, "its token expired %lld s ago",
                        (long long)(unix_s - exp));
                rc = AL_E_EXPIRED;
            } else if (exp) {
                /* shortly before its exp, or at once on the next use when
                 * it has less than the margin left */
                int64_t left = exp - unix_s - PLATFORM_EXP_MARGIN_S;
                int64_t by_exp = now_ms + (left > 0 ? left * 1000 : 1);
                if (by_exp < until)
                    until = by_exp;
            }
            t->until_ms = until;
        }
        if (rc != AL_OK) {
            OPENSSL_cleanse(t, sizeof *t);
            if (d->token_file[0] || rc == AL_E_EXPIRED)
                al_errf(why, wcap, "platform %s: %s", d->name, detail);
            else
                al_errf(why, wcap, "%s", detail);
            return rc;
        }
    }
    size_t n = strlen(t->value);
    if (n + 1 > cap)
        return AL_E_TOOBIG;
    memcpy(out, t->value, n + 1);
    return AL_OK;
}
