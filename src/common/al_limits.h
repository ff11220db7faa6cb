/*
 * al_limits: every fixed limit of the airlock.v1 channel, named once.
 * docs/protocol.md quotes these values; tests exercise each one.
 */
#ifndef AL_LIMITS_H
#define AL_LIMITS_H

#define AL_PROTO_VERSION 1 /* the version this code speaks */
#define AL_SUBPROTOCOL "airlock.v1"

#define AL_FRAME_HEADER 10   /* type u8, flags u8, channel u32, length u32 */
#define AL_MAX_PAYLOAD 65536 /* largest payload of one frame */
#define AL_MAX_FRAME (AL_FRAME_HEADER + AL_MAX_PAYLOAD)
#define AL_MAX_DATA (AL_MAX_PAYLOAD - 8) /* data bytes in one DATA frame */
#define AL_MAX_CHANNELS 256              /* channels open at once per endpoint */
#define AL_MAX_ARGV 256                  /* argv entries in OPEN */
#define AL_MAX_ENV 256                   /* env entries in OPEN */
#define AL_MAX_STR 4096                  /* bytes in one argv/env/cwd string */
#define AL_MAX_TERM 64                   /* bytes in TERM */
#define AL_MAX_NAME 255                  /* bytes in a HELLO peer name */
#define AL_MAX_ERRMSG 1024               /* bytes in an ERROR message */
#define AL_MAX_TOKEN 4096                /* bytes in an in-band TOKEN */
#define AL_MAX_SNAPSHOT (4u << 20)       /* bytes in one whole snapshot */
#define AL_MAX_COLS 4096                 /* terminal size bounds, inclusive */
#define AL_MAX_ROWS 4096
#define AL_MAX_PENDING_SIGNALS 8        /* signals queued per channel */
#define AL_MAX_PENDING_ERRORS 16        /* error frames queued per endpoint */
#define AL_MAX_VIEWERS 64               /* entries in one VIEWERS frame */
#define AL_MAX_VIEWER_NAME 64           /* bytes in one VIEWERS entry's name */
#define AL_PROBE_MAX_HEADERS 64         /* entries of a PROBE_REPLY HEADERS (§13) */
#define AL_PROBE_MAX_HEADER_NAME 64     /* bytes of one header's name there */
#define AL_PROBE_MAX_HEADER_VALUE 128   /* bytes of one header's redacted value there */
#define AL_PROBE_SOURCE_MAX (64u << 20) /* bytes one PROBE SOURCE may ask for */
#define AL_MAX_PROXY_CHANNELS 256 /* proxy channels open at once, apart from AL_MAX_CHANNELS */
#define AL_MAX_PROXY_URL 256      /* bytes of PROXY_AT's url */

/* A dialing runner's own key, sent on every dial beside its token: a copied
 * token alone cannot take a linked sandbox over (docs/protocol.md). */
#define AL_RUNNER_KEY_HEADER "x-airlock-runner-key"
#define AL_RUNNER_KEY_RAW 32 /* random bytes of a runner key */
#define AL_RUNNER_KEY_LEN 43 /* its base64url text */

/* Behind a platform's front, which takes Authorization for its own token,
 * the runner:connect token travels in this header (the runner's
 * --token-header; docs/aca.md), and every answer of a runner to an upgrade
 * carries AL_RUNNER_REPLY_HEADER: a 403 without it is the front's. */
#define AL_PLATFORM_TOKEN_HEADER "X-Airlock-Token"
#define AL_RUNNER_REPLY_HEADER "x-airlock-runner"

#endif
