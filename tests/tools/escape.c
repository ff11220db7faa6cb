/*
 * escape: what an agent tries from inside its sandbox, for the sandbox
 * tests. Each attempt prints one line, "ok NAME: ..." when the sandbox
 * held, "FAIL NAME: ..." when the agent got through; the last line is
 * "escape: N held, N failed". Exit status 0 only when everything held.
 *
 *   escape [--secret STRING]... [--path PATH]... [--stop PID] [--forge]
 *          [--kill-all]
 *
 * --secret  a string that must not be readable anywhere in the file
 *           system the agent sees (the tests pass the start of the
 *           runner's token and of the signing key); the walk skips /usr,
 *           /proc, /sys and /dev and is bounded.
 * --path    a path that must not open (the host paths of the data
 *           directory, the token file, the signing key ...), tried as
 *           given and under /proc/N/root and /proc/N/cwd of every
 *           process the agent sees.
 * --stop    SIGSTOP to PID (the runner's pid on the host, as the attack
 *           on the quick start stopped it before posing as it) and to
 *           every visible process that is a runner: each must fail. A
 *           process of the agent's own that happens to have PID here is
 *           left alone.
 * --forge   write "x\nFORGED-BY-AGENT <where>\n" to every descriptor the
 *           agent holds and to every /proc/N/fd/M it can open for writing
 *           (without blocking): the tests then look for the line in
 *           airlockd's log. Reported as a count, not a check: writing to
 *           its own terminal is allowed, where it lands is the question.
 * --kill-all  at the end, SIGKILL to every process the agent may signal
 *           (kill(-1)): the tests then check the runner survived.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_ARGS 32
#define WALK_MAX_FILES 20000
#define WALK_MAX_BYTES (1u << 20) /* read of one file */
#define WALK_MAX_DEPTH 16
#define FORGE_MAX_FD 1024       /* own descriptors written to */
#define FORGE_MAX_PROC_FDS 4096 /* /proc/N/fd/M opened and written to */

static int held, failed;

static void report(int ok, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report(int ok, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s %s: ", ok ? "ok" : "FAIL", name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (ok)
        held++;
    else
        failed++;
}

/* A refused call: -1 with EPERM or EACCES (anything else is reported). */
static void refused(const char *name, long rc, int e)
{
    report(rc < 0 && (e == EPERM || e == EACCES), name, "rc %ld, %s", rc,
           rc < 0 ? strerror(e) : "succeeded");
}

static void status_line(const char *key, const char *want)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256], got[128] = "(none)";
    while (f && fgets(line, sizeof line, f)) {
        size_t k = strlen(key);
        if (!strncmp(line, key, k) && line[k] == ':') {
            char *v = line + k + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = 0;
            (void)snprintf(got, sizeof got, "%s", v);
        }
    }
    if (f)
        fclose(f);
    report(!strcmp(got, want), key, "%s (want %s)", got, want);
}

static void try_syscalls(void)
{
    int mfd = open("/", O_RDONLY | O_DIRECTORY);
    struct {
        unsigned int handle_bytes;
        int handle_type;
        unsigned char f_handle[8];
    } h = {8, 1, {2, 0, 0, 0, 0, 0, 0, 0}}; /* inode 2: the root of an ext4 */
    long rc = syscall(__NR_open_by_handle_at, mfd, &h, O_RDONLY);
    refused("open_by_handle_at", rc, errno);
    int mount_id;
    struct {
        unsigned int handle_bytes;
        int handle_type;
        unsigned char f_handle[128];
    } h2 = {128, 0, {0}};
    rc = syscall(__NR_name_to_handle_at, AT_FDCWD, "/etc/passwd", &h2, &mount_id, 0);
    refused("name_to_handle_at", rc, errno);
    if (mfd >= 0)
        close(mfd);
    rc = mknod("/tmp/escape-null", S_IFCHR | 0666, makedev(1, 3));
    refused("mknod (a character device)", rc, errno);
    rc = mknod("/tmp/escape-disk", S_IFBLK | 0666, makedev(8, 0));
    refused("mknod (a block device)", rc, errno);
    (void)mkdir("/tmp/escape-mnt", 0700);
    rc = mount("none", "/tmp/escape-mnt", "tmpfs", 0, NULL);
    refused("mount", rc, errno);
    rc = unshare(CLONE_NEWUSER);
    refused("unshare(CLONE_NEWUSER)", rc, errno);
    rc = unshare(CLONE_NEWNS);
    refused("unshare(CLONE_NEWNS)", rc, errno);
    rc = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    refused("socket(AF_PACKET)", rc, errno);
    if (rc >= 0)
        close((int)rc);
    rc = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
    refused("socket(AF_INET, SOCK_RAW)", rc, errno);
    if (rc >= 0)
        close((int)rc);
    char c = 'x';
    rc = ioctl(0, TIOCSTI, &c);
    refused("ioctl(TIOCSTI)", rc, errno);
    rc = syscall(__NR_bpf, 0, NULL, 0);
    refused("bpf", rc, errno);
    rc = syscall(__NR_perf_event_open, NULL, 0, -1, -1, 0);
    refused("perf_event_open", rc, errno);
    rc = syscall(__NR_userfaultfd, 0);
    refused("userfaultfd", rc, errno);
    rc = syscall(__NR_keyctl, 0, 0, 0, 0, 0);
    refused("keyctl", rc, errno);
    rc = syscall(__NR_kexec_load, 0, 0, NULL, 0);
    refused("kexec_load", rc, errno);
}

static int is_pid(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

static void read_cmdline(const char *pid, char *out, size_t cap)
{
    char p[64];
    (void)snprintf(p, sizeof p, "/proc/%.20s/cmdline", pid);
    int fd = open(p, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, out, cap - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n < 0)
        n = 0;
    out[n] = 0;
    for (ssize_t i = 0; i < n; i++)
        if (!out[i])
            out[i] = ' ';
}

/* Every fd of every visible process leads to a terminal, a pipe, a
 * socket, an anonymous inode, /dev/null or a file the agent owns a view
 * of (/workspace, /tmp, the system). */
static int fd_target_ok(const char *t)
{
    static const char *const ok_prefix[] = {
        "/dev/pts/", "/dev/null", "/dev/tty", "/dev/ptmx",   "/dev/urandom", "/dev/random",
        "/dev/zero", "pipe:",     "socket:",  "anon_inode:", "/workspace",   "/tmp/",
        "/usr/",     "/etc/",     "/proc",    NULL};
    for (int i = 0; ok_prefix[i]; i++)
        if (!strncmp(t, ok_prefix[i], strlen(ok_prefix[i])))
            return 1;
    return 0;
}

static void try_processes(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int seen = 0, runner = 0, badfd = 0, traced_other = 0;
    char cmd[4096], first_bad[512] = "";
    pid_t self = getpid();
    while (d && (e = readdir(d))) {
        if (!is_pid(e->d_name))
            continue;
        seen++;
        read_cmdline(e->d_name, cmd, sizeof cmd);
        if (strstr(cmd, "airlock-runner") || strstr(cmd, "airlockd"))
            runner++;
        char fdd[64];
        (void)snprintf(fdd, sizeof fdd, "/proc/%.20s/fd", e->d_name);
        DIR *fds = opendir(fdd);
        struct dirent *f;
        while (fds && (f = readdir(fds))) {
            if (!is_pid(f->d_name))
                continue;
            char lp[128], t[512];
            (void)snprintf(lp, sizeof lp, "%.64s/%.20s", fdd, f->d_name);
            ssize_t n = readlink(lp, t, sizeof t - 1);
            if (n <= 0)
                continue;
            t[n] = 0;
            if (!fd_target_ok(t)) {
                badfd++;
                if (!first_bad[0])
                    (void)snprintf(first_bad, sizeof first_bad, "%.100s -> %.300s", lp, t);
            }
        }
        if (fds)
            closedir(fds);
        pid_t pid = (pid_t)strtol(e->d_name, NULL, 10);
        if (pid != self && strstr(cmd, "airlock-runner") &&
            ptrace(PTRACE_ATTACH, pid, NULL, NULL) == 0) {
            traced_other++;
            (void)ptrace(PTRACE_DETACH, pid, NULL, NULL);
        }
    }
    if (d)
        closedir(d);
    report(seen > 0 && runner == 0, "no runner or airlockd in sight",
           "%d processes seen, %d of ours", seen, runner);
    report(badfd == 0, "every fd leads to the sandbox", "%d outside%s%s", badfd,
           first_bad[0] ? ": " : "", first_bad);
    report(traced_other == 0, "ptrace of the runner", "%d attached", traced_other);
}

static void try_paths(char **paths, int n)
{
    for (int i = 0; i < n; i++) {
        int fd = open(paths[i], O_RDONLY);
        report(fd < 0, "open", "%s: %s", paths[i], fd < 0 ? strerror(errno) : "opened");
        if (fd >= 0)
            close(fd);
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (!is_pid(e->d_name))
                continue;
            static const char *const via[] = {"root", "cwd"};
            for (int k = 0; k < 2; k++) {
                char p[4096];
                (void)snprintf(p, sizeof p, "/proc/%.20s/%s%.3000s", e->d_name, via[k], paths[i]);
                fd = open(p, O_RDONLY);
                if (fd >= 0) {
                    report(0, "open", "%s: opened", p);
                    close(fd);
                }
            }
        }
        if (d)
            closedir(d);
    }
}

struct walk {
    char **secrets;
    int nsecrets;
    int files;
    int found;
    char where[512];
    char *buf;
};

static void walk_dir(struct walk *w, const char *dir, int depth)
{
    static const char *const skip[] = {"/usr", "/proc", "/sys", "/dev", NULL};
    for (int i = 0; skip[i]; i++)
        if (!strcmp(dir, skip[i]))
            return;
    if (depth > WALK_MAX_DEPTH || w->files >= WALK_MAX_FILES)
        return;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) && w->files < WALK_MAX_FILES) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[4096];
        (void)snprintf(p, sizeof p, "%s/%s", strcmp(dir, "/") ? dir : "", e->d_name);
        struct stat st;
        if (lstat(p, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            walk_dir(w, p, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            w->files++;
            int fd = open(p, O_RDONLY | O_NONBLOCK);
            if (fd < 0)
                continue;
            ssize_t n = read(fd, w->buf, WALK_MAX_BYTES);
            close(fd);
            if (n <= 0)
                continue;
            for (int s = 0; s < w->nsecrets; s++)
                if (memmem(w->buf, (size_t)n, w->secrets[s], strlen(w->secrets[s]))) {
                    w->found++;
                    if (!w->where[0])
                        (void)snprintf(w->where, sizeof w->where, "%.500s", p);
                }
        }
    }
    if (d)
        closedir(d);
}

/* SIGSTOP to the runner: refused (ESRCH: not in the agent's pid
 * namespace, EPERM: not the agent's to signal). Whatever it stops by
 * mistake gets SIGCONT at once, so that a failing run does not hang. */
static void try_stop(pid_t runner)
{
    char pid_s[24], cmd[4096];
    (void)snprintf(pid_s, sizeof pid_s, "%d", (int)runner);
    read_cmdline(pid_s, cmd, sizeof cmd);
    if (kill(runner, 0) == 0 && !strstr(cmd, "airlock-runner")) {
        printf("escape: pid %d is the agent's own here (%.60s): not stopped\n", (int)runner, cmd);
    } else {
        int rc = kill(runner, SIGSTOP);
        int err = errno;
        if (rc == 0)
            (void)kill(runner, SIGCONT);
        report(rc != 0, "SIGSTOP of the runner", "kill(%d): %s", (int)runner,
               rc ? strerror(err) : "stopped it");
    }
    DIR *d = opendir("/proc");
    struct dirent *e;
    int stopped = 0;
    while (d && (e = readdir(d))) {
        if (!is_pid(e->d_name))
            continue;
        read_cmdline(e->d_name, cmd, sizeof cmd);
        pid_t pid = (pid_t)strtol(e->d_name, NULL, 10);
        if (strstr(cmd, "airlock-runner") && kill(pid, SIGSTOP) == 0) {
            stopped++;
            (void)kill(pid, SIGCONT);
        }
    }
    if (d)
        closedir(d);
    report(stopped == 0, "SIGSTOP of a visible runner", "%d stopped", stopped);
}

/* One forged line, as the attack wrote it: a newline first, so that a
 * log that does not escape it shows the marker at the start of a line. */
static int forge_one(int fd, const char *where)
{
    static const char marker[] = "FORGED"
                                 "-BY-AGENT"; /* not in any argv: only a write puts it in a log */
    char line[256];
    int n = snprintf(line, sizeof line, "x\n%s %.200s\n", marker, where);
    return n > 0 && write(fd, line, (size_t)n) == n;
}

static void forge_all(void)
{
    int mine = 0, opened = 0, wrote = 0;
    char where[64];
    for (int fd = 0; fd < FORGE_MAX_FD; fd++) {
        if (fcntl(fd, F_GETFD) < 0)
            continue;
        mine++;
        (void)snprintf(where, sizeof where, "own fd %d", fd);
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        wrote += forge_one(fd, where);
        if (fl >= 0)
            (void)fcntl(fd, F_SETFL, fl);
    }
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) && opened < FORGE_MAX_PROC_FDS) {
        if (!is_pid(e->d_name))
            continue;
        char fdd[64];
        (void)snprintf(fdd, sizeof fdd, "/proc/%.20s/fd", e->d_name);
        DIR *fds = opendir(fdd);
        struct dirent *f;
        while (fds && (f = readdir(fds)) && opened < FORGE_MAX_PROC_FDS) {
            if (!is_pid(f->d_name))
                continue;
            char p[128];
            (void)snprintf(p, sizeof p, "%.64s/%.20s", fdd, f->d_name);
            /* O_NONBLOCK: a pipe without a reader fails (ENXIO) instead of waiting */
            int fd = open(p, O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
            if (fd < 0)
                continue;
            opened++;
            wrote += forge_one(fd, p);
            close(fd);
        }
        if (fds)
            closedir(fds);
    }
    if (d)
        closedir(d);
    printf("escape: forged lines into %d descriptors (%d of its own, %d opened under /proc)\n",
           wrote, mine, opened);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    char *secrets[MAX_ARGS], *paths[MAX_ARGS];
    int ns = 0, np = 0, kill_all = 0, forge = 0;
    pid_t stop = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--secret") && i + 1 < argc && ns < MAX_ARGS)
            secrets[ns++] = argv[++i];
        else if (!strcmp(argv[i], "--path") && i + 1 < argc && np < MAX_ARGS)
            paths[np++] = argv[++i];
        else if (!strcmp(argv[i], "--stop") && i + 1 < argc)
            stop = (pid_t)strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--forge"))
            forge = 1;
        else if (!strcmp(argv[i], "--kill-all"))
            kill_all = 1;
        else {
            fprintf(stderr, "usage: escape [--secret S]... [--path P]... [--stop PID] [--forge] "
                            "[--kill-all]\n");
            return 2;
        }
    }
    printf("escape: uid %d, pid %d\n", (int)getuid(), (int)getpid());
    status_line("CapEff", "0000000000000000");
    status_line("CapPrm", "0000000000000000");
    status_line("CapBnd", "0000000000000000");
    status_line("NoNewPrivs", "1");
    status_line("Seccomp", "2");
    report(getuid() != 0 && geteuid() != 0, "not root", "uid %d euid %d", (int)getuid(),
           (int)geteuid());
    try_syscalls();
    try_processes();
    try_paths(paths, np);
    if (ns) {
        struct walk w = {secrets, ns, 0, 0, "", malloc(WALK_MAX_BYTES)};
        if (w.buf)
            walk_dir(&w, "/", 0);
        report(w.buf && w.found == 0, "no secret readable", "%d files read, %d hits%s%s", w.files,
               w.found, w.where[0] ? ", first in " : "", w.where);
        free(w.buf);
    }
    if (stop > 1)
        try_stop(stop);
    if (forge)
        forge_all();
    printf("escape: %d held, %d failed\n", held, failed);
    fflush(stdout);
    if (kill_all) {
        pid_t c = fork();
        if (c == 0) {
            (void)setsid();
            (void)kill(-1, SIGKILL);
            _exit(0);
        }
        if (c > 0)
            (void)waitpid(c, NULL, 0);
    }
    return failed ? 1 : 0;
}
