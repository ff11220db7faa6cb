/*
 * cli_fmt: see cli_fmt.h.
 */
#include "cli_fmt.h"

#include <stdio.h>

#define MS_PER_S 1000
#define US_PER_MS 1000.0
#define SECONDS_PER_MINUTE 60
#define SECONDS_PER_HOUR 3600
#define SECONDS_PER_DAY 86400

void cli_fmt_age(char *buf, size_t cap, int64_t since_ms, int64_t now_s)
{
    if (since_ms <= 0) {
        (void)snprintf(buf, cap, "-");
        return;
    }
    long long s = (long long)now_s - (long long)(since_ms / MS_PER_S);
    if (s < 0)
        s = 0;
    if (s < SECONDS_PER_MINUTE)
        (void)snprintf(buf, cap, "%llds", s);
    else if (s < SECONDS_PER_HOUR)
        (void)snprintf(buf, cap, "%lldm", s / SECONDS_PER_MINUTE);
    else if (s < SECONDS_PER_DAY)
        (void)snprintf(buf, cap, "%lldh", s / SECONDS_PER_HOUR);
    else
        (void)snprintf(buf, cap, "%lldd", s / SECONDS_PER_DAY);
}

void cli_fmt_rtt(char *buf, size_t cap, int64_t rtt_us)
{
    if (rtt_us <= 0)
        (void)snprintf(buf, cap, "-");
    else
        (void)snprintf(buf, cap, "%.1fms", (double)rtt_us / US_PER_MS);
}
