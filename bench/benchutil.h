/*
 * benchutil: small helpers the benchmarks share (not a module of airlock).
 *
 * Failure model: a benchmark calls bu_init() once with its name and a
 * cleanup function (async-signal-safe: it stops what the benchmark started,
 * by pid, and removes its files). bu_fail() and every helper that fails
 * print "NAME: error: what" on stderr, run the cleanup and exit 1. Every
 * wait has a deadline; times are CLOCK_MONOTONIC nanoseconds (ns) or
 * microseconds (us).
 *
 * The WebSocket client (struct bu_ws) is a small blocking one of our own:
 * RFC 6455 upgrade, masked frames, no extensions, TCP_NODELAY. It hands
 * each whole binary message to a callback. struct bu_ctl puts a controller
 * endpoint (src/common/endpoint.c, which does all the airlock.v1 work) on
 * top of it; its events go to the benchmark's own callback.
 */
#ifndef BENCHUTIL_H
#define BENCHUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "endpoint.h"

#define BU_SEC 1000000000ull /* nanoseconds */

/* ---- time, I/O, statistics ------------------------------------------------ */

/* Monotonic seconds, nanoseconds, microseconds. */
double bu_now_s(void);
uint64_t bu_now_ns(void);
uint64_t bu_now_us(void);
void bu_sleep_ms(unsigned ms);
/* Write or read exactly n bytes (EINTR retried); 0 or -1. */
int bu_write_all(int fd, const void *p, size_t n);
int bu_read_all(int fd, void *p, size_t n);
/* qsort comparator for doubles, and the median of n samples (sorts v). */
int bu_cmp_double(const void *a, const void *b);
double bu_median(double *v, int n);

enum { BU_MAX_RUNS = 21 }; /* samples bu_stat3() and bu_fmt3() take at most */

struct bu_stat3 {
    double min, med, max;
};
struct bu_stat3 bu_stat3_of(const double *v, int n);
/* "min/med/max" with prec decimals, into buf. */
const char *bu_fmt3(char *buf, size_t cap, const double *v, int n, int prec);
/* p50, p90, p99 (nearest rank) and max of n samples, sorted in place. */
void bu_percentiles(double *v, int n, double out[4]);

/* ---- failure --------------------------------------------------------------- */

void bu_init(const char *prog, void (*cleanup)(void));
void bu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Async-signal-safe: s on stderr. */
void bu_say(const char *s);

/* ---- a bench's start ------------------------------------------------------- */

/* A decimal command-line argument in [lo, hi]; -1 if it is not one. */
long bu_arg_long(const char *s, long lo, long hi);
/* A fresh directory $TMPDIR/NAME.XXXXXX (/tmp without TMPDIR) in dir,
 * with room left for file names of BU_TMPDIR_ROOM bytes; the bench fails
 * if it cannot be made, or its path is too long or holds a quote (it may
 * go into a shell command). */
enum { BU_TMPDIR_ROOM = 20 };
void bu_make_tmpdir(char *dir, size_t cap, const char *name);
/* SIGPIPE ignored; SIGALRM (the watchdog), SIGINT, SIGTERM and SIGHUP to
 * on_signal. */
void bu_catch_signals(void (*on_signal)(int));

/* ---- processes ------------------------------------------------------------- */

/* Async-signal-safe: first_sig to pid, wait up to 5 s for it to be reaped,
 * then SIGKILL and reap. pid must be our child. */
void bu_stop_pid(pid_t pid, int first_sig);
/* Reap pid within ms: 0 and *st set, or -1 if it is still running. */
int bu_wait_bounded(pid_t pid, unsigned ms, int *st);
/* Run argv (no shell, 10 s at most), its stdout into out (NUL-terminated);
 * 0 if it exited 0. While it runs its pid is in *slot (for the cleanup). */
int bu_run_capture(char *const argv[], char *out, size_t cap, volatile pid_t *slot);

/* ---- TCP on 127.0.0.1 ------------------------------------------------------ */

int bu_free_port(void);
/* A connected socket with TCP_NODELAY, or -1. */
int bu_tcp_connect(int port);
/* A socket listening on 127.0.0.1 at a free port (backlog), its port in
 * *port; bu_fail naming `what` otherwise. */
int bu_tcp_listen(int backlog, int *port, const char *what);

/* ---- /proc ------------------------------------------------------------------- */

struct bu_mem {
    long rss_kb;
    int threads, fds; /* fds: -1 when /proc/PID/fd cannot be read */
};
struct bu_mem bu_mem_of(pid_t pid);
/* utime + stime of pid (not its children), in seconds. */
double bu_cpu_of(pid_t pid);
/* The same, with utime alone in *user. */
double bu_cpu_split(pid_t pid, double *user);
/* The calling process's own user + system time, in seconds; its system
 * time alone in *sys unless sys is NULL. */
double bu_self_cpu(double *sys);
/* The machine's CPU time so far, all CPUs (/proc/stat), in clock ticks:
 * idle (idle and iowait) and in all. */
struct bu_cpustat {
    unsigned long long idle, total;
};
struct bu_cpustat bu_cpustat_now(void);
/* The share of the machine's CPU time that was idle from a to b, in
 * per cent; -1 if no tick passed. */
double bu_idle_pct(struct bu_cpustat a, struct bu_cpustat b);

/* ---- the data set -------------------------------------------------------------- */

/* len bytes of base64-looking text (xorshift64), lines of 76 + CR LF,
 * written to path and mapped read-only at d->p. */
struct bu_dataset {
    const uint8_t *p;
    size_t len;
};
void bu_make_dataset(struct bu_dataset *d, const char *path, size_t len);
/* A full-screen TUI repainting, like an agent's UI, for an 80x24 terminal
 * (deterministic): the alternate screen, cursor addressing, 256 colours
 * and truecolour, bold and reverse, box drawing, a status line, a scroll
 * region scrolled; frame after frame until p holds cap bytes (the last
 * frame cut where cap ends). bench_vt feeds it to the model alone. */
void bu_gen_tui(uint8_t *p, size_t cap);
/* The same as a file, written to path and mapped as bu_make_dataset does. */
void bu_make_tui_dataset(struct bu_dataset *d, const char *path, size_t len);
void bu_free_dataset(struct bu_dataset *d);

/* ---- the bare PTY ---------------------------------------------------------------- */

/* sh -c cmd under forkpty (80x24), master non-blocking; pid also in *slot. */
pid_t bu_pty_spawn(const char *cmd, int *master, volatile pid_t *slot);
/* Bytes from the master (waiting until deadline_ns, else failing); 0 at its end. */
size_t bu_pty_read(int m, uint8_t *buf, size_t cap, uint64_t deadline_ns);
/* Start airlock-runner --listen 127.0.0.1:port (stdio to log) into *slot and
 * wait (5 s at most) until it accepts connections; bu_fail otherwise. */
void bu_start_runner(const char *bin, int port, const char *ident, const char *jwks,
                     const char *log, volatile pid_t *slot);
void bu_pty_stop(pid_t pid, int m, volatile pid_t *slot);
/* Keystroke echo on a bare PTY running cmd (it prints 'R' once ready, then
 * echoes): warm + n one-byte round trips; samples (n of them) in µs, and
 * out = p50, p90, p99, max. */
void bu_lat_bare(const char *cmd, int warm, int n, double *samples, volatile pid_t *slot,
                 double out[4]);

/* ---- a small blocking WebSocket client ------------------------------------------- */

typedef void bu_ws_msg_fn(void *ud, const uint8_t *p, size_t n);

struct bu_ws {
    int fd;
    const char *peer; /* "the runner", "airlockd": named in errors */
    uint8_t *rx, *tx, *msg;
    size_t rx_start, rx_end, tx_len, msg_len;
    int in_frag;
    uint32_t mask_state;
    bu_ws_msg_fn *on_msg; /* each whole binary message */
    void *ud;
    char err[300]; /* the first failure seen while parsing or in a callback */
};

/* Buffers for one connection (fails when out of memory). */
void bu_ws_init(struct bu_ws *c, const char *peer);
void bu_ws_free(struct bu_ws *c);
/* Connect to 127.0.0.1:port, upgrade at target ("/path?query") with the
 * airlock.v1 subprotocol; headers: extra "Name: value\r\n" lines or "". */
void bu_ws_connect(struct bu_ws *c, int port, const char *target, const char *headers);
/* Remember the first error (reported by the next bu_ctl_pump()). */
void bu_ws_error(struct bu_ws *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Queue one masked frame (opcode op); bu_ws_send() writes what is queued. */
void bu_ws_put(struct bu_ws *c, unsigned op, const uint8_t *p, size_t n);
void bu_ws_send(struct bu_ws *c);
/* One non-blocking read and the whole frames in it: 1 if bytes came, 0 if
 * none were there. The peer closing the connection is a failure. */
int bu_ws_read(struct bu_ws *c);
/* Send a close frame, wait (1 s at most) for the peer to drop the socket. */
void bu_ws_close(struct bu_ws *c);

/* ---- a controller endpoint over it ------------------------------------------------- */

struct bu_ctl {
    struct bu_ws ws;
    struct ep *ep;
};

/* A controller endpoint named name, events to on_event(ud); the caller may
 * ep_adopt() channels before bu_ctl_link(). */
void bu_ctl_new(struct bu_ctl *c, const char *name, ep_event_fn *on_event, void *ud);
/* The connection is up (after bu_ws_connect): HELLO goes out. */
void bu_ctl_link(struct bu_ctl *c);
/* Send every frame the endpoint has, in as few writes as fit. */
void bu_ctl_flush(struct bu_ctl *c);
/* Flush each of n clients, read what any has (waiting until deadline_ns, at
 * most 1 s), deliver it, answer. A recorded error fails. */
void bu_ctl_pump(struct bu_ctl *const *cs, int n, uint64_t deadline_ns);
/* Close the connection politely and free the endpoint. */
void bu_ctl_end(struct bu_ctl *c);

#endif
