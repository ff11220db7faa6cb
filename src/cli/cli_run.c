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

/* --env NAME=VALUE: one member of body's "env"; 0 or the usage error's
 * exit code. */
static int add_env(json_t *body, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv)
        return cli_err_usage("--env wants NAME=VALUE, not '%s'", kv);
    char name[AL_MAX_STR];
    (void)snprintf(name, sizeof name, "%.*s", (int)(eq - kv), kv);
    if (json_object_set_new(json_object_get(body, "env"), name, json_string(eq + 1)) != 0)
        return cli_err_usage("--env wants NAME=VALUE in UTF-8, not '%s'", kv);
    return 0;
}

/* --proxy NAME: one more of body's "proxy" (the server checks the name:
 * an upstream it does not have is its 400); 0 or the usage error's code. */
static int add_proxy(json_t *body, const char *name)
{
    if (json_array_append_new(json_object_get(body, "proxy"), json_string(name)) != 0)
        return cli_err_usage("--proxy wants an upstream's name in UTF-8, not '%s'", name);
    return 0;
}

/* --cwd DIR: body's "cwd". */
static int set_cwd(json_t *body, const char *dir)
{
    if (json_object_set_new(body, "cwd", json_string(dir)) != 0)
        return cli_err_usage("--cwd wants a directory in UTF-8, not '%s'", dir);
    return 0;
}

/* run's options with a value, each put into the request's body */
static const struct run_opt {
    const char *name;
    int (*set)(json_t *body, const char *value);
} run_opts_with_value[] = {{"--cwd", set_cwd}, {"--env", add_env}, {"--proxy", add_proxy}};

/* The options before "--": aa's, *sandbox, and body's "cwd", "env" and
 * "proxy"; *i ends at the command's first word. 0 or an exit code. */
static int run_opts(struct cli_attach_args *aa, int argc, char **argv, int *i, const char **sandbox,
                    json_t *body)
{
    for (; *i < argc; ++*i) {
        const char *s = argv[*i];
        const struct run_opt *o = NULL;
        for (size_t k = 0; k < sizeof run_opts_with_value / sizeof run_opts_with_value[0]; k++)
            if (!strcmp(s, run_opts_with_value[k].name))
                o = &run_opts_with_value[k];
        int err = 0;
        if (!strcmp(s, "--")) {
            ++*i;
            return 0;
        }
        if (!strcmp(s, "--pipe"))
            aa->pipe = 1;
        else if (o && *i + 1 >= argc)
            err = cli_err_usage("run: %s wants a value", s);
        else if (o)
            err = o->set(body, argv[++*i]);
        else if (!cli_attach_opt(aa, argc, argv, i, &err)) {
            if (s[0] != '-' && !*sandbox)
                *sandbox = s;
            else
                err = cli_err_usage("run: unexpected argument %s (the command goes after --)", s);
        }
        if (err)
            return err;
    }
    return 0;
}

/* body's "sandbox" and "argv" (argv[i..argc-1]); 0 or an exit code. */
static int set_command(json_t *body, const char *sandbox, int argc, char **argv, int i)
{
    if (!sandbox || i >= argc)
        return cli_err_usage(
            "run: usage: airlock run SANDBOX [--pipe] [--proxy NAME]... -- CMD ARGS...%s", "");
    json_t *av = json_array();
    for (int k = i; av && k < argc; k++)
        if (json_array_append_new(av, json_string(argv[k])) != 0) {
            json_decref(av);
            av = NULL;
        }
    if (!av || json_object_set_new(body, "argv", av) != 0 ||
        json_object_set_new(body, "sandbox", json_string(sandbox)) != 0) {
        fprintf(stderr, "airlock: the command or sandbox is not valid UTF-8\n");
        return CLI_EXIT_USAGE;
    }
    return 0;
}

int cli_run_cmd(struct cli_app *a, int argc, char **argv)
{
    struct cli_attach_args aa = {0, CLI_ESCAPE_DEFAULT, 0,
                                 (uint64_t)CLI_RETRY_FOR_DEFAULT_S * MS_PER_S, 0};
    const char *sandbox = NULL;
    json_t *body = json_pack("{s:o, s:o}", "env", json_object(), "proxy", json_array());
    if (!body) {
        fprintf(stderr, "airlock: out of memory\n");
        return CLI_EXIT_OTHER;
    }
    int i = 0, rc = run_opts(&aa, argc, argv, &i, &sandbox, body);
    if (rc == 0)
        rc = set_command(body, sandbox, argc, argv, i);
    if (rc != 0) {
        json_decref(body);
        return rc;
    }
    if (json_array_size(json_object_get(body, "proxy")) == 0)
        (void)json_object_del(body, "proxy"); /* the body of a run without --proxy, as before */
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        aa.pipe = 1;
    (void)json_object_set_new(body, "mode", json_string(aa.pipe ? "pipes" : "pty"));
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
    rc = cli_app_json(a, "starting the command", "POST", "/v1/terminals", body, &t);
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
