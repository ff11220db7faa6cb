/*
 * cgroup: resource bounds of a local sandbox (memory, processes, CPU), in
 * control groups of its own. Control plane only.
 *
 * One group per sandbox, "airlock/<name>", created in the unified (v2)
 * hierarchy when it has the controllers, else in each v1 hierarchy that
 * is mounted writable (/sys/fs/cgroup/<controller>/airlock/<name>). The
 * limits are written by airlockd; the sandbox's runner joins the groups
 * itself, first thing, by writing "0" to the cgroup.procs descriptors
 * airlockd opened for it (cg_open), so that every agent it starts is
 * counted. The agent sees no cgroup file: /sys is not in its sandbox.
 *
 * Where no hierarchy is writable (airlockd not root, nothing delegated),
 * cg_open says why and the caller falls back to rlimits.
 */
#ifndef AL_CGROUP_H
#define AL_CGROUP_H

#include <stddef.h>
#include <stdint.h>

#define CG_ROOT "/sys/fs/cgroup"
#define CG_PARENT "airlock" /* our groups live under this one */
#define CG_MAX_FDS 4        /* cgroup.procs descriptors of one sandbox */
#define CG_NAME_MAX 128
#define CG_CPU_PERIOD_US 100000

struct cg_limits {
    uint64_t memory_bytes; /* 0: no limit */
    uint64_t pids;         /* 0: no limit */
    unsigned cpu_percent;  /* of one core; 0: no limit */
};

/* Create (or reuse) the groups of name and set the limits. fds get
 * cgroup.procs of each group, opened for writing (close-on-exec; the
 * caller hands them to the runner and closes them). 0, or AL_E_* with why
 * (AL_E_NOENT: no writable hierarchy). */
int cg_open(const char *name, const struct cg_limits *l, int fds[CG_MAX_FDS], size_t *nfds,
            char *why, size_t cap);

/* Remove the groups of name (only empty groups go; errors ignored). */
void cg_remove(const char *name);

#endif
