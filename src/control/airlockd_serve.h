/*
 * airlockd_serve: `airlockd serve`, the control plane: its settings
 * (airlockd_conf.h) checked and turned into an api_config, then api_serve()
 * until SIGTERM or SIGINT.
 */
#ifndef AL_AIRLOCKD_SERVE_H
#define AL_AIRLOCKD_SERVE_H

#include "airlockd_cmd.h"

/* The command's handler (a struct airlockd_cmd's run). */
int airlockd_serve(const struct airlockd_cmd *self, int argc, char **argv);

#endif
