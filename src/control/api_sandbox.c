/*
 * api_sandbox: the routes of /v1/sandboxes (docs/api.md): list, add
 * (checked by apireq.c; a local one only where lsbx.c says local sandboxes
 * can run), remove, and the enrollment of a reverse sandbox (a token the
 * signer mints, the command a runner is started with, our JWKS). Each
 * change is audited.
 *
 * Not here: who may call them (the route table, api_route.c), the live
 * sandboxes and their runners (relay_sandbox.c, relay_spawn.c).
 */
#include <jansson.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "api_local.h"
#include "apireq.h"
#include "db.h"
#include "keys.h"
#include "lsbx.h"
#include "platform.h"
#include "relay.h"
#include "signer.h"

int api_sandbox_list(struct api *a, struct lws *wsi, struct call *c)
{
    struct api_list l = {a, json_array(), 0};
    if (!l.arr)
        return api_reply_error(wsi, 500, "out of memory");
    return api_reply_list(a, wsi, c, &l, db_sandbox_list(a->db, api_view_add_sandbox, &l));
}

int api_sandbox_add(struct api *a, struct lws *wsi, struct call *c)
{
    const struct db_user *u = &c->u;
    struct apireq_sandbox s;
    char why[256];
    int rc = apireq_sandbox(api_body_of(c), c->q->len, &s, why, sizeof why);
    if (rc != AL_OK)
        return api_reply_error(wsi, 400, why);
    const char *unusable = s.kind == DB_SANDBOX_LOCAL ? lsbx_unusable(a->lsbx) : NULL;
    if (unusable) { /* never an unsafe one instead */
        char msg[600];
        (void)snprintf(msg, sizeof msg, "local sandboxes cannot run on this host: %s", unusable);
        return api_reply_error(wsi, 503, msg);
    }
    if (s.kind == DB_SANDBOX_ACA && !platform_find(a->cfg.platforms, s.platform)) {
        char msg[200];
        (void)snprintf(msg, sizeof msg,
                       "no platform %s in airlockd's --config (platform.%s.token-file or "
                       "token-command)",
                       s.platform, s.platform);
        return api_reply_error(wsi, 400, msg);
    }
    if (s.network == DB_NETWORK_NONE && a->cfg.no_bwrap)
        return api_reply_error(wsi, 409,
                               "\"network\": none needs bubblewrap; this airlockd runs with "
                               "--no-bwrap (no jail for the agents)");
    const struct db_sandbox_spec sp = {
        .id = s.id,
        .kind = s.kind,
        .url = s.kind == DB_SANDBOX_STATIC || s.kind == DB_SANDBOX_ACA ? s.url : NULL,
        .platform = s.kind == DB_SANDBOX_ACA ? s.platform : NULL,
        .record_input = s.record_input,
        .network = s.network,
    };
    rc = db_sandbox_create(a->db, &sp);
    if (rc != AL_OK)
        return api_reply_error(wsi, api_reply_status(rc), db_errmsg(a->db));
    /* what differs from the defaults */
    json_t *d = json_object();
    if (d && s.record_input)
        (void)json_object_set_new(d, "record_input", json_true());
    if (d && s.kind == DB_SANDBOX_ACA)
        (void)json_object_set_new(d, "platform", json_string(s.platform));
    if (d && s.network != DB_NETWORK_DEFAULT)
        (void)json_object_set_new(d, "network", json_string(db_sandbox_network_name(s.network)));
    char *detail = d && json_object_size(d) ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    api_audit(a, u->name, "sandbox_add", s.id, detail);
    free(detail);
    rc = relay_sandbox_added(a->relay, s.id, why, sizeof why);
    if (rc != AL_OK)
        return api_reply_error(wsi, 500, why);
    struct db_sandbox row;
    if (db_sandbox_get(a->db, s.id, &row) != AL_OK)
        return api_reply_error(wsi, 500, db_errmsg(a->db));
    return api_reply_json(wsi, 201, api_view_sandbox(a, &row));
}

int api_sandbox_remove(struct api *a, struct lws *wsi, struct call *c)
{
    int rc = db_sandbox_remove(a->db, c->id);
    if (rc != AL_OK)
        return api_reply_error(wsi, api_reply_status(rc), db_errmsg(a->db));
    relay_sandbox_removed(a->relay, c->id);
    api_audit(a, c->u.name, "sandbox_remove", c->id, NULL);
    return api_reply_json(wsi, 200, json_pack("{s:s}", "id", c->id));
}

/* The enrollment's jwks: ours, then every other replica's published keys
 * (docs/scale-out.md, "Trust between replicas"), each kid once, at most
 * TOK_MAX_KEYS, so that the runner verifies the in-band tokens of
 * whichever replica its link lands on. */
static int add_peer_keys(void *ctx, const char *replica_id, const char *text)
{
    (void)replica_id;
    json_t *keys = json_object_get(ctx, "keys");
    json_t *peer = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    json_t *pk = json_object_get(peer, "keys");
    size_t i, j;
    json_t *k, *o;
    json_array_foreach(pk, i, k)
    {
        const char *kid = json_string_value(json_object_get(k, "kid"));
        int known = !kid;
        json_array_foreach(keys, j, o)
        {
            const char *okid = json_string_value(json_object_get(o, "kid"));
            known = known || (okid && !strcmp(okid, kid));
        }
        if (!known && json_array_size(keys) < TOK_MAX_KEYS)
            (void)json_array_append(keys, k);
    }
    json_decref(peer);
    return 0;
}

int api_sandbox_enroll(struct api *a, struct lws *wsi, struct call *c)
{
    const struct db_user *u = &c->u;
    const char *id = c->id;
    unsigned ttl;
    char why[APIREQ_ERR_MAX];
    if (apireq_enroll(api_body_of(c), c->q->len, &ttl, why, sizeof why) != AL_OK)
        return api_reply_error(wsi, 400, why);
    struct db_sandbox row;
    if (db_sandbox_get(a->db, id, &row) != AL_OK)
        return api_reply_error(wsi, 404, "no such sandbox");
    if (row.kind != DB_SANDBOX_REVERSE)
        return api_reply_error(wsi, 409, "only reverse sandboxes enroll");
    /* The signer alone holds the key and checks the shape (ttl bound
     * included); we audit on its behalf with what it answered. */
    struct signer_mint m = {SIGNER_SHAPE_ENROLL, id, u->name, ttl};
    struct signer_resp *t = malloc(sizeof *t); /* 4 KiB of token */
    if (!t)
        return api_reply_error(wsi, 500, "out of memory");
    char swhy[SIGNER_REASON_MAX + 128];
    int rc = signer_mint(a->signer, &m, t, swhy, sizeof swhy);
    if (rc != AL_OK) {
        free(t);
        return api_reply_error(wsi, rc == AL_E_PERM ? 400 : 500, swhy);
    }
    char detail[512];
    (void)snprintf(detail, sizeof detail,
                   "{\"scope\":\"" SIGNER_RUNNER_SCOPE
                   "\",\"for\":\"enroll\",\"ttl\":%u,\"jti\":\"%s\",\"kid\":\"%s\"}",
                   ttl, t->jti, t->kid);
    api_audit(a, u->name, "token_mint", id, detail);
    /* a new enrollment: the next runner to link is pinned afresh */
    if (relay_cred_key_forget(a->relay, id) != AL_OK)
        api_log(a, 0, "sandbox %s: cannot forget the pinned runner key", id);
    char url[600], cmd[1200];
    (void)snprintf(url, sizeof url, "%s/v1/runners/connect?identifier=%s", a->self_url, id);
    (void)snprintf(cmd, sizeof cmd,
                   "airlock-runner --connect '%s' --identifier %s --jwks jwks.json "
                   "--token-file token",
                   url, id);
    json_error_t jerr;
    char jwks_path[PATH_MAX + 16];
    (void)snprintf(jwks_path, sizeof jwks_path, "%s/%s", a->data_dir, KEYS_JWKS_FILE);
    json_t *jwks = json_load_file(jwks_path, JSON_REJECT_DUPLICATES, &jerr);
    if (json_is_array(json_object_get(jwks, "keys")) &&
        db_replica_jwks_list(a->db, add_peer_keys, jwks) != AL_OK)
        api_log(a, 0, "enrollment of %s: the other replicas' keys: %s", id, db_errmsg(a->db));
    rc = api_reply_json(wsi, 200,
                        json_pack("{s:s, s:s, s:s, s:o*, s:I}", "token", t->token, "url", url,
                                  "command", cmd, "jwks", jwks, "expires_in", (json_int_t)ttl));
    OPENSSL_cleanse(t, sizeof *t);
    free(t);
    return rc;
}
