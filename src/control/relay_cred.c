/*
 * relay_cred: who may be a sandbox's runner (relay.h, "runners").
 *
 * Tokens: every runner:connect token the relay hands out (in band on a
 * link, in a local runner's token file, on a dial to a static sandbox) is
 * minted here through the signer (the key is the signer's, never ours) and
 * audited with its purpose, jti and kid; a dialing runner's bearer token
 * is checked here against our public keys and every other registered
 * replica's (relay_peers.c, token.h). Keys: a dialing
 * runner's key must be the sandbox's pinned one (rkey.h), kept in the
 * database beside the lease (db.h "runner keys") so that every replica
 * checks the same pin; the first key a sandbox without a pin sees is
 * pinned.
 *
 * Not here: when tokens are refreshed or files rewritten (relay_runner.c,
 * relay_spawn.c), the fresh key a local runner is started with
 * (relay_spawn.c), the HTTP side of the checks (api.c).
 */
#include "relay_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "al_err.h"
#include "al_limits.h"
#include "rkey.h"
#include "token.h"

#define RL_SCOPE SIGNER_RUNNER_SCOPE

/* Mint a runner:connect token for a sandbox through the signer; `purpose`
 * says why, in the audit (written here, with the signer's jti and kid: the
 * signer has no database). */
int relay_cred_mint(struct rl_sbx *sb, const char *sandbox_id, const char *purpose, char *out,
                    size_t cap)
{
    struct relay *r = sb->r;
    if (!relay_lease_owned(sb))
        return AL_E_STATE; /* another replica serves it: no token, no audit row */
    struct signer_mint m = {SIGNER_SHAPE_RUNNER, sandbox_id, SIGNER_RUNNER_SUB, RL_TOKEN_TTL_S};
    struct signer_resp *t = malloc(sizeof *t); /* 4 KiB of token */
    if (!t)
        return AL_E_NOMEM;
    char why[SIGNER_REASON_MAX + 128];
    int rc = signer_mint(r->cfg.signer, &m, t, why, sizeof why);
    if (rc == AL_OK && t->token_len >= cap)
        rc = AL_E_TOOBIG;
    if (rc != AL_OK) {
        relay_log(r, 0, "minting a token for %s: %s", sandbox_id,
                  rc == AL_E_TOOBIG ? "too long" : why);
        free(t);
        return rc;
    }
    memcpy(out, t->token, t->token_len + 1);
    char detail[512];
    (void)snprintf(detail, sizeof detail,
                   "{\"scope\":\"%s\",\"for\":\"%s\",\"ttl\":%d,\"jti\":\"%s\",\"kid\":\"%s\"}",
                   RL_SCOPE, purpose, RL_TOKEN_TTL_S, t->jti, t->kid);
    OPENSSL_cleanse(t, sizeof *t);
    free(t);
    relay_audit_sbx(sb, "system", "token_mint", sandbox_id, detail);
    return AL_OK;
}

_Static_assert(RL_TOKEN_TTL_S <= (int)SIGNER_RUNNER_TTL_MAX,
               "the signer's table allows our tokens");

int relay_cred_token_ok(struct relay *r, const char *sandbox_id, const char *token, char *why,
                        size_t cap)
{
    if (!token) {
        al_errf(why, cap, "no bearer token");
        return AL_E_PERM;
    }
    struct tok_verify_params p;
    tok_verify_params_init(&p, sandbox_id, RL_SCOPE, tok_now());
    return relay_peers_verify(r, token, &p, NULL, why, cap); /* ours, or another replica's */
}

/* A link with a valid token but not the sandbox's key: counted, and shown
 * to admins with the sandbox (GET /v1/sandboxes, refused_links). */
static void refused(struct relay *r, const char *sandbox_id)
{
    struct rl_sbx *sb = relay_sandbox(r, sandbox_id);
    if (sb) {
        sb->refused_links++;
        sb->refused_at_ms = relay_wall_ms();
    }
}

/* The pin a replica kept in its data directory before pins were in the
 * database (schema 10): moved there if the sandbox has none yet, so that a
 * lone airlockd upgraded keeps its pins; then the file goes. */
static const char *legacy_pin(struct relay *r, const char *sandbox_id, char out[RKEY_HASH_HEX + 1])
{
    return rkey_load(r->cfg.data_dir, sandbox_id, out) == AL_OK ? out : NULL;
}

int relay_cred_key_ok(struct relay *r, const char *sandbox_id, const char *key, char *why,
                      size_t cap)
{
    char pinned[RKEY_HASH_HEX + 1], h[RKEY_HASH_HEX + 1], old[RKEY_HASH_HEX + 1];
    size_t len = key ? strlen(key) : 0;
    if (len != AL_RUNNER_KEY_LEN) {
        refused(r, sandbox_id);
        al_errf(why, cap, "no runner key (%s)", AL_RUNNER_KEY_HEADER);
        return AL_E_PERM;
    }
    /* the pin is the database's, shared by every replica: the first key a
     * sandbox without one sees is pinned in the same statement that reads
     * it, so that two replicas racing pin one key */
    rkey_hash(key, len, h);
    const char *legacy = legacy_pin(r, sandbox_id, old);
    int rc = db_runner_key_pin(r->cfg.db, sandbox_id, legacy ? legacy : h, pinned, sizeof pinned);
    if (rc != AL_OK) {
        al_errf(why, cap, "cannot read or pin the runner key: %s", db_errmsg(r->cfg.db));
        return rc;
    }
    if (legacy && !strcmp(pinned, legacy) && rkey_store(r->cfg.data_dir, sandbox_id, NULL) == AL_OK)
        relay_log(r, 1, "sandbox %s: runner key pin moved from the data directory to the database",
                  sandbox_id);
    if (!rkey_matches(pinned, key, len)) {
        refused(r, sandbox_id);
        al_errf(why, cap,
                "runner key differs from the pinned one (another runner, or an "
                "impostor with a copied token)");
        return AL_E_PERM;
    }
    return AL_OK;
}

int relay_cred_key_pin(struct rl_sbx *sb, const char *key)
{
    char h[RKEY_HASH_HEX + 1];
    rkey_hash(key, strlen(key), h);
    int rc = relay_lease_checked(sb, db_runner_key_set(sb->r->cfg.db, sb->id, h, sb->fence));
    OPENSSL_cleanse(h, sizeof h);
    return rc;
}

int relay_cred_key_forget(struct relay *r, const char *sandbox_id)
{
    int rc = db_runner_key_set(r->cfg.db, sandbox_id, NULL, DB_NO_FENCE);
    int frc = rkey_store(r->cfg.data_dir, sandbox_id, NULL); /* a pin from before schema 10 */
    return rc != AL_OK ? rc : frc;
}
