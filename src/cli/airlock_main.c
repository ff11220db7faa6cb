/*
 * airlock: the command-line client. This file parses the command line,
 * calls airlockd's JSON API (cli_net's HTTP) and hands terminals to
 * cli_attach and recordings to cli_replay. Exit codes: cli_err.h.
 *
 * Data model: struct app is the run's context (no globals): the
 * configuration, the libuv loop and the network context, created on the
 * first command that needs them.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "al_err.h"
#include "al_limits.h"
#include "castread.h"
#include "cli_attach.h"
#include "cli_config.h"
#include "cli_err.h"
#include "cli_fmt.h"
#include "cli_net.h"
#include "cli_probe.h"
#include "cli_replay.h"
#include "cli_tty.h"

#define WHY_MAX 512
#define MAX_ARGS 512
#define MS_PER_S 1000
#define US_PER_S 1000000.0
#define TERM_ID_MAX 128
#define HTTP_OK_MIN 200
#define HTTP_OK_MAX 299
#define DEFAULT_TERM "xterm-256color"
#define MAX_RETRY_FOR_S (7ull * 86400)
#define PATH_MAX_CLI 4096

struct app {
    const char *flag_url, *flag_key;
    int flag_insecure;
    struct cli_config cfg;
    uv_loop_t loop;
    int loop_ok;
    struct cli_net *net;
};

static void usage(FILE *to)
{
    fprintf(to,
            "usage: airlock [--url URL] [--key KEY] [--insecure] COMMAND ...\n"
            "\n"
            "Agents' terminals, from your terminal.\n"
            "\n"
            "commands:\n"
            "  probe [--json]                 check the server, the key and the sandboxes' links\n"
            "        (run it first: health, who the key is, link state and RTT, timings)\n"
            "  attach [SANDBOX/]TERMINAL [--read-only] [--escape C|none] [--retry-for S]\n"
            "        attach this terminal to it (Enter ~ . detaches, ~ t takes over, ~ ? help)\n"
            "  run SANDBOX [--pipe] [--cwd DIR] [--env NAME=VALUE]... -- CMD ARGS...\n"
            "        start a command and attach; --pipe (or no terminal here): stdin, stdout\n"
            "        and stderr as pipes, exit code propagated\n"
            "  ls [--json]                    sandboxes and terminals\n"
            "  kill TERMINAL [--signal NAME]  signal its processes (TERM, INT, HUP, KILL, ...)\n"
            "  sandbox add ID --kind local|static|reverse [--url URL] [--network host|none]\n"
            "                                 (admin; --network: a local sandbox's agents)\n"
            "  sandbox rm ID | sandbox ls\n"
            "  sandbox enroll ID [--ttl S] [--out DIR] [--json]   (admin, reverse sandboxes)\n"
            "        a runner token and the airlock-runner command line to start it with;\n"
            "        --out writes DIR/jwks.json and DIR/token\n"
            "  replay FILE|TERMINAL [--speed X] [--idle-limit S]\n"
            "        play an asciicast recording (a file, or a terminal's from the server)\n"
            "\n"
            "server and key: --url/--key, else AIRLOCK_URL/AIRLOCK_API_KEY, else url= and key=\n"
            "lines in ~/.config/airlock/config. --insecure: accept a self-signed or otherwise\n"
            "unverifiable certificate from an https server (the traffic is still encrypted).\n"
            "\n"
            "exit codes:\n"
            "  0   success (attach/run: the terminal's own status, 128+N if killed by signal N;\n"
            "      0 after a detach)\n"
            "  %d  bad command line or configuration\n"
            "  %d  the server refused the request (bad input, already exists)\n"
            "  %d  no such terminal, sandbox or file\n"
            "  %d  the server cannot be reached (down, refused, connection lost for good)\n"
            "  %d  the server failed, or another error\n"
            "  %d  protocol error: the server answered something this client does not understand\n"
            "  %d  the API key was not accepted (401), or none was given (probe)\n"
            "  %d  the key's role may not do this (403)\n"
            "  128+N  this program was stopped by signal N (the terminal keeps running)\n",
            CLI_EXIT_USAGE, CLI_EXIT_REFUSED, CLI_EXIT_NOTFOUND, CLI_EXIT_DOWN, CLI_EXIT_OTHER,
            CLI_EXIT_PROTO, CLI_EXIT_AUTH, CLI_EXIT_FORBIDDEN);
}

static int bad_usage(const char *fmt, const char *arg)
{
    fputs("airlock: ", stderr);
    fprintf(stderr, fmt, arg ? arg : "");
    fputs(" (see airlock --help)\n", stderr);
    return CLI_EXIT_USAGE;
}

/* ---- set-up ---------------------------------------------------------------- */

static int app_net(struct app *a)
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

static void app_free(struct app *a)
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

/* ---- the API --------------------------------------------------------------- */

/*
 * One call; on success (2xx) *out holds the parsed JSON (when want_json)
 * or res->body. Otherwise a message is printed and the exit code returned.
 */
static int api_call(struct app *a, const char *what, const char *method, const char *path,
                    json_t *body, size_t max, struct cli_http_result *res, json_t **out)
{
    int rc = app_net(a);
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

static int api_json(struct app *a, const char *what, const char *method, const char *path,
                    json_t *body, json_t **out)
{
    struct cli_http_result res;
    memset(&res, 0, sizeof res);
    int rc = api_call(a, what, method, path, body, CLI_HTTP_MAX_BODY, &res, out);
    free(res.body);
    return rc;
}

/* Terminal and sandbox ids go into URL paths: the server's alphabet only. */
static int id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n >= TERM_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return 0;
    }
    return 1;
}

/* ---- ls, kill, sandbox ----------------------------------------------------- */

static const char *str_of(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* NET: what a local sandbox's agents get, "host" or "none", starred when
 * it is the server's --sandbox-network rather than the sandbox's own; "-"
 * for the others (airlockd does not start their runners). */
static void print_sandboxes(json_t *arr)
{
    printf("%-20s %-8s %-5s %-6s %-8s %s\n", "SANDBOX", "KIND", "LINK", "SINCE", "RTT", "NET");
    size_t i;
    json_t *s;
    json_array_foreach(arr, i, s)
    {
        char age[32], rtt[32], net[16];
        cli_fmt_age(age, sizeof age, json_integer_value(json_object_get(s, "link_since")),
                    (int64_t)time(NULL));
        cli_fmt_rtt(rtt, sizeof rtt, json_integer_value(json_object_get(s, "rtt_us")));
        const char *n = str_of(s, "network");
        (void)snprintf(net, sizeof net, "%.8s%s", n[0] ? n : "-",
                       n[0] && json_is_true(json_object_get(s, "network_default")) ? "*" : "");
        printf("%-20s %-8s %-5s %-6s %-8s %s\n", str_of(s, "id"), str_of(s, "kind"),
               json_is_true(json_object_get(s, "link_up")) ? "up" : "down", age, rtt, net);
    }
}

static void print_terminals(json_t *arr)
{
    printf("%-24s %-16s %-12s %-5s %-7s %-6s %s\n", "TERMINAL", "SANDBOX", "STATE", "MODE",
           "VIEWERS", "AGE", "COMMAND");
    size_t i;
    json_t *t;
    json_array_foreach(arr, i, t)
    {
        char age[32], state[32], cmd[256] = "";
        cli_fmt_age(age, sizeof age, json_integer_value(json_object_get(t, "created_at")),
                    (int64_t)time(NULL));
        const char *st = str_of(t, "state");
        if (!strcmp(st, "exited") && json_integer_value(json_object_get(t, "exit_signal")) > 0)
            (void)snprintf(state, sizeof state, "exited(sig%d)",
                           (int)json_integer_value(json_object_get(t, "exit_signal")));
        else if (!strcmp(st, "exited"))
            (void)snprintf(state, sizeof state, "exited(%d)",
                           (int)json_integer_value(json_object_get(t, "exit_code")));
        else
            (void)snprintf(state, sizeof state, "%s", st);
        size_t k;
        json_t *arg;
        size_t used = 0;
        json_array_foreach(json_object_get(t, "argv"), k, arg)
        {
            int n = snprintf(cmd + used, sizeof cmd - used, "%s%s", k ? " " : "",
                             json_string_value(arg) ? json_string_value(arg) : "");
            if (n < 0 || (size_t)n >= sizeof cmd - used)
                break;
            used += (size_t)n;
        }
        const char *writer = str_of(t, "writer");
        char viewers[64];
        (void)snprintf(viewers, sizeof viewers, "%zu%s%s",
                       json_array_size(json_object_get(t, "viewers")), writer[0] ? " w:" : "",
                       writer);
        printf("%-24s %-16s %-12s %-5s %-7s %-6s %s\n", str_of(t, "id"), str_of(t, "sandbox"),
               state, str_of(t, "mode"), viewers, age, cmd);
    }
}

static int cmd_ls(struct app *a, int argc, char **argv)
{
    int json = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else
            return bad_usage("ls: unknown argument %s", argv[i]);
    }
    json_t *sb = NULL, *tm = NULL;
    int rc = api_json(a, "listing sandboxes", "GET", "/v1/sandboxes", NULL, &sb);
    if (rc == CLI_EXIT_OK)
        rc = api_json(a, "listing terminals", "GET", "/v1/terminals", NULL, &tm);
    if (rc == CLI_EXIT_OK && (!json_is_array(sb) || !json_is_array(tm))) {
        fprintf(stderr, "airlock: the server's lists are not JSON arrays\n");
        rc = CLI_EXIT_PROTO;
    }
    if (rc == CLI_EXIT_OK && json) {
        json_t *all = json_pack("{s:O, s:O}", "sandboxes", sb, "terminals", tm);
        char *s = all ? json_dumps(all, JSON_INDENT(2)) : NULL;
        if (s)
            printf("%s\n", s);
        free(s);
        json_decref(all);
    } else if (rc == CLI_EXIT_OK) {
        print_sandboxes(sb);
        printf("\n");
        print_terminals(tm);
    }
    json_decref(sb);
    json_decref(tm);
    return rc;
}

static int cmd_kill(struct app *a, int argc, char **argv)
{
    const char *id = NULL, *sig = "TERM";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--signal") && i + 1 < argc)
            sig = argv[++i];
        else if (argv[i][0] != '-' && !id)
            id = argv[i];
        else
            return bad_usage("kill: unexpected argument %s", argv[i]);
    }
    if (!id || !id_ok(id))
        return bad_usage("kill: give a terminal id%s", "");
    if (!strncmp(sig, "SIG", 3))
        sig += 3;
    char path[256];
    (void)snprintf(path, sizeof path, "/v1/terminals/%s/kill", id);
    json_t *body = json_pack("{s:s}", "signal", sig);
    int rc = api_json(a, "kill", "POST", path, body, NULL);
    json_decref(body);
    if (rc == CLI_EXIT_OK)
        printf("sent %s to %s\n", sig, id);
    return rc;
}

/* Write a whole file with the given mode (made so even if it existed).
 * 0, or -1 with why. */
static int write_file(const char *path, const char *data, size_t len, mode_t mode, char *why,
                      size_t cap)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0 || fchmod(fd, mode) != 0) {
        (void)snprintf(why, cap, "cannot write %s: %s", path, strerror(errno));
        if (fd >= 0)
            (void)close(fd);
        return -1;
    }
    while (len > 0) {
        ssize_t w = write(fd, data, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            (void)snprintf(why, cap, "cannot write %s: %s", path, strerror(errno));
            (void)close(fd);
            return -1;
        }
        data += w;
        len -= (size_t)w;
    }
    if (close(fd) != 0) {
        (void)snprintf(why, cap, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The enrollment's files in dir: jwks.json (the public keys) and token. */
static int write_enrollment(const char *dir, json_t *jwks, const char *token, char *why, size_t cap)
{
    if (mkdir(dir, S_IRWXU) != 0 && errno != EEXIST) {
        (void)snprintf(why, cap, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    char path[PATH_MAX_CLI];
    char *keys = jwks ? json_dumps(jwks, JSON_INDENT(2)) : NULL;
    if (!keys) {
        (void)snprintf(why, cap, "the server's answer has no public keys (jwks)");
        return -1;
    }
    size_t kl = strlen(keys);
    int rc = -1;
    if (snprintf(path, sizeof path, "%s/jwks.json", dir) < (int)sizeof path &&
        write_file(path, keys, kl, S_IRUSR | S_IWUSR | S_IRGRP | S_IROTH, why, cap) == 0) {
        char line[AL_MAX_TOKEN + 2];
        int tl = snprintf(line, sizeof line, "%s\n", token);
        if (tl > 0 && tl < (int)sizeof line &&
            snprintf(path, sizeof path, "%s/token", dir) < (int)sizeof path &&
            write_file(path, line, (size_t)tl, S_IRUSR | S_IWUSR, why, cap) == 0)
            rc = 0;
    }
    free(keys);
    return rc;
}

static int cmd_enroll(struct app *a, int argc, char **argv)
{
    const char *id = NULL, *out_dir = NULL;
    long long ttl = 0;
    int json = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--ttl") && i + 1 < argc) {
            char *end;
            errno = 0;
            ttl = strtoll(argv[++i], &end, 10);
            if (errno || end == argv[i] || *end || ttl <= 0)
                return bad_usage("--ttl wants seconds, not '%s'", argv[i]);
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out_dir = argv[++i];
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (argv[i][0] != '-' && !id) {
            id = argv[i];
        } else {
            return bad_usage("sandbox enroll: unexpected argument %s", argv[i]);
        }
    }
    if (!id || !id_ok(id))
        return bad_usage("sandbox enroll: give a sandbox id%s", "");
    char path[256];
    (void)snprintf(path, sizeof path, "/v1/sandboxes/%s/enroll", id);
    json_t *body = ttl ? json_pack("{s:I}", "ttl", (json_int_t)ttl) : json_object();
    json_t *res = NULL;
    int rc = api_json(a, "enrolling the sandbox", "POST", path, body, &res);
    json_decref(body);
    if (rc != CLI_EXIT_OK)
        return rc;
    const char *token = str_of(res, "token"), *command = str_of(res, "command");
    if (!token[0] || !command[0]) {
        fprintf(stderr, "airlock: the server's enrollment has no token or command\n");
        json_decref(res);
        return CLI_EXIT_PROTO;
    }
    char why[WHY_MAX];
    if (out_dir &&
        write_enrollment(out_dir, json_object_get(res, "jwks"), token, why, sizeof why) != 0) {
        fprintf(stderr, "airlock: %s\n", why);
        json_decref(res);
        return CLI_EXIT_OTHER;
    }
    if (json) {
        char *s = json_dumps(res, JSON_INDENT(2));
        if (s)
            printf("%s\n", s);
        free(s);
    } else {
        printf("enrolled sandbox %s: a runner token valid for %lld s\n", id,
               (long long)json_integer_value(json_object_get(res, "expires_in")));
        if (out_dir)
            printf("wrote %s/jwks.json and %s/token; in the sandbox, in that directory, run:\n",
                   out_dir, out_dir);
        else
            printf("in the sandbox, with the keys in jwks.json and the token in a file named "
                   "token (airlock sandbox enroll --out DIR writes both), run:\n");
        printf("  %s\n", command);
        printf("token: %s\n", token);
    }
    json_decref(res);
    return CLI_EXIT_OK;
}

static int cmd_sandbox(struct app *a, int argc, char **argv)
{
    if (argc < 1)
        return bad_usage("sandbox: add, rm, ls or enroll%s", "");
    if (!strcmp(argv[0], "ls")) {
        json_t *sb = NULL;
        int rc = api_json(a, "listing sandboxes", "GET", "/v1/sandboxes", NULL, &sb);
        if (rc == CLI_EXIT_OK)
            print_sandboxes(sb);
        json_decref(sb);
        return rc;
    }
    if (!strcmp(argv[0], "rm")) {
        if (argc != 2 || !id_ok(argv[1]))
            return bad_usage("sandbox rm: give one sandbox id%s", "");
        char path[256];
        (void)snprintf(path, sizeof path, "/v1/sandboxes/%s", argv[1]);
        int rc = api_json(a, "removing the sandbox", "DELETE", path, NULL, NULL);
        if (rc == CLI_EXIT_OK)
            printf("removed sandbox %s\n", argv[1]);
        return rc;
    }
    if (!strcmp(argv[0], "enroll"))
        return cmd_enroll(a, argc - 1, argv + 1);
    if (strcmp(argv[0], "add") != 0)
        return bad_usage("sandbox: unknown subcommand %s", argv[0]);
    const char *id = NULL, *kind = NULL, *url = NULL, *net = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--kind") && i + 1 < argc)
            kind = argv[++i];
        else if (!strcmp(argv[i], "--url") && i + 1 < argc)
            url = argv[++i];
        else if (!strcmp(argv[i], "--network") && i + 1 < argc)
            net = argv[++i];
        else if (argv[i][0] != '-' && !id)
            id = argv[i];
        else
            return bad_usage("sandbox add: unexpected argument %s", argv[i]);
    }
    if (!id || !kind)
        return bad_usage("sandbox add: give an id and --kind local|static|reverse%s", "");
    /* checked here too: a value jansson refused would silently be left out */
    if (net && strcmp(net, "host") != 0 && strcmp(net, "none") != 0)
        return bad_usage("sandbox add: --network host or none, not %s", net);
    json_t *body = json_pack("{s:s, s:s}", "id", id, "kind", kind);
    if (body && url)
        (void)json_object_set_new(body, "url", json_string(url));
    if (body && net) /* the server checks that the sandbox is local */
        (void)json_object_set_new(body, "network", json_string(net));
    json_t *out = NULL;
    int rc = api_json(a, "adding the sandbox", "POST", "/v1/sandboxes", body, &out);
    json_decref(body);
    if (rc == CLI_EXIT_OK && json_is_string(json_object_get(out, "network")))
        printf("added %s sandbox %s (network %s%s)\n", kind, id, str_of(out, "network"),
               json_is_true(json_object_get(out, "network_default")) ? ", the server's default"
                                                                     : "");
    else if (rc == CLI_EXIT_OK)
        printf("added %s sandbox %s\n", kind, id);
    json_decref(out);
    return rc;
}

/* ---- attach and run -------------------------------------------------------- */

struct attach_args {
    int read_only, escape, pipe;
    uint64_t retry_for_ms;
};

/* Options shared by attach and run; 1 when argv[*i] was one of them. */
static int common_opt(struct attach_args *o, int argc, char **argv, int *i, int *err)
{
    const char *s = argv[*i];
    if (!strcmp(s, "--escape") && *i + 1 < argc) {
        const char *v = argv[++*i];
        if (!strcmp(v, "none"))
            o->escape = -1;
        else if (strlen(v) == 1 && (unsigned char)v[0] > ' ' && (unsigned char)v[0] < 0x7f)
            o->escape = (unsigned char)v[0];
        else
            *err = bad_usage("--escape wants one printable character or 'none', not '%s'", v);
        return 1;
    }
    if (!strcmp(s, "--retry-for") && *i + 1 < argc) {
        char *end;
        errno = 0;
        const char *v = argv[++*i];
        unsigned long long n = strtoull(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-' || n > MAX_RETRY_FOR_S)
            *err = bad_usage("--retry-for wants seconds, not '%s'", v);
        o->retry_for_ms = n * MS_PER_S;
        return 1;
    }
    return 0;
}

static int do_attach(struct app *a, const char *id, int pipe, const struct attach_args *aa,
                     int quiet, int *detached)
{
    struct cli_attach_opts o;
    memset(&o, 0, sizeof o);
    o.term_id = id;
    o.pipe_mode = pipe;
    o.read_only = aa->read_only;
    o.escape = aa->escape;
    o.retry_for_ms = aa->retry_for_ms;
    o.quiet = quiet;
    o.forward_signals = pipe;
    int st = CLI_EXIT_OTHER;
    if (cli_attach(&a->loop, a->net, &o, &st, detached) != AL_OK) {
        fprintf(stderr, "airlock: out of memory\n");
        return CLI_EXIT_OTHER;
    }
    return st;
}

static int cmd_attach(struct app *a, int argc, char **argv)
{
    struct attach_args aa = {0, CLI_ESCAPE_DEFAULT, 0,
                             (uint64_t)CLI_RETRY_FOR_DEFAULT_S * MS_PER_S};
    const char *target = NULL;
    for (int i = 0; i < argc; i++) {
        int err = 0;
        if (!strcmp(argv[i], "--read-only"))
            aa.read_only = 1;
        else if (common_opt(&aa, argc, argv, &i, &err)) {
            if (err)
                return err;
        } else if (argv[i][0] != '-' && !target)
            target = argv[i];
        else
            return bad_usage("attach: unexpected argument %s", argv[i]);
    }
    if (!target)
        return bad_usage("attach: which terminal?%s", "");
    const char *slash = strchr(target, '/');
    const char *id = slash ? slash + 1 : target;
    if (!id_ok(id))
        return bad_usage("attach: '%s' is not a terminal id", target);
    char path[256];
    (void)snprintf(path, sizeof path, "/v1/terminals/%s", id);
    json_t *t = NULL;
    int rc = api_json(a, "looking up the terminal", "GET", path, NULL, &t);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (slash && strncmp(str_of(t, "sandbox"), target, (size_t)(slash - target)) != 0) {
        fprintf(stderr, "airlock: terminal %s is in sandbox %s, not %.*s\n", id,
                str_of(t, "sandbox"), (int)(slash - target), target);
        json_decref(t);
        return CLI_EXIT_NOTFOUND;
    }
    int pipe = !strcmp(str_of(t, "mode"), "pipes");
    const char *state = str_of(t, "state");
    if (!strcmp(state, "closed") || !strcmp(state, "lost")) {
        fprintf(stderr, "airlock: terminal %s is %s; its recording stays: airlock replay %s\n", id,
                state, id);
        json_decref(t);
        return CLI_EXIT_NOTFOUND;
    }
    json_decref(t);
    int detached = 0;
    return do_attach(a, id, pipe, &aa, 0, &detached);
}

static int cmd_run(struct app *a, int argc, char **argv)
{
    struct attach_args aa = {0, CLI_ESCAPE_DEFAULT, 0,
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
                return bad_usage("--env wants NAME=VALUE, not '%s'", kv);
            }
            char name[AL_MAX_STR];
            (void)snprintf(name, sizeof name, "%.*s", (int)(eq - kv), kv);
            (void)json_object_set_new(env, name, json_string(eq + 1));
        } else if (common_opt(&aa, argc, argv, &i, &err)) {
            if (err) {
                json_decref(env);
                return err;
            }
        } else if (argv[i][0] != '-' && !sandbox) {
            sandbox = argv[i];
        } else {
            json_decref(env);
            return bad_usage("run: unexpected argument %s (the command goes after --)", argv[i]);
        }
    }
    if (!sandbox || i >= argc) {
        json_decref(env);
        return bad_usage("run: usage: airlock run SANDBOX [--pipe] -- CMD ARGS...%s", "");
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
    int rc = api_json(a, "starting the command", "POST", "/v1/terminals", body, &t);
    json_decref(body);
    if (rc != CLI_EXIT_OK)
        return rc;
    char id[TERM_ID_MAX];
    (void)snprintf(id, sizeof id, "%s", str_of(t, "id"));
    json_decref(t);
    if (!id_ok(id)) {
        fprintf(stderr, "airlock: the server gave no usable terminal id\n");
        return CLI_EXIT_PROTO;
    }
    int detached = 0;
    int st = do_attach(a, id, aa.pipe, &aa, aa.pipe, &detached);
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

/* ---- probe ------------------------------------------------------------------- */

static int cmd_probe(struct app *a, int argc, char **argv)
{
    int json = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else
            return bad_usage("probe: unknown argument %s", argv[i]);
    }
    int rc = app_net(a);
    if (rc != CLI_EXIT_OK)
        return rc;
    return cli_probe(a->net, &a->cfg, json, stdout);
}

/* ---- replay ------------------------------------------------------------------ */

static int parse_seconds(const char *v, double max, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d > 0) || d > max)
        return -1;
    *out = d;
    return 0;
}

static int cmd_replay(struct app *a, int argc, char **argv)
{
    struct cli_replay_opts o = {1.0, 0};
    const char *src = NULL;
    for (int i = 0; i < argc; i++) {
        double d;
        if (!strcmp(argv[i], "--speed") && i + 1 < argc) {
            if (parse_seconds(argv[++i], CLI_REPLAY_MAX_SPEED, &d) != 0)
                return bad_usage("--speed wants a factor above 0 (2 = twice as fast), not '%s'",
                                 argv[i]);
            o.speed = d;
        } else if (!strcmp(argv[i], "--idle-limit") && i + 1 < argc) {
            if (parse_seconds(argv[++i], CASTREAD_MAX_INTERVAL_S, &d) != 0)
                return bad_usage("--idle-limit wants seconds above 0, not '%s'", argv[i]);
            o.idle_limit_us = (int64_t)(d * US_PER_S);
        } else if (argv[i][0] != '-' && !src) {
            src = argv[i];
        } else {
            return bad_usage("replay: unexpected argument %s", argv[i]);
        }
    }
    if (!src)
        return bad_usage("replay: give a recording file or a terminal id%s", "");
    char why[WHY_MAX];
    struct castread *r = NULL;
    struct cli_http_result res;
    memset(&res, 0, sizeof res);
    struct stat st;
    if (stat(src, &st) == 0 || strchr(src, '/') || !id_ok(src)) {
        if (castread_open(src, &r, why, sizeof why) != AL_OK) {
            fprintf(stderr, "airlock: %s: %s\n", src, why);
            return errno == ENOENT || stat(src, &st) != 0 ? CLI_EXIT_NOTFOUND : CLI_EXIT_PROTO;
        }
    } else {
        char path[256];
        (void)snprintf(path, sizeof path, "/v1/terminals/%s/recording", src);
        int rc = api_call(a, "downloading the recording", "GET", path, NULL, CLI_HTTP_MAX_RECORDING,
                          &res, NULL);
        if (rc != CLI_EXIT_OK) {
            free(res.body);
            return rc;
        }
        if (castread_open_mem(res.body ? res.body : "", res.len, &r, why, sizeof why) != AL_OK) {
            fprintf(stderr, "airlock: the recording of %s is not readable: %s\n", src, why);
            free(res.body);
            return CLI_EXIT_PROTO;
        }
    }
    if (!a->loop_ok) {
        if (uv_loop_init(&a->loop) != 0) {
            castread_close(r);
            free(res.body);
            return CLI_EXIT_OTHER;
        }
        a->loop_ok = 1;
    }
    int rc = cli_replay(&a->loop, r, &o, why, sizeof why);
    if (why[0])
        fprintf(stderr, "airlock: %s\n", why);
    castread_close(r);
    free(res.body);
    return rc;
}

/* ---- main ---------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    struct app app;
    memset(&app, 0, sizeof app);
    signal(SIGPIPE, SIG_IGN);
    /* global options come before the command */
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(argv[i], "--url") && i + 1 < argc)
            app.flag_url = argv[++i];
        else if (!strcmp(argv[i], "--key") && i + 1 < argc)
            app.flag_key = argv[++i];
        else if (!strcmp(argv[i], "--insecure"))
            app.flag_insecure = 1;
        else if (argv[i][0] == '-')
            return bad_usage("unknown option %s", argv[i]);
        else
            break;
    }
    if (i >= argc) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[i];
    int sub_argc = argc - i - 1;
    char **sub = argv + i + 1;
    for (int k = 0; k < sub_argc; k++) {
        if (!strcmp(sub[k], "--"))
            break;
        if (!strcmp(sub[k], "-h") || !strcmp(sub[k], "--help")) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
    }
    int rc;
    if (!strcmp(cmd, "ls"))
        rc = cmd_ls(&app, sub_argc, sub);
    else if (!strcmp(cmd, "kill"))
        rc = cmd_kill(&app, sub_argc, sub);
    else if (!strcmp(cmd, "sandbox"))
        rc = cmd_sandbox(&app, sub_argc, sub);
    else if (!strcmp(cmd, "attach"))
        rc = cmd_attach(&app, sub_argc, sub);
    else if (!strcmp(cmd, "run"))
        rc = cmd_run(&app, sub_argc, sub);
    else if (!strcmp(cmd, "replay"))
        rc = cmd_replay(&app, sub_argc, sub);
    else if (!strcmp(cmd, "probe"))
        rc = cmd_probe(&app, sub_argc, sub);
    else
        rc = bad_usage("unknown command '%s'", cmd);
    app_free(&app);
    (void)fflush(stdout);
    return rc;
}
