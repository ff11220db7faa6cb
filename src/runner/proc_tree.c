/*
 * proc_tree: the process tree of a command, read from /proc (see proc.h).
 *
 * Data model: a walk reads /proc/<pid>/stat of every process into an
 * array of struct pinfo (pid, ppid, process group, session; see
 * proc_internal.h), owned by the walk and freed at its end. The members
 * of a tree are the keeper's descendants: the keeper is a child
 * subreaper, so a process whose parent exits is re-parented to the
 * nearest subreaper among its ancestors, never leaving the tree, whatever
 * session or group it moved to. A full scan is used rather than
 * /proc/<pid>/task/<tid>/children, which many kernels do not build
 * (CONFIG_PROC_CHILDREN) and which the kernel documents as reliable only
 * for stopped processes.
 *
 * Not here: what is done with the members (proc_signal.c).
 */
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_err.h"
#include "proc_internal.h"

#define PROC_STAT_MAX 512 /* bytes of /proc/<pid>/stat read */

static int parse_num(const char **s, pid_t *out)
{
    char *end;
    errno = 0;
    long v = strtol(*s, &end, 10);
    if (end == *s || errno != 0 || v < 0 || v > INT_MAX)
        return -1;
    *out = (pid_t)v;
    *s = end;
    return 0;
}

/* One /proc/<pid>/stat: "pid (comm) state ppid pgrp session ...". */
static int read_stat(int procfd, const char *name, struct pinfo *pi)
{
    char path[64];
    (void)snprintf(path, sizeof path, "%s/stat", name);
    int fd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[PROC_STAT_MAX];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    (void)close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    const char *s = buf;
    if (parse_num(&s, &pi->pid) < 0)
        return -1;
    s = strrchr(buf, ')'); /* comm may hold ')' and spaces; no field after does */
    if (!s || s[1] != ' ' || !s[2] || s[3] != ' ')
        return -1;
    s += 4;
    if (parse_num(&s, &pi->ppid) < 0 || parse_num(&s, &pi->pgrp) < 0 || parse_num(&s, &pi->sid) < 0)
        return -1;
    return 0;
}

static int pinfo_cmp(const void *a, const void *b)
{
    pid_t x = ((const struct pinfo *)a)->pid, y = ((const struct pinfo *)b)->pid;
    return (x > y) - (x < y);
}

/* Every process (up to PROC_MAX_SCAN) into *out, sorted by pid; the
 * caller frees *out. */
static int scan_all(struct pinfo **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    int pfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
        return al_err_from_errno(errno);
    DIR *d = fdopendir(pfd);
    if (!d) {
        int e = errno;
        (void)close(pfd);
        return al_err_from_errno(e);
    }
    size_t n = 0, cap = 0;
    struct pinfo *a = NULL;
    int rc = AL_OK;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        if (n == PROC_MAX_SCAN) {
            rc = AL_E_LIMIT; /* keep what we have */
            break;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 256;
            if (ncap > PROC_MAX_SCAN)
                ncap = PROC_MAX_SCAN;
            struct pinfo *na = realloc(a, ncap * sizeof *a);
            if (!na) {
                rc = AL_E_NOMEM;
                break;
            }
            a = na;
            cap = ncap;
        }
        if (read_stat(pfd, de->d_name, &a[n]) == 0)
            n++; /* a process that vanished meanwhile is skipped */
    }
    (void)closedir(d); /* closes pfd */
    if (n > 1)
        qsort(a, n, sizeof *a, pinfo_cmp);
    *out = a;
    *count = n;
    return rc;
}

static int pid_marked(const struct pinfo *a, const unsigned char *mark, size_t n, pid_t pid)
{
    struct pinfo key = {.pid = pid};
    const struct pinfo *f = bsearch(&key, a, n, sizeof *a, pinfo_cmp);
    return f && mark[f - a];
}

/* The tree of root (see the top of the file) into out[0..*n), at most
 * PROC_MAX_TREE entries, never ourselves or init. */
static int tree_members(pid_t root, struct pinfo *out, size_t *nout)
{
    *nout = 0;
    struct pinfo *a;
    size_t n;
    int rc = scan_all(&a, &n);
    if (!a)
        return rc == AL_OK ? AL_OK : rc;
    unsigned char *mark = calloc(n ? n : 1, 1);
    if (!mark) {
        free(a);
        return AL_E_NOMEM;
    }
    pid_t self = getpid();
    for (size_t i = 0; i < n; i++)
        mark[i] = a[i].pid == root || a[i].pgrp == root || a[i].sid == root;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < n; i++) {
            if (!mark[i] && pid_marked(a, mark, n, a[i].ppid)) {
                mark[i] = 1;
                changed = 1;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!mark[i] || a[i].pid == self || a[i].pid <= 1)
            continue;
        if (*nout == PROC_MAX_TREE) {
            rc = AL_E_LIMIT;
            break;
        }
        out[(*nout)++] = a[i];
    }
    free(mark);
    free(a);
    return rc;
}

/* The tree of p into m[0..*n) (never the keeper itself), after taking
 * the command's status if it came: AL_E_NOENT when the keeper is gone
 * (the tree is empty and its pid may be another process's by now). */
int proc_tree(struct proc *p, struct pinfo *m, size_t *n)
{
    *n = 0;
    (void)proc_status_poll(p);
    proc_keeper_poll(p);
    if (p->keeper_gone)
        return AL_E_NOENT;
    size_t all = 0;
    int rc = tree_members(p->keeper, m, &all);
    for (size_t i = 0; i < all; i++)
        if (m[i].pid != p->keeper)
            m[(*n)++] = m[i];
    return rc;
}
