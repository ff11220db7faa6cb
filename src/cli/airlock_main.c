/*
 * airlock: the command-line client's main. A table of commands, cmds[],
 * of the same shape as airlockd's (src/control/airlockd_main.c): a name,
 * its lines of `airlock --help`, and its handler, which parses its own
 * arguments. The global options (--url, --key, --insecure) come before
 * the command, a table too (struct opt, as airlockd's: a value's place or
 * a flag's); -h or --help anywhere before a "--" prints the help.
 *
 * Each command's code is in the file of its concept (cli_probe.c,
 * cli_attach.c, cli_run.c, cli_ls.c, cli_kill.c, cli_sandbox.c,
 * cli_replay.c), on top of cli_app (the run's context and airlockd's
 * JSON API), all in the library al_cli. Exit codes: cli_err.h.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "al_version.h"
#include "cli_app.h"
#include "cli_attach.h"
#include "cli_err.h"
#include "cli_kill.h"
#include "cli_ls.h"
#include "cli_probe.h"
#include "cli_replay.h"
#include "cli_run.h"
#include "cli_sandbox.h"

struct cmd {
    const char *name;
    const char *usage; /* its lines of airlock --help, as printed */
    int (*run)(struct cli_app *app, int argc, char **argv);
    const char *help; /* more for `airlock NAME --help`, or NULL */
};

/* airlock probe --help: every figure a path probe prints. */
static const char probe_help[] =
    "\n"
    "airlock probe ws://HOST[:PORT]/?identifier=ID&api-version=2024-02-02-preview [options]\n"
    "        measure the WebSocket path to a runner (wss:// for TLS). The token is a\n"
    "        runner:probe token for ID (airlockd token --aud ID --scope runner:probe):\n"
    "        it opens a probe session, which runs nothing and leaves airlockd's link alone.\n"
    "  --token T | --token-file F   the token; without one only the refusals are measured\n"
    "  --wrong-token T              a token of another audience, expected refused\n"
    "  --token-header NAME          send the token in NAME, not Authorization\n"
    "  --header 'Name: value'       add a header (up to 16), e.g. a platform's own token\n"
    "  --cacert FILE                CAs for wss:// (default: the system's); --insecure: none\n"
    "  --idle-max S  --age-max S    how long to wait for an idle cut / a maximum age\n"
    "                               (default 30 each; 0 skips that measurement)\n"
    "  --ping-interval-ms MS        pings of the pinged session (default 2000)\n"
    "  --pings N  --bytes N         RTT samples (20); bytes each way for throughput (4 MiB)\n"
    "  --json                       one JSON object (members in brackets below)\n"
    "\n"
    "figures:\n"
    "  phases      dns: the name's resolution; tcp: a TCP connect on its own; tls: the\n"
    "              connection's start to its upgrade request, less tcp; upgrade: the\n"
    "              request to its answer [phases_ms]\n"
    "  upgrade     the HTTP status with no token [upgrade_without_token], a damaged one\n"
    "              [upgrade_with_bad_token], --wrong-token [upgrade_with_wrong_audience]\n"
    "              (403 each on a sound path), and the token (101) [upgrade_with_token]\n"
    "  subprotocol what the server chose (airlock.v1) [subprotocol]\n"
    "  rtt         p50 and p99 of N round trips, one after the other [rtt_ms]\n"
    "  messages    the largest message carried whole, up to 65546 bytes [max_message_bytes]\n"
    "  throughput  Mbit/s to the runner and from it [throughput_mbps]\n"
    "  idle        when a silent connection was cut, and how (close CODE or reset)\n"
    "              [idle_cut_s, idle_close]; not cut within --idle-max: null\n"
    "  pings       whether a pinged connection lived as long as the silent one\n"
    "              [idle_with_pings_ok]\n"
    "  max age     when the pinged connection was cut anyway [max_age_s, age_close]\n"
    "  headers     the request headers the runner saw, credentials redacted to their\n"
    "              scheme and length [headers_seen, headers]\n"
    "  WARNING     with --token-header: Authorization reached the sandbox, so the\n"
    "              platform's token is visible there [authorization_forwarded]\n"
    "exit: 0 measured; 69 unreachable, TLS failed, no answer, out of time; 77 no token or\n"
    "the token refused; 76 not a runner's path; 64 bad option.\n";

static const struct cmd cmds[] = {
    {"probe",
     "  probe [--json]                 check the server, the key and the sandboxes' links\n"
     "        (run it first: health, who the key is, link state and RTT, timings)\n"
     "  probe ws://...|wss://... [--token T|--token-file F] [--wrong-token T] [--json]\n"
     "        [--token-header NAME] [--header 'Name: value']... [--cacert FILE]\n"
     "        [--idle-max S] [--age-max S] [--ping-interval-ms MS] [--pings N] [--bytes N]\n"
     "        measure the path to a runner (idle cut, maximum age, RTT, throughput,\n"
     "        headers seen: airlock probe --help)\n",
     cli_probe_cmd, probe_help},
    {"attach",
     "  attach [SANDBOX/]TERMINAL [--read-only] [--escape C|none] [--retry-for S]\n"
     "        [--ping-interval S]\n"
     "        attach this terminal to it (Enter ~ . detaches, ~ t takes over, ~ ? help)\n",
     cli_attach_cmd, NULL},
    {"run",
     "  run SANDBOX [--pipe] [--cwd DIR] [--env NAME=VALUE]... [--proxy NAME]... -- CMD ARGS...\n"
     "        start a command and attach; --pipe (or no terminal here): stdin, stdout\n"
     "        and stderr as pipes, exit code propagated; --proxy: the command may call\n"
     "        airlockd's upstream NAME through the credential proxy, without its key\n",
     cli_run_cmd, NULL},
    {"ls", "  ls [--json]                    sandboxes and terminals\n", cli_ls_cmd, NULL},
    {"kill", "  kill TERMINAL [--signal NAME]  signal its processes (TERM, INT, HUP, KILL, ...)\n",
     cli_kill_cmd, NULL},
    {"sandbox",
     "  sandbox add ID --kind local|static|reverse|aca [--url URL] [--network host|none]\n"
     "                [--platform NAME]   (aca: URL is the pool's endpoint)\n"
     "                                 (admin; --network: a local sandbox's agents)\n"
     "  sandbox rm ID | sandbox ls\n"
     "  sandbox enroll ID [--ttl S] [--out DIR] [--json]   (admin, reverse sandboxes)\n"
     "        a runner token and the airlock-runner command line to start it with;\n"
     "        --out writes DIR/jwks.json and DIR/token\n",
     cli_sandbox_cmd, NULL},
    {"replay",
     "  replay FILE|TERMINAL [--speed X] [--idle-limit S]\n"
     "        play an asciicast recording (a file, or a terminal's from the server)\n",
     cli_replay_cmd, NULL},
};
enum { NCMDS = sizeof cmds / sizeof cmds[0] };

static void usage(FILE *to)
{
    fputs("usage: airlock [--url URL] [--key KEY] [--insecure] COMMAND ...\n"
          "       airlock --version\n"
          "\n"
          "Agents' terminals, from your terminal.\n"
          "\n"
          "commands:\n",
          to);
    for (size_t i = 0; i < NCMDS; i++)
        fputs(cmds[i].usage, to);
    fprintf(to,
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

static const struct cmd *find_cmd(const char *name)
{
    for (size_t i = 0; i < NCMDS; i++)
        if (!strcmp(cmds[i].name, name))
            return &cmds[i];
    return NULL;
}

static int is_help(const char *a)
{
    return !strcmp(a, "-h") || !strcmp(a, "--help");
}

/* The global options, before the command: --url URL, --key KEY,
 * --insecure. i: the first argument not an option (argc if none); 0, 1
 * for --help (printed), or CLI_EXIT_USAGE (printed). */
static int global_opts(struct cli_app *app, int argc, char **argv, int *i)
{
    const struct opt {
        const char *name;
        const char **value; /* receives the next argument; NULL for a flag */
        int *flag;
    } opts[] = {{"--url", &app->flag_url, NULL},
                {"--key", &app->flag_key, NULL},
                {"--insecure", NULL, &app->flag_insecure}};
    for (*i = 1; *i < argc && argv[*i][0] == '-'; ++*i) {
        const char *a = argv[*i];
        if (is_help(a)) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--version"))
            return al_version_print(stdout, "airlock") == 0 ? 1 : CLI_EXIT_OTHER;
        const struct opt *o = NULL;
        for (size_t k = 0; k < sizeof opts / sizeof opts[0] && !o; k++)
            if (!strcmp(opts[k].name, a))
                o = &opts[k];
        if (!o || (o->value && *i + 1 >= argc))
            return cli_err_usage("unknown option %s", a);
        if (o->value)
            *o->value = argv[++*i];
        else
            *o->flag = 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct cli_app app;
    memset(&app, 0, sizeof app);
    signal(SIGPIPE, SIG_IGN);
    int i, rc = global_opts(&app, argc, argv, &i);
    if (rc != 0)
        return rc == 1 ? CLI_EXIT_OK : rc;
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
        if (is_help(sub[k])) {
            const struct cmd *h = find_cmd(cmd);
            if (h && h->help) {
                fputs(h->usage, stdout);
                fputs(h->help, stdout);
            } else {
                usage(stdout);
            }
            return CLI_EXIT_OK;
        }
    }
    const struct cmd *c = find_cmd(cmd);
    rc = c ? c->run(&app, sub_argc, sub) : cli_err_usage("unknown command '%s'", cmd);
    cli_app_free(&app);
    (void)fflush(stdout);
    return rc;
}
