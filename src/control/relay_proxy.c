/*
 * relay_proxy: the credential proxy's part in a terminal's life
 * (docs/proxy.md). When the API creates a terminal with "proxy": [...],
 * a credential is minted (proxy_mint) and the terminal's OPEN frame gets
 * the variables of its upstreams (proxyenv.c) pointing at the proxy: its
 * runner's listener (the path through the runner) for a local or reverse
 * sandbox whose runner announced one (PROXY_AT), else airlockd's direct
 * path (relay_proxy_base); once its row exists, the credential's hash is bound to it
 * in the database (db_proxy_add). The credential itself goes into the
 * OPEN frame only: never into the row's env or argv, a log, or the API.
 * It is revoked (in the database, and the proxy's limits for the terminal
 * forgotten) when the terminal exits, is closed or lost (a kill revokes
 * when the process ends), on POST /v1/terminals/ID/proxy/revoke, and at
 * start for every terminal that ended while airlockd was down; removing a
 * terminal's row removes its credentials (ON DELETE CASCADE). A valid
 * credential opens its upstreams only while relay_proxy_live says its
 * terminal is confirmed to run: its runner linked, and its OPENED or
 * ATTACHED "running" received on that link (relay_runner.c). The database
 * alone cannot tell, after a restart, a terminal that ended while airlockd
 * was down, nor can a link that is up but has not yet answered the
 * terminal's re-attach.
 *
 * Data model: struct rl_proxy_env (relay_int.h) lives from the checks of
 * a create to its end: the variables (holding the credential) and the
 * credential's hash; relay_proxy_free wipes it.
 */
#include "relay_int.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "al_limits.h"
#include "lsbx.h"
#include "proxy.h"

/* AL_OK when airlockd has every upstream the request names; else AL_E_INVAL
 * and why names the first it lacks and those it has, so that a client's
 * one line (airlock run --proxy) says what to ask for instead. */
static int known_upstreams(const struct proxycfg *pc, const struct apireq_terminal *spec, char *why,
                           size_t cap)
{
    for (size_t i = 0; i < spec->nproxy; i++) {
        if (proxycfg_find(pc, spec->proxy[i]))
            continue;
        char have[PROXY_MAX_UPSTREAMS * (PROXY_NAME_MAX + 2)] = "";
        size_t o = 0;
        for (unsigned k = 0; k < pc->n && o < sizeof have; k++) {
            int n = snprintf(have + o, sizeof have - o, "%s%s", k ? ", " : "", pc->up[k].name);
            if (n < 0)
                break;
            o += (size_t)n;
        }
        al_errf(why, cap,
                "\"proxy\"[%zu]: no upstream \"%s\" in airlockd's configuration (it has: %s)", i,
                spec->proxy[i], have);
        return AL_E_INVAL;
    }
    return AL_OK;
}

int relay_proxy_base(const struct relay *r, const struct rl_sbx *sb, char *out, size_t cap)
{
    int n = -1;
    if (sb->kind != DB_SANDBOX_STATIC && sb->proxy_at[0] && !r->cfg.proxy_direct)
        n = snprintf(out, cap, "%s/v1/proxy", sb->proxy_at); /* through the runner */
    else if (r->cfg.proxy_base && r->cfg.proxy_base[0])
        n = snprintf(out, cap, "%s", r->cfg.proxy_base); /* direct */
    return n > 0 && (size_t)n < cap;
}

int relay_proxy_prepare(struct relay *r, const struct apireq_terminal *spec,
                        const struct rl_sbx *sb, struct rl_proxy_env **out, char *why, size_t cap)
{
    *out = NULL;
    if (spec->nproxy == 0)
        return AL_OK;
    if (!r->cfg.proxy) {
        al_errf(why, cap, "\"proxy\": airlockd has no upstream (no upstream.* in its --config)");
        return AL_E_INVAL;
    }
    /* agents with no network: only through their runner, whose forwarder
     * in each jail carries the listener's port to the runner's socket */
    if (sb->kind == DB_SANDBOX_LOCAL && relay_sandbox_network(r, sb->network) == DB_NETWORK_NONE) {
        if (r->cfg.proxy_direct) {
            al_errf(why, cap,
                    "\"proxy\": the agents of sandbox %s have no network, so they cannot reach "
                    "the proxy's direct path (--proxy-path direct); with --proxy-path runner "
                    "they reach it through their runner",
                    sb->id);
            return AL_E_INVAL;
        }
        if (!sb->proxy_at[0]) {
            al_errf(why, cap,
                    "\"proxy\": the agents of sandbox %s have no network, and its runner serves "
                    "them no proxy (its runner has not linked yet, or airlockd found no %s "
                    "next to airlock-runner)",
                    sb->id, LSBX_FWD_NAME);
            return AL_E_INVAL;
        }
    }
    char base[AL_MAX_PROXY_URL + 32];
    if (!relay_proxy_base(r, sb, base, sizeof base)) {
        al_errf(why, cap,
                "\"proxy\": no path to the credential proxy for sandbox %s (its runner serves "
                "no proxy listener, and airlockd has no --proxy-listen)",
                sb->id);
        return AL_E_INVAL;
    }
    int rc = known_upstreams(proxy_config(r->cfg.proxy), spec, why, cap);
    if (rc != AL_OK)
        return rc;
    struct rl_proxy_env *px = calloc(1, sizeof *px);
    if (!px)
        return AL_E_NOMEM;
    const char *names[APIREQ_PROXY_MAX];
    for (size_t i = 0; i < spec->nproxy; i++)
        names[i] = spec->proxy[i];
    char cred[PROXY_CRED_LEN + 1];
    rc = proxy_mint(cred, px->hash);
    if (rc != AL_OK)
        al_errf(why, cap, "cannot mint a proxy credential");
    if (rc == AL_OK)
        rc = proxyenv_build(proxy_config(r->cfg.proxy), names, spec->nproxy, base, cred, &px->env,
                            why, cap);
    OPENSSL_cleanse(cred, sizeof cred);
    if (rc == AL_E_NOENT) /* an upstream airlockd does not have: the request's fault */
        rc = AL_E_INVAL;
    char name[AL_MAX_STR];
    if (rc == AL_OK && proxyenv_clash(&px->env, spec->env, spec->envc, name, sizeof name)) {
        al_errf(why, cap, "\"env\".\"%.64s\": set by the credential proxy for this terminal", name);
        rc = AL_E_INVAL;
    }
    if (rc == AL_OK && spec->envc + px->env.n > AL_MAX_ENV) {
        al_errf(why, cap, "\"env\": %zu entries and %zu of the credential proxy, at most %d",
                spec->envc, px->env.n, AL_MAX_ENV);
        rc = AL_E_TOOBIG;
    }
    if (rc != AL_OK) {
        relay_proxy_free(px);
        return rc;
    }
    *out = px;
    return AL_OK;
}

int relay_proxy_bind(struct relay *r, const struct rl_proxy_env *px,
                     const struct apireq_terminal *spec, const char *term_id, char *why, size_t cap)
{
    const char *names[APIREQ_PROXY_MAX];
    for (size_t i = 0; i < spec->nproxy; i++)
        names[i] = spec->proxy[i];
    int rc = db_proxy_add(r->cfg.db, px->hash, term_id, names, spec->nproxy);
    if (rc != AL_OK) {
        al_errf(why, cap, "cannot store the proxy credential: %s", db_errmsg(r->cfg.db));
        return rc;
    }
    json_t *ups = json_array();
    for (size_t i = 0; ups && i < spec->nproxy; i++)
        (void)json_array_append_new(ups, json_string(spec->proxy[i]));
    json_t *d = ups ? json_pack("{s:o}", "upstreams", ups) : NULL;
    char *detail = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    relay_audit(r, "system", "proxy_credential", term_id,
                detail); /* at its creation, by the owner */
    free(detail);
    return AL_OK;
}

void relay_proxy_free(struct rl_proxy_env *px)
{
    if (!px)
        return;
    proxyenv_clear(&px->env);
    OPENSSL_cleanse(px->hash, sizeof px->hash);
    free(px);
}

int relay_proxy_revoke(struct relay *r, const char *term_id)
{
    int rc = db_proxy_revoke_terminal(r->cfg.db, term_id);
    if (rc != AL_OK)
        relay_log(r, 0, "terminal %s: revoking its proxy credential: %s", term_id,
                  db_errmsg(r->cfg.db));
    if (r->cfg.proxy)
        proxy_forget_terminal(r->cfg.proxy, term_id);
    return rc;
}

int relay_proxy_start(struct relay *r)
{
    return db_proxy_revoke_ended(r->cfg.db);
}

/* A terminal of a sandbox another replica owns (docs/scale-out.md, "The
 * credential proxy on any replica"): live when the database says the
 * terminal runs, another replica holds its sandbox's lease (not expired by
 * this replica's clock) and that replica has the runner linked. */
static int live_elsewhere(const struct relay *r, const char *term_id)
{
    if (!r->replica_id[0])
        return 0;
    struct db_terminal *t = calloc(1, sizeof *t);
    struct db_sandbox *s = calloc(1, sizeof *s);
    int live =
        t && s && db_terminal_get(r->cfg.db, term_id, t) == AL_OK && t->state == DB_TERM_RUNNING &&
        db_sandbox_get(r->cfg.db, t->sandbox_id, s) == AL_OK && s->owner[0] &&
        strcmp(s->owner, r->replica_id) != 0 && s->link_up && s->lease_until > relay_wall_ms();
    free(t);
    free(s);
    return live;
}

int relay_proxy_live(const struct relay *r, const char *term_id)
{
    if (!term_id)
        return 0;
    const struct rl_term *t = relay_terminal_by_id(r, term_id);
    if (t)
        return !t->exited && t->confirmed && t->sb && t->sb->up;
    return live_elsewhere(r, term_id);
}
