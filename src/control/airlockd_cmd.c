/*
 * airlockd_cmd: see airlockd_cmd.h. The option parser reads one command's
 * table; a flag may be given once, a value is never empty.
 */
#include "airlockd_cmd.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define OPT_MAX 48 /* flags per subcommand */

void airlockd_cmd_err(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)fprintf(stderr, "airlockd%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): see tok_reason in token.c
    (void)vfprintf(stderr, fmt, ap);
    (void)fputc('\n', stderr);
    va_end(ap);
}

void airlockd_cmd_usage(const struct airlockd_cmd *c, FILE *to)
{
    (void)fprintf(to, "usage: airlockd %s %s\n  %s\n", c->name, c->synopsis, c->summary);
}

bool airlockd_cmd_is_help(const char *a)
{
    return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

/* The unseen positional entry of opts, or NULL. */
static const struct airlockd_opt *positional(const struct airlockd_opt *opts, size_t nopts,
                                             const bool *seen, size_t *at)
{
    for (size_t i = 0; i < nopts; i++) {
        if (!opts[i].name && !seen[i]) {
            *at = i;
            return &opts[i];
        }
    }
    return NULL;
}

/* The entry of opts named by a, up to its '=' if any, or NULL. */
static const struct airlockd_opt *named(const struct airlockd_opt *opts, size_t nopts,
                                        const char *a, size_t nlen, size_t *at)
{
    for (size_t i = 0; a[0] == '-' && i < nopts; i++) {
        if (opts[i].name && strlen(opts[i].name) == nlen && strncmp(opts[i].name, a, nlen) == 0) {
            *at = i;
            return &opts[i];
        }
    }
    return NULL;
}

int airlockd_cmd_opts(const struct airlockd_cmd *c, int argc, char **argv,
                      const struct airlockd_opt *opts, size_t nopts)
{
    bool seen[OPT_MAX] = {false};
    if (nopts > OPT_MAX) {
        airlockd_cmd_err(c->name, "internal: %zu options, at most %d", nopts, (int)OPT_MAX);
        return AIRLOCKD_RC_USAGE;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (airlockd_cmd_is_help(a)) {
            airlockd_cmd_usage(c, stdout);
            return 1;
        }
        size_t oi = 0;
        const struct airlockd_opt *o = a[0] != '-' ? positional(opts, nopts, seen, &oi) : NULL;
        if (o) { /* the positional argument, if the command has one */
            seen[oi] = true;
            *o->value = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        o = named(opts, nopts, a, eq ? (size_t)(eq - a) : strlen(a), &oi);
        if (!o) {
            airlockd_cmd_err(c->name, "unknown %s '%s' (see airlockd %s --help)",
                             a[0] == '-' ? "option" : "argument", a, c->name);
            return AIRLOCKD_RC_USAGE;
        }
        if (seen[oi]) {
            airlockd_cmd_err(c->name, "%s given twice", o->name);
            return AIRLOCKD_RC_USAGE;
        }
        seen[oi] = true;
        if (!o->value) {
            if (eq) {
                airlockd_cmd_err(c->name, "%s takes no value", o->name);
                return AIRLOCKD_RC_USAGE;
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
            airlockd_cmd_err(c->name, "%s needs a value", o->name);
            return AIRLOCKD_RC_USAGE;
        }
        if (v[0] == '\0') {
            airlockd_cmd_err(c->name, "%s needs a non-empty value", o->name);
            return AIRLOCKD_RC_USAGE;
        }
        *o->value = v;
    }
    return 0;
}

const char *airlockd_cmd_data_dir(void)
{
    const char *env = getenv(AIRLOCKD_DATA_ENV);
    return env && env[0] != '\0' ? env : AIRLOCKD_DATA_DEFAULT;
}

bool airlockd_cmd_int(const char *s, long long lo, long long hi, long long *out)
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
