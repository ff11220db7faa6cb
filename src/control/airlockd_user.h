/*
 * airlockd_user: `airlockd user add | ls | rm`, the users of airlockd and
 * their roles (admin, operator, viewer).
 */
#ifndef AL_AIRLOCKD_USER_H
#define AL_AIRLOCKD_USER_H

#include "airlockd_cmd.h"

/* The command's handler (a struct airlockd_cmd's run): the action in
 * argv[1], then its own options. */
int airlockd_user(const struct airlockd_cmd *self, int argc, char **argv);

#endif
