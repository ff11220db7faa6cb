/*
 * cli_ls: see cli_ls.h. Ages and round trips are shown by cli_fmt.
 */
#include "cli_ls.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_app.h"
#include "cli_err.h"
#include "cli_fmt.h"

/* NET: what a local sandbox's agents get, "host" or "none", starred when
 * it is the server's --sandbox-network rather than the sandbox's own; "-"
 * for the others (airlockd does not start their runners). */
void cli_ls_sandboxes(json_t *arr)
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
        const char *n = cli_app_str(s, "network");
        (void)snprintf(net, sizeof net, "%.8s%s", n[0] ? n : "-",
                       n[0] && json_is_true(json_object_get(s, "network_default")) ? "*" : "");
        printf("%-20s %-8s %-5s %-6s %-8s %s\n", cli_app_str(s, "id"), cli_app_str(s, "kind"),
               json_is_true(json_object_get(s, "link_up")) ? "up" : "down", age, rtt, net);
    }
    /* refused runner links (a copied token without the runner's key) are a
     * warning each, after the table */
    json_array_foreach(arr, i, s)
    {
        json_int_t n = json_integer_value(json_object_get(s, "refused_links"));
        if (n <= 0)
            continue;
        char age[32];
        cli_fmt_age(age, sizeof age, json_integer_value(json_object_get(s, "refused_link_at")),
                    (int64_t)time(NULL));
        printf("warning: sandbox %s: %lld runner link%s refused since airlockd started, the last "
               "%s ago: a valid token without the runner's key (an impostor?); see the audit "
               "log, action runner_impostor\n",
               cli_app_str(s, "id"), (long long)n, n == 1 ? "" : "s", age);
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
        const char *st = cli_app_str(t, "state");
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
        const char *writer = cli_app_str(t, "writer");
        char viewers[64];
        (void)snprintf(viewers, sizeof viewers, "%zu%s%s",
                       json_array_size(json_object_get(t, "viewers")), writer[0] ? " w:" : "",
                       writer);
        printf("%-24s %-16s %-12s %-5s %-7s %-6s %s\n", cli_app_str(t, "id"),
               cli_app_str(t, "sandbox"), state, cli_app_str(t, "mode"), viewers, age, cmd);
    }
}

int cli_ls_cmd(struct cli_app *a, int argc, char **argv)
{
    int json = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else
            return cli_err_usage("ls: unknown argument %s", argv[i]);
    }
    json_t *sb = NULL, *tm = NULL;
    int rc = cli_app_json(a, "listing sandboxes", "GET", "/v1/sandboxes", NULL, &sb);
    if (rc == CLI_EXIT_OK)
        rc = cli_app_json(a, "listing terminals", "GET", "/v1/terminals", NULL, &tm);
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
        cli_ls_sandboxes(sb);
        printf("\n");
        print_terminals(tm);
    }
    json_decref(sb);
    json_decref(tm);
    return rc;
}
