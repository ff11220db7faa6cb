/*
 * api_reply: the answers of airlockd's HTTP side: a body with our headers
 * (Server: airlockd/<version>, no-store, nosniff, a cookie when asked), JSON values, {"error":
 * ...}, the status of an AL_E_* and a list's answer. Each answer ends the request's transaction and
 * arms the deadline of the next one on the same connection (wslisten.h).
 *
 * Not here: what a request is (api_http.c), who may make it (api_auth.c),
 * files streamed from disk (api_static.c, a recording in api_terminal.c).
 */
#include <jansson.h>
#include <libwebsockets.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "al_version.h"
#include "api_local.h"
#include "wslisten.h"

/* Answer with a body; cookie, when not NULL, is a whole Set-Cookie value. */
static int reply_with(struct lws *wsi, unsigned status, const char *type, const char *body,
                      size_t len, const char *cookie)
{
    uint8_t hdr[LWS_PRE + 1024 + API_MAX_COOKIE + 128];
    uint8_t *start = hdr + LWS_PRE, *p = start, *end = hdr + sizeof hdr - 1;
    char server[AL_VERSION_NAME_MAX];
    (void)al_version_name("airlockd", server, sizeof server);
    if (lws_add_http_common_headers(wsi, status, type, len, &p, end) ||
        lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_SERVER, (const unsigned char *)server,
                                     (int)strlen(server), &p, end) ||
        lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:",
                                    (const unsigned char *)"no-store", 8, &p, end) ||
        lws_add_http_header_by_name(wsi, (const unsigned char *)"x-content-type-options:",
                                    (const unsigned char *)"nosniff", 7, &p, end) ||
        (cookie && lws_add_http_header_by_name(
                       wsi, (const unsigned char *)"set-cookie:", (const unsigned char *)cookie,
                       (int)strlen(cookie), &p, end)) ||
        lws_finalize_write_http_header(wsi, start, &p, end))
        return -1;
    uint8_t *buf = malloc(LWS_PRE + len + 1);
    if (!buf)
        return -1;
    memcpy(buf + LWS_PRE, body, len); // NOLINT(bugprone-not-null-terminated-result)
    int n = lws_write(wsi, buf + LWS_PRE, len, LWS_WRITE_HTTP_FINAL);
    free(buf);
    if (n != (int)len)
        return -1;
    /* the next request on this connection has a deadline of its own */
    const struct api *a = lws_context_user(lws_get_context(wsi));
    wsl_deadline(a->wsl, wsi, 1);
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

int api_reply(struct lws *wsi, unsigned status, const char *type, const char *body, size_t len)
{
    return reply_with(wsi, status, type, body, len, NULL);
}

/* Send a JSON value (stolen) as the answer, with a cookie if not NULL. */
int api_reply_json_cookie(struct lws *wsi, unsigned status, json_t *v, const char *cookie)
{
    if (!v)
        return api_reply(wsi, 500, "application/json", "{\"error\":\"out of memory\"}\n", 26);
    char *s = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    if (!s || strlen(s) > API_MAX_BODY) {
        free(s);
        return api_reply(wsi, 500, "application/json", "{\"error\":\"answer too large\"}\n", 29);
    }
    size_t n = strlen(s);
    char *body = malloc(n + 2);
    if (!body) {
        free(s);
        return -1;
    }
    memcpy(body, s, n); // NOLINT(bugprone-not-null-terminated-result): a body, not a string
    body[n] = '\n';
    free(s);
    int rc = reply_with(wsi, status, "application/json", body, n + 1, cookie);
    free(body);
    return rc;
}

int api_reply_json(struct lws *wsi, unsigned status, json_t *v)
{
    return api_reply_json_cookie(wsi, status, v, NULL);
}

int api_reply_error(struct lws *wsi, unsigned status, const char *msg)
{
    return api_reply_json(wsi, status, json_pack("{s:s}", "error", msg));
}

unsigned api_reply_status(int rc)
{
    switch (rc) {
    case AL_E_NOENT:
        return 404;
    case AL_E_EXISTS:
    case AL_E_STATE:
        return 409;
    case AL_E_INVAL:
    case AL_E_TOOBIG:
    case AL_E_FORMAT:
        return 400;
    case AL_E_LIMIT:
        return 429;
    default:
        return 500;
    }
}

/* A list's answer: the rows rc's query put in l, or a database error. */
int api_reply_list(struct api *a, struct lws *wsi, const struct call *c, struct api_list *l, int rc)
{
    if (rc < 0) {
        json_decref(l->arr);
        api_log(a, 0, "%s: %s", c->uri, db_errmsg(a->db));
        return api_reply_error(wsi, 500, "database error");
    }
    return api_reply_json(wsi, 200, l->arr);
}
