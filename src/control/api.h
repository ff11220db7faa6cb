/*
 * api: `airlockd serve`, the control plane's HTTP side (first slice).
 *
 * Today it opens the data directory (signing key created on first start,
 * refused if others can read it; the SQLite database), and serves
 *   GET /healthz            200, no auth
 *   GET /v1/sandboxes       any role
 *   GET /v1/terminals       any role
 *   GET /v1/audit           admin
 * with `Authorization: Bearer <API key>`: 401 without a valid key, 403 when
 * the role does not allow it. Keys are never logged. Runners, terminals,
 * attach, recordings and the web UI come next (issue 4).
 */
#ifndef AL_API_H
#define AL_API_H

#include <stddef.h>

struct api_config {
    const char *data_dir;
    const char *listen; /* HOST:PORT */
    int log_level;      /* 0 errors, 1 info, 2 debug */
};

/* Run until SIGTERM or SIGINT. 0, or AL_E_* with a reason in err. */
int api_serve(const struct api_config *cfg, char *err, size_t cap);

#endif
