/*
 * cgroup: a local sandbox's control groups (cgroup.h).
 *
 * The knobs are a table: for each controller, the file that bounds it in
 * each hierarchy version and how a limit (or "none") is spelled there.
 */
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_err.h"
#include "fsutil.h"

#define CG_PATH_MAX 512
#define CG_STR2(x) #x
#define CG_STR(x) CG_STR2(x)

enum cg_what { CG_MEMORY, CG_PIDS, CG_CPU };

struct cg_knob {
    const char *ctrl;    /* the controller (v1: its hierarchy's directory) */
    const char *v1_file; /* its limit in a v1 hierarchy */
    const char *v2_file; /* in the unified one */
    const char *v1_none, *v2_none;
    enum cg_what what;
};

static const struct cg_knob knobs[] = {
    {"memory", "memory.limit_in_bytes", "memory.max", "-1", "max", CG_MEMORY},
    {"pids", "pids.max", "pids.max", "max", "max", CG_PIDS},
    {"cpu", "cpu.cfs_quota_us", "cpu.max", "-1", "max", CG_CPU},
};
#define CG_NKNOBS (sizeof knobs / sizeof knobs[0])

static int name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > CG_NAME_MAX || name[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return 0;
    }
    return 1;
}

static int write_file(const char *dir, const char *file, const char *text)
{
    char p[CG_PATH_MAX];
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, file) >= sizeof p)
        return -ENAMETOOLONG;
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int e = errno;
    (void)close(fd);
    return w == (ssize_t)n ? 0 : -(w < 0 ? e : EIO);
}

static int mkdir_ok(const char *p)
{
    return mkdir(p, 0755) == 0 || errno == EEXIST ? 0 : -errno;
}

/* The unified hierarchy, when it has every controller of the table. */
static int unified(void)
{
    char buf[512];
    if (fsutil_read(CG_ROOT "/cgroup.controllers", buf, sizeof buf) <= 0)
        return 0;
    for (size_t i = 0; i < CG_NKNOBS; i++)
        if (!strstr(buf, knobs[i].ctrl))
            return 0;
    return 1;
}

static void limit_text(const struct cg_knob *k, const struct cg_limits *l, int v2, char *out,
                       size_t cap)
{
    uint64_t v = k->what == CG_MEMORY ? l->memory_bytes : k->what == CG_PIDS ? l->pids : 0;
    if (k->what == CG_CPU) {
        uint64_t q = (uint64_t)l->cpu_percent * CG_CPU_PERIOD_US / 100u;
        if (!l->cpu_percent)
            (void)snprintf(out, cap, "%s", v2 ? "max " CG_STR(CG_CPU_PERIOD_US) : k->v1_none);
        else
            (void)snprintf(out, cap, v2 ? "%" PRIu64 " " CG_STR(CG_CPU_PERIOD_US) : "%" PRIu64, q);
        return;
    }
    if (!v)
        (void)snprintf(out, cap, "%s", v2 ? k->v2_none : k->v1_none);
    else
        (void)snprintf(out, cap, "%" PRIu64, v);
}

static void close_all(int fds[CG_MAX_FDS], size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        (void)close(fds[i]);
    *n = 0;
}

static int open_procs(const char *dir, int fds[CG_MAX_FDS], size_t *n)
{
    char p[CG_PATH_MAX];
    if (*n >= CG_MAX_FDS || (size_t)snprintf(p, sizeof p, "%s/cgroup.procs", dir) >= sizeof p)
        return -ENAMETOOLONG;
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    fds[(*n)++] = fd;
    return 0;
}

static int open_v2(const char *name, const struct cg_limits *l, int fds[CG_MAX_FDS], size_t *nfds,
                   char *why, size_t cap)
{
    char parent[64], dir[64 + CG_NAME_MAX + 2], text[64];
    (void)snprintf(parent, sizeof parent, "%s/%s", CG_ROOT, CG_PARENT);
    (void)snprintf(dir, sizeof dir, "%s/%s", parent, name);
    int e = 0;
    /* the controllers must be enabled for the children of each level */
    (void)write_file(CG_ROOT, "cgroup.subtree_control", "+memory +pids +cpu");
    if ((e = mkdir_ok(parent)) != 0 ||
        (e = write_file(parent, "cgroup.subtree_control", "+memory +pids +cpu")) != 0 ||
        (e = mkdir_ok(dir)) != 0) {
        al_errf(why, cap, "cgroup v2 %s: %s", parent, strerror(-e));
        return e == -EACCES || e == -EPERM || e == -EROFS ? AL_E_NOENT : AL_E_IO;
    }
    for (size_t i = 0; i < CG_NKNOBS; i++) {
        limit_text(&knobs[i], l, 1, text, sizeof text);
        if ((e = write_file(dir, knobs[i].v2_file, text)) != 0) {
            al_errf(why, cap, "cgroup v2 %s/%s: %s", dir, knobs[i].v2_file, strerror(-e));
            return AL_E_IO;
        }
    }
    if ((e = open_procs(dir, fds, nfds)) != 0) {
        al_errf(why, cap, "cgroup v2 %s/cgroup.procs: %s", dir, strerror(-e));
        return AL_E_IO;
    }
    return AL_OK;
}

static int open_v1(const char *name, const struct cg_limits *l, int fds[CG_MAX_FDS], size_t *nfds,
                   char *why, size_t cap)
{
    char first_err[CG_PATH_MAX] = "";
    for (size_t i = 0; i < CG_NKNOBS; i++) {
        const struct cg_knob *k = &knobs[i];
        char root[64], parent[128], dir[128 + CG_NAME_MAX + 2], text[64];
        (void)snprintf(root, sizeof root, "%s/%.32s", CG_ROOT, k->ctrl);
        struct stat st;
        if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        (void)snprintf(parent, sizeof parent, "%s/%s", root, CG_PARENT);
        (void)snprintf(dir, sizeof dir, "%s/%s", parent, name);
        limit_text(k, l, 0, text, sizeof text);
        int e = mkdir_ok(parent);
        if (!e)
            e = mkdir_ok(dir);
        if (!e && k->what == CG_CPU)
            e = write_file(dir, "cpu.cfs_period_us", CG_STR(CG_CPU_PERIOD_US));
        if (!e)
            e = write_file(dir, k->v1_file, text);
        if (!e && k->what == CG_MEMORY) /* swap too, where it is accounted */
            (void)write_file(dir, "memory.memsw.limit_in_bytes", text);
        if (!e)
            e = open_procs(dir, fds, nfds);
        if (e) {
            if (!first_err[0])
                (void)snprintf(first_err, sizeof first_err, "%.300s: %.100s", dir, strerror(-e));
            continue;
        }
    }
    if (*nfds == CG_NKNOBS)
        return AL_OK;
    close_all(fds, nfds);
    al_errf(why, cap, "no writable cgroup hierarchy for %s%s%s", name, first_err[0] ? ": " : "",
            first_err);
    return AL_E_NOENT;
}

int cg_open(const char *name, const struct cg_limits *l, int fds[CG_MAX_FDS], size_t *nfds,
            char *why, size_t cap)
{
    *nfds = 0;
    if (!name_ok(name)) {
        al_errf(why, cap, "bad cgroup name");
        return AL_E_INVAL;
    }
    int rc =
        unified() ? open_v2(name, l, fds, nfds, why, cap) : open_v1(name, l, fds, nfds, why, cap);
    if (rc != AL_OK)
        close_all(fds, nfds);
    return rc;
}

void cg_remove(const char *name)
{
    if (!name_ok(name))
        return;
    char dir[CG_PATH_MAX];
    if (unified()) {
        (void)snprintf(dir, sizeof dir, "%s/%s/%s", CG_ROOT, CG_PARENT, name);
        (void)rmdir(dir);
        return;
    }
    for (size_t i = 0; i < CG_NKNOBS; i++) {
        (void)snprintf(dir, sizeof dir, "%s/%s/%s/%s", CG_ROOT, knobs[i].ctrl, CG_PARENT, name);
        (void)rmdir(dir);
    }
}
