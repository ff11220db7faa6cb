/*
 * proxyenv: the environment a terminal gets for the credential proxy's
 * upstreams it may call (docs/proxy.md, "What a terminal gets"): the
 * variables its agents read to find the proxy and the credential to show
 * it. Control plane only (al_control). Pure: no I/O, no clock, no global
 * state.
 *
 * For each upstream, by its kind (a table in proxyenv.c):
 *   anthropic  ANTHROPIC_BASE_URL=BASE/NAME, ANTHROPIC_AUTH_TOKEN=CRED
 *   openai     OPENAI_BASE_URL=BASE/NAME, OPENAI_API_KEY=CRED, CODEX_API_KEY=CRED
 *   git        through GIT_CONFIG_COUNT / GIT_CONFIG_KEY_i / _VALUE_i:
 *              url.BASE/NAME/.insteadOf = URL/ (so that `git clone URL/x`
 *              goes through the proxy unchanged) and
 *              http.BASE/NAME/.extraHeader = Authorization: Bearer CRED
 *              (sent to the proxy's URL only)
 *   http       nothing of its own
 * and for every terminal with at least one upstream AIRLOCK_PROXY_URL=BASE
 * and AIRLOCK_PROXY_TOKEN=CRED, where BASE is the proxy's root as the
 * sandbox reaches it ("http://127.0.0.1:8090/v1/proxy"), NAME the
 * upstream's name, URL its configured base URL, CRED the terminal's
 * credential. Never the real secret: proxycfg holds none.
 *
 * Data model: a proxyenv is a fixed buffer of NUL-terminated "NAME=value"
 * strings and the list of them, in the order above (upstreams in the
 * order given). It holds the credential: proxyenv_clear wipes it.
 */
#ifndef AL_PROXYENV_H
#define AL_PROXYENV_H

#include "proxycfg.h"

#include <stddef.h>

enum {
    PROXYENV_BASE_MAX = 256, /* bytes of the proxy's root URL */
    /* AIRLOCK_PROXY_*, 4 git variables or at most 3 others per upstream, GIT_CONFIG_COUNT */
    PROXYENV_VARS_MAX = 2 + 4 * PROXY_MAX_UPSTREAMS + 1,
    PROXYENV_BUF_MAX = 64 * 1024, /* bytes of all the strings */
};

struct proxyenv {
    size_t n;
    const char *vars[PROXYENV_VARS_MAX]; /* "NAME=value", into buf */
    char buf[PROXYENV_BUF_MAX];
    size_t used;
};

/* The variables for the n upstreams named (each once). base: the proxy's
 * root, http:// or https://, no trailing '/', at most PROXYENV_BASE_MAX
 * bytes. AL_E_NOENT naming the first upstream cfg does not have;
 * AL_E_INVAL when two upstreams would set the same variable (two of kind
 * anthropic, say) or for a bad base; the reason never holds cred. */
int proxyenv_build(const struct proxycfg *cfg, const char *const *names, size_t n, const char *base,
                   const char *cred, struct proxyenv *out, char *why, size_t cap);

/* 1 and the variable's name (into name, cap bytes) when one of the envc
 * "NAME=value" strings of env sets a variable pe sets too; else 0. */
int proxyenv_clash(const struct proxyenv *pe, char *const *env, size_t envc, char *name,
                   size_t cap);

/* Wipe the strings (they hold the credential). */
void proxyenv_clear(struct proxyenv *pe);

#endif
