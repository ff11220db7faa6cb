/*
 * airlockd: the control plane. A table of subcommands (later issues add
 * serve, user, ...); each parses its own flags with one small option table.
 *
 * Data model: struct cmd names a subcommand, its synopsis and its handler;
 * struct opt binds a flag to where its value goes (a string pointer, or a
 * bool for a flag without value). Exit codes: 0 success, 1 runtime failure,
 * 2 usage error; every failure is one line on stderr.
 *
 *   airlockd keygen [--data DIR] [--rotate]
 *   airlockd token  [--data DIR] --aud AUD --scope SCOPE [--sub SUB]
 *                   [--iss ISS] [--ttl SECONDS]
 *
 * --data defaults to $AIRLOCK_DATA, else ./airlock-data.
 */
#include "al_err.h"
#include "keys.h"
#include "tok_sign.h"
#include "token.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    RC_FAIL = 1,
    RC_USAGE = 2,
    OPT_MAX = 8, /* flags per subcommand */
};

#define DATA_DEFAULT "./airlock-data"
#define DATA_ENV "AIRLOCK_DATA"
#define SUB_DEFAULT "operator"

struct opt {
    const char *name;   /* "--aud" */
    const char **value; /* receives the argument; NULL for a bool flag */
    bool *flag;         /* set for a bool flag */
};

struct cmd {
    const char *name;
    const char *synopsis;
    const char *summary;
    int (*run)(const struct cmd *self, int argc, char **argv);
};

static int cmd_keygen(const struct cmd *self, int argc, char **argv);
static int cmd_token(const struct cmd *self, int argc, char **argv);
static int cmd_help(const struct cmd *self, int argc, char **argv);

static const struct cmd cmds[] = {
    {"keygen", "[--data DIR] [--rotate]",
     "create the signing key (DIR/" KEYS_PRIVATE_FILE ", 0600) and DIR/" KEYS_JWKS_FILE
     "; --rotate makes a new current key and keeps the old public keys",
     cmd_keygen},
    {"token", "[--data DIR] --aud AUD --scope SCOPE [--sub SUB] [--iss ISS] [--ttl SECONDS]",
     "mint a signed token and print it on stdout", cmd_token},
    {"help", "[COMMAND]", "show this help, or a command's", cmd_help},
};
enum { NCMDS = sizeof cmds / sizeof cmds[0] };

/* The one error line of a failure: "airlockd[ CMD]: message" on stderr. */
__attribute__((format(printf, 2, 3))) static void errline(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)fprintf(stderr, "airlockd%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): see tok_reason in token.c
    (void)vfprintf(stderr, fmt, ap);
    (void)fputc('\n', stderr);
    va_end(ap);
}

static void usage_all(FILE *to)
{
    (void)fputs("usage: airlockd COMMAND [OPTIONS]\n\ncommands:\n", to);
    for (size_t i = 0; i < NCMDS; i++)
        (void)fprintf(to, "  %-8s %s\n           %s\n", cmds[i].name, cmds[i].synopsis,
                      cmds[i].summary);
    (void)fputs("\n--data defaults to $" DATA_ENV ", else " DATA_DEFAULT ".\n"
                "Exit status: 0 ok, 1 failure, 2 usage error.\n",
                to);
}

static void usage_cmd(const struct cmd *c, FILE *to)
{
    (void)fprintf(to, "usage: airlockd %s %s\n  %s\n", c->name, c->synopsis, c->summary);
}

static bool is_help(const char *a)
{
    return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

/* Parse argv[1..argc) against opts. Accepts "--name value" and
 * "--name=value". Returns 0, 1 for --help (printed), or RC_USAGE. */
static int parse_opts(const struct cmd *c, int argc, char **argv, const struct opt *opts,
                      size_t nopts)
{
    bool seen[OPT_MAX] = {false};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            usage_cmd(c, stdout);
            return 1;
        }
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        const struct opt *o = NULL;
        size_t oi = 0;
        for (; oi < nopts; oi++) {
            if (strlen(opts[oi].name) == nlen && strncmp(opts[oi].name, a, nlen) == 0) {
                o = &opts[oi];
                break;
            }
        }
        if (!o) {
            errline(c->name, "unknown %s '%s' (see airlockd %s --help)",
                    a[0] == '-' ? "option" : "argument", a, c->name);
            return RC_USAGE;
        }
        if (seen[oi]) {
            errline(c->name, "%s given twice", o->name);
            return RC_USAGE;
        }
        seen[oi] = true;
        if (!o->value) {
            if (eq) {
                errline(c->name, "%s takes no value", o->name);
                return RC_USAGE;
            }
            *o->flag = true;
            continue;
        }
        const char *v;
        if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            errline(c->name, "%s needs a value", o->name);
            return RC_USAGE;
        }
        if (v[0] == '\0') {
            errline(c->name, "%s needs a non-empty value", o->name);
            return RC_USAGE;
        }
        *o->value = v;
    }
    return 0;
}

static const char *default_data_dir(void)
{
    const char *env = getenv(DATA_ENV);
    return env && env[0] != '\0' ? env : DATA_DEFAULT;
}

/* A whole decimal number in [lo, hi]; false otherwise. */
static bool parse_int(const char *s, long long lo, long long hi, long long *out)
{
    if (!s || s[0] < '0' || s[0] > '9')
        return false; /* no sign, no space */
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || !end || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static int cmd_keygen(const struct cmd *self, int argc, char **argv)
{
    const char *data = NULL;
    bool rotate = false;
    const struct opt opts[] = {
        {"--data", &data, NULL},
        {"--rotate", NULL, &rotate},
    };
    int prc = parse_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if (!data)
        data = default_data_dir();

    struct keys_init_result res;
    char reason[TOK_REASON_MAX + KEYS_PATH_MAX];
    int rc = keys_init_dir(data, rotate, &res, reason, sizeof reason);
    if (rc != AL_OK) {
        errline("keygen", "%s", reason[0] ? reason : al_strerror(rc));
        return RC_FAIL;
    }
    if (printf("%s signing key %s in %s/" KEYS_PRIVATE_FILE "; %s/" KEYS_JWKS_FILE
               " publishes %zu key%s\n",
               rotate ? "rotated: new" : "created", res.kid, data, data, res.jwks_keys,
               res.jwks_keys == 1 ? "" : "s") < 0 ||
        fflush(stdout) != 0)
        return RC_FAIL;
    return 0;
}

static int cmd_token(const struct cmd *self, int argc, char **argv)
{
    const char *data = NULL, *aud = NULL, *scope = NULL, *sub = NULL, *iss = NULL;
    const char *ttl_s = NULL;
    const struct opt opts[] = {
        {"--data", &data, NULL}, {"--aud", &aud, NULL}, {"--scope", &scope, NULL},
        {"--sub", &sub, NULL},   {"--iss", &iss, NULL}, {"--ttl", &ttl_s, NULL},
    };
    int prc = parse_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if (!aud || !scope) {
        errline("token", "--aud and --scope are required (see airlockd token "
                         "--help)");
        return RC_USAGE;
    }
    long long ttl = TOK_SIGN_TTL_DEFAULT;
    if (ttl_s && !parse_int(ttl_s, 1, TOK_SIGN_TTL_MAX, &ttl)) {
        errline("token", "--ttl must be a whole number of seconds from 1 to %d", TOK_SIGN_TTL_MAX);
        return RC_USAGE;
    }
    if (!tok_scope_list_valid(scope)) {
        errline("token", "--scope must be space-separated scopes such as "
                         "'runner:connect' (printable ASCII, no quote or backslash)");
        return RC_USAGE;
    }
    if (!data)
        data = default_data_dir();

    char key_path[KEYS_PATH_MAX], jwks_path[KEYS_PATH_MAX];
    if (keys_path(data, KEYS_PRIVATE_FILE, key_path, sizeof key_path) != AL_OK ||
        keys_path(data, KEYS_JWKS_FILE, jwks_path, sizeof jwks_path) != AL_OK) {
        errline("token", "--data path too long");
        return RC_USAGE;
    }
    time_t now = time(NULL);
    if (now == (time_t)-1) {
        errline("token", "cannot read the clock");
        return RC_FAIL;
    }

    char reason[TOK_REASON_MAX + KEYS_PATH_MAX];
    struct keys_signing *k = NULL;
    int rc = keys_load_private(key_path, &k, reason, sizeof reason);
    if (rc != AL_OK) {
        errline("token", "%s%s%s%s", reason[0] ? reason : al_strerror(rc),
                rc == AL_E_NOENT ? " (run: airlockd keygen --data " : "",
                rc == AL_E_NOENT ? data : "", rc == AL_E_NOENT ? ")" : "");
        return RC_FAIL;
    }
    struct tok_sign_req req = {
        .iss = iss,
        .aud = aud,
        .sub = sub ? sub : SUB_DEFAULT,
        .scope = scope,
        .jti = NULL,
        .now = (int64_t)now,
        .ttl = ttl,
    };
    char token[TOK_MAX_TOKEN + 1];
    size_t len = 0;
    rc = tok_sign_mint(k, &req, token, sizeof token, &len, reason, sizeof reason);
    keys_free(k);
    if (rc != AL_OK) {
        errline("token", "%s", reason[0] ? reason : al_strerror(rc));
        return rc == AL_E_INVAL ? RC_USAGE : RC_FAIL;
    }

    /* Never hand out a token the published key set would refuse (for
     * example a jwks.json that lost the current key). */
    struct tok_keyset *ks = NULL;
    rc = tok_keyset_from_file(jwks_path, &ks, reason, sizeof reason);
    if (rc == AL_OK) {
        /* Ask for a scope the token has: this checks key, signature and time. */
        const char *sp = strchr(scope, ' ');
        char first[TOK_MAX_SCOPE + 1];
        size_t fl = sp ? (size_t)(sp - scope) : strlen(scope);
        memcpy(first, scope, fl);
        first[fl] = '\0';
        struct tok_verify_params p;
        tok_verify_params_init(&p, aud, first, (int64_t)now);
        char why[TOK_REASON_MAX];
        rc = tok_verify(ks, token, len, &p, NULL, why, sizeof why);
        tok_keyset_free(ks);
        if (rc != AL_OK) {
            errline("token",
                    "the minted token does not verify against %s (%s); "
                    "run airlockd keygen --rotate to republish the keys",
                    jwks_path, why);
            return RC_FAIL;
        }
    } else {
        errline("token", "%s; verifiers need it (run airlockd keygen --rotate)",
                reason[0] ? reason : al_strerror(rc));
        return RC_FAIL;
    }

    if (printf("%s\n", token) < 0 || fflush(stdout) != 0) {
        errline("token", "cannot write to stdout");
        return RC_FAIL;
    }
    return 0;
}

static int cmd_help(const struct cmd *self, int argc, char **argv)
{
    (void)self;
    if (argc > 2) {
        errline("help", "one command at most");
        return RC_USAGE;
    }
    if (argc == 2) {
        for (size_t i = 0; i < NCMDS; i++) {
            if (strcmp(cmds[i].name, argv[1]) == 0) {
                usage_cmd(&cmds[i], stdout);
                return 0;
            }
        }
        errline("help", "unknown command '%s'", argv[1]);
        return RC_USAGE;
    }
    usage_all(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        errline(NULL, "missing command (see airlockd --help)");
        return RC_USAGE;
    }
    if (is_help(argv[1])) {
        usage_all(stdout);
        return 0;
    }
    for (size_t i = 0; i < NCMDS; i++)
        if (strcmp(cmds[i].name, argv[1]) == 0)
            return cmds[i].run(&cmds[i], argc - 1, argv + 1);
    errline(NULL, "unknown command '%s' (see airlockd --help)", argv[1]);
    return RC_USAGE;
}
