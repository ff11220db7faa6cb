/*
 * api_terminal: the routes of /v1/terminals (docs/api.md): list, create,
 * get, kill (a signal), close, the recording (admins and the terminal's
 * creator only: docs/recording.md), and the upgrade that attaches a client
 * to a live terminal (/v1/terminals/ID/attach[?mode=read]). Each change is
 * audited.
 *
 * Not here: who may call them and the loading of {id}'s row
 * (ROUTE_TERMINAL, api_route.c), the live terminals (relay_terminal.c), the
 * attached client's WebSocket (api_ws.c).
 */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "al_err.h"
#include "api_local.h"
#include "apireq.h"
#include "db.h"
#include "relay.h"
#include "wsg.h"
#include "wslisten.h"

int api_terminal_list(struct api *a, struct lws *wsi, struct call *c)
{
    struct api_list l = {a, json_array(), 0};
    if (!l.arr)
        return api_reply_error(wsi, 500, "out of memory");
    return api_reply_list(a, wsi, c, &l, db_terminal_list(a->db, NULL, api_view_add_terminal, &l));
}

int api_terminal_create(struct api *a, struct lws *wsi, struct call *c)
{
    const struct db_user *u = &c->u;
    struct apireq_terminal t;
    memset(&t, 0, sizeof t);
    char why[256];
    int rc = apireq_terminal(api_body_of(c), c->q->len, &t, why, sizeof why);
    if (rc != AL_OK) {
        apireq_terminal_free(&t);
        return api_reply_error(wsi, 400, why);
    }
    char id[DB_NAME_MAX + 1];
    rc = relay_terminal_create(a->relay, &t, u->name, id, sizeof id, why, sizeof why);
    apireq_terminal_free(&t);
    if (rc != AL_OK)
        return api_reply_error(wsi, api_reply_status(rc), why);
    api_audit(a, u->name, "terminal_create", id, NULL);
    struct db_terminal *row = malloc(sizeof *row);
    if (!row || db_terminal_get(a->db, id, row) != AL_OK) {
        free(row);
        return api_reply_error(wsi, 500, "terminal vanished");
    }
    json_t *o = api_view_terminal(a, row);
    free(row);
    api_proxy_view(a, o, id);
    return api_reply_json(wsi, 201, o);
}

int api_terminal_get(struct api *a, struct lws *wsi, struct call *c)
{
    json_t *o = api_view_terminal(a, c->term);
    api_proxy_view(a, o, c->id);
    return api_reply_json(wsi, 200, o);
}

int api_terminal_kill(struct api *a, struct lws *wsi, struct call *c)
{
    unsigned signo;
    char why[256];
    int rc = apireq_signal(api_body_of(c), c->q->len, &signo, why, sizeof why);
    if (rc != AL_OK)
        return api_reply_error(wsi, 400, why);
    rc = relay_terminal_signal(a->relay, c->id, signo);
    if (rc != AL_OK)
        return api_reply_error(wsi, 409, "the terminal is not running");
    char detail[64];
    (void)snprintf(detail, sizeof detail, "{\"signal\":%u}", signo);
    api_audit(a, c->u.name, "kill", c->id, detail);
    return api_reply_json(wsi, 202, json_pack("{s:s, s:i}", "id", c->id, "signal", (int)signo));
}

int api_terminal_close(struct api *a, struct lws *wsi, struct call *c)
{
    /* a live terminal of a sandbox another replica owns (or none does, in a
     * fail-over) is that replica's to close: its row stays (api_fwd.c
     * forwards the close when the owner can be asked) */
    char owner[DB_REPLICA_ID_LEN + 8];
    const int live = c->term->state == DB_TERM_OPENING || c->term->state == DB_TERM_RUNNING;
    if (live && relay_sandbox_owner(a->relay, c->term->sandbox_id, owner, sizeof owner)) {
        char why[DB_NAME_MAX + sizeof owner + 128];
        (void)snprintf(why, sizeof why,
                       "the terminal runs in sandbox %s, served by replica %s, which cannot be "
                       "asked now: try again",
                       c->term->sandbox_id, owner);
        return api_reply_error(wsi, 409, why);
    }
    /* its proxy credential ends now, not when the runner has closed it */
    (void)relay_proxy_revoke(a->relay, c->id);
    int rc = relay_terminal_close(a->relay, c->id);
    if (rc == AL_E_NOENT) { /* not live: only the row is left */
        rc = db_terminal_remove(a->db, c->id);
        if (rc != AL_OK)
            return api_reply_error(wsi, api_reply_status(rc), db_errmsg(a->db));
    } else if (rc != AL_OK) {
        return api_reply_error(wsi, api_reply_status(rc), al_strerror(rc));
    }
    api_audit(a, c->u.name, "terminal_close", c->id, NULL);
    return api_reply_json(wsi, 202, json_pack("{s:s}", "id", c->id));
}

/* Recordings: admins and the terminal's creator (docs/recording.md). */
int api_terminal_recording(struct api *a, struct lws *wsi, struct call *c)
{
    if (c->u.role != DB_ROLE_ADMIN &&
        !(c->term->creator[0] && !strcmp(c->term->creator, c->u.name)))
        return api_reply_error(wsi, 403,
                               "a recording is readable by admins and the terminal's creator only");
    char path[PATH_MAX + DB_NAME_MAX + 32];
    (void)snprintf(path, sizeof path, "%s/%s.cast", a->rec_dir, c->id);
    struct stat st;
    if (stat(path, &st) != 0)
        return api_reply_error(wsi, 404, "no recording");
    wsl_deadline(a->wsl, wsi, 0); /* streamed: re-armed at HTTP_FILE_COMPLETION */
    int n = lws_serve_http_file(wsi, path, "application/x-asciicast", NULL, 0);
    return n < 0 ? -1 : 0;
}

/* GET /v1/terminals/ID/attach[?mode=read]: a client of a live terminal. */
int api_terminal_attach(struct api *a, struct lws *wsi, struct call *c)
{
    char argb[300], why[256];
    const char *mode = wsg_urlarg(wsi, "mode", argb, sizeof argb);
    struct rl_attach at = {c->id, c->u.name, c->u.role, mode && !strcmp(mode, "read"), wsi};
    int rc = relay_client_attach(a->relay, &at, &c->conn->cl, why, sizeof why);
    /* a terminal this replica does not serve: relayed to its owner */
    if (rc == AL_E_NOENT && api_hop_attach(a, wsi, c, at.read_only) == AL_OK)
        return 0;
    if (rc != AL_OK) {
        api_log(a, 1, "attach of %s by %s refused: %s", c->id, c->u.name, why);
        (void)api_reply_error(wsi, api_reply_status(rc),
                              rc == AL_E_NOENT ? "no such live terminal" : why);
        return -1;
    }
    c->conn->kind = CONN_CLIENT;
    return 0;
}
