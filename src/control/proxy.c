/*
 * proxy: the credential proxy's owner (proxy.h): the gate each agent
 * connection passes, the secrets' cache, the limits' table, the metrics.
 *
 * Secrets are read when a call needs one and kept for the upstream's
 * secret-ttl; a secret-command runs under /bin/sh -c with its output read
 * for at most SECRET_COMMAND_TIMEOUT_MS (secret.h: it blocks the loop that
 * long at worst, once per ttl: a command such as `gh auth token` answers in
 * milliseconds). A secret never goes into a log, an error or a metric.
 */
#include "proxy.h"

#include "al_err.h"
#include "b64url.h"
#include "ratelim.h"
#include "secret.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const uint64_t proxy_latency_bounds_ms[PROXY_LATENCY_BUCKETS] = {
    5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000, 60000, UINT64_MAX,
};

struct quota {
    char terminal[PROXYCONN_TERMINAL_MAX + 1]; /* "" : a free entry */
    unsigned upstream;                         /* index in the config */
    unsigned active;                           /* calls in flight */
    int forgotten;                             /* its terminal ended: freed once idle */
    uint64_t bytes;                            /* moved over its life */
    uint64_t used_ms;                          /* its last call's start (uv_now) */
    struct ratelim rate;
};

struct secret {
    char value[PROXY_SECRET_MAX + 1];
    uint64_t until_ms; /* 0: none held */
};

struct proxy {
    struct proxycfg cfg;
    uv_loop_t *loop;
    struct proxyup *up;
    struct proxy_store store;
    struct secret secrets[PROXY_MAX_UPSTREAMS];
    struct proxy_metrics metrics[PROXY_MAX_UPSTREAMS];
    struct quota *quotas; /* PROXY_MAX_QUOTAS entries */
};

static unsigned index_of(const struct proxy *p, const struct proxy_upstream *up)
{
    return (unsigned)(up - p->cfg.up);
}

/* ---- credentials ---- */

void proxy_hash(const char *cred, char hash[PROXY_HASH_HEX + 1])
{
    unsigned char md[32];
    unsigned int len = 0;
    if (EVP_Digest(cred, strlen(cred), md, &len, EVP_sha256(), NULL) != 1 || len != sizeof md)
        memset(md, 0, sizeof md);
    for (size_t i = 0; i < sizeof md; i++)
        snprintf(hash + 2 * i, 3, "%02x", md[i]);
}

int proxy_mint(char cred[PROXY_CRED_LEN + 1], char hash[PROXY_HASH_HEX + 1])
{
    uint8_t raw[PROXY_CRED_RAW];
    if (RAND_bytes(raw, sizeof raw) != 1)
        return AL_E_CRYPTO;
    size_t n = 0;
    memcpy(cred, PROXY_CRED_PREFIX, 4);
    int rc = b64u_encode(raw, sizeof raw, cred + 4, PROXY_CRED_LEN + 1 - 4, &n);
    OPENSSL_cleanse(raw, sizeof raw);
    if (rc != AL_OK || n != PROXY_CRED_LEN - 4)
        return AL_E_CRYPTO;
    cred[PROXY_CRED_LEN] = '\0';
    proxy_hash(cred, hash);
    return AL_OK;
}

/* ---- secrets ---- */

static int run_secret_command(const struct proxy_upstream *up, char *out, size_t cap, char *why,
                              size_t wcap)
{
    char who[PROXY_NAME_MAX + 16];
    (void)snprintf(who, sizeof who, "upstream %s", up->name);
    return secret_run_command(up->secret_command, out, cap, who, "secret-command", why, wcap);
}

/* The secret of an upstream, from the cache or read anew. */
static int secret_of(struct proxy *p, const struct proxy_upstream *up, char *out, size_t cap,
                     char *why, size_t wcap)
{
    struct secret *s = &p->secrets[index_of(p, up)];
    uint64_t now = uv_now(p->loop);
    if (!s->until_ms || now >= s->until_ms) {
        char detail[PROXYCONN_REASON_MAX];
        int rc = up->secret_file[0]
                     ? secret_read_file(up->secret_file, s->value, sizeof s->value, detail,
                                        sizeof detail)
                     : run_secret_command(up, s->value, sizeof s->value, detail, sizeof detail);
        if (rc != AL_OK) {
            s->until_ms = 0;
            if (up->secret_file[0]) /* a command's reason names the upstream already */
                al_errf(why, wcap, "upstream %s: %s", up->name, detail);
            else
                al_errf(why, wcap, "%s", detail);
            return rc;
        }
        s->until_ms = now + (uint64_t)up->secret_ttl_s * 1000u;
    }
    size_t n = strlen(s->value);
    if (n + 1 > cap)
        return AL_E_TOOBIG;
    memcpy(out, s->value, n + 1);
    return AL_OK;
}

int proxy_check_secrets(struct proxy *p, char *why, size_t cap)
{
    for (unsigned i = 0; i < p->cfg.n; i++) {
        char s[PROXY_SECRET_MAX + 1];
        int rc = secret_of(p, &p->cfg.up[i], s, sizeof s, why, cap);
        OPENSSL_cleanse(s, sizeof s);
        if (rc != AL_OK)
            return rc;
    }
    return AL_OK;
}

/* ---- limits ---- */

/* The entry of (terminal, upstream); with make, a new one if there is
 * none. A full table gives up the idle entry used the longest ago: a
 * terminal whose end this replica never hears of (it served the direct
 * path for a sandbox another replica owns) must not hold its entry for
 * ever. That entry's counts start again if its terminal comes back, as
 * they do when airlockd restarts: the limits are kept in memory. */
static struct quota *quota_of(struct proxy *p, const char *terminal, unsigned upstream, int make)
{
    struct quota *free_slot = NULL, *idle = NULL;
    for (unsigned i = 0; i < PROXY_MAX_QUOTAS; i++) {
        struct quota *q = &p->quotas[i];
        if (!q->terminal[0]) {
            if (!free_slot)
                free_slot = q;
            continue;
        }
        if (q->upstream == upstream && strcmp(q->terminal, terminal) == 0)
            return q;
        if (q->active == 0 && (!idle || q->used_ms < idle->used_ms))
            idle = q;
    }
    if (!free_slot)
        free_slot = idle;
    if (!make || !free_slot)
        return NULL;
    const struct proxy_upstream *up = &p->cfg.up[upstream];
    memset(free_slot, 0, sizeof *free_slot);
    snprintf(free_slot->terminal, sizeof free_slot->terminal, "%s", terminal);
    free_slot->upstream = upstream;
    unsigned burst = up->rpm / 10 ? up->rpm / 10 : 1;
    ratelim_init(&free_slot->rate, 60000000ull / up->rpm, burst);
    return free_slot;
}

void proxy_forget_terminal(struct proxy *p, const char *terminal)
{
    for (unsigned i = 0; i < PROXY_MAX_QUOTAS; i++) {
        struct quota *q = &p->quotas[i];
        if (!q->terminal[0] || strcmp(q->terminal, terminal) != 0)
            continue;
        if (q->active == 0)
            q->terminal[0] = '\0';
        else
            q->forgotten = 1; /* freed by the end of its last call */
    }
}

/* ---- the gate ---- */

int proxy_gate_begin_in(struct proxy *p, const char *sandbox, const struct proxy_upstream *up,
                        const char *cred, char *terminal, size_t tcap, char *secret, size_t scap,
                        unsigned *retry, char *why, size_t wcap)
{
    char hash[PROXY_HASH_HEX + 1];
    proxy_hash(cred, hash);
    int rc = p->store.lookup(p->store.ud, hash, up->name, terminal, tcap);
    OPENSSL_cleanse(hash, sizeof hash);
    if (rc == AL_OK && sandbox) {
        /* a runner's channel spends only its own sandbox's credentials: one
         * of another sandbox is refused as an unknown one, before any of
         * that terminal's limits is touched */
        char sb[PROXY_SANDBOX_MAX + 1] = "";
        rc = p->store.sandbox_of ? p->store.sandbox_of(p->store.ud, terminal, sb, sizeof sb)
                                 : AL_E_STATE;
        if (rc == AL_OK && strcmp(sb, sandbox) != 0)
            rc = AL_E_NOENT;
    }
    if (rc == AL_E_NOENT) {
        if (tcap)
            terminal[0] = '\0';
        al_errf(why, wcap, "unknown, revoked or foreign credential for upstream %s", up->name);
        return 401;
    }
    if (rc == AL_E_AGAIN) {
        al_errf(why, wcap,
                "the credential's terminal cannot be confirmed to run now (its runner is not "
                "linked to airlockd, or has not yet said that it runs): try again");
        *retry = 1;
        return 503;
    }
    if (rc != AL_OK) {
        if (tcap)
            terminal[0] = '\0';
        al_errf(why, wcap, "cannot check the credential now");
        return 503;
    }
    unsigned ui = index_of(p, up);
    struct quota *q = quota_of(p, terminal, ui, 1);
    if (!q) {
        al_errf(why, wcap, "too many terminals use the proxy at once");
        *retry = 1;
        return 429;
    }
    uint64_t now_us = uv_now(p->loop) * 1000u;
    if (q->active >= up->concurrent) {
        al_errf(why, wcap, "terminal %s: %u requests at once to upstream %s", terminal,
                up->concurrent, up->name);
        *retry = 1;
        return 429;
    }
    if (q->bytes >= up->max_bytes) {
        al_errf(why, wcap,
                "terminal %s: its %llu bytes through upstream %s are spent (max-bytes, for the "
                "terminal's life)",
                terminal, (unsigned long long)up->max_bytes, up->name);
        *retry = PROXYCONN_SPENT_RETRY_S;
        return 429;
    }
    if (!ratelim_take(&q->rate, now_us)) {
        uint64_t wait_us = ratelim_next(&q->rate, now_us) - now_us;
        al_errf(why, wcap, "terminal %s: %u requests a minute to upstream %s", terminal, up->rpm,
                up->name);
        *retry = (unsigned)((wait_us + 999999) / 1000000);
        return 429;
    }
    char detail[PROXYCONN_REASON_MAX];
    rc = secret_of(p, up, secret, scap, detail, sizeof detail);
    if (rc != AL_OK) {
        al_errf(why, wcap, "%s", detail);
        return 502;
    }
    q->active++;
    q->forgotten = 0; /* a call began: its terminal lives */
    q->used_ms = uv_now(p->loop);
    return 0;
}

int proxy_gate_begin(struct proxy *p, const struct proxy_upstream *up, const char *cred,
                     char *terminal, size_t tcap, char *secret, size_t scap, unsigned *retry,
                     char *why, size_t wcap)
{
    return proxy_gate_begin_in(p, NULL, up, cred, terminal, tcap, secret, scap, retry, why, wcap);
}

static int gate_begin(void *ud, const struct proxy_upstream *up, const char *cred, char *terminal,
                      size_t tcap, char *secret, size_t scap, unsigned *retry, char *why,
                      size_t wcap)
{
    return proxy_gate_begin(ud, up, cred, terminal, tcap, secret, scap, retry, why, wcap);
}

/* The gate of a sandbox's channel: ud is its struct proxy_scope. */
static int scope_begin(void *ud, const struct proxy_upstream *up, const char *cred, char *terminal,
                       size_t tcap, char *secret, size_t scap, unsigned *retry, char *why,
                       size_t wcap)
{
    struct proxy_scope *sc = ud;
    return proxy_gate_begin_in(sc->p, sc->sandbox, up, cred, terminal, tcap, secret, scap, retry,
                               why, wcap);
}

static void gate_end(void *ud, const char *terminal, const char *upstream, uint64_t bytes)
{
    struct proxy *p = ud;
    const struct proxy_upstream *up = proxycfg_find(&p->cfg, upstream);
    if (!up)
        return;
    struct quota *q = quota_of(p, terminal, index_of(p, up), 0);
    if (!q)
        return;
    if (q->active)
        q->active--;
    q->bytes += bytes;
    if (q->active == 0 && q->forgotten)
        q->terminal[0] = '\0';
}

/* A call's bytes as they move: 0 while the terminal's budget holds. */
static int gate_spend(void *ud, const char *terminal, const char *upstream, uint64_t bytes)
{
    struct proxy *p = ud;
    const struct proxy_upstream *up = proxycfg_find(&p->cfg, upstream);
    struct quota *q = up ? quota_of(p, terminal, index_of(p, up), 0) : NULL;
    if (!q)
        return 0; /* not counted by begin: nothing to hold it to */
    q->bytes += bytes;
    return q->bytes > up->max_bytes;
}

static void gate_record(void *ud, const struct proxyconn_record *rec)
{
    struct proxy *p = ud;
    const struct proxy_upstream *up = proxycfg_find(&p->cfg, rec->upstream);
    if (up) {
        struct proxy_metrics *m = &p->metrics[index_of(p, up)];
        m->requests++;
        m->by_class[rec->status >= 100 && rec->status < 600 ? rec->status / 100 : 0]++;
        m->bytes_up += rec->bytes_up;
        m->bytes_down += rec->bytes_down;
        m->latency_sum_ms += rec->latency_ms;
        for (unsigned i = 0; i < PROXY_LATENCY_BUCKETS; i++)
            if (rec->latency_ms <= proxy_latency_bounds_ms[i])
                m->latency_le[i]++;
    }
    if (p->store.record)
        p->store.record(p->store.ud, rec);
}

void proxy_gate_end(struct proxy *p, const char *terminal, const char *upstream, uint64_t bytes)
{
    gate_end(p, terminal, upstream, bytes);
}

static const struct proxyconn_gate the_gate = {gate_begin, gate_end, gate_record, gate_spend};

static void scope_end(void *ud, const char *terminal, const char *upstream, uint64_t bytes)
{
    gate_end(((struct proxy_scope *)ud)->p, terminal, upstream, bytes);
}

static void scope_record(void *ud, const struct proxyconn_record *rec)
{
    gate_record(((struct proxy_scope *)ud)->p, rec);
}

static int scope_spend(void *ud, const char *terminal, const char *upstream, uint64_t bytes)
{
    return gate_spend(((struct proxy_scope *)ud)->p, terminal, upstream, bytes);
}

static const struct proxyconn_gate scope_gate = {scope_begin, scope_end, scope_record, scope_spend};

/* ---- life ---- */

int proxy_new(const struct proxycfg *cfg, uv_loop_t *loop, const struct proxy_store *store,
              struct proxy **out, char *why, size_t cap)
{
    if (!cfg || !loop || !store || !store->lookup || !out)
        return AL_E_INVAL;
    struct proxy *p = calloc(1, sizeof *p);
    if (!p)
        return AL_E_NOMEM;
    p->quotas = calloc(PROXY_MAX_QUOTAS, sizeof *p->quotas);
    int rc = p->quotas ? proxyup_new(loop, &p->up) : AL_E_NOMEM;
    if (rc != AL_OK) {
        free(p->quotas);
        free(p);
        al_errf(why, cap, "cannot start the credential proxy: %s", al_strerror(rc));
        return rc;
    }
    p->cfg = *cfg;
    p->loop = loop;
    p->store = *store;
    *out = p;
    return AL_OK;
}

void proxy_free(struct proxy *p)
{
    if (!p)
        return;
    proxyup_free(p->up);
    OPENSSL_cleanse(p->secrets, sizeof p->secrets);
    free(p->quotas);
    free(p);
}

const struct proxycfg *proxy_config(const struct proxy *p)
{
    return &p->cfg;
}

int proxy_conn(struct proxy *p, const struct proxyconn_ops *ops, void *ud, struct proxyconn **out)
{
    return proxyconn_new(&p->cfg, p->up, &the_gate, p, ops, ud, out);
}

int proxy_conn_in(struct proxy_scope *scope, const struct proxyconn_ops *ops, void *ud,
                  struct proxyconn **out)
{
    if (!scope || !scope->p || !scope->sandbox[0])
        return AL_E_INVAL;
    return proxyconn_new(&scope->p->cfg, scope->p->up, &scope_gate, scope, ops, ud, out);
}

const struct proxy_metrics *proxy_metrics_of(const struct proxy *p, const char *upstream)
{
    const struct proxy_upstream *up = proxycfg_find(&p->cfg, upstream);
    return up ? &p->metrics[index_of(p, up)] : NULL;
}
