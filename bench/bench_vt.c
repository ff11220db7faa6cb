/*
 * bench_vt: what the screen model alone (vt_feed: the filter, libvterm's
 * parser and state, the cells) costs per byte, in CPU time of this
 * process (CLOCK_PROCESS_CPUTIME_ID), so that a busy machine slows it but
 * does not change the figure much. Three workloads, each generated here
 * (deterministic) and fed in 4 KiB pieces (a PTY read's size) to a fresh
 * 80x24 model:
 *
 *   text   76 columns of base64-like text + CRLF (bench_runner's data)
 *   yes    "y\r\n" (a scroll every 3 bytes: the model's worst)
 *   tui    a full-screen repaint on the alternate screen: cursor
 *          addressing, 256 colours and truecolour, bold, reverse, box
 *          drawing, a status line, a scroll region scrolled (an agent's UI)
 *
 * Prints, per workload, min/median/max over RUNS of core-seconds per GB.
 * Usage: bench_vt [MB per workload 1..1000] [RUNS 1..21] [WORKLOAD]; with
 * WORKLOAD (text, yes or tui) only that one runs (to profile it alone).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "al_err.h"
#include "benchutil.h"
#include "vt.h"

enum { PIECE = 4096, MAX_RUNS = 21, MAX_MB = 1000 };

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct gen {
    uint8_t *p;
    size_t len, cap;
};

static void put(struct gen *g, const char *s, size_t n)
{
    if (g->len + n > g->cap)
        n = g->cap - g->len;
    memcpy(g->p + g->len, s, n);
    g->len += n;
}

static void gen_text(struct gen *g)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint32_t s = 1;
    char line[78];
    while (g->len < g->cap) {
        for (int i = 0; i < 76; i++) {
            s = s * 1103515245u + 12345u;
            line[i] = b64[(s >> 16) & 63];
        }
        line[76] = '\r';
        line[77] = '\n';
        put(g, line, sizeof line);
    }
}

static void gen_yes(struct gen *g)
{
    while (g->len < g->cap)
        put(g, "y\r\n", 3);
}

static void gen_tui(struct gen *g)
{
    bu_gen_tui(g->p, g->cap); /* shared with bench_runner's TUI stream */
    g->len = g->cap;
}

int main(int argc, char **argv)
{
    long mb = argc > 1 ? bu_arg_long(argv[1], 1, MAX_MB) : 100;
    long runs = argc > 2 ? bu_arg_long(argv[2], 1, MAX_RUNS) : 5;
    const char *only = argc > 3 ? argv[3] : NULL;
    if (mb < 0 || runs < 0 || argc > 4 ||
        (only && strcmp(only, "text") != 0 && strcmp(only, "yes") != 0 &&
         strcmp(only, "tui") != 0)) {
        fprintf(stderr, "usage: bench_vt [MB 1..%d] [RUNS 1..%d] [text|yes|tui]\n", MAX_MB,
                MAX_RUNS);
        return 1;
    }
    struct {
        const char *name;
        void (*gen)(struct gen *);
    } loads[] = {{"text", gen_text}, {"yes", gen_yes}, {"tui", gen_tui}};
    printf("| workload | core-s/GB min | median | max |\n|---|---|---|---|\n");
    for (size_t w = 0; w < sizeof loads / sizeof loads[0]; w++) {
        if (only && strcmp(only, loads[w].name) != 0)
            continue;
        struct gen g = {malloc((size_t)mb * 1000000), 0, (size_t)mb * 1000000};
        if (!g.p) {
            fprintf(stderr, "bench_vt: out of memory\n");
            return 1;
        }
        loads[w].gen(&g);
        double per_gb[MAX_RUNS];
        for (long r = 0; r < runs; r++) {
            struct vt *vt = NULL;
            if (vt_new(80, 24, &vt) != AL_OK) {
                fprintf(stderr, "bench_vt: vt_new failed\n");
                return 1;
            }
            double t0 = cpu_now();
            for (size_t off = 0; off < g.len; off += PIECE) {
                size_t n = g.len - off < PIECE ? g.len - off : PIECE;
                if (vt_feed(vt, g.p + off, n) != AL_OK) {
                    fprintf(stderr, "bench_vt: vt_feed failed\n");
                    return 1;
                }
            }
            per_gb[r] = (cpu_now() - t0) / ((double)g.len / 1e9);
            vt_free(vt);
        }
        qsort(per_gb, (size_t)runs, sizeof per_gb[0], bu_cmp_double);
        printf("| %s | %.1f | %.1f | %.1f |\n", loads[w].name, per_gb[0], per_gb[runs / 2],
               per_gb[runs - 1]);
        free(g.p);
    }
    return 0;
}
