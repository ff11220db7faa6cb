/*
 * cli_run: see cli_run.h.
 */
#include "cli_run.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"
#include "cli_app.h"
#include "cli_attach.h"
#include "cli_err.h"
#include "cli_net.h"
#include "cli_tty.h"

#define MS_PER_S 1000
#define DEFAULT_TERM "xterm-256color"

int cli_run_cmd(struct cli_app *a, int argc, char **argv)
{
    struct cli_attach_args aa = {0, CLI_ESCAPE_DEFAULT, 0,
                                 (uint64_t)CLI_RETRY_FOR_DEFAULT_S * MS_PER_S};
    const char *sandbox = NULL, *cwd = NULL;
    json_t *env = json_object();
    int i = 0;
    for (; i < argc; i++) {
        int err = 0;
        if (!strcmp(argv[i], "--")) {
            i++;
            break;
        }
        if (!strcmp(argv[i], "--pipe")) {
            aa.pipe = 1;
        } else if (!strcmp(argv[i], "--cwd") && i + 1 < argc) {
            cwd = argv[++i];
        } else if (!strcmp(argv[i], "--env") && i + 1 < argc) {
            const char *kv = argv[++i], *eq = strchr(kv, '=');
            if (!eq || eq == kv) {
                json_decref(env);
                return cli_err_usage("--env wants NAME=VALUE, not '%s'", kv);
            }
            char name[AL_MAX_STR];
            (void)snprintf(name, sizeof name, "%.*s", (int)(eq - kv), kv);
            (void)json_object_set_new(env, name, json_string(eq + 1));
        } else if (cli_attach_opt(&aa, argc, argv, &i, &err)) {
            if (err) {
                json_decref(env);
                return err;
            }
        } else if (argv[i][0] != '-' && !sandbox) {
            sandbox = argv[i];
        } else {
            json_decref(env);
            return cli_err_usage("run: unexpected argument %s (the command goes after --)",
                                 argv[i]);
        }
    }
    if (!sandbox || i >= argc) {
        json_decref(env);
        return cli_err_usage("run: usage: airlock run SANDBOX [--pipe] -- CMD ARGS...%s", "");
    }
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        aa.pipe = 1;
    json_t *av = json_array();
    for (int k = i; k < argc; k++)
        (void)json_array_append_new(av, json_string(argv[k]));
    json_t *body = json_pack("{s:s, s:o, s:s}", "sandbox", sandbox, "argv", av, "mode",
                             aa.pipe ? "pipes" : "pty");
    if (!body) {
        json_decref(env);
        fprintf(stderr, "airlock: the command or sandbox is not valid UTF-8\n");
        return CLI_EXIT_USAGE;
    }
    (void)json_object_set_new(body, "env", env);
    if (cwd)
        (void)json_object_set_new(body, "cwd", json_string(cwd));
    uint16_t cols, rows;
    if (!aa.pipe) {
        if (cli_tty_size(STDOUT_FILENO, &cols, &rows) == AL_OK) {
            (void)json_object_set_new(body, "cols", json_integer(cols));
            (void)json_object_set_new(body, "rows", json_integer(rows));
        }
        const char *term = getenv("TERM");
        size_t tl = term ? strlen(term) : 0;
        (void)json_object_set_new(
            body, "term",
            json_string(tl > 0 && tl <= AL_MAX_TERM && !strchr(term, ' ') ? term : DEFAULT_TERM));
    }
    json_t *t = NULL;
    int rc = cli_app_json(a, "starting the command", "POST", "/v1/terminals", body, &t);
    json_decref(body);
    if (rc != CLI_EXIT_OK)
        return rc;
    char id[CLI_APP_ID_MAX];
    (void)snprintf(id, sizeof id, "%s", cli_app_str(t, "id"));
    json_decref(t);
    if (!cli_app_id_ok(id)) {
        fprintf(stderr, "airlock: the server gave no usable terminal id\n");
        return CLI_EXIT_PROTO;
    }
    int detached = 0;
    int st = cli_attach_start(a, id, aa.pipe, &aa, aa.pipe, &detached);
    if (!detached && st >= 0) {
        /* the command is over: close its terminal (the row and recording stay) */
        char path[256];
        (void)snprintf(path, sizeof path, "/v1/terminals/%s", id);
        struct cli_http_result res;
        if (cli_http(a->net, "DELETE", path, NULL, CLI_HTTP_MAX_BODY, &res) == AL_OK)
            free(res.body);
    }
    return st;
}
