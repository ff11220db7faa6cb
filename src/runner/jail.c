/*
 * jail: bubblewrap arguments and the seccomp filter for agents (jail.h).
 *
 * The filter allows everything but the system calls of the tables below,
 * which fail with EPERM: what no coding agent needs and what breaks out of
 * a sandbox or reads its neighbours (file handles that reach the host's
 * file system, mounts, new namespaces, kernel modules and kexec, BPF and
 * perf, userfaultfd, keyrings, raw and packet sockets, device nodes,
 * injecting input into a terminal). Calls of another architecture (i386
 * or x32 on x86_64) kill the process: the tables are for the native one.
 */
#include "jail.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "al_err.h"

#define JAIL_BPF_MAX (64u << 10) /* the compiled program (a few KB) */

/* Refused outright. */
static const char *const denied[] = {
    /* the host's files by handle, whatever the mount namespace */
    "open_by_handle_at", "name_to_handle_at",
    /* mounts and namespaces */
    "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr", "unshare", "setns", "chroot",
    /* the kernel itself */
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf",
    "perf_event_open", "userfaultfd", "iopl", "ioperm", "swapon", "swapoff", "reboot", "syslog",
    "uselib", "acct", "quotactl", "quotactl_fd", "lookup_dcookie", "vhangup", "io_uring_setup",
    "io_uring_enter", "io_uring_register",
    /* the clock every process shares */
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    /* keyrings */
    "add_key", "request_key", "keyctl", NULL};

/* Refused when one argument matches: (arg & mask) == value (and, when
 * mask2 is not 0, arg2 too). */
struct jail_argrule {
    const char *name;
    uint64_t mask, value, mask2, value2;
    unsigned arg, arg2;
};

#define ANY ~0ull
static const struct jail_argrule denied_args[] = {
    /* packet sockets, any protocol */
    {"socket", ANY, AF_PACKET, 0, 0, 0, 0},
    /* raw IP sockets (the type's low bits; SOCK_CLOEXEC and friends above) */
    {"socket", ANY, AF_INET, 0xf, SOCK_RAW, 0, 1},
    {"socket", ANY, AF_INET6, 0xf, SOCK_RAW, 0, 1},
    /* device nodes (FIFOs and sockets stay allowed) */
    {"mknod", S_IFMT, S_IFCHR, 0, 0, 1, 0},
    {"mknod", S_IFMT, S_IFBLK, 0, 0, 1, 0},
    {"mknodat", S_IFMT, S_IFCHR, 0, 0, 2, 0},
    {"mknodat", S_IFMT, S_IFBLK, 0, 0, 2, 0},
    /* typing into a terminal from inside it */
    {"ioctl", 0xffffffffull, TIOCSTI, 0, 0, 1, 0},
    {"ioctl", 0xffffffffull, TIOCLINUX, 0, 0, 1, 0},
};
#undef ANY

struct jail {
    struct jail_config cfg;
    char workspace[512];
    uint8_t *bpf;
    size_t bpf_len;
};

static int compile(struct jail *j, char *err, size_t cap)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        al_errf(err, cap, "seccomp: cannot create a filter");
        return AL_E_NOMEM;
    }
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    for (size_t i = 0; rc == 0 && denied[i]; i++) {
        int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture */
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    }
    for (size_t i = 0; rc == 0 && i < sizeof denied_args / sizeof denied_args[0]; i++) {
        const struct jail_argrule *a = &denied_args[i];
        int nr = seccomp_syscall_resolve_name(a->name);
        if (nr == __NR_SCMP_ERROR)
            continue;
        struct scmp_arg_cmp c[2] = {
            {a->arg, SCMP_CMP_MASKED_EQ, a->mask, a->value},
            {a->arg2, SCMP_CMP_MASKED_EQ, a->mask2, a->value2},
        };
        rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, a->mask2 ? 2 : 1, c);
    }
    if (rc != 0) {
        al_errf(err, cap, "seccomp: cannot add a rule: %s", strerror(-rc));
        seccomp_release(ctx);
        return AL_E_IO;
    }
    int fd = memfd_create("airlock-seccomp", MFD_CLOEXEC);
    if (fd < 0 || seccomp_export_bpf(ctx, fd) != 0) {
        al_errf(err, cap, "seccomp: cannot export the filter: %s", strerror(errno));
        if (fd >= 0)
            (void)close(fd);
        seccomp_release(ctx);
        return AL_E_IO;
    }
    seccomp_release(ctx);
    off_t len = lseek(fd, 0, SEEK_END);
    if (len <= 0 || (size_t)len > JAIL_BPF_MAX || !(j->bpf = malloc((size_t)len)) ||
        pread(fd, j->bpf, (size_t)len, 0) != len) {
        al_errf(err, cap, "seccomp: cannot read the compiled filter back");
        (void)close(fd);
        return AL_E_IO;
    }
    (void)close(fd);
    j->bpf_len = (size_t)len;
    return AL_OK;
}

int jail_new(const struct jail_config *cfg, struct jail **out, char *err, size_t cap)
{
    *out = NULL;
    static const char *const needed[] = {JAIL_BWRAP, JAIL_SETSID, NULL};
    for (int i = 0; needed[i]; i++)
        if (access(needed[i], X_OK) != 0) {
            al_errf(err, cap, "agents cannot be sandboxed: %s: %s", needed[i], strerror(errno));
            return AL_E_NOENT;
        }
    struct jail *j = calloc(1, sizeof *j);
    if (!j)
        return AL_E_NOMEM;
    j->cfg = *cfg;
    const char *ws = cfg->workspace && *cfg->workspace ? cfg->workspace : JAIL_DEFAULT_HOME;
    if (ws[0] != '/' || strlen(ws) >= sizeof j->workspace) {
        al_errf(err, cap, "the workspace must be an absolute path of less than %zu bytes",
                sizeof j->workspace);
        free(j);
        return AL_E_INVAL;
    }
    if (cfg->proxy_fwd && access(cfg->proxy_fwd, X_OK) != 0) {
        al_errf(err, cap, "the proxy's forwarder %s: %s", cfg->proxy_fwd, strerror(errno));
        free(j);
        return AL_E_NOENT;
    }
    (void)snprintf(j->workspace, sizeof j->workspace, "%s", ws);
    j->cfg.workspace = j->workspace;
    int rc = compile(j, err, cap);
    if (rc != AL_OK) {
        jail_free(j);
        return rc;
    }
    *out = j;
    return AL_OK;
}

void jail_free(struct jail *j)
{
    if (!j)
        return;
    free(j->bpf);
    free(j);
}

/* The system, read-only; each only where it exists. Links as they are. */
static const char *const sys_dirs[] = {"/usr", "/etc", "/opt", NULL};
static const char *const sys_links[] = {"/bin",   "/sbin",   "/lib", "/lib32",
                                        "/lib64", "/libx32", NULL};

int jail_forwards(const struct jail *j, const struct jail_proxy *px)
{
    return j->cfg.no_network && j->cfg.proxy_fwd && px && px->socket && px->port > 0 &&
           px->port <= 65535;
}

int jail_cmd(const struct jail *j, const char *cwd, int pty, const struct jail_proxy *px,
             struct jail_cmd *c, char *err, size_t cap)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    const char *dir = cwd && *cwd ? cwd : j->workspace;
    if (strlen(dir) >= sizeof c->cwd) {
        al_errf(err, cap, "working directory too long");
        return AL_E_TOOBIG;
    }
    (void)snprintf(c->cwd, sizeof c->cwd, "%s", dir);
    c->fd = memfd_create("airlock-seccomp", MFD_CLOEXEC);
    if (c->fd < 0 || write(c->fd, j->bpf, j->bpf_len) != (ssize_t)j->bpf_len ||
        lseek(c->fd, 0, SEEK_SET) != 0) {
        al_errf(err, cap, "cannot hand the seccomp filter over: %s", strerror(errno));
        jail_cmd_done(c);
        return AL_E_IO;
    }
    (void)snprintf(c->fdtxt, sizeof c->fdtxt, "%d", c->fd);
    unsigned n = 0;
    const char **a = c->argv;
    static const char *const head[] = {JAIL_BWRAP,
                                       "--unshare-user",
                                       "--uid",
                                       "1000",
                                       "--gid",
                                       "1000",
                                       "--disable-userns",
                                       "--unshare-pid",
                                       "--unshare-ipc",
                                       "--unshare-uts",
                                       "--unshare-cgroup-try",
                                       "--die-with-parent",
                                       "--cap-drop",
                                       "ALL",
                                       "--dev",
                                       "/dev",
                                       "--proc",
                                       "/proc",
                                       "--tmpfs",
                                       "/tmp",
                                       NULL};
    _Static_assert(JAIL_AGENT_UID == 1000, "head[] spells the agent's uid");
    for (unsigned i = 0; head[i]; i++)
        a[n++] = head[i];
    if (j->cfg.no_network)
        a[n++] = "--unshare-net";
    for (unsigned i = 0; sys_dirs[i]; i++) {
        a[n++] = "--ro-bind-try";
        a[n++] = sys_dirs[i];
        a[n++] = sys_dirs[i];
    }
    /* the links of a merged /usr are copied as links: the runner's view
     * has them too (bwrap made them there), so readlink gives the target */
    _Static_assert(sizeof sys_links / sizeof sys_links[0] <= JAIL_MAX_LINKS, "links[]");
    for (unsigned i = 0; sys_links[i]; i++) {
        ssize_t m = readlink(sys_links[i], c->links[i], sizeof c->links[i] - 1);
        if (m > 0) {
            c->links[i][m] = 0;
            a[n++] = "--symlink";
            a[n++] = c->links[i];
            a[n++] = sys_links[i];
        } else {
            a[n++] = "--ro-bind-try";
            a[n++] = sys_links[i];
            a[n++] = sys_links[i];
        }
    }
    a[n++] = "--bind";
    a[n++] = j->workspace;
    a[n++] = j->workspace;
    a[n++] = "--chdir";
    a[n++] = c->cwd;
    int fwd = jail_forwards(j, px);
    if (fwd) { /* the socket must stay connectable: a read-only bind still is */
        a[n++] = "--ro-bind";
        a[n++] = j->cfg.proxy_fwd;
        a[n++] = JAIL_PROXY_FWD;
        a[n++] = "--ro-bind";
        a[n++] = px->socket;
        a[n++] = JAIL_PROXY_SOCKET;
    }
    a[n++] = "--seccomp";
    a[n++] = c->fdtxt;
    a[n++] = "--";
    if (fwd) { /* it listens, leaves the forwarder behind and becomes the rest */
        (void)snprintf(c->porttxt, sizeof c->porttxt, "%d", px->port);
        a[n++] = JAIL_PROXY_FWD;
        a[n++] = "--port";
        a[n++] = c->porttxt;
        a[n++] = "--socket";
        a[n++] = JAIL_PROXY_SOCKET;
        a[n++] = "--";
    }
    /* the command leads a session of its own inside the namespace (and
     * takes its terminal there): job control then sees its own groups */
    a[n++] = JAIL_SETSID;
    if (pty)
        a[n++] = "--ctty";
    a[n] = NULL;
    return AL_OK;
}

void jail_cmd_done(struct jail_cmd *c)
{
    if (c->fd >= 0)
        (void)close(c->fd);
    c->fd = -1;
}
