/* http.c — libmicrohttpd glue: routing, authentication, body limits, and
 * getting each job's answer to its client.
 *
 * MHD runs one thread per connection, so a handler may block: it reads the
 * body, checks and tokenizes the request (openai_req.c), queues the job, and
 * then either waits for the job (non-streaming) or returns a streaming
 * response whose reader blocks until the engine has appended SSE bytes.
 * While waiting, both poll the client's socket every POLL_MS: a client that
 * hung up cancels its job (removed from the queue, or stopped by the engine
 * at its next token).  A half-closed client (shutdown(SHUT_WR) after the
 * body) is not a hang-up: see client_check.
 *
 * Status codes: 400 bad JSON or request, 401 API key, 404 unknown path (or
 * an OpenAI endpoint lilac does not implement, or another model's id), 405
 * wrong method, 413 body over --max-body, 429 queue full (Retry-After), 431
 * headers over MAX_HEADER_BYTES, 500 internal (details on stderr), 503
 * shutting down; all OpenAI error objects.  Headers larger than MHD's
 * connection pool (MHD_MEMORY_LIMIT) and requests MHD cannot parse get MHD's
 * own short HTML answers, which the handler never sees.  GET routes answer
 * HEAD (MHD leaves out the body), every route OPTIONS (CORS preflight). */
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"

#define POLL_MS 50
#define DISCARD_MAX ((size_t)1 << 30)

struct srv_http {
    struct MHD_Daemon *d;
    srv_ctx *srv;
    int quiesced;
};

typedef enum {
    R_UNKNOWN,
    R_CHAT,
    R_COMPLETIONS,
    R_MODELS,
    R_MODEL, /* /v1/models/{id} */
    R_HEALTH,
    R_TOKENIZE,
    R_DETOKENIZE,
    R_UNSUPPORTED, /* OpenAI endpoints lilac does not implement: 404 saying so */
    R_MESSAGES,
    R_COUNT_TOKENS,
    R_METRICS,
    R_PAGE,
} route;

#define MAX_HEADER_BYTES 65536           /* larger request headers get 431 (an OpenAI error) */
#define MHD_MEMORY_LIMIT (256u * 1024)   /* MHD's per-connection pool: headers up to about this reach the handler */

/* One server per process (srv_run): reply() reads the CORS origins here. */
static const srv_ctx *cors_srv;

/* The route of the request this thread is answering.  MHD calls a
 * connection's handler and its response callbacks only on that connection's
 * thread, so the replies can see which API asked (error shapes, the metrics'
 * endpoint label) without the route passed through every helper. */
static _Thread_local route tl_route;
static _Thread_local srv_ctx *tl_srv;

static int anthropic_route(route r) { return r == R_MESSAGES || r == R_COUNT_TOKENS; }

static srv_endpoint endpoint_of(route r) {
    switch (r) {
    case R_CHAT: return SRV_EP_CHAT;
    case R_COMPLETIONS: return SRV_EP_COMPLETIONS;
    case R_MESSAGES: return SRV_EP_MESSAGES;
    case R_COUNT_TOKENS: return SRV_EP_COUNT_TOKENS;
    case R_MODELS:
    case R_MODEL: return SRV_EP_MODELS;
    case R_HEALTH: return SRV_EP_HEALTH;
    case R_METRICS: return SRV_EP_METRICS;
    case R_PAGE: return SRV_EP_PAGE;
    default: return SRV_EP_OTHER;
    }
}

/* Per-request state (MHD's con_cls), freed by the completion callback. */
typedef struct {
    route r;
    lilac_buf body;
    size_t too_big; /* bytes dropped after the body went over the limit (+1 when announced too large) */
    int answered; /* a response was queued before the body was read */
} conn_req;

/* What is known of a waiting client (see client_check). */
typedef struct {
    MHD_socket fd;
    int http11; /* 1xx interim responses may be sent */
    int eof;    /* the client has shut down its sending side */
    int probed; /* the probe was written */
} client_watch;

/* A streaming response's view of its job. */
typedef struct {
    srv_ctx *srv;
    srv_job *j;
    client_watch w;
    size_t off; /* bytes of j->sse already sent */
    struct timespec last; /* when bytes were last handed to MHD (monotonic) */
} stream_ctx;

static const char KEEPALIVE[] = ": keep-alive\n\n";

/* ------------------------------------------------------------------ CORS */

/* The request's Origin when --cors allows it ("*" with --cors-any-origin),
 * else NULL.  The list is matched exactly, entry by entry. */
static const char *cors_origin(struct MHD_Connection *c) {
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!origin || !cors_srv) return NULL;
    if (cors_srv->o.cors_any) return "*";
    const char *list = cors_srv->o.cors;
    size_t n = strlen(origin);
    while (list && *list) {
        const char *end = strchr(list, ',');
        size_t len = end ? (size_t)(end - list) : strlen(list);
        if (len == n && memcmp(list, origin, n) == 0) return origin;
        list = end ? end + 1 : NULL;
    }
    return NULL;
}

static void add_cors(struct MHD_Connection *c, struct MHD_Response *r) {
    const char *o = cors_origin(c);
    if (!o) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", o);
    if (strcmp(o, "*") != 0) MHD_add_response_header(r, "Vary", "Origin");
}

/* --------------------------------------------------------------- replies */

static enum MHD_Result reply_typed(struct MHD_Connection *c, int status, char *body, const char *ctype, const char *hname,
                                   const char *hval) {
    if (!body) { /* out of memory: an empty 500 is all that can be said */
        status = 500;
        body = strdup("");
        if (!body) return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    if (hname) MHD_add_response_header(r, hname, hval);
    add_cors(c, r);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    if (ret == MHD_YES && tl_srv) srv_metrics_request(tl_srv->metrics, endpoint_of(tl_route), status);
    return ret;
}

/* The web chat page: static bytes, no key needed (the page asks for one
 * when the API wants it). */
static enum MHD_Result reply_page(struct MHD_Connection *c) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(lilac_web_page_len, (void *)lilac_web_page, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    if (ret == MHD_YES && tl_srv) srv_metrics_request(tl_srv->metrics, SRV_EP_PAGE, 200);
    return ret;
}

static enum MHD_Result reply(struct MHD_Connection *c, int status, char *body, const char *hname, const char *hval) {
    return reply_typed(c, status, body, "application/json", hname, hval);
}

static enum MHD_Result reply_err(struct MHD_Connection *c, const srv_err *e) {
    const char *hn = NULL, *hv = NULL;
    if (e->status == 429) hn = "Retry-After", hv = "1";
    if (e->status == 401) hn = "WWW-Authenticate", hv = "Bearer";
    return reply(c, e->status, anthropic_route(tl_route) ? srv_anth_error(e) : srv_resp_error(e), hn, hv);
}

static enum MHD_Result reply_simple(struct MHD_Connection *c, int status, const char *code, const char *msg) {
    srv_err e;
    srv_errf(&e, status, NULL, "%s", msg);
    e.code = code;
    return reply_err(c, &e);
}

/* ------------------------------------------------------------ the client */

/* Whether the client is still there.  A read EOF alone does not say: a
 * client that sent its request and then shut down its sending side
 * (shutdown(SHUT_WR), legal in HTTP/1.1) is still reading, and looks the same
 * from here as one that closed its socket.  So on EOF the server writes a
 * probe (an interim "100 Continue" before a non-streaming answer, an SSE
 * comment in a stream): a socket that was closed answers it with a reset,
 * which the next check sees as an error.  Gone means a reset or another read
 * error, a hang-up, or a failed write. */
static _Thread_local int client_closed_here; /* this connection's client left: MHD's error lines are expected */

typedef enum { CLIENT_HERE, CLIENT_GONE, CLIENT_PROBE } client_state;

static client_state client_check(client_watch *w) {
    if (w->fd == MHD_INVALID_SOCKET) return CLIENT_HERE;
    struct pollfd p = {w->fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return CLIENT_HERE;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return CLIENT_GONE;
    if (p.revents & POLLIN) {
        char ch;
        ssize_t n = recv(w->fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return CLIENT_GONE;
        if (n == 0) w->eof = 1;
    }
    if (p.revents & POLLRDHUP) w->eof = 1;
    return w->eof && !w->probed ? CLIENT_PROBE : CLIENT_HERE;
}

/* Before a non-streaming answer: true when the client is gone. */
static int client_gone(client_watch *w) {
    client_state s = client_check(w);
    if (s != CLIENT_PROBE) return s == CLIENT_GONE;
    w->probed = 1;
    if (!w->http11) return 0; /* HTTP/1.0 has no interim responses: wait for the answer */
    static const char probe[] = "HTTP/1.1 100 Continue\r\n\r\n";
    ssize_t n = send(w->fd, probe, sizeof probe - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

static void client_left(srv_ctx *srv, srv_job *j) {
    client_closed_here = 1;
    srv_queue_cancel(srv->q, j);
}

static MHD_socket conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : MHD_INVALID_SOCKET;
}

static void deadline(struct timespec *ts) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += POLL_MS * 1000000L;
    if (ts->tv_nsec >= 1000000000L) ts->tv_sec++, ts->tv_nsec -= 1000000000L;
}

/* ------------------------------------------------------------- streaming */

static double since(const struct timespec *t) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) * 1e-9;
}

/* MHD's idle timeout counts from the last bytes sent, even while this reader
 * blocks (a request waiting in the queue): an SSE comment now and then keeps
 * the connection, and clients ignore it. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_ctx *sc = cls;
    srv_job *j = sc->j;
    double keepalive = sc->srv->o.timeout_s / 3.0;
    if (keepalive > 15) keepalive = 15;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (j->sse.len > sc->off) {
            size_t n = j->sse.len - sc->off;
            if (n > max) n = max;
            memcpy(buf, j->sse.data + sc->off, n);
            sc->off += n;
            if (sc->off == j->sse.len) {
                lilac_buf_clear(&j->sse);
                sc->off = 0;
            }
            pthread_mutex_unlock(&j->mu);
            clock_gettime(CLOCK_MONOTONIC, &sc->last);
            return (ssize_t)n;
        }
        if (j->done) {
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        struct timespec ts;
        deadline(&ts);
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT && !j->done && j->sse.len == sc->off) {
            pthread_mutex_unlock(&j->mu);
            client_state cs = client_check(&sc->w);
            if (cs == CLIENT_GONE) {
                client_left(sc->srv, j);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            if (cs == CLIENT_PROBE) sc->w.probed = 1; /* the comment below is the probe */
            if ((cs == CLIENT_PROBE || since(&sc->last) >= keepalive) && max >= sizeof KEEPALIVE - 1) {
                memcpy(buf, KEEPALIVE, sizeof KEEPALIVE - 1);
                clock_gettime(CLOCK_MONOTONIC, &sc->last);
                return (ssize_t)(sizeof KEEPALIVE - 1);
            }
            pthread_mutex_lock(&j->mu);
        }
    }
}

static void stream_free(void *cls) {
    stream_ctx *sc = cls;
    if (!sc) return;
    /* the response is gone (sent, or the write failed): stop the job if it still runs */
    srv_queue_cancel(sc->srv->q, sc->j);
    srv_job_release(sc->j);
    free(sc);
}

static enum MHD_Result reply_stream(struct MHD_Connection *c, srv_ctx *srv, srv_job *j, int http11) {
    stream_ctx *sc = calloc(1, sizeof *sc);
    if (!sc) {
        srv_queue_cancel(srv->q, j);
        srv_job_release(j);
        return MHD_NO;
    }
    sc->srv = srv;
    sc->j = j;
    sc->w.fd = conn_fd(c);
    sc->w.http11 = http11;
    clock_gettime(CLOCK_MONOTONIC, &sc->last);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, sc, stream_free);
    if (!r) {
        stream_free(sc);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream; charset=utf-8");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    add_cors(c, r);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    if (ret == MHD_YES) srv_metrics_request(srv->metrics, endpoint_of(tl_route), 200);
    return ret;
}

/* ------------------------------------------------------------ generation */

/* The body as a JSON object, or NULL after replying 400 (or 500) in *ret. */
static json_t *body_object(struct MHD_Connection *c, conn_req *rq, enum MHD_Result *ret) {
    if (rq->body.oom) return *ret = reply_simple(c, 500, NULL, "out of memory"), NULL;
    json_error_t jerr;
    json_t *body = json_loadb(rq->body.data ? rq->body.data : "", rq->body.len, JSON_ALLOW_NUL, &jerr);
    if (!body) {
        srv_err err;
        srv_errf(&err, 400, NULL, "the body is not valid JSON: line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
        return *ret = reply_err(c, &err), NULL;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        return *ret = reply_simple(c, 400, NULL, "the body must be a JSON object"), NULL;
    }
    return body;
}

/* POST /tokenize, /detokenize */
static enum MHD_Result tokens(struct MHD_Connection *c, srv_ctx *srv, conn_req *rq) {
    enum MHD_Result ret;
    json_t *body = body_object(c, rq, &ret);
    if (!body) return ret;
    srv_err err;
    char *out = rq->r == R_TOKENIZE ? srv_tokenize(srv, body, &err) : srv_detokenize(srv, body, &err);
    json_decref(body);
    return out ? reply(c, 200, out, NULL, NULL) : reply_err(c, &err);
}

static enum MHD_Result generate(struct MHD_Connection *c, srv_ctx *srv, conn_req *rq, int http11) {
    if (atomic_load(&srv->stopping)) return reply_simple(c, 503, "shutting_down", "the server is shutting down");
    enum MHD_Result ret;
    json_t *body = body_object(c, rq, &ret);
    if (!body) return ret;
    srv_err err;
    if (rq->r == R_COUNT_TOKENS) {
        char *count = srv_req_count_tokens(srv, body, &err);
        json_decref(body);
        return count ? reply(c, 200, count, NULL, NULL) : reply_err(c, &err);
    }
    srv_job *j = srv_job_new(srv, rq->r == R_COMPLETIONS ? SRV_COMPLETION : SRV_CHAT);
    if (!j) {
        json_decref(body);
        return reply_simple(c, 500, NULL, "out of memory");
    }
    int bad = rq->r == R_MESSAGES ? srv_req_messages(srv, body, j, &err)
              : j->kind == SRV_CHAT ? srv_req_chat(srv, body, j, &err)
                                    : srv_req_completion(srv, body, j, &err);
    json_decref(body);
    if (bad) {
        srv_job_release(j);
        if (err.status >= 500) srv_stat_add(srv, &srv->stats.errors, 1);
        return reply_err(c, &err);
    }
    if (j->stream) srv_resp_stream_start(j);
    int q = srv_queue_push(srv->q, j);
    if (q != SRV_Q_OK) {
        srv_job_release(j);
        if (q == SRV_Q_FULL) {
            srv_stat_add(srv, &srv->stats.rejected_busy, 1);
            srv_errf(&err, 429, NULL, "the server is busy: %d requests are waiting; retry later", srv->o.queue);
            err.code = "rate_limit_exceeded";
            return reply_err(c, &err);
        }
        return reply_simple(c, 503, "shutting_down", "the server is shutting down");
    }
    srv_stat_add(srv, &srv->stats.requests, 1);
    if (j->stream) return reply_stream(c, srv, j, http11);

    client_watch w = {conn_fd(c), http11, 0, 0};
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        struct timespec ts;
        deadline(&ts);
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT && !j->done) {
            pthread_mutex_unlock(&j->mu);
            if (client_gone(&w)) {
                client_left(srv, j);
                srv_job_release(j);
                return MHD_NO; /* nobody to answer */
            }
            pthread_mutex_lock(&j->mu);
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (j->failed) ret = reply_err(c, &j->err);
    else if (atomic_load(&j->cancel)) ret = reply_simple(c, 503, NULL, "the request was cancelled");
    else ret = reply(c, 200, srv_resp_body(j), NULL, NULL);
    srv_job_release(j);
    return ret;
}

/* -------------------------------------------------------------- handler */

/* Anthropic clients send the key as "x-api-key: KEY" (accepted on their routes). */
static int auth_ok(struct MHD_Connection *c, const char *key, int x_api_key) {
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *x = x_api_key ? MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key") : NULL;
    const char *p = x && !(h && strncmp(h, "Bearer ", 7) == 0) ? x : h && strncmp(h, "Bearer ", 7) == 0 ? h + 7 : "";
    size_t np = strlen(p), nk = strlen(key);
    /* constant time in the key's content: every byte of the key is compared */
    unsigned char d = np != nk;
    for (size_t i = 0; i < nk; i++) d |= (unsigned char)((unsigned char)key[i] ^ (unsigned char)(i < np ? p[i] : 0));
    return d == 0;
}

/* The routes.  A path ending in '*' matches what starts with the rest; a
 * NULL method takes any.  GET routes answer HEAD too, and every route
 * OPTIONS (CORS preflight). */
static route route_of(const char *url, const char **method_needed) {
    static const struct {
        const char *path, *method;
        route r;
    } routes[] = {
        {"/v1/chat/completions", "POST", R_CHAT},
        {"/v1/completions", "POST", R_COMPLETIONS},
        {"/v1/models", "GET", R_MODELS},
        {"/health", "GET", R_HEALTH},
        {"/v1/messages", "POST", R_MESSAGES},
        {"/v1/messages/count_tokens", "POST", R_COUNT_TOKENS},
        {"/metrics", "GET", R_METRICS},
        {"/", "GET", R_PAGE},
        {"/v1/models/*", "GET", R_MODEL},
        {"/tokenize", "POST", R_TOKENIZE},
        {"/detokenize", "POST", R_DETOKENIZE},
        {"/v1/embeddings", NULL, R_UNSUPPORTED},
        {"/v1/audio/*", NULL, R_UNSUPPORTED},
        {"/v1/images/*", NULL, R_UNSUPPORTED},
        {"/v1/moderations", NULL, R_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const char *p = routes[i].path;
        size_t n = strlen(p);
        if (p[n - 1] == '*' ? strncmp(url, p, n - 1) == 0 && url[n - 1] : strcmp(url, p) == 0) {
            *method_needed = routes[i].method;
            return routes[i].r;
        }
    }
    return R_UNKNOWN;
}

/* The Allow header of a route. */
static const char *allow_of(const char *method) {
    return method && strcmp(method, "GET") == 0 ? "GET, HEAD, OPTIONS" : "POST, OPTIONS";
}

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *k, const char *v) {
    (void)kind;
    *(size_t *)cls += strlen(k) + (v ? strlen(v) : 0) + 4; /* "k: v\r\n" */
    return MHD_YES;
}

static size_t header_bytes(struct MHD_Connection *c) {
    size_t n = 0;
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &n);
    return n;
}

/* OPTIONS: a CORS preflight (Origin + Access-Control-Request-Method) for an
 * allowed origin gets the allowed methods and headers; any other OPTIONS
 * gets 204 with Allow (and no Access-Control-*, so a browser refuses). */
static enum MHD_Result preflight(struct MHD_Connection *c, const char *method_needed) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    const char *allow = allow_of(method_needed);
    MHD_add_response_header(r, "Allow", allow);
    if (cors_origin(c) && MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Method")) {
        add_cors(c, r);
        MHD_add_response_header(r, "Access-Control-Allow-Methods", allow);
        const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", h && *h ? h : "Authorization, Content-Type");
        MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    }
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    srv_ctx *srv = cls;
    conn_req *rq = *con_cls;
    tl_srv = srv;
    tl_route = rq ? rq->r : R_UNKNOWN;
    if (!rq) { /* headers only: decide what can be decided before the body */
        if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
        *con_cls = rq;
        const char *need = NULL;
        rq->r = tl_route = route_of(url, &need);
        enum MHD_Result ret = MHD_YES;
        size_t hb = header_bytes(c);
        if (hb > MAX_HEADER_BYTES) {
            char msg[200];
            snprintf(msg, sizeof msg, "the request headers are %zu bytes, over the limit of %d", hb, MAX_HEADER_BYTES);
            ret = reply_simple(c, 431, "request_header_fields_too_large", msg), rq->answered = 1;
        } else if (rq->r == R_UNKNOWN) {
            char msg[300];
            snprintf(msg, sizeof msg, "no such endpoint: %.20s %.200s", method, url);
            ret = reply_simple(c, 404, "not_found", msg), rq->answered = 1;
        } else if (rq->r == R_UNSUPPORTED) {
            char msg[300];
            snprintf(msg, sizeof msg, "%.200s is not supported by this server (lilac serves chat and text completions)", url);
            ret = reply_simple(c, 404, "unsupported_endpoint", msg), rq->answered = 1;
        } else if (strcmp(method, "OPTIONS") == 0) {
            ret = preflight(c, need), rq->answered = 1;
        } else if (strcmp(method, need) != 0 && !(strcmp(need, "GET") == 0 && strcmp(method, "HEAD") == 0)) {
            char msg[320];
            snprintf(msg, sizeof msg, "%.200s takes %s, not %.20s", url, need, method);
            srv_err e;
            srv_errf(&e, 405, NULL, "%s", msg);
            e.code = "method_not_allowed";
            ret = reply(c, 405, anthropic_route(rq->r) ? srv_anth_error(&e) : srv_resp_error(&e), "Allow", allow_of(need)),
            rq->answered = 1;
        } else if (rq->r != R_HEALTH && rq->r != R_PAGE && !(rq->r == R_METRICS && srv->o.metrics_open) && srv->o.api_key &&
                   !auth_ok(c, srv->o.api_key, anthropic_route(rq->r))) {
            srv_err e;
            srv_errf(&e, 401, NULL, "missing or incorrect API key (send 'Authorization: Bearer KEY'%s)",
                     anthropic_route(rq->r) ? " or 'x-api-key: KEY'" : "");
            e.code = "invalid_api_key";
            ret = reply_err(c, &e), rq->answered = 1;
        } else {
            const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
            const unsigned long long len = cl ? strtoull(cl, NULL, 10) : 0;
            if (len > srv->o.max_body) {
                /* Answer at once when the client waits for "100 Continue" or
                 * the body is huge; otherwise read and drop the body first,
                 * so that a client still sending is not cut off before it
                 * can read the 413 (a close with unread data resets). */
                const char *ex = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Expect");
                if ((ex && !strcasecmp(ex, "100-continue")) || len > DISCARD_MAX) {
                    char msg[200];
                    snprintf(msg, sizeof msg, "the body is larger than the limit of %zu bytes (--max-body)", srv->o.max_body);
                    ret = reply_simple(c, 413, "request_too_large", msg), rq->answered = 1;
                } else {
                    rq->too_big = 1;
                }
            }
        }
        return ret;
    }
    if (rq->answered) { /* a refused request's body is read and dropped */
        *upload_size = 0;
        return MHD_YES;
    }
    char msg[200];
    snprintf(msg, sizeof msg, "the body is larger than the limit of %zu bytes (--max-body)", srv->o.max_body);
    if (*upload_size) {
        /* Over the limit without a Content-Length (chunked): the rest is read
         * and dropped so that the client, still sending, can read the 413;
         * past DISCARD_MAX the connection is cut short instead. */
        if (rq->too_big || rq->body.len + *upload_size > srv->o.max_body) {
            if (!rq->too_big) lilac_buf_free(&rq->body);
            rq->too_big += *upload_size;
            *upload_size = 0;
            if (rq->too_big <= DISCARD_MAX) return MHD_YES;
            rq->answered = 1;
            return reply_simple(c, 413, "request_too_large", msg);
        }
        lilac_buf_append(&rq->body, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (rq->too_big) return reply_simple(c, 413, "request_too_large", msg);
    switch (rq->r) {
    case R_HEALTH:
        return reply(c, atomic_load(&srv->stopping) ? 503 : 200, srv_resp_health(srv), NULL, NULL);
    case R_MODELS:
        return reply(c, 200, srv_resp_models(srv), NULL, NULL);
    case R_PAGE:
        return reply_page(c);
    case R_METRICS:
        return reply_typed(c, 200, srv_metrics_render(srv), "text/plain; version=0.0.4; charset=utf-8", NULL, NULL);
    case R_MODEL: {
        const char *id = url + strlen("/v1/models/");
        if (strcmp(id, srv->model_name) == 0) return reply(c, 200, srv_resp_model(srv), NULL, NULL);
        srv_err e;
        srv_errf(&e, 404, "model", "The model '%.200s' does not exist; this server serves '%.200s'", id, srv->model_name);
        e.code = "model_not_found";
        return reply_err(c, &e);
    }
    case R_TOKENIZE:
    case R_DETOKENIZE:
        return tokens(c, srv, rq);
    case R_CHAT:
    case R_COMPLETIONS:
    case R_MESSAGES:
    case R_COUNT_TOKENS:
        return generate(c, srv, rq, strcmp(version, MHD_HTTP_VERSION_1_0) != 0);
    default:
        return MHD_NO;
    }
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    conn_req *rq = *con_cls;
    if (!rq) return;
    lilac_buf_free(&rq->body);
    free(rq);
    *con_cls = NULL;
}

/* MHD's lines about a connection whose client left ("internal error", "error
 * generating response", failed sends) are dropped: the job's own line says
 * "cancelled: client closed".  Connections have a thread each, so the flag
 * is the connection's. */
static void log_mhd(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    if (client_closed_here) return;
    fprintf(stderr, "lilac serve: http: ");
    vfprintf(stderr, fmt, ap);
}

/* --------------------------------------------------------------- daemon */

int srv_http_start(srv_ctx *srv, srv_http **out, int *port_out, char *msg, size_t msgcap) {
    *out = NULL;
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char port[16];
    snprintf(port, sizeof port, "%d", srv->o.port);
    int g = getaddrinfo(srv->o.host, port, &hints, &ai);
    if (g) {
        snprintf(msg, msgcap, "--host %s: %s", srv->o.host, gai_strerror(g));
        return -1;
    }
    srv_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        snprintf(msg, msgcap, "out of memory");
        return -1;
    }
    h->srv = srv;
    cors_srv = srv;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, (uint16_t)srv->o.port, NULL, NULL, handler, srv, MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MHD_MEMORY_LIMIT,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)srv->o.max_conns, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)srv->o.timeout_s, MHD_OPTION_NOTIFY_COMPLETED, completed, srv, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        snprintf(msg, msgcap, "cannot listen on %s port %d (in use, or not an address of this machine?)", srv->o.host,
                 srv->o.port);
        free(h);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = di ? di->port : srv->o.port;
    *out = h;
    return 0;
}

void srv_http_quiesce(srv_http *h) {
    if (!h || h->quiesced) return;
    MHD_socket s = MHD_quiesce_daemon(h->d);
    if (s != MHD_INVALID_SOCKET) close(s);
    h->quiesced = 1;
}

void srv_http_stop(srv_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->d);
    free(h);
}
