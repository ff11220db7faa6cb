/*
 * proxyenv: a terminal's environment for the credential proxy
 * (proxyenv.h). The variables each kind of upstream sets are the rows of
 * kind_vars[]; git's configuration goes through GIT_CONFIG_COUNT and its
 * numbered pairs (git 2.31 and later read them), counted as they come.
 */
#include "proxyenv.h"

#include "al_err.h"

#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PROXYENV_URL_VAR "AIRLOCK_PROXY_URL"
#define PROXYENV_TOKEN_VAR "AIRLOCK_PROXY_TOKEN"

/* What a kind of upstream sets besides the AIRLOCK_PROXY_* pair: its base
 * URL through the proxy and the credential, under a second name too where
 * an agent reads another (Codex's `exec` reads CODEX_API_KEY, not
 * OPENAI_API_KEY); git: see add_git. */
static const struct {
    enum proxy_kind kind;
    const char *url_var;
    const char *token_var;
    const char *token_var2; /* NULL: none */
} kind_vars[] = {
    {PROXY_KIND_ANTHROPIC, "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", NULL},
    {PROXY_KIND_OPENAI, "OPENAI_BASE_URL", "OPENAI_API_KEY", "CODEX_API_KEY"},
};

/* Append "NAME=value" (printf-style value). AL_E_TOOBIG past the limits. */
__attribute__((format(printf, 3, 4))) static int add(struct proxyenv *pe, const char *name,
                                                     const char *fmt, ...)
{
    if (pe->n >= PROXYENV_VARS_MAX)
        return AL_E_TOOBIG;
    size_t room = sizeof pe->buf - pe->used;
    int k = snprintf(pe->buf + pe->used, room, "%s=", name);
    if (k < 0 || (size_t)k >= room)
        return AL_E_TOOBIG;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(pe->buf + pe->used + k, room - (size_t)k, fmt, ap);
    va_end(ap);
    if (m < 0 || (size_t)k + (size_t)m >= room)
        return AL_E_TOOBIG;
    pe->vars[pe->n++] = pe->buf + pe->used;
    pe->used += (size_t)k + (size_t)m + 1;
    return AL_OK;
}

/* Whether a variable called name (the text before '=' of s) is set yet. */
static int has_var(const struct proxyenv *pe, const char *name, size_t len)
{
    for (size_t i = 0; i < pe->n; i++)
        if (strncmp(pe->vars[i], name, len) == 0 && pe->vars[i][len] == '=')
            return 1;
    return 0;
}

static int base_ok(const char *base)
{
    size_t n = base ? strnlen(base, PROXYENV_BASE_MAX + 1) : 0;
    if (n == 0 || n > PROXYENV_BASE_MAX || base[n - 1] == '/')
        return 0;
    if (strncmp(base, "http://", 7) != 0 && strncmp(base, "https://", 8) != 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)base[i] <= 0x20 || (unsigned char)base[i] >= 0x7f)
            return 0;
    return 1;
}

/* git: the upstream's URL rewritten to the proxy's, and the credential
 * sent to the proxy's URL only. *ngit counts the pairs so far. */
static int add_git(struct proxyenv *pe, const struct proxy_upstream *up, const char *base,
                   const char *cred, unsigned *ngit)
{
    char key[32];
    int rc = AL_OK;
    (void)snprintf(key, sizeof key, "GIT_CONFIG_KEY_%u", *ngit);
    rc = add(pe, key, "url.%s/%s/.insteadOf", base, up->name);
    (void)snprintf(key, sizeof key, "GIT_CONFIG_VALUE_%u", *ngit);
    if (rc == AL_OK)
        rc = add(pe, key, "%s/", up->url);
    (void)snprintf(key, sizeof key, "GIT_CONFIG_KEY_%u", *ngit + 1);
    if (rc == AL_OK)
        rc = add(pe, key, "http.%s/%s/.extraHeader", base, up->name);
    (void)snprintf(key, sizeof key, "GIT_CONFIG_VALUE_%u", *ngit + 1);
    if (rc == AL_OK)
        rc = add(pe, key, "Authorization: Bearer %s", cred);
    *ngit += 2;
    return rc;
}

static int add_kind(struct proxyenv *pe, const struct proxy_upstream *up, const char *base,
                    const char *cred, char *why, size_t cap)
{
    for (size_t i = 0; i < sizeof kind_vars / sizeof kind_vars[0]; i++) {
        if (kind_vars[i].kind != up->kind)
            continue;
        if (has_var(pe, kind_vars[i].url_var, strlen(kind_vars[i].url_var))) {
            al_errf(why, cap, "upstream %s: another upstream of kind %s sets %s already", up->name,
                    proxycfg_kind_name(up->kind), kind_vars[i].url_var);
            return AL_E_INVAL;
        }
        int rc = add(pe, kind_vars[i].url_var, "%s/%s", base, up->name);
        if (rc == AL_OK)
            rc = add(pe, kind_vars[i].token_var, "%s", cred);
        if (rc == AL_OK && kind_vars[i].token_var2)
            rc = add(pe, kind_vars[i].token_var2, "%s", cred);
        return rc;
    }
    return AL_OK; /* http: nothing of its own */
}

int proxyenv_build(const struct proxycfg *cfg, const char *const *names, size_t n, const char *base,
                   const char *cred, struct proxyenv *out, char *why, size_t cap)
{
    if (why && cap)
        why[0] = '\0';
    if (!out)
        return AL_E_INVAL;
    out->n = 0;
    out->used = 0;
    if (!cfg || !cred || (n && !names) || n > PROXY_MAX_UPSTREAMS) {
        al_errf(why, cap, "bad arguments");
        return AL_E_INVAL;
    }
    if (!base_ok(base)) {
        al_errf(why, cap,
                "the proxy's URL must be http:// or https://, printable, without a "
                "trailing /, at most %d bytes",
                PROXYENV_BASE_MAX);
        return AL_E_INVAL;
    }
    if (n == 0)
        return AL_OK;
    int rc = add(out, PROXYENV_URL_VAR, "%s", base);
    if (rc == AL_OK)
        rc = add(out, PROXYENV_TOKEN_VAR, "%s", cred);
    unsigned ngit = 0;
    for (size_t i = 0; i < n && rc == AL_OK; i++) {
        const struct proxy_upstream *up = names[i] ? proxycfg_find(cfg, names[i]) : NULL;
        if (!up) {
            al_errf(why, cap, "no upstream \"%.*s\" in airlockd's configuration", PROXY_NAME_MAX,
                    names[i] ? names[i] : "");
            rc = AL_E_NOENT;
        } else if (up->kind == PROXY_KIND_GIT) {
            rc = add_git(out, up, base, cred, &ngit);
        } else {
            rc = add_kind(out, up, base, cred, why, cap);
        }
    }
    if (rc == AL_OK && ngit)
        rc = add(out, "GIT_CONFIG_COUNT", "%u", ngit);
    if (rc == AL_E_TOOBIG)
        al_errf(why, cap, "the proxy's variables are over %d bytes", PROXYENV_BUF_MAX);
    if (rc != AL_OK)
        proxyenv_clear(out);
    return rc;
}

int proxyenv_clash(const struct proxyenv *pe, char *const *env, size_t envc, char *name, size_t cap)
{
    for (size_t i = 0; i < envc; i++) {
        const char *eq = env[i] ? strchr(env[i], '=') : NULL;
        size_t len = eq ? (size_t)(eq - env[i]) : 0;
        if (len && has_var(pe, env[i], len)) {
            if (name && cap)
                (void)snprintf(name, cap, "%.*s", (int)len, env[i]);
            return 1;
        }
    }
    return 0;
}

void proxyenv_clear(struct proxyenv *pe)
{
    if (!pe)
        return;
    OPENSSL_cleanse(pe->buf, sizeof pe->buf);
    memset(pe->vars, 0, sizeof pe->vars);
    pe->n = 0;
    pe->used = 0;
}
