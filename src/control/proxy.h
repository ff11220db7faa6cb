/*
 * proxy: the credential proxy's owner in airlockd: the upstreams'
 * configuration, the real secrets (read from their files or commands and
 * cached for secret-ttl seconds), the per-terminal limits, the agents'
 * credentials (minted here, checked through the store), metrics per
 * upstream, and the gate every proxyconn passes (proxyconn.h). Control
 * plane only (al_control).
 *
 * Credentials: "alp_" followed by the base64url text of 32 random bytes.
 * Only their SHA-256 (hex) is kept, by the caller's store (the database),
 * with the terminal they belong to, the upstreams they open and whether
 * they are revoked; the store answers lookups (proxy_store).
 *
 * Limits (per terminal and upstream): requests at once (concurrent),
 * requests per minute (a GCRA with a burst of a tenth of a minute's worth,
 * at least 1), and bytes both ways over the terminal's life (max-bytes).
 *
 * Data model: a proxy owns a copy of the proxycfg, one proxyup, a table of
 * at most PROXY_MAX_QUOTAS limit entries and one secret cache entry per
 * upstream. Nothing is global.
 */
#ifndef AL_PROXY_H
#define AL_PROXY_H

#include "proxycfg.h"
#include "proxyconn.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

enum {
    PROXY_CRED_RAW = 32,     /* random bytes of a credential */
    PROXY_CRED_LEN = 4 + 43, /* "alp_" and their base64url */
    PROXY_HASH_HEX = 64,     /* SHA-256 in hex */
    PROXY_MAX_QUOTAS = 4096, /* (terminal, upstream) pairs tracked */
    PROXY_LATENCY_BUCKETS = 12,
};
#define PROXY_CRED_PREFIX "alp_"

/* The credentials' store (the database). */
struct proxy_store {
    /* 0 and the terminal's id when `hash` is a live credential that opens
     * `upstream`; AL_E_NOENT when it is unknown, revoked or opens other
     * upstreams only; AL_E_AGAIN when its terminal cannot be confirmed to
     * run just now (its runner is not linked: 503, try again); another
     * AL_E_* when the store failed. */
    int (*lookup)(void *ud, const char *hash, const char *upstream, char *terminal, size_t cap);
    /* 0 and the sandbox of `terminal` (the channel path's check: a
     * runner's channel spends only its own sandbox's credentials);
     * AL_E_NOENT when there is no such terminal; another AL_E_* when the
     * store failed. NULL: the channel path cannot be served. */
    int (*sandbox_of)(void *ud, const char *terminal, char *sandbox, size_t cap);
    /* One call, for the audit table (may be NULL). */
    void (*record)(void *ud, const struct proxyconn_record *rec);
    void *ud;
};

struct proxy_metrics {
    uint64_t requests;    /* calls answered, refused or cut */
    uint64_t by_class[6]; /* status 0 (cut), 1xx .. 5xx */
    uint64_t bytes_up, bytes_down;
    uint64_t latency_le[PROXY_LATENCY_BUCKETS]; /* cumulative counts per bucket */
    uint64_t latency_sum_ms;
};

/* The latency buckets' upper bounds, in milliseconds (the last is +Inf). */
extern const uint64_t proxy_latency_bounds_ms[PROXY_LATENCY_BUCKETS];

struct proxy;

int proxy_new(const struct proxycfg *cfg, uv_loop_t *loop, const struct proxy_store *store,
              struct proxy **out, char *why, size_t cap);
void proxy_free(struct proxy *p);

const struct proxycfg *proxy_config(const struct proxy *p);

/* Check at start-up that every upstream's secret can be read (a file of
 * the right mode, a command that prints one line), so that a bad config
 * stops airlockd at once. The reason names the upstream, never a secret. */
int proxy_check_secrets(struct proxy *p, char *why, size_t cap);

/* A new credential (NUL-terminated, PROXY_CRED_LEN chars) and its hash. */
int proxy_mint(char cred[PROXY_CRED_LEN + 1], char hash[PROXY_HASH_HEX + 1]);
/* The hash of a credential as an agent sent it. */
void proxy_hash(const char *cred, char hash[PROXY_HASH_HEX + 1]);

/* Forget a terminal's limit entries (its credential was revoked). */
void proxy_forget_terminal(struct proxy *p, const char *terminal);

/* A new agent connection through the gate of this proxy. */
int proxy_conn(struct proxy *p, const struct proxyconn_ops *ops, void *ud, struct proxyconn **out);

/*
 * The path through a runner (docs/proxy.md): a connection carried on a
 * proxy channel of `sandbox`'s link. Its gate also refuses (401, as an
 * unknown credential, before any limit is counted) a credential whose
 * terminal is not in that sandbox. The scope is the caller's: it must
 * outlive the proxyconn.
 */
enum { PROXY_SANDBOX_MAX = 64 };
struct proxy_scope {
    struct proxy *p;
    char sandbox[PROXY_SANDBOX_MAX + 1];
};
int proxy_conn_in(struct proxy_scope *scope, const struct proxyconn_ops *ops, void *ud,
                  struct proxyconn **out);

/* Metrics of the upstream named (NULL when there is none). */
const struct proxy_metrics *proxy_metrics_of(const struct proxy *p, const char *upstream);

/* For tests: the gate's decision, without a connection. */
int proxy_gate_begin(struct proxy *p, const struct proxy_upstream *up, const char *cred,
                     char *terminal, size_t tcap, char *secret, size_t scap, unsigned *retry,
                     char *why, size_t wcap);
void proxy_gate_end(struct proxy *p, const char *terminal, const char *upstream, uint64_t bytes);
/* The same for a connection of a sandbox's channel (NULL: the direct path). */
int proxy_gate_begin_in(struct proxy *p, const char *sandbox, const struct proxy_upstream *up,
                        const char *cred, char *terminal, size_t tcap, char *secret, size_t scap,
                        unsigned *retry, char *why, size_t wcap);

#endif
