/*
 * sock.c — the unix stream socket inputs: listeners (--listen, or inherited from systemd),
 * their connections, and the input objects every kind shares. A connection carries the same
 * frames as the FIFO; its bytes are read, decoded, stored and committed, in that order, so
 * what is lost when indexd is killed is what it had read and not yet committed (at most one
 * read's worth): at-most-once, documented in README.md. A connection's buffer starts small and
 * grows to the largest frame it must hold whole (LB_FRAME_MAX); larger frames are streamed:
 * the first LB_FRAME_MAX bytes kept, the message cut at LB_MSG_MAX and flagged truncated,
 * never split into two messages. A frame whose message can never be stored is quarantined
 * (quarantine.c) and reading goes on. A peer is named by SO_PEERCRED in logs.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "indexd.h"

static void	conn_cb(int fd, short what, void *arg);

struct input *
input_new(struct indexd *env, int kind, int fd, const char *name)
{
	struct input	*in;
	event_callback_fn fn;

	if ((in = calloc(1, sizeof(*in))) == NULL)
		return (NULL);
	in->in_env = env;
	in->in_kind = kind;
	in->in_fd = fd;
	snprintf(in->in_name, sizeof(in->in_name), "%s", name);
	fn = kind == IN_FIFO ? fifo_cb : kind == IN_SPOOL ? spool_cb : kind == IN_LISTEN ?
	    listen_cb : conn_cb;
	if ((in->in_ev = event_new(env->base_ev, fd, EV_READ | EV_PERSIST, fn,
	    kind == IN_FIFO || kind == IN_SPOOL ? (void *)env : (void *)in)) == NULL) {
		free(in);
		return (NULL);
	}
	TAILQ_INSERT_TAIL(&env->inputs, in, in_entry);
	return (in);
}

/* Unlinks, closes and frees an input. A connection hands its counters to its listener. */
void
input_free(struct input *in)
{
	struct indexd	*env;
	struct input	*p;

	if (in == NULL)
		return;
	env = in->in_env;
	if ((p = in->in_parent) != NULL) {
		p->in_received += in->in_received;
		p->in_malformed += in->in_malformed;
		p->in_truncated += in->in_truncated;
		p->in_quarantined += in->in_quarantined;
		p->in_bytes += in->in_bytes;
		p->in_conns--;
		env->conns--;
	}
	TAILQ_REMOVE(&env->inputs, in, in_entry);
	if (in->in_ev != NULL)
		event_free(in->in_ev);
	if (in->in_fd != -1)
		close(in->in_fd);
	free(in->in_buf);
	free(in->in_big.buf);
	free(in);
}

void
listen_cb(int fd, short what, void *arg)
{
	struct input	*li = arg, *in;
	struct indexd	*env = li->in_env;
	struct ucred	 cr;
	socklen_t	 crlen = sizeof(cr);
	char		 name[160];
	int		 cfd;

	(void)what;
	for (int k = 0; k < 64; k++) {
		if ((cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) == -1) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_warn("%s: accept on %s", __func__, li->in_name);
			return;
		}
		if (env->conns >= IX_CONN_MAX) {
			log_warnx("%s: %s: %d connections open: refusing another", __func__,
			    li->in_name, IX_CONN_MAX);
			close(cfd);
			continue;
		}
		if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) == 0)
			snprintf(name, sizeof(name), "peer pid %d uid %u on %.100s", (int)cr.pid,
			    (unsigned)cr.uid, li->in_name);
		else
			snprintf(name, sizeof(name), "peer ? on %.100s", li->in_name);
		if ((in = input_new(env, IN_CONN, cfd, name)) == NULL) {
			log_warnx("%s: out of memory: refusing %s", __func__, name);
			close(cfd);
			continue;
		}
		in->in_parent = li;
		li->in_conns++;
		li->in_accepted++;
		env->conns++;
		if (env->holding[0] == '\0' && !env->stopping)
			event_add(in->in_ev, NULL);
		log_debug("connection from %s", name);
	}
}

/* The streamed frame of a connection went by: store it (0) or hold (the error). */
static int
conn_big_done(struct indexd *env, struct input *in)
{
	struct lb_frame	 f;
	struct lspace	*l;
	const char	*why = "malformed";
	int		 stored, rc, qrc;

	if ((rc = bigframe_msg(&in->in_big, &f, &why)) != 0) {
		malformed(env, in, in->in_big.off, why, in->in_big.buf, in->in_big.keep);
		bigframe_reset(&in->in_big);
		return (0);
	}
	if ((rc = ls_get(env, f.ls.p, f.ls.len, &l)) == 0)
		rc = ls_append(env, l, &f.msg, &stored);
	else
		stored = 0;
	if (!stored && lb_errclass(rc) == LB_ERRC_MESSAGE) {
		if ((qrc = quarantine(env, in, f.ls.p, f.ls.len, &f, in->in_big.buf,
		    in->in_big.keep, rc, 0, 0, 0)) != 0) {
			hold(env, "%s/%s: %s", env->data, LB_DL_FILE, lb_strerror(qrc));
			return (qrc);
		}
		in->in_received++;
		env->received++;
		bigframe_reset(&in->in_big);
		return (0);
	}
	if (!stored) {
		hold(env, "logspace %.*s: %s", (int)f.ls.len, (const char *)f.ls.p,
		    lb_strerror(rc));
		return (rc);
	}
	in->in_received++;
	in->in_truncated++;
	env->received++;
	log_info("%s: a frame of %zu bytes at byte %llu was streamed: message cut at %d bytes",
	    in->in_name, in->in_big.need, (unsigned long long)in->in_big.off, LB_MSG_MAX);
	bigframe_reset(&in->in_big);
	if (rc != 0)
		hold(env, "logspace %s: %s", l->name, lb_strerror(rc));
	return (rc);
}

/*
 * Stores the complete frames in the connection's buffer and keeps the rest at its front.
 * Returns 0, or the error that made indexd hold (the unstored bytes stay in the buffer).
 */
static int
conn_process(struct indexd *env, struct input *in)
{
	struct lb_frame	 f;
	struct lspace	*l;
	const char	*why;
	size_t		 pos = 0, need, take;
	int		 stored, rc = 0;

	/* Nothing is stored while the disk is below its reserve (disk.c); stopping stores all. */
	if (!env->stopping && (rc = disk_check(env)) != 0)
		return (rc);
	while (pos < in->in_len || (in->in_big.need != 0 && in->in_big.got == in->in_big.need)) {
		if (in->in_big.need != 0) {
			take = bigframe_feed(&in->in_big, in->in_buf + pos, in->in_len - pos);
			pos += take;
			if (in->in_big.got < in->in_big.need)
				break;
			if ((rc = conn_big_done(env, in)) != 0)
				break;
			continue;
		}
		why = "malformed";
		rc = lb_frame_decode(in->in_buf + pos, in->in_len - pos, LB_FRAME_MAX, &f, &need,
		    &why);
		if (rc == EAGAIN) {
			rc = 0;
			if (in->in_eof) {
				malformed(env, in, in->in_bytes + pos,
				    "connection closed inside a frame", in->in_buf + pos,
				    in->in_len - pos);
				pos = in->in_len;
			} else if (need > in->in_cap) {
				uint8_t	*nb;
				size_t	 cap = in->in_cap;

				while (cap < need)
					cap *= 2;
				if ((nb = realloc(in->in_buf, cap)) == NULL) {
					hold(env, "%s: out of memory", in->in_name);
					rc = ENOMEM;
					break;
				}
				in->in_buf = nb;
				in->in_cap = cap;
			}
			break;
		}
		if (rc == LB_ETOOBIG) {
			if ((rc = bigframe_start(&in->in_big, need, in->in_bytes + pos)) != 0) {
				hold(env, "%s: out of memory", in->in_name);
				break;
			}
			continue;
		}
		if (rc == 0 && !lb_logspace_name_ok(f.ls.p, f.ls.len, &why)) {
			malformed(env, in, in->in_bytes + pos, why, in->in_buf + pos,
			    in->in_len - pos);
			pos += f.size;
			continue;
		}
		if (rc != 0) {
			malformed(env, in, in->in_bytes + pos, why, in->in_buf + pos,
			    in->in_len - pos);
			pos += lb_frame_resync(in->in_buf + pos, in->in_len - pos, 1);
			rc = 0;
			continue;
		}
		if ((rc = ls_get(env, f.ls.p, f.ls.len, &l)) == 0)
			rc = ls_append(env, l, &f.msg, &stored);
		else
			stored = 0;
		if (!stored && lb_errclass(rc) == LB_ERRC_MESSAGE) {
			if ((rc = quarantine(env, in, f.ls.p, f.ls.len, &f, in->in_buf + pos,
			    f.size, rc, 0, 0, 0)) != 0) {
				hold(env, "%s/%s: %s", env->data, LB_DL_FILE, lb_strerror(rc));
				break;
			}
			pos += f.size;
			in->in_received++;
			env->received++;
			continue;
		}
		if (!stored && rc != 0) {
			hold(env, "logspace %.*s: %s", (int)f.ls.len, (const char *)f.ls.p,
			    lb_strerror(rc));
			break;
		}
		if (stored) {
			pos += f.size;
			in->in_received++;
			env->received++;
			if (f.msg.flags & LB_MSG_TRUNCATED)
				in->in_truncated++;
		}
		if (rc != 0) {
			hold(env, "logspace %s: %s", l->name, lb_strerror(rc));
			break;
		}
	}
	if (pos > 0) {
		memmove(in->in_buf, in->in_buf + pos, in->in_len - pos);
		in->in_len -= pos;
		in->in_bytes += pos;
	}
	if (rc == 0)
		rc = ls_commit_dirty(env, 0);
	return (rc);
}

static void
conn_cb(int fd, short what, void *arg)
{
	struct input	*in = arg;
	struct indexd	*env = in->in_env;
	ssize_t		 n;

	(void)what;
	if (env->holding[0] != '\0' || env->stopping)
		return;
	if (in->in_buf == NULL) {
		if ((in->in_buf = malloc(IX_CONN_BUF)) == NULL) {
			hold(env, "%s: out of memory", in->in_name);
			return;
		}
		in->in_cap = IX_CONN_BUF;
	}
	if (in->in_len == in->in_cap) {
		/* (cannot happen: the buffer grows to the frame it must hold) */
		malformed(env, in, in->in_bytes, "buffer full", in->in_buf, in->in_len);
		in->in_bytes += in->in_len;
		in->in_len = 0;
	}
	n = read(fd, in->in_buf + in->in_len, in->in_cap - in->in_len);
	if (n == -1) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		log_warn("%s: %s: read", __func__, in->in_name);
		n = 0;
	}
	if (n == 0)
		in->in_eof = 1;
	in->in_len += (size_t)n;
	if (conn_process(env, in) != 0)
		return;
	/* An idle connection keeps no buffer (thousands of them may be open). */
	if (in->in_len == 0 && in->in_big.need == 0 && ((size_t)n < in->in_cap / 2 ||
	    in->in_cap > IX_CONN_BUF)) {
		free(in->in_buf);
		in->in_buf = NULL;
		in->in_cap = 0;
	}
	ls_memory(env);
	if (in->in_eof) {
		log_debug("%s: closed after %llu frames", in->in_name,
		    (unsigned long long)in->in_received);
		input_free(in);
	}
}

/* After a hold: stores what the connection's buffer holds; closes it if the peer had. */
int
conn_resume(struct indexd *env, struct input *in)
{
	int rc;

	if ((rc = conn_process(env, in)) != 0)
		return (rc);
	if (in->in_eof)
		input_free(in);
	return (0);
}

/* Stopping: store the complete frames the connections' buffers hold, then close them. */
void
conn_drain(struct indexd *env)
{
	struct input *in, *next;

	for (in = TAILQ_FIRST(&env->inputs); in != NULL; in = next) {
		next = TAILQ_NEXT(in, in_entry);
		if (in->in_kind != IN_CONN)
			continue;
		if (in->in_len > 0 && conn_process(env, in) != 0)
			log_warnx("%s: %s: %zu bytes not stored", __func__, in->in_name,
			    in->in_len);
		input_free(in);
	}
}
