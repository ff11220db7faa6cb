/*
 * bench_resume: what reopening recordings costs when airlockd restarts
 * (docs/performance.md, "Restart and long recordings"). Writes N
 * recordings of MB megabytes of output each with the real writer (76
 * columns of base64-like text + CRLF in 4 KiB chunks, one event per chunk,
 * 1 ms apart), synced, in a temporary directory; then reopens all of them
 * as a restart does (cast_open then cast_close, which writes nothing),
 * RUNS times each way:
 *
 *   full   the size only (a row from before schema 7): castread_prefix
 *          parses every line of each recording with jansson;
 *   tail   the size with the stored time and exit (schema 7): the header
 *          and the last line only.
 *
 * The files are in the page cache (they were just written, and the first
 * full pass reads them), so this is the CPU-bound best case of the full
 * check: from a cold disk it would also read N x MB from the disk.
 * Prints, per mode, min/median/max over RUNS of the wall time to reopen all
 * N recordings and the CPU time of this process. The files are removed at
 * the end (and by the cleanup on failure).
 * Usage: bench_resume [N 1..16] [MB per recording 1..2000] [RUNS 1..21].
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "benchutil.h"
#include "cast.h"

enum { MAX_N = 16, MAX_MB = 2000, CHUNK = 4096, LINE = 78 };

static char bench_dir[256];
static char paths[MAX_N][256 + 32]; /* the recordings, named before any is made */
static unsigned npaths;

/* Async-signal-safe (bu_init): unlink what we made. */
static void cleanup(void)
{
    for (unsigned i = 0; i < npaths; i++)
        (void)unlink(paths[i]);
    if (bench_dir[0])
        (void)rmdir(bench_dir);
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct cast_header header(void)
{
    struct cast_header h;
    memset(&h, 0, sizeof h);
    h.cols = 80;
    h.rows = 24;
    h.term_type = "xterm-256color";
    h.timestamp = 1700000000;
    h.command = "[\"sh\",\"-c\",\"agent\"]";
    h.start_us = 1000000;
    return h;
}

/* One recording of mb MB of output; its durable mark into *m. */
static void write_one(const char *path, unsigned mb, struct cast_mark *m)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    static uint8_t chunk[CHUNK];
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    struct cast_header h = header();
    struct cast *c = NULL;
    char err[256];
    if (cast_open(path, &h, NULL, &c, err, sizeof err) != AL_OK)
        bu_fail("%s: %s", path, err);
    uint64_t total = (uint64_t)mb * 1000000u;
    int64_t now = h.start_us;
    for (uint64_t done = 0; done < total; done += CHUNK) {
        for (size_t i = 0; i < CHUNK; i++) {
            size_t col = (size_t)((done + i) % LINE);
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            chunk[i] = col == LINE - 2 ? '\r' : col == LINE - 1 ? '\n' : (uint8_t)b64[seed >> 58];
        }
        now += 1000;
        if (cast_output(c, now, chunk, CHUNK) != AL_OK)
            bu_fail("%s: writing", path);
    }
    if (cast_sync(c, m) != AL_OK || cast_close(c) != AL_OK)
        bu_fail("%s: sync", path);
}

/* Reopen the n recordings as a restart does; wall and CPU seconds. */
static void reopen_all(unsigned n, const struct cast_mark *marks, int with_time, double *wall,
                       double *cpu)
{
    struct cast_header h = header();
    double w0 = bu_now_s(), c0 = cpu_now();
    for (unsigned i = 0; i < n; i++) {
        const char *path = paths[i];
        char err[256];
        struct cast_mark m = marks[i];
        if (!with_time)
            m.time_us = -1;
        struct cast *c = NULL;
        if (cast_open(path, &h, &m, &c, err, sizeof err) != AL_OK)
            bu_fail("resume %s: %s", path, err);
        struct cast_mark got;
        if (cast_sync(c, &got) != AL_OK || got.time_us != marks[i].time_us ||
            got.size != marks[i].size)
            bu_fail("resume %s: not at the mark", path);
        if (cast_close(c) != AL_OK)
            bu_fail("close %s", path);
    }
    *wall = bu_now_s() - w0;
    *cpu = cpu_now() - c0;
}

int main(int argc, char **argv)
{
    long ln = argc > 1 ? bu_arg_long(argv[1], 1, MAX_N) : 4;
    long lmb = argc > 2 ? bu_arg_long(argv[2], 1, MAX_MB) : 200;
    long lruns = argc > 3 ? bu_arg_long(argv[3], 1, BU_MAX_RUNS) : 5;
    if (ln < 0 || lmb < 0 || lruns < 0 || argc > 4) {
        fprintf(stderr, "usage: bench_resume [N 1..%d] [MB 1..%d] [RUNS 1..%d]\n", MAX_N, MAX_MB,
                BU_MAX_RUNS);
        return 2;
    }
    unsigned n = (unsigned)ln, mb = (unsigned)lmb;
    int runs = (int)lruns;
    bu_init("bench_resume", cleanup);
    bu_make_tmpdir(bench_dir, sizeof bench_dir, "bench_resume");
    for (unsigned i = 0; i < n; i++)
        (void)snprintf(paths[i], sizeof paths[i], "%s/r%u.cast", bench_dir, i);
    npaths = n;
    struct cast_mark marks[MAX_N];
    int64_t bytes = 0;
    double t0 = bu_now_s();
    for (unsigned i = 0; i < n; i++) {
        write_one(paths[i], mb, &marks[i]);
        bytes += marks[i].size;
    }
    printf("bench_resume: %u recordings of %u MB of output (%.1f MB of asciicast in all), "
           "written in %.1f s\n",
           n, mb, (double)bytes / 1e6, bu_now_s() - t0);
    static const char *const mode[2] = {"full (size only)", "tail (size + time)"};
    for (int with_time = 0; with_time <= 1; with_time++) {
        double wall[BU_MAX_RUNS], cpu[BU_MAX_RUNS];
        for (int r = 0; r < runs; r++)
            reopen_all(n, marks, with_time, &wall[r], &cpu[r]);
        char a[64], b[64];
        printf("  %-20s reopen all: wall %s s, cpu %s s (min/median/max of %d)\n", mode[with_time],
               bu_fmt3(a, sizeof a, wall, runs, 4), bu_fmt3(b, sizeof b, cpu, runs, 4), runs);
    }
    cleanup();
    return 0;
}
