/*
 * api_view: rows of the database as the API's JSON (docs/api.md): a
 * sandbox, a terminal (its row, and while it is live what the relay knows:
 * size, viewers, writer, bytes), an audit entry; and the adders a list
 * query calls per row, bounded to API_LIST_MAX rows.
 *
 * Not here: which rows are asked for (the handlers: api_sandbox.c,
 * api_terminal.c, api_audit.c) and how the answer is sent (api_reply.c).
 */
#include <jansson.h>

#include "al_err.h"
#include "api_local.h"
#include "relay.h"

/* "network" is what a local sandbox's agents get ("host" or "none"; null
 * for the others: airlockd does not start their runners), and
 * "network_default" whether that is the server's --sandbox-network (the
 * sandbox was made without one) rather than its own. "refused_links" and
 * "refused_link_at": runner links refused since airlockd started because
 * their key was not the sandbox's (an impostor with a copied token; the
 * audit log has each, action runner_impostor), and when the last was. */
json_t *api_view_sandbox(const struct api *a, const struct db_sandbox *s)
{
    const int local = s->kind == DB_SANDBOX_LOCAL;
    json_t *net =
        local ? json_string(db_sandbox_network_name(relay_sandbox_network(a->relay, s->network)))
              : json_null();
    uint64_t refused;
    int64_t refused_at;
    relay_sandbox_refused(a->relay, s->id, &refused, &refused_at);
    const char *lerr = relay_sandbox_link_error(a->relay, s->id);
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:b, s:I, s:I, s:b, s:o, s:b, s:I, s:I, s:o}", "id", s->id,
                  "kind", db_sandbox_kind_name(s->kind), "url", s->url, "link_up", (int)s->link_up,
                  "link_since", (json_int_t)s->link_since, "rtt_us", (json_int_t)s->rtt_us,
                  "record_input", (int)s->record_input, "network", net, "network_default",
                  local && s->network == DB_NETWORK_DEFAULT, "refused_links", (json_int_t)refused,
                  "refused_link_at", (json_int_t)refused_at, "link_error",
                  lerr ? json_string(lerr) : json_null());
    if (o) { /* the lease (docs/scale-out.md): who owns its runner link */
        (void)json_object_set_new(o, "owner", s->owner[0] ? json_string(s->owner) : json_null());
        (void)json_object_set_new(o, "fence", json_integer(s->fence));
    }
    if (o && s->kind == DB_SANDBOX_ACA) {
        (void)json_object_set_new(o, "platform", json_string(s->platform));
        (void)json_object_set_new(o, "identifier", json_string(s->identifier));
    }
    return o;
}

int api_view_add_sandbox(void *ctx, const struct db_sandbox *s)
{
    struct api_list *l = ctx;
    if (l->n++ >= API_LIST_MAX)
        return 1;
    json_t *o = api_view_sandbox(l->a, s);
    return o && json_array_append_new(l->arr, o) == 0 ? 0 : AL_E_NOMEM;
}

json_t *api_view_terminal(struct api *a, const struct db_terminal *t)
{
    json_error_t jerr;
    json_t *argv = json_loads(t->argv_json, JSON_REJECT_DUPLICATES, &jerr);
    struct rl_term_info info;
    relay_terminal_info(a->relay, t->id, &info);
    json_t *viewers = json_array();
    for (unsigned i = 0; viewers && i < info.clients; i++)
        (void)json_array_append_new(viewers, json_pack("{s:s, s:s}", "name", info.names[i], "role",
                                                       info.roles[i] == 1 ? "writer" : "viewer"));
    json_t *o = json_pack(
        "{s:s, s:s, s:i, s:o*, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:o*}", "id",
        t->id, "sandbox", t->sandbox_id, "channel", (int)t->channel, "argv", argv, "cwd", t->cwd,
        "mode", db_term_mode_name(t->mode), "state", db_term_state_name(t->state), "cols",
        info.live ? info.cols : t->cols, "rows", info.live ? info.rows : t->rows, "exit_code",
        t->exit_code, "exit_signal", t->exit_signal, "created_at", (json_int_t)t->created_at,
        "ended_at", (json_int_t)t->ended_at, "out_bytes",
        (json_int_t)(info.live && info.out_end > t->out_offset ? info.out_end : t->out_offset),
        "recording_bytes", (json_int_t)(info.live ? info.rec_bytes : t->rec_bytes), "viewers",
        viewers);
    if (o && info.rec_failed)
        (void)json_object_set_new(o, "recording_error", json_string(info.rec_error));
    if (o && info.writer[0])
        (void)json_object_set_new(o, "writer", json_string(info.writer));
    if (o) {
        (void)json_object_set_new(o, "creator", json_string(t->creator));
        (void)json_object_set_new(o, "record_input", json_boolean(t->record_input));
    }
    return o;
}

int api_view_add_terminal(void *ctx, const struct db_terminal *t)
{
    struct api_list *l = ctx;
    if (l->n++ >= API_LIST_MAX)
        return 1;
    json_t *o = api_view_terminal(l->a, t);
    return o && json_array_append_new(l->arr, o) == 0 ? 0 : AL_E_NOMEM;
}

int api_view_add_audit(void *ctx, const struct db_audit *e)
{
    struct api_list *l = ctx;
    json_t *o = json_pack("{s:I, s:I, s:s, s:s, s:s, s:s}", "id", (json_int_t)e->id, "at",
                          (json_int_t)e->at, "actor", e->actor, "action", e->action, "target",
                          e->target, "detail", e->detail);
    return o && json_array_append_new(l->arr, o) == 0 ? 0 : AL_E_NOMEM;
}
