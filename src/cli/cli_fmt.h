/*
 * cli_fmt: how the CLI shows times to a person. Pure (the clock is passed
 * in), so the tables of `ls`, `sandbox ls` and `probe` agree and can be
 * tested.
 */
#ifndef CLI_FMT_H
#define CLI_FMT_H

#include <stddef.h>
#include <stdint.h>

/* How long ago since_ms (ms since the epoch) was at now_s (s since the
 * epoch): "42s", "5m", "3h", "2d"; "-" when since_ms <= 0 (never). A time
 * in the future counts as now. */
void cli_fmt_age(char *buf, size_t cap, int64_t since_ms, int64_t now_s);

/* A round trip in microseconds as "0.4ms"; "-" when rtt_us <= 0 (none
 * measured). */
void cli_fmt_rtt(char *buf, size_t cap, int64_t rtt_us);

#endif
