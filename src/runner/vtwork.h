/*
 * vtwork: one thread that feeds the terminals' screen models, so that the
 * loop relays a terminal's output while its model takes it in (issue 16).
 *
 * The loop pushes each read (a model, its channel, the bytes) into one
 * ring of records; the thread feeds them to the models in the order they
 * were pushed. The loop touches a model itself (a snapshot, a resize, its
 * free) only once the thread has fed every record pushed for it: after
 * vtw_sync, when the thread has fed every byte pushed and waits, or, not
 * to wait, by taking a mark (vtw_mark), pushing nothing more for that
 * model, and waiting for on_mark to say the thread has passed the mark
 * (vtw_passed) while the loop goes on. So a snapshot is still exact at the
 * stream's offset, and a model is never used by both threads at once.
 *
 * Bounds: the ring holds VTW_RING bytes (records of at most VTW_PUSH_MAX
 * bytes each); a loop that finds too little room stops reading until the
 * thread has made room, which it is told of through on_room, on the loop.
 * So a model is never further behind its terminal's output than the ring,
 * and vtw_sync holds the loop for as long as the thread takes to feed at
 * most that much.
 */
#ifndef AL_VTWORK_H
#define AL_VTWORK_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define VTW_RING ((size_t)128 * 1024)    /* bytes of records queued for the thread at most */
#define VTW_PUSH_MAX ((size_t)64 * 1024) /* bytes one push may carry at most */
/* A thread asleep is woken once this much is queued, or VTW_WAKE_MS after
 * the first push that left it asleep, or at once when the loop waits for
 * it (vtw_sync, vtw_notify, vtw_room short of room): so a model is at most
 * VTW_WAKE_MS behind a quiet terminal, and a flowing terminal costs one
 * wake-up per VTW_WAKE_BYTES, not one per read. */
#define VTW_WAKE_BYTES ((size_t)32 * 1024)
#define VTW_WAKE_MS 1

struct vtw;

/* Feeds n bytes to target (a struct vt *, for the runner), on the thread;
 * returns AL_OK or an AL_E_* code. */
typedef int vtw_feed_fn(void *target, const uint8_t *p, size_t n);
/* On the loop: room came back after vtw_room found less than asked. */
typedef void vtw_room_fn(void *ud);
/* On the loop: a feed on the thread failed (rc) for channel ch; the most
 * recent failure since the last call, with how many there were. */
typedef void vtw_error_fn(void *ud, uint32_t ch, int rc, unsigned count);
/* On the loop: the thread has passed the earliest mark vtw_notify was
 * given and not yet passed then; vtw_passed tells which marks now. It may
 * also come when no new mark was passed. */
typedef void vtw_mark_fn(void *ud);

struct vtw_config {
    vtw_feed_fn *feed;
    vtw_room_fn *on_room;
    vtw_error_fn *on_error;
    vtw_mark_fn *on_mark;
    void *ud;
};

/* Starts the thread (its signals blocked). AL_E_NOMEM, AL_E_IO when the
 * thread or the loop's handle cannot be made. */
int vtw_new(uv_loop_t *loop, const struct vtw_config *cfg, struct vtw **out);
/* Feeds what is queued, stops the thread and closes the loop's handle;
 * the memory goes once the loop has closed it. NULL is allowed. */
void vtw_close(struct vtw *w);

/* The bytes one push may carry now (at most VTW_PUSH_MAX). When it is
 * under want, on_room is called once the thread has made room. */
size_t vtw_room(struct vtw *w, size_t want);
/* Queues n bytes (1 ≤ n ≤ vtw_room's answer) for target, tagged ch.
 * AL_E_LIMIT when they do not fit (nothing is queued). */
int vtw_push(struct vtw *w, void *target, uint32_t ch, const uint8_t *p, size_t n);
/* Whether the thread has bytes to feed or is feeding them (0: every byte
 * pushed has been fed, and the loop may use any model now). */
int vtw_busy(const struct vtw *w);
/* Returns once the thread has fed every byte pushed so far. */
void vtw_sync(struct vtw *w);

/* Where the ring stands: every record pushed so far lies before the mark.
 * Taken right after a push, it is where that record ends, and a model's
 * last such mark is the one its own use waits for: not the ring's end,
 * which may lie behind other models' records. */
size_t vtw_mark(const struct vtw *w);
/* Whether the thread has fed every record before mark. */
int vtw_passed(const struct vtw *w, size_t mark);
/* Asks for on_mark once the thread has passed mark: 1 when it already has
 * (no call comes for it then), 0 when a call will come. One mark is
 * watched at a time, the earliest asked for: a call comes once it is
 * passed, and the caller then asks again for the marks it still waits for
 * (a later mark may be passed by then, or not). */
int vtw_notify(struct vtw *w, size_t mark);

#endif
