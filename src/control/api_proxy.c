/*
 * api_proxy: the credential proxy in `airlockd serve` (docs/proxy.md):
 * started with the relay when --config names upstreams (each upstream's
 * secret read once at start, so that a bad one stops airlockd with the
 * upstream named, never the secret), its direct path served on
 * --proxy-listen by proxysrv.c, its store the database (proxystore.c, its
 * audit rows queued and written in batches: api_audit_later), and
 * stopped before the loop closes. GET /v1/proxy/upstreams lists the
 * upstreams a terminal may ask for (names and kinds: never a URL, a
 * header or where a secret comes from); POST /v1/terminals/ID/proxy/revoke
 * revokes a terminal's credentials; a terminal's view shows its
 * upstreams (never its credential).
 *
 * Not here: minting and revoking with a terminal's life (relay_proxy.c),
 * the proxy's own work (proxy.c and the proxy*.c it drives), /metrics
 * (api_metrics.c).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "al_err.h"
#include "api_local.h"
#include "proxy.h"
#include "proxystore.h"
#include "proxysrv.h"
#include "relay.h"

/* The upstreams' names for the log, "a, b". */
static void upstream_names(const struct proxycfg *pc, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < pc->n && o < cap; i++) {
        int n = snprintf(out + o, cap - o, "%s%s%s", i ? ", " : "", pc->up[i].name,
                         pc->up[i].insecure_http ? " (plain http)" : "");
        if (n < 0)
            break;
        o += (size_t)n;
    }
}

/* The relay is made after the proxy: until it is, nothing is confirmed. */
static int proxy_live(void *ud, const char *terminal)
{
    struct api *a = ud;
    return a->relay && relay_proxy_live(a->relay, terminal);
}

static void run_closes(struct api *a)
{
    for (int i = 0; i < 10 && uv_run(a->loop, UV_RUN_NOWAIT); i++)
        ;
}

int api_proxy_start(struct api *a, char *err, size_t cap)
{
    const struct proxycfg *pc = a->cfg.proxy;
    if (!pc || pc->n == 0) {
        if (a->cfg.proxy_direct) {
            al_errf(err, cap, "--proxy-path: no upstream.* in --config to serve");
            return AL_E_INVAL;
        }
        if (a->cfg.proxy_listen) {
            al_errf(err, cap, "--proxy-listen: no upstream.* in --config to serve");
            return AL_E_INVAL;
        }
        return AL_OK;
    }
    struct proxy_store store;
    /* each call's audit row is queued, written in batches (api_audit_later);
     * the calls with no valid credential are counted (api_audit_refused_of) */
    a->pstore = (struct proxystore){a->db, proxy_live, a, api_audit_later, api_audit_refused_of, a};
    proxystore_of(&a->pstore, &store);
    char why[512] = "";
    int rc = proxy_new(pc, a->loop, &store, &a->proxy, why, sizeof why);
    if (rc == AL_OK && (rc = proxy_check_secrets(a->proxy, why, sizeof why)) != AL_OK)
        al_errf(err, cap, "credential proxy: %s", why);
    else if (rc != AL_OK)
        al_errf(err, cap, "%s", why);
    if (rc == AL_OK && a->cfg.proxy_direct && !a->cfg.proxy_listen) {
        al_errf(err, cap, "--proxy-path direct: needs --proxy-listen ADDR:PORT");
        rc = AL_E_INVAL;
    }
    if (rc == AL_OK && a->cfg.proxy_listen &&
        (rc = proxysrv_new(a->loop, a->proxy, a->cfg.proxy_listen, &a->proxysrv, why,
                           sizeof why)) != AL_OK)
        al_errf(err, cap, "credential proxy: %s", why);
    if (rc != AL_OK) {
        api_proxy_stop(a);
        run_closes(a);
        return rc;
    }
    char names[PROXY_MAX_UPSTREAMS * (PROXY_NAME_MAX + 16)];
    upstream_names(pc, names, sizeof names);
    if (a->proxysrv) {
        proxysrv_base(a->proxysrv, a->proxy_base, sizeof a->proxy_base);
        api_log(a, 1, "credential proxy serving on port %d, agents reach it at %s (upstreams: %s)",
                proxysrv_port(a->proxysrv), a->proxy_base, names);
    } else {
        api_log(a, 1,
                "credential proxy: upstreams %s served through the runners of local and reverse "
                "sandboxes only (no --proxy-listen: no direct path)",
                names);
    }
    return AL_OK;
}

void api_proxy_stop(struct api *a)
{
    proxysrv_free(a->proxysrv); /* its connections first: they use the proxy */
    a->proxysrv = NULL;
    proxy_free(a->proxy);
    a->proxy = NULL;
}

/* A terminal's view gets "proxy": {"upstreams": [...], "revoked": bool}
 * when it was given upstreams. */
void api_proxy_view(struct api *a, json_t *o, const char *term_id)
{
    struct db_proxy p;
    if (!o || db_proxy_of_terminal(a->db, term_id, &p) != AL_OK)
        return;
    json_t *ups = json_array();
    for (const char *s = p.upstreams; ups && *s;) {
        size_t n = strcspn(s, ",");
        (void)json_array_append_new(ups, json_stringn(s, n));
        s += n + (s[n] == ',');
    }
    (void)json_object_set_new(o, "proxy",
                              json_pack("{s:o*, s:b}", "upstreams", ups, "revoked", p.revoked));
}

/* POST /v1/terminals/ID/proxy/revoke */
int api_terminal_proxy_revoke(struct api *a, struct lws *wsi, struct call *c)
{
    if (relay_proxy_revoke(a->relay, c->id) != AL_OK)
        return api_reply_error(wsi, 500, "database error");
    api_audit(a, c->u.name, "proxy_revoke", c->id, NULL);
    return api_reply_json(wsi, 200, json_pack("{s:s, s:b}", "id", c->id, "revoked", 1));
}

/* GET /v1/proxy/upstreams: [{"name", "kind", "served"}] in the order of
 * --config; "served": whether terminals can use it now (the proxy runs:
 * through the runners of local and reverse sandboxes, and on the direct
 * path when --proxy-listen is set). Nothing else of an upstream is shown: its URL may hold a
 * private host, its secret's file or command say where keys are kept. */
int api_proxy_upstreams(struct api *a, struct lws *wsi, struct call *c)
{
    (void)c;
    const struct proxycfg *pc = a->cfg.proxy;
    json_t *arr = json_array();
    for (unsigned i = 0; arr && pc && i < pc->n; i++) {
        json_t *o = json_pack("{s:s, s:s, s:b}", "name", pc->up[i].name, "kind",
                              proxycfg_kind_name(pc->up[i].kind), "served", a->proxy != NULL);
        if (!o || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    if (!arr)
        return api_reply_error(wsi, 500, "out of memory");
    return api_reply_json(wsi, 200, arr);
}
