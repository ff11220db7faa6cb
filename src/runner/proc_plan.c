/*
 * proc_plan: what proc_spawn checks and builds before it forks (see
 * proc.h, struct proc_spec, for the rules). proc_plan_build refuses a bad
 * spec with a message (validate), then makes the struct plan (see
 * proc_internal.h) the child runs from: argv, the environment built from
 * nothing (env_allow, spec->env, TERM), the exec candidates from the
 * child's PATH, the wrapper's argv. Nothing here forks, opens or runs.
 *
 * Not here: the descriptors and the fork (proc.c), what runs after fork
 * (proc_keeper.c).
 */
#include "proc.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"
#include "proc_internal.h"

#define PROC_DEFAULT_PATH "/bin:/usr/bin" /* glibc's execvp default */
/* Without close_range (Linux < 5.9) and without /proc, the child closes
 * fds 3..min(RLIMIT_NOFILE, this) one by one. Higher ones could only be
 * left if the runner opened them without O_CLOEXEC, which it never does. */
#define PROC_CLOSE_LOOP_MAX (1L << 20)

/* Copy s for a message: bounded, control bytes shown as '?'. */
void proc_shown(char *dst, size_t cap, const char *s)
{
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    dst[i] = 0;
    if (s[i] && cap > 4)
        memcpy(dst + cap - 4, "...", 4);
}

/* ---- validation ---------------------------------------------------------- */

/* Entries in a NULL-terminated array, counting at most max + 1. */
static size_t count_upto(const char *const *a, size_t max)
{
    size_t n = 0;
    while (a && a[n] && n <= max)
        n++;
    return n;
}

/* Length of the name of "NAME=value", or 0 if it is not of that form. */
static size_t env_name_len(const char *entry)
{
    const char *eq = strchr(entry, '=');
    return eq ? (size_t)(eq - entry) : 0;
}

static int env_is(const char *entry, const char *name)
{
    size_t n = strlen(name);
    return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

static int env_same_name(const char *a, const char *b)
{
    size_t n = env_name_len(a);
    return n > 0 && strncmp(a, b, n + 1) == 0;
}

static int validate(const struct proc_spec *s, char *err, size_t errcap)
{
    if (s->wrap && (!s->wrap[0] || s->wrap[0][0] != '/' || s->wrap_fd < -1 ||
                    (s->wrap_fd >= 0 && s->wrap_fd < 3) ||
                    count_upto(s->wrap, PROC_MAX_WRAP + 1) > PROC_MAX_WRAP)) {
        al_errf(err, errcap, "bad wrapper: an absolute path, at most %d entries, fd >= 3",
                PROC_MAX_WRAP);
        return AL_E_INVAL;
    }
    if (s->mode != PROC_PTY && s->mode != PROC_PIPES) {
        al_errf(err, errcap, "unknown process mode %d", (int)s->mode);
        return AL_E_INVAL;
    }
    size_t argc = count_upto(s->argv, AL_MAX_ARGV);
    if (argc == 0) {
        al_errf(err, errcap, "no command given (argv is empty)");
        return AL_E_INVAL;
    }
    if (argc > AL_MAX_ARGV) {
        al_errf(err, errcap, "argv has more than %d entries", AL_MAX_ARGV);
        return AL_E_INVAL;
    }
    if (s->argv[0][0] == 0) {
        al_errf(err, errcap, "argv[0] is empty");
        return AL_E_INVAL;
    }
    for (size_t i = 0; i < argc; i++) {
        if (strnlen(s->argv[i], AL_MAX_STR + 1) > AL_MAX_STR) {
            al_errf(err, errcap, "argv[%zu] is longer than %d bytes", i, AL_MAX_STR);
            return AL_E_INVAL;
        }
    }
    size_t nenv = count_upto(s->env, AL_MAX_ENV);
    if (nenv > AL_MAX_ENV) {
        al_errf(err, errcap, "env has more than %d entries", AL_MAX_ENV);
        return AL_E_INVAL;
    }
    for (size_t i = 0; i < nenv; i++) {
        if (strnlen(s->env[i], AL_MAX_STR + 1) > AL_MAX_STR) {
            al_errf(err, errcap, "env[%zu] is longer than %d bytes", i, AL_MAX_STR);
            return AL_E_INVAL;
        }
        if (env_name_len(s->env[i]) == 0) {
            char name[PROC_SHOWN_MAX];
            proc_shown(name, sizeof name, s->env[i]);
            al_errf(err, errcap, "env[%zu] '%s' is not of the form NAME=value", i, name);
            return AL_E_INVAL;
        }
    }
    size_t nallow = count_upto(s->env_allow, PROC_MAX_ENV_ALLOW);
    if (nallow > PROC_MAX_ENV_ALLOW) {
        al_errf(err, errcap, "env_allow has more than %d names", PROC_MAX_ENV_ALLOW);
        return AL_E_INVAL;
    }
    for (size_t i = 0; i < nallow; i++) {
        const char *a = s->env_allow[i];
        size_t n = strnlen(a, AL_MAX_STR + 1);
        const char *star = strchr(a, '*');
        /* a bare "*" would inherit everything: refused */
        if (n == 0 || n > AL_MAX_STR || strchr(a, '=') || (star && (star != a + n - 1 || n == 1))) {
            al_errf(err, errcap, "env_allow[%zu] is not a variable name or NAME* prefix", i);
            return AL_E_INVAL;
        }
    }
    if (s->cwd && strnlen(s->cwd, AL_MAX_STR + 1) > AL_MAX_STR) {
        al_errf(err, errcap, "cwd is longer than %d bytes", AL_MAX_STR);
        return AL_E_INVAL;
    }
    if (s->term && s->term[0]) {
        size_t n = strnlen(s->term, AL_MAX_TERM + 1);
        if (n > AL_MAX_TERM) {
            al_errf(err, errcap, "TERM is longer than %d bytes", AL_MAX_TERM);
            return AL_E_INVAL;
        }
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s->term[i];
            if (c <= 0x20 || c >= 0x7f) {
                al_errf(err, errcap, "TERM holds a byte that is not printable ASCII");
                return AL_E_INVAL;
            }
        }
    }
    if (s->mode == PROC_PTY &&
        (s->cols < 1 || s->cols > AL_MAX_COLS || s->rows < 1 || s->rows > AL_MAX_ROWS)) {
        al_errf(err, errcap, "terminal size %ux%u is out of bounds (1..%d x 1..%d)",
                (unsigned)s->cols, (unsigned)s->rows, AL_MAX_COLS, AL_MAX_ROWS);
        return AL_E_INVAL;
    }
    return AL_OK;
}

/* ---- the plan: what the child needs, built before fork -------------------- */

void proc_plan_free(struct plan *pl)
{
    free(pl->ptrs);
    free(pl->cmem);
    pl->ptrs = NULL;
    pl->cmem = NULL;
}

static int allow_match(const char *const *allow, const char *entry, size_t nlen)
{
    for (size_t i = 0; allow && allow[i]; i++) {
        size_t plen = strlen(allow[i]);
        if (allow[i][plen - 1] == '*') {
            if (nlen >= plen - 1 && memcmp(entry, allow[i], plen - 1) == 0)
                return 1;
        } else if (nlen == plen && memcmp(entry, allow[i], plen) == 0) {
            return 1;
        }
    }
    return 0;
}

static int has_name(const char *const *arr, size_t n, const char *entry)
{
    for (size_t i = 0; i < n; i++)
        if (env_same_name(arr[i], entry))
            return 1;
    return 0;
}

/* Fill pl->envp (room for nenv + PROC_MAX_INHERIT + 2 pointers). */
static int build_env(const struct proc_spec *s, struct plan *pl, char *err, size_t errcap)
{
    const char *const *penv = s->parent_env ? s->parent_env : (const char *const *)environ;
    const char *const *senv = s->env;
    size_t nenv = count_upto(senv, AL_MAX_ENV);
    int spec_term = s->term && s->term[0];
    int env_term = 0;
    for (size_t i = 0; i < nenv; i++)
        if (env_is(senv[i], "TERM"))
            env_term = 1;
    /* our TERM= entry replaces every other TERM */
    int add_term = spec_term || (s->mode == PROC_PTY && !env_term);
    if (add_term)
        (void)snprintf(pl->term_env, sizeof pl->term_env, "TERM=%s",
                       spec_term ? s->term : PROC_DEFAULT_TERM);

    const char **envp = (const char **)pl->envp;
    size_t k = 0;
    for (size_t i = 0; penv && penv[i]; i++) {
        const char *e = penv[i];
        size_t nlen = env_name_len(e);
        if (nlen == 0 || !allow_match(s->env_allow, e, nlen))
            continue;
        if ((add_term || env_term) && env_is(e, "TERM"))
            continue;
        if (has_name(senv, nenv, e) || has_name(envp, k, e))
            continue; /* the spec wins; the first of duplicates wins (getenv) */
        if (k == PROC_MAX_INHERIT) {
            al_errf(err, errcap,
                    "more than %d variables of the runner's environment match env_allow",
                    PROC_MAX_INHERIT);
            return AL_E_LIMIT;
        }
        envp[k++] = e;
    }
    for (size_t i = 0; i < nenv; i++) {
        if (spec_term && env_is(senv[i], "TERM"))
            continue;
        if (has_name(senv + i + 1, nenv - i - 1, senv[i]))
            continue; /* a later duplicate wins */
        envp[k++] = senv[i];
    }
    if (add_term)
        envp[k++] = pl->term_env;
    envp[k] = NULL;
    return AL_OK;
}

/* The candidates for argv[0]: itself if it holds a '/', else each PATH
 * entry joined with it (an empty entry is the working directory). */
static int build_cands(struct plan *pl, char *err, size_t errcap)
{
    const char *name = pl->argv[0];
    size_t nlen = strlen(name);
    if (strchr(name, '/')) {
        pl->cands[0] = pl->argv[0];
        pl->cands[1] = NULL;
        return AL_OK;
    }
    const char *path = PROC_DEFAULT_PATH;
    for (size_t i = 0; pl->envp[i]; i++)
        if (env_is(pl->envp[i], "PATH"))
            path = pl->envp[i] + sizeof "PATH=" - 1;
    size_t ndirs = 1;
    for (const char *c = path; *c; c++)
        if (*c == ':')
            ndirs++;
    if (ndirs > PROC_MAX_PATH_DIRS) {
        al_errf(err, errcap, "PATH has more than %d entries", PROC_MAX_PATH_DIRS);
        return AL_E_LIMIT;
    }
    size_t bytes = strlen(path) + ndirs * (nlen + 2);
    pl->cmem = malloc(bytes);
    if (!pl->cmem) {
        al_errf(err, errcap, "out of memory");
        return AL_E_NOMEM;
    }
    size_t used = 0, k = 0;
    const char *dir = path;
    for (;;) {
        const char *end = strchr(dir, ':');
        size_t dlen = end ? (size_t)(end - dir) : strlen(dir);
        /* entries too long for a path are skipped, as execvp does */
        if (dlen + 1 + nlen < PATH_MAX) {
            char *w = pl->cmem + used;
            /* bytes holds every entry: nothing is truncated */
            (void)snprintf(w, bytes - used, "%.*s%s%s", (int)dlen, dir, dlen ? "/" : "", name);
            pl->cands[k++] = w;
            used += strlen(w) + 1;
        }
        if (!end)
            break;
        dir = end + 1;
    }
    pl->cands[k] = NULL;
    return AL_OK;
}

int proc_plan_build(const struct proc_spec *s, struct plan *pl, char *err, size_t errcap)
{
    memset(pl, 0, sizeof *pl);
    int rc = validate(s, err, errcap);
    if (rc != AL_OK)
        return rc;
    size_t argc = count_upto(s->argv, AL_MAX_ARGV);
    size_t nenv = count_upto(s->env, AL_MAX_ENV);
    size_t n_argv = argc + 1, n_sh = argc + 2, n_envp = nenv + PROC_MAX_INHERIT + 2;
    size_t n_cands = PROC_MAX_PATH_DIRS + 1;
    size_t nwrap = s->wrap ? count_upto(s->wrap, PROC_MAX_WRAP) : 0;
    size_t n_w = nwrap ? nwrap + argc + 1 : 0;
    pl->ptrs = calloc(n_argv + n_sh + n_envp + n_cands + n_w, sizeof(char *));
    if (!pl->ptrs) {
        al_errf(err, errcap, "out of memory");
        return AL_E_NOMEM;
    }
    char **p = pl->ptrs;
    pl->argv = p;
    pl->shargv = p + n_argv;
    pl->envp = p + n_argv + n_sh;
    pl->cands = p + n_argv + n_sh + n_envp;
    pl->nwrap = nwrap;
    pl->wrap_fd = nwrap ? s->wrap_fd : -1;
    if (nwrap) {
        pl->wargv = pl->cands + n_cands;
        for (size_t i = 0; i < nwrap; i++)
            pl->wargv[i] = (char *)s->wrap[i];
        for (size_t i = 1; i < argc; i++)
            pl->wargv[nwrap + i] = (char *)s->argv[i]; /* [nwrap]: the candidate */
    }
    /* exec*() take char *const[] but do not write through it */
    for (size_t i = 0; i < argc; i++)
        pl->argv[i] = (char *)s->argv[i];
    pl->shargv[0] = (char *)PROC_SHELL;
    for (size_t i = 0; i < argc; i++)
        pl->shargv[i + 1] = pl->argv[i]; /* [1] becomes the candidate */
    rc = build_env(s, pl, err, errcap);
    if (rc == AL_OK)
        rc = build_cands(pl, err, errcap);
    if (rc != AL_OK) {
        proc_plan_free(pl);
        return rc;
    }
    pl->cwd = s->cwd && s->cwd[0] ? s->cwd : NULL;
    pl->set_user = s->set_user;
    pl->max_data = s->max_data;
    pl->uid = s->uid;
    pl->gid = s->gid;
    pl->maxfd = sysconf(_SC_OPEN_MAX);
    if (pl->maxfd < 0 || pl->maxfd > PROC_CLOSE_LOOP_MAX)
        pl->maxfd = PROC_CLOSE_LOOP_MAX;
    return AL_OK;
}
