/*
 * airlockd: the control plane. main() and the table of subcommands (name,
 * synopsis, summary, handler), each in the file named after it; every
 * command parses its own flags with one small option table
 * (airlockd_cmd.h). Exit codes: 0 success, 1 runtime failure, 2 usage
 * error; every failure is one line on stderr.
 *
 *   airlockd keygen [--data DIR] [--rotate]                 airlockd_key.c
 *   airlockd token  [--data DIR] --aud AUD --scope SCOPE [--sub SUB]
 *                   [--iss ISS] [--ttl SECONDS]             airlockd_key.c
 *   airlockd user add NAME --role admin|operator|viewer [--data DIR] [--db URL]
 *   airlockd user ls [--data DIR] [--db URL]
 *   airlockd user rm NAME [--data DIR] [--db URL]           airlockd_user.c
 *   airlockd serve [--config FILE] [--data DIR] [--db URL] --listen HOST:PORT [...]
 *                  (airlockd_serve.c, api.h; a --config file holds
 *                  "key = value" lines named like the flags, which win
 *                  over it: airlockd_conf.c)
 *   airlockd version | --version                          (al_version.h)
 *   airlockd signer --fd N --data DIR [--log-level N]
 *                  (internal: the key-holding process serve starts,
 *                  airlockd_key.c, signer.h)
 *
 * The database is DIR/airlock.db (db.h), or the one --db names (a db.h URL:
 * postgres://... for PostgreSQL; DIR still holds the signing key and the
 * recordings). --data defaults to $AIRLOCK_DATA, else ./airlock-data.
 */
#include <stdio.h>
#include <string.h>

#include "al_version.h"
#include "airlockd_cmd.h"
#include "airlockd_key.h"
#include "airlockd_serve.h"
#include "airlockd_user.h"
#include "db.h"
#include "keys.h"

static int cmd_help(const struct airlockd_cmd *self, int argc, char **argv);
static int cmd_version(const struct airlockd_cmd *self, int argc, char **argv);

static const struct airlockd_cmd cmds[] = {
    {"keygen", "[--data DIR] [--rotate]",
     "create the signing key (DIR/" KEYS_PRIVATE_FILE ", 0600) and DIR/" KEYS_JWKS_FILE
     "; --rotate makes a new current key and keeps the old public keys",
     airlockd_key_gen},
    {"token", "[--data DIR] --aud AUD --scope SCOPE [--sub SUB] [--iss ISS] [--ttl SECONDS]",
     "mint a signed token and print it on stdout", airlockd_key_token},
    {"user", "add NAME --role ROLE | ls | rm NAME  [--data DIR] [--db URL]",
     "manage the people who may use airlockd (roles: admin, operator, viewer); add prints the "
     "new API key once, DIR/" DB_FILE_NAME " keeps only its hash",
     airlockd_user},
    {"serve",
     "[--config FILE] [--data DIR] [--db URL] --listen HOST:PORT [--tls-cert PEM --tls-key PEM] "
     "[--runner PATH] [--no-bwrap] [--web DIR] [--session-ttl SECONDS] [--session-idle SECONDS] "
     "[--log-level error|info|debug] [--log-format text|json] [--verbose] "
     "[--sandbox-user USER] [--sandbox-network host|none] [--sandbox-memory SIZE] "
     "[--sandbox-pids N] [--sandbox-cpu PERCENT] "
     "[--max-conns N] [--max-conns-per-ip N] [--request-timeout SECONDS] [--audit-keep-days N] "
     "[--audit-keep-rows N] [--ping-interval SECONDS] [--idle-timeout SECONDS] "
     "[--proxy-listen ADDR:PORT] [--proxy-path runner|direct] [--advertise URL] [--recordings DIR]",
     "run the control plane: the JSON API behind API keys, runners (local under bubblewrap, "
     "static, reverse), terminals relayed to clients and recorded, the web page, and the "
     "credential proxy of the upstreams --config names",
     airlockd_serve},
    {"signer", "--fd N --data DIR [--log-level 0|1|2] [--log-format text|json]",
     "internal: the process serve starts to hold the signing key and mint its tokens "
     "(docs/security.md)",
     airlockd_key_signer},
    {"help", "[COMMAND]", "show this help, or a command's", cmd_help},
    {"version", "", "print the version (also --version)", cmd_version},
};
enum { NCMDS = sizeof cmds / sizeof cmds[0] };

static void usage_all(FILE *to)
{
    (void)fputs("usage: airlockd COMMAND [OPTIONS]\n\ncommands:\n", to);
    for (size_t i = 0; i < NCMDS; i++)
        (void)fprintf(to, "  %-8s %s\n           %s\n", cmds[i].name, cmds[i].synopsis,
                      cmds[i].summary);
    (void)fputs("\n--data defaults to $" AIRLOCKD_DATA_ENV ", else " AIRLOCKD_DATA_DEFAULT ".\n"
                "--db URL: that database (postgres://... or sqlite:PATH) instead of "
                "DIR/" DB_FILE_NAME ".\n"
                "Exit status: 0 ok, 1 failure, 2 usage error.\n",
                to);
}

static int cmd_version(const struct airlockd_cmd *self, int argc, char **argv)
{
    (void)self;
    (void)argv;
    if (argc > 1) {
        airlockd_cmd_err("version", "takes no argument");
        return AIRLOCKD_RC_USAGE;
    }
    return al_version_print(stdout, "airlockd") == 0 ? 0 : AIRLOCKD_RC_FAIL;
}

static int cmd_help(const struct airlockd_cmd *self, int argc, char **argv)
{
    (void)self;
    if (argc > 2) {
        airlockd_cmd_err("help", "one command at most");
        return AIRLOCKD_RC_USAGE;
    }
    if (argc == 2) {
        for (size_t i = 0; i < NCMDS; i++) {
            if (strcmp(cmds[i].name, argv[1]) == 0) {
                airlockd_cmd_usage(&cmds[i], stdout);
                return 0;
            }
        }
        airlockd_cmd_err("help", "unknown command '%s'", argv[1]);
        return AIRLOCKD_RC_USAGE;
    }
    usage_all(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        airlockd_cmd_err(NULL, "missing command (see airlockd --help)");
        return AIRLOCKD_RC_USAGE;
    }
    if (airlockd_cmd_is_help(argv[1])) {
        usage_all(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0)
        return al_version_print(stdout, "airlockd") == 0 ? 0 : AIRLOCKD_RC_FAIL;
    for (size_t i = 0; i < NCMDS; i++)
        if (strcmp(cmds[i].name, argv[1]) == 0)
            return cmds[i].run(&cmds[i], argc - 1, argv + 1);
    airlockd_cmd_err(NULL, "unknown command '%s' (see airlockd --help)", argv[1]);
    return AIRLOCKD_RC_USAGE;
}
