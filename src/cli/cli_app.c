/*
 * cli_app: see cli_app.h.
 */
#include "cli_app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "cli_err.h"

#define WHY_MAX 512
#define HTTP_OK_MIN 200
#define HTTP_OK_MAX 299

int cli_app_net(struct cli_app *a)
{
    if (a->net)
        return CLI_EXIT_OK;
    char why[WHY_MAX];
    if (cli_config_load(&a->cfg, a->flag_url, a->flag_key, why, sizeof why) != AL_OK) {
        fprintf(stderr, "airlock: %s\n", why);
        return CLI_EXIT_USAGE;
    }
    a->cfg.insecure = a->flag_insecure;
    if (uv_loop_init(&a->loop) != 0) {
        fprintf(stderr, "airlock: cannot start the event loop\n");
        return CLI_EXIT_OTHER;
    }
    a->loop_ok = 1;
    if (cli_net_new(&a->loop, &a->cfg, &a->net, why, sizeof why) != AL_OK) {
        fprintf(stderr, "airlock: %s\n", why);
        return CLI_EXIT_OTHER;
    }
    return CLI_EXIT_OK;
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void cli_app_free(struct cli_app *a)
{
    if (a->net)
        cli_net_free(a->net);
    if (!a->loop_ok)
        return;
    for (int i = 0; i < 100 && uv_run(&a->loop, UV_RUN_NOWAIT); i++)
        ;
    uv_walk(&a->loop, close_walk, NULL);
    for (int i = 0; i < 100 && uv_run(&a->loop, UV_RUN_NOWAIT); i++)
        ;
    (void)uv_loop_close(&a->loop);
}

/*
 * One call; on success (2xx) *out holds the parsed JSON (when want_json)
 * or res->body. Otherwise a message is printed and the exit code returned.
 */
int cli_app_call(struct cli_app *a, const char *what, const char *method, const char *path,
                 json_t *body, size_t max, struct cli_http_result *res, json_t **out)
{
    int rc = cli_app_net(a);
    if (rc != CLI_EXIT_OK)
        return rc;
    char *text = NULL;
    if (body) {
        text = json_dumps(body, JSON_COMPACT);
        if (!text) {
            fprintf(stderr, "airlock: out of memory\n");
            return CLI_EXIT_OTHER;
        }
    }
    rc = cli_http(a->net, method, path, text, max, res);
    free(text);
    if (rc == AL_E_IO) {
        fprintf(stderr, "airlock: cannot reach the server at %s: %s%s\n", a->cfg.url, res->why,
                cli_net_hint(a->net, res->why));
        return CLI_EXIT_DOWN;
    }
    if (rc == AL_E_TOOBIG) {
        fprintf(stderr, "airlock: %s: the answer is larger than %zu bytes\n", what, max);
        return CLI_EXIT_OTHER;
    }
    if (rc != AL_OK) {
        fprintf(stderr, "airlock: %s: %s\n", what, al_strerror(rc));
        return CLI_EXIT_OTHER;
    }
    json_t *j = NULL;
    if (res->body && (out || res->status < HTTP_OK_MIN || res->status > HTTP_OK_MAX))
        j = json_loadb(res->body, res->len, JSON_REJECT_DUPLICATES, NULL);
    if (res->status < HTTP_OK_MIN || res->status > HTTP_OK_MAX) {
        const char *msg = j ? json_string_value(json_object_get(j, "error")) : NULL;
        fprintf(stderr, "airlock: %s: %s (%s, HTTP %u)\n", what, msg ? msg : "refused",
                cli_status_hint(res->status), res->status);
        json_decref(j);
        return cli_exit_of_status(res->status);
    }
    if (out) {
        if (!j) {
            fprintf(stderr, "airlock: %s: the server's answer is not JSON\n", what);
            return CLI_EXIT_PROTO;
        }
        *out = j;
    }
    return CLI_EXIT_OK;
}

int cli_app_json(struct cli_app *a, const char *what, const char *method, const char *path,
                 json_t *body, json_t **out)
{
    struct cli_http_result res;
    memset(&res, 0, sizeof res);
    int rc = cli_app_call(a, what, method, path, body, CLI_HTTP_MAX_BODY, &res, out);
    free(res.body);
    return rc;
}

/* Terminal and sandbox ids go into URL paths: the server's alphabet only. */
int cli_app_id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n >= CLI_APP_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return 0;
    }
    return 1;
}

const char *cli_app_str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}
