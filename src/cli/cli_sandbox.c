/*
 * cli_sandbox: see cli_sandbox.h.
 */
#include "cli_sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_limits.h"
#include "cli_app.h"
#include "cli_err.h"
#include "cli_ls.h"

#define WHY_MAX 512
#define PATH_MAX_CLI 4096

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

static int cmd_enroll(struct cli_app *a, int argc, char **argv)
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
                return cli_err_usage("--ttl wants seconds, not '%s'", argv[i]);
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out_dir = argv[++i];
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (argv[i][0] != '-' && !id) {
            id = argv[i];
        } else {
            return cli_err_usage("sandbox enroll: unexpected argument %s", argv[i]);
        }
    }
    if (!id || !cli_app_id_ok(id))
        return cli_err_usage("sandbox enroll: give a sandbox id%s", "");
    char path[256];
    (void)snprintf(path, sizeof path, "/v1/sandboxes/%s/enroll", id);
    json_t *body = ttl ? json_pack("{s:I}", "ttl", (json_int_t)ttl) : json_object();
    json_t *res = NULL;
    int rc = cli_app_json(a, "enrolling the sandbox", "POST", path, body, &res);
    json_decref(body);
    if (rc != CLI_EXIT_OK)
        return rc;
    const char *token = cli_app_str(res, "token"), *command = cli_app_str(res, "command");
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

int cli_sandbox_cmd(struct cli_app *a, int argc, char **argv)
{
    if (argc < 1)
        return cli_err_usage("sandbox: add, rm, ls or enroll%s", "");
    if (!strcmp(argv[0], "ls")) {
        json_t *sb = NULL;
        int rc = cli_app_json(a, "listing sandboxes", "GET", "/v1/sandboxes", NULL, &sb);
        if (rc == CLI_EXIT_OK)
            cli_ls_sandboxes(sb);
        json_decref(sb);
        return rc;
    }
    if (!strcmp(argv[0], "rm")) {
        if (argc != 2 || !cli_app_id_ok(argv[1]))
            return cli_err_usage("sandbox rm: give one sandbox id%s", "");
        char path[256];
        (void)snprintf(path, sizeof path, "/v1/sandboxes/%s", argv[1]);
        int rc = cli_app_json(a, "removing the sandbox", "DELETE", path, NULL, NULL);
        if (rc == CLI_EXIT_OK)
            printf("removed sandbox %s\n", argv[1]);
        return rc;
    }
    if (!strcmp(argv[0], "enroll"))
        return cmd_enroll(a, argc - 1, argv + 1);
    if (strcmp(argv[0], "add") != 0)
        return cli_err_usage("sandbox: unknown subcommand %s", argv[0]);
    const char *id = NULL, *kind = NULL, *url = NULL, *net = NULL, *platform = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--kind") && i + 1 < argc)
            kind = argv[++i];
        else if (!strcmp(argv[i], "--url") && i + 1 < argc)
            url = argv[++i];
        else if (!strcmp(argv[i], "--network") && i + 1 < argc)
            net = argv[++i];
        else if (!strcmp(argv[i], "--platform") && i + 1 < argc)
            platform = argv[++i];
        else if (argv[i][0] != '-' && !id)
            id = argv[i];
        else
            return cli_err_usage("sandbox add: unexpected argument %s", argv[i]);
    }
    if (!id || !kind)
        return cli_err_usage("sandbox add: give an id and --kind local|static|reverse|aca%s", "");
    /* checked here too: a value jansson refused would silently be left out */
    if (net && strcmp(net, "host") != 0 && strcmp(net, "none") != 0)
        return cli_err_usage("sandbox add: --network host or none, not %s", net);
    json_t *body = json_pack("{s:s, s:s}", "id", id, "kind", kind);
    if (body && url)
        (void)json_object_set_new(body, "url", json_string(url));
    if (body && net) /* the server checks that the sandbox is local */
        (void)json_object_set_new(body, "network", json_string(net));
    if (body && platform) /* ... and that an aca sandbox's platform is in its config */
        (void)json_object_set_new(body, "platform", json_string(platform));
    if (body && json_object_size(body) != 2u + !!url + !!net + !!platform) {
        json_decref(body);
        return cli_err_usage("sandbox add: an argument is not valid UTF-8%s", "");
    }
    json_t *out = NULL;
    int rc = cli_app_json(a, "adding the sandbox", "POST", "/v1/sandboxes", body, &out);
    json_decref(body);
    if (rc == CLI_EXIT_OK && json_is_string(json_object_get(out, "network")))
        printf("added %s sandbox %s (network %s%s)\n", kind, id, cli_app_str(out, "network"),
               json_is_true(json_object_get(out, "network_default")) ? ", the server's default"
                                                                     : "");
    else if (rc == CLI_EXIT_OK && json_is_string(json_object_get(out, "identifier")))
        printf("added %s sandbox %s (platform %s, session identifier %s)\n", kind, id,
               cli_app_str(out, "platform"), cli_app_str(out, "identifier"));
    else if (rc == CLI_EXIT_OK)
        printf("added %s sandbox %s\n", kind, id);
    json_decref(out);
    return rc;
}
