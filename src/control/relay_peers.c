/*
 * relay_peers: trust between the replicas of one database (docs/
 * scale-out.md, "Trust between replicas"). Each replica publishes the
 * public keys it signs with (its jwks.json, compact) in its replicas row
 * when it registers; every replica accepts a runner:connect token signed
 * by its own keys or by the keys any registered replica published, so
 * that a token minted at one (an enrollment, an in-band refresh, a local
 * runner's token file) verifies at the others without copying files. The
 * database is trusted (whoever writes it could do anything already); the
 * sandbox never reaches it.
 *
 * The keys are read again at every heartbeat (relay_lease_beat), and on
 * demand when a token's kid is none of theirs (a replica that registered
 * since the last beat): RL_PEER_REFRESH_BURST reads at once, then one per
 * RL_PEER_REFRESH_MIN_US, so that bad tokens cannot make the relay query
 * the database at will.
 *
 * The same keys verify a replica's token for a client it relays to this
 * replica, the owner of the client's terminal (relay_hop_user: aud our
 * replica id, scope SIGNER_HOP_SCOPE, sub the user's name).
 *
 * Data model: struct relay holds peer_keys[0..n_peer_keys), one keyset
 * per other replica that published valid keys (owned, freed at the next
 * refresh and by relay_free), and when they were last read (µs, the
 * relay's monotonic clock). A row whose keys do not parse is skipped
 * (logged at debug level: it is read again every beat).
 */
#include "relay_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "keys.h"
#include "signer.h"
#include "token.h"

_Static_assert((int)DB_REPLICA_JWKS_MAX == (int)TOK_MAX_JWKS_BYTES, "a replica publishes one JWKS");
_Static_assert(RL_PEER_KEYSETS_MAX == DB_REPLICAS_LIST_MAX, "one keyset per replica listed");

int relay_peers_publish(struct relay *r)
{
    char path[RL_PATH_MAX];
    int rc = relay_path(r, path, sizeof path, "%s", KEYS_JWKS_FILE);
    if (rc != AL_OK)
        return rc;
    json_error_t jerr;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text) {
        relay_log(r, 0, "publishing this replica's public keys: %s cannot be read", path);
        return AL_E_FORMAT;
    }
    rc = db_replica_set_jwks(r->cfg.db, r->replica_id, text);
    free(text);
    if (rc != AL_OK)
        relay_log(r, 0, "publishing this replica's public keys: %s", db_errmsg(r->cfg.db));
    return rc;
}

static void peers_free(struct tok_keyset **ks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tok_keyset_free(ks[i]);
}

struct peers_read {
    struct relay *r;
    struct tok_keyset **ks; /* RL_PEER_KEYSETS_MAX */
    size_t n;
};

static int peer_row(void *ctx, const char *replica_id, const char *jwks)
{
    struct peers_read *p = ctx;
    if (!strcmp(replica_id, p->r->replica_id) || p->n >= RL_PEER_KEYSETS_MAX)
        return 0; /* ours are r->keys already */
    char why[TOK_REASON_MAX];
    struct tok_keyset *ks = NULL;
    if (tok_keyset_from_json(jwks, strlen(jwks), &ks, why, sizeof why) != AL_OK) {
        relay_log(p->r, 2, "replica %s: its public keys are not used: %s", replica_id, why);
        return 0;
    }
    p->ks[p->n++] = ks;
    return 0;
}

int relay_peers_refresh(struct relay *r)
{
    struct tok_keyset **ks = calloc(RL_PEER_KEYSETS_MAX, sizeof(struct tok_keyset *));
    if (!ks)
        return AL_E_NOMEM;
    struct peers_read p = {r, ks, 0};
    int rc = db_replica_jwks_list(r->cfg.db, peer_row, &p);
    if (rc != AL_OK) { /* the database is away: the keys read last stay */
        peers_free(ks, p.n);
        free(ks);
        return rc;
    }
    peers_free(r->peer_keys, r->n_peer_keys);
    free(r->peer_keys);
    r->peer_keys = ks;
    r->n_peer_keys = p.n;
    return AL_OK;
}

void relay_peers_free(struct relay *r)
{
    peers_free(r->peer_keys, r->n_peer_keys);
    free(r->peer_keys);
    r->peer_keys = NULL;
    r->n_peer_keys = 0;
    free(r->hop_seen);
    r->hop_seen = NULL;
}

/* Ours first, then each other replica's: a token whose kid none of them
 * knows is AL_E_KID; one a keyset knows is told by that keyset. */
static int verify_once(const struct relay *r, const char *token, const struct tok_verify_params *p,
                       struct tok_claims *out, char *why, size_t cap)
{
    size_t len = strlen(token);
    int rc = tok_verify(r->keys, token, len, p, out, why, cap);
    for (size_t i = 0; rc == AL_E_KID && i < r->n_peer_keys; i++) {
        char pwhy[TOK_REASON_MAX];
        int prc = tok_verify(r->peer_keys[i], token, len, p, out, pwhy, sizeof pwhy);
        if (prc != AL_E_KID) {
            rc = prc;
            if (rc != AL_OK)
                al_errf(why, cap, "%s", pwhy);
        }
    }
    return rc;
}

int relay_peers_verify(struct relay *r, const char *token, const struct tok_verify_params *p,
                       struct tok_claims *out, char *why, size_t cap)
{
    int rc = verify_once(r, token, p, out, why, cap);
    if (rc != AL_E_KID || !r->replica_id[0])
        return rc;
    /* on demand: RL_PEER_REFRESH_BURST at once, then one per
     * RL_PEER_REFRESH_MIN_US (a cell-rate bucket of their own: the beat's
     * reads do not use it up, so a replica that registered just after one
     * is read at its first token) */
    uint64_t now = relay_now_us();
    uint64_t tat = r->peer_refresh_tat_us > now ? r->peer_refresh_tat_us : now;
    if (tat - now > (uint64_t)(RL_PEER_REFRESH_BURST - 1) * RL_PEER_REFRESH_MIN_US)
        return rc;
    r->peer_refresh_tat_us = tat + RL_PEER_REFRESH_MIN_US;
    if (relay_peers_refresh(r) != AL_OK) /* a replica registered since the last beat? */
        return rc;
    return verify_once(r, token, p, out, why, cap);
}

/* A replica's token is good once (its jti, until it expires): one seen
 * on the wire or in a log cannot open a second attach or action. */
static int hop_once(struct relay *r, const struct tok_claims *cl, int64_t now, int64_t leeway,
                    char *why, size_t wcap)
{
    size_t n = strlen(cl->jti);
    if (n == 0 || n > RL_HOP_JTI_MAX) {
        al_errf(why, wcap, "a replica's token without a valid jti");
        return AL_E_PERM;
    }
    if (!r->hop_seen && !(r->hop_seen = calloc(RL_HOP_SEEN_MAX, sizeof *r->hop_seen)))
        return AL_E_NOMEM;
    struct rl_jti *free_slot = NULL;
    for (size_t i = 0; i < RL_HOP_SEEN_MAX; i++) {
        struct rl_jti *e = &r->hop_seen[i];
        /* past its exp and the verifier's leeway: its token is refused anyway */
        if (e->exp && e->exp + leeway < now)
            e->exp = 0;
        if (!e->exp) {
            if (!free_slot)
                free_slot = e;
            continue;
        }
        if (!strcmp(e->jti, cl->jti)) {
            al_errf(why, wcap, "a replica's token used twice");
            return AL_E_PERM;
        }
    }
    if (!free_slot) {
        al_errf(why, wcap, "too many replicas' tokens in the last minute");
        return AL_E_LIMIT;
    }
    memcpy(free_slot->jti, cl->jti, n + 1);
    free_slot->exp = cl->exp ? cl->exp : now + 1;
    return AL_OK;
}

int relay_hop_user(struct relay *r, const char *token, const char *scope, int take, char *user,
                   size_t cap, char *why, size_t wcap)
{
    if (!r->replica_id[0]) {
        al_errf(why, wcap, "this replica is starting");
        return AL_E_AGAIN;
    }
    struct tok_verify_params p;
    int64_t now = tok_now();
    tok_verify_params_init(&p, r->replica_id, scope, now);
    struct tok_claims cl;
    int rc = relay_peers_verify(r, token, &p, &cl, why, wcap);
    if (rc == AL_OK && !db_name_valid(cl.sub)) {
        al_errf(why, wcap, "a replica's token for no valid user name");
        rc = AL_E_PERM;
    }
    if (rc == AL_OK && take)
        rc = hop_once(r, &cl, now, p.leeway, why, wcap);
    if (rc == AL_OK)
        (void)snprintf(user, cap, "%s", cl.sub);
    return rc;
}
