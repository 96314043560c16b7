/*
 * fifo.c — the FIFO input and its exactly-once protocol (README.md "Exactly once"). The FIFO
 * is held open by the supervisor, so bytes indexd has not read survive indexd's death. indexd
 * therefore never reads a byte before what it carries is stored:
 *   1. tee() the FIFO's head (up to 1 MiB) into a private pipe and read that copy (the FIFO
 *      keeps the bytes);
 *   2. decode the complete frames at the head: m bytes, malformed stretches included, and open
 *      the stores of the logspaces they name;
 *   3. write the intent record (state.c): m, the CRC and first 64 bytes of the m bytes, and
 *      each touched logspace's next id before the batch;
 *   4. append every frame, commit every touched store (to the kernel: survives kill -9);
 *   5. consume the m bytes (one read: all or nothing under kill -9); 6. write the record
 *      again with m = 0.
 * After a kill at any point, start-up finds either m = 0 (nothing half done) or m > 0 and the
 * same m bytes at the FIFO's head: it decodes them again and gives the frames of each logspace
 * ids from the recorded "next id before" on; a frame whose id is below the store's next id
 * (after the store's own recovery) was stored and is skipped, the others are appended. The same
 * rule finishes a batch after a hold (an append or commit that failed). A frame whose message
 * can never be stored is quarantined (quarantine.c): it takes no id, and its dead-letter record
 * names the batch, so replay neither sets it aside twice nor miscounts the ids after it. It
 * also owns frames too big to be seen whole through tee(): they are streamed (consumed while
 * read), the first LB_FRAME_MAX bytes kept and the message cut at LB_MSG_MAX — the one
 * at-most-once case.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "indexd.h"
#include "lb_util.h"

/* ---------------------------------------------------------------- streamed big frames */

void
bigframe_reset(struct bigframe *b)
{
	b->need = b->got = b->keep = 0;
	b->last = 0;
}

/* Begins streaming a frame of need bytes that started at input offset off. */
int
bigframe_start(struct bigframe *b, size_t need, uint64_t off)
{
	if (b->buf == NULL && (b->buf = malloc(LB_FRAME_MAX)) == NULL)
		return (ENOMEM);
	bigframe_reset(b);
	b->need = need;
	b->off = off;
	return (0);
}

/* Takes bytes of the frame from p[0..len); returns how many it took (the frame ends there). */
size_t
bigframe_feed(struct bigframe *b, const uint8_t *p, size_t len)
{
	size_t	take = b->need - b->got, k;

	if (take > len)
		take = len;
	if (take == 0)
		return (0);
	if (b->keep < LB_FRAME_MAX) {
		k = LB_FRAME_MAX - b->keep;
		if (k > take)
			k = take;
		memcpy(b->buf + b->keep, p, k);
		b->keep += k;
	}
	b->got += take;
	b->last = p[take - 1];
	return (take);
}

/* bigframe_msg() but for the logspace name. */
static int
bigframe_decode(struct bigframe *b, struct lb_frame *f, const char **why)
{
	size_t	need, off;
	int	rc;

	if (b->got != b->need)
		return (EAGAIN);
	if (b->last != '\n') {
		*why = "no LF after the payload";
		return (LB_EPARSE);
	}
	rc = lb_frame_decode(b->buf, b->keep, LB_FRAME_MAX, f, &need, why);
	if (rc == 0)
		return (0);
	if (rc != LB_ETOOBIG) {
		if (rc != LB_EPARSE)
			*why = rc == EAGAIN ? "frame shorter than its header says" : lb_strerror(rc);
		return (LB_EPARSE);
	}
	off = f->hdr + f->ls.len + f->msg.host.len + f->msg.program.len + f->msg.pid.len +
	    f->msg.msgid.len + f->msg.sd.len;
	if (off > b->keep) {
		*why = "fields larger than a frame may be";
		return (LB_EPARSE);
	}
	f->msg.message.p = b->buf + off;
	f->msg.message.len = b->keep - off;
	if (f->msg.message.len > LB_MSG_MAX)
		f->msg.message.len = LB_MSG_MAX;
	f->msg.flags |= LB_MSG_TRUNCATED;
	f->size = b->need;
	return (0);
}

/*
 * The whole frame went by: decodes what was kept into *f (zeroed first), the message cut at
 * LB_MSG_MAX and flagged truncated. LB_EPARSE (with *why) when it turns out malformed or its
 * logspace is not a logspace name.
 */
int
bigframe_msg(struct bigframe *b, struct lb_frame *f, const char **why)
{
	int rc;

	memset(f, 0, sizeof(*f));
	rc = bigframe_decode(b, f, why);
	if (rc == 0 && !lb_logspace_name_ok(f->ls.p, f->ls.len, why))
		rc = LB_EPARSE;
	return (rc);
}

/* ---------------------------------------------------------------- the FIFO's head */

int
fifo_init(struct indexd *env, int fd, int kill_safe)
{
	struct fifo	*fi = &env->fifo;
	char		 name[64];
	int		 cap, cap2, fl;

	if (fi->in != NULL)
		fatalx("%s: more than one FIFO input", __func__);
	fi->priv[0] = fi->priv[1] = fi->statefd = -1;
	if ((fl = fcntl(fd, F_GETFL)) == -1 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1)
		return (errno);
	if (fcntl(fd, F_SETPIPE_SZ, IX_PIPE_SIZE) == -1)
		log_debug("%s: F_SETPIPE_SZ on the FIFO: %s", __func__, strerror(errno));
	if ((cap = fcntl(fd, F_GETPIPE_SZ)) == -1)
		return (errno);
	if (pipe2(fi->priv, O_CLOEXEC | O_NONBLOCK) == -1)
		return (errno);
	if (fcntl(fi->priv[0], F_SETPIPE_SZ, cap) == -1)
		log_debug("%s: F_SETPIPE_SZ on the private pipe: %s", __func__, strerror(errno));
	if ((cap2 = fcntl(fi->priv[0], F_GETPIPE_SZ)) == -1)
		return (errno);
	fi->view_max = (size_t)(cap < cap2 ? cap : cap2);
	if (fi->view_max > IX_VIEW_MAX)
		fi->view_max = IX_VIEW_MAX;
	if ((fi->view = malloc(IX_VIEW_MAX)) == NULL ||
	    (fi->scratch = malloc(64 * 1024)) == NULL)
		return (ENOMEM);
	fi->kill_safe = kill_safe;
	snprintf(name, sizeof(name), "fifo fd %d", fd);
	if ((fi->in = input_new(env, IN_FIFO, fd, name)) == NULL)
		return (ENOMEM);
	if ((fi->ev_retry = evtimer_new(env->base_ev, fifo_cb, env)) == NULL)
		return (ENOMEM);
	if (fi->view_max < LB_FRAME_MAX)
		log_warnx("%s: the FIFO holds only %zu bytes: frames larger than that are streamed "
		    "(at-most-once across a kill)", __func__, fi->view_max);
	return (0);
}

void
fifo_free(struct indexd *env)
{
	struct fifo *fi = &env->fifo;

	if (fi->ev_retry != NULL)
		event_free(fi->ev_retry);
	if (fi->priv[0] != -1)
		close(fi->priv[0]);
	if (fi->priv[1] != -1)
		close(fi->priv[1]);
	if (fi->statefd != -1)
		close(fi->statefd);
	free(fi->view);
	free(fi->scratch);
	free(fi->frames);
	free(fi->fls);
	free(fi->fdead);
	free(fi->frc);
	lb_dl_close(env->dl);
	env->dl = NULL;
	free(fi->big.buf);
	memset(fi, 0, sizeof(*fi));
}

/* Copies the FIFO's head (up to view_max bytes) into fi->view without consuming it. */
static int
fifo_peek(struct fifo *fi)
{
	ssize_t	n, r;
	size_t	got = 0;

	fi->vlen = 0;
	fi->eof = 0;
	for (;;) {
		n = tee(fi->in->in_fd, fi->priv[1], fi->view_max, SPLICE_F_NONBLOCK);
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		return (errno == EAGAIN ? 0 : errno);
	}
	if (n == 0)
		fi->eof = 1;	/* no writer and nothing buffered (a FIFO not held O_RDWR) */
	while (got < (size_t)n) {
		if ((r = read(fi->priv[0], fi->view + got, (size_t)n - got)) == -1) {
			if (errno == EINTR)
				continue;
			return (errno);
		}
		if (r == 0)
			return (EIO);
		got += (size_t)r;
	}
	fi->vlen = got;
	return (0);
}

/*
 * Consumes the n bytes of a batch from the FIFO (they are in it: we have seen them) with one
 * read(2) into the view, whose bytes are no longer needed. One read, not splice(): a pipe read
 * that finds all its bytes in the pipe copies them without looking at signals, so a kill -9
 * leaves the batch either wholly consumed or not at all; splice() checks for signals between
 * pipe buffers and could stop in the middle.
 */
static int
fifo_consume(struct fifo *fi, size_t n)
{
	ssize_t	r;

	while (n > 0) {
		r = read(fi->in->in_fd, fi->view, n < IX_VIEW_MAX ? n : IX_VIEW_MAX);
		if (r == -1) {
			if (errno == EINTR)
				continue;
			return (errno);
		}
		if (r == 0)
			return (EIO);
		n -= (size_t)r;
	}
	fi->vlen = 0;
	return (0);
}

/*
 * Decodes the complete frames at the head of the view into fi->frames: up to limit bytes
 * (replay) or as many as there are. Sets *m to the bytes they (and malformed stretches
 * between them) take, *bigneed to a frame's size when the head is a frame that must be
 * streamed. Opens the logspaces named; with it != NULL (replay) the recorded next ids are
 * used, else the stores' own, and the intent's logspace list is filled.
 */
static int
batch_build(struct indexd *env, size_t limit, const struct ix_intent *replay, size_t *m,
    size_t *bigneed)
{
	struct fifo	*fi = &env->fifo;
	struct ix_intent *it = &fi->intent;
	struct lb_frame	 f;
	struct lspace	*l;
	const char	*why;
	size_t		 pos = 0, need, end = fi->vlen;
	int		 rc, lrc;

	*bigneed = 0;
	fi->nframes = 0;
	it->nls = 0;
	for (size_t i = 0; i < env->nls; i++)
		env->ls[i]->bmark = 0;
	if (limit != 0 && limit < end)
		end = limit;
	while (pos < end) {
		why = "malformed";
		rc = lb_frame_decode(fi->view + pos, fi->vlen - pos, LB_FRAME_MAX, &f, &need, &why);
		if (rc == 0 && pos + f.size > end)
			break;
		if (rc == EAGAIN) {
			if (pos == 0 && need > fi->view_max)
				*bigneed = need;
			break;
		}
		if (rc == LB_ETOOBIG) {
			if (pos == 0)
				*bigneed = need;
			break;
		}
		if (rc == 0 && !lb_logspace_name_ok(f.ls.p, f.ls.len, &why))
			rc = EINVAL;	/* a whole frame, refused: skip it */
		if (rc != 0) {
			size_t skip;

			if (rc == EINVAL)
				skip = f.size;
			else
				skip = lb_frame_resync(fi->view + pos, fi->vlen - pos, 1);
			if (replay == NULL)
				malformed(env, fi->in, fi->in->in_bytes + pos, why, fi->view + pos,
				    fi->vlen - pos);
			pos += skip;
			continue;
		}
		if ((lrc = ls_get(env, f.ls.p, f.ls.len, &l)) != 0) {
			if (lb_errclass(lrc) == LB_ERRC_MESSAGE)
				l = NULL;	/* batch_store quarantines it */
			else if (pos > 0)
				break;	/* store what comes before it first */
			else {
				hold(env, "logspace %.*s: %s", (int)f.ls.len,
				    (const char *)f.ls.p, lb_strerror(lrc));
				return (lrc);
			}
		}
		if (l != NULL && !l->bmark) {
			if (it->nls == IX_STATE_LS)
				break;
			if (replay != NULL) {
				uint32_t k;

				for (k = 0; k < replay->nls; k++)
					if (strcmp(replay->ls[k].name, l->name) == 0)
						break;
				if (k == replay->nls)
					return (LB_ECORRUPT);
				l->bbefore = replay->ls[k].before;
			} else
				l->bbefore = l->next_id;
			snprintf(it->ls[it->nls].name, sizeof(it->ls[0].name), "%s", l->name);
			it->ls[it->nls].before = l->bbefore;
			it->nls++;
			l->bmark = 1;
		}
		if (fi->nframes == fi->capframes) {
			size_t		 cap = fi->capframes ? fi->capframes * 2 : 4096;
			struct lb_frame	*nf;
			struct lspace	**nl;
			uint8_t		*nd;
			int		*nr;

			if ((nf = reallocarray(fi->frames, cap, sizeof(*nf))) == NULL)
				return (ENOMEM);
			fi->frames = nf;
			if ((nl = reallocarray(fi->fls, cap, sizeof(*nl))) == NULL)
				return (ENOMEM);
			fi->fls = nl;
			if ((nd = reallocarray(fi->fdead, cap, sizeof(*nd))) == NULL)
				return (ENOMEM);
			fi->fdead = nd;
			if ((nr = reallocarray(fi->frc, cap, sizeof(*nr))) == NULL)
				return (ENOMEM);
			fi->frc = nr;
			fi->capframes = cap;
		}
		fi->frames[fi->nframes] = f;
		fi->fdead[fi->nframes] = 0;
		fi->frc[fi->nframes] = l == NULL ? lrc : 0;
		fi->fls[fi->nframes++] = l;
		pos += f.size;
	}
	*m = pos;
	return (0);
}

/*
 * Steps 4-6 for the recorded batch: append (skipping what is stored), commit, consume, clear
 * the record. Also finishes a batch after a hold or a kill. 0 when done, else holding.
 */
static int
batch_store(struct indexd *env, uint64_t *skipped)
{
	struct fifo	*fi = &env->fifo;
	struct lspace	*l;
	uint64_t	 id, skip = 0;
	int		 stored, rc, qrc;

	for (size_t i = 0; i < fi->nframes; i++)
		if (fi->fls[i] != NULL)
			fi->fls[i]->bidx = 0;
	for (size_t i = 0; i < fi->nframes; i++) {
		struct lb_frame *f = &fi->frames[i];

		if (fi->fdead[i])
			continue;	/* quarantined: it has no id */
		if ((l = fi->fls[i]) == NULL) {
			rc = fi->frc[i];
			goto aside;
		}
		id = l->bbefore + l->bidx;
		if (id < l->next_id) {
			l->bidx++;
			skip++;
			continue;
		}
		rc = ls_append(env, l, &f->msg, &stored);
		if (stored)
			l->bidx++;
		if (rc == 0)
			continue;
		if (stored || lb_errclass(rc) != LB_ERRC_MESSAGE) {
			hold(env, "logspace %s: %s", l->name, lb_strerror(rc));
			return (rc);
		}
 aside:
		if ((qrc = quarantine(env, fi->in, f->ls.p, f->ls.len, f, f->ls.p - f->hdr,
		    f->size, rc, fi->intent.seq, fi->intent.crc, (uint32_t)i)) != 0) {
			hold(env, "%s/%s: %s", env->data, LB_DL_FILE, lb_strerror(qrc));
			return (qrc);
		}
		fi->fdead[i] = 1;
	}
	if ((rc = ls_commit_dirty(env, 0)) != 0)
		return (rc);
	if ((rc = fifo_consume(fi, fi->m)) != 0) {
		hold(env, "%s: consuming: %s", fi->in->in_name, strerror(rc));
		return (rc);
	}
	fi->in->in_bytes += fi->m;
	fi->in->in_received += fi->nframes;
	env->received += fi->nframes;
	for (size_t i = 0; i < fi->nframes; i++)
		if (fi->frames[i].msg.flags & LB_MSG_TRUNCATED)
			fi->in->in_truncated++;
	fi->pending = 0;
	fi->m = 0;
	fi->nframes = 0;
	fi->intent.m = 0;
	fi->intent.nls = 0;
	fi->intent.crc = 0;
	memset(fi->intent.head, 0, sizeof(fi->intent.head));
	if ((rc = state_write(fi->statefd, &fi->intent)) != 0)
		log_warnx("%s: writing %s/indexd/state: %s", __func__, env->data, strerror(rc));
	if (skipped != NULL)
		*skipped = skip;
	return (0);
}

/* Step 3: records the batch of m bytes just built. */
static int
batch_record(struct indexd *env, size_t m)
{
	struct fifo	*fi = &env->fifo;
	struct ix_intent *it = &fi->intent;
	int		 rc;

	it->seq++;
	it->m = (uint32_t)m;
	it->crc = lb_crc32(fi->view, m);
	memset(it->head, 0, sizeof(it->head));
	memcpy(it->head, fi->view, m < IX_STATE_HEAD ? m : IX_STATE_HEAD);
	if ((rc = state_write(fi->statefd, it)) != 0) {
		hold(env, "writing %s/indexd/state: %s", env->data, strerror(rc));
		return (rc);
	}
	fi->m = m;
	fi->pending = 1;
	return (0);
}

/* Stores a streamed frame once it has gone by. 0 when done (or malformed), else holding. */
static int
big_store(struct indexd *env)
{
	struct fifo	*fi = &env->fifo;
	struct lb_frame	 f;
	struct lspace	*l;
	const char	*why = "malformed";
	int		 stored, rc, qrc;

	if ((rc = bigframe_msg(&fi->big, &f, &why)) != 0) {
		malformed(env, fi->in, fi->big.off, why, fi->big.buf, fi->big.keep);
		goto done;
	}
	if ((rc = ls_get(env, f.ls.p, f.ls.len, &l)) != 0) {
		if (lb_errclass(rc) == LB_ERRC_MESSAGE)
			goto aside;
		hold(env, "logspace %.*s: %s", (int)f.ls.len, (const char *)f.ls.p,
		    lb_strerror(rc));
		return (rc);
	}
	if ((rc = ls_append(env, l, &f.msg, &stored)) != 0 && !stored) {
		if (lb_errclass(rc) == LB_ERRC_MESSAGE)
			goto aside;
		fi->big_pending = 1;
		hold(env, "logspace %s: %s", l->name, lb_strerror(rc));
		return (rc);
	}
	fi->big_pending = 0;
	fi->in->in_received++;
	fi->in->in_truncated++;
	env->received++;
	log_info("%s: a frame of %zu bytes at byte %llu was streamed: message cut at %d bytes",
	    fi->in->in_name, fi->big.need, (unsigned long long)fi->big.off, LB_MSG_MAX);
	if (rc != 0) {
		hold(env, "logspace %s: %s", l->name, lb_strerror(rc));
		bigframe_reset(&fi->big);
		return (rc);
	}
	if ((rc = ls_commit_dirty(env, 0)) != 0) {
		bigframe_reset(&fi->big);
		return (rc);
	}
 done:
	bigframe_reset(&fi->big);
	return (0);
 aside:
	/* (Streamed frames are at-most-once anyway: no batch to name.) */
	if ((qrc = quarantine(env, fi->in, f.ls.p, f.ls.len, &f, fi->big.buf, fi->big.keep,
	    rc, 0, 0, 0)) != 0) {
		fi->big_pending = 1;
		hold(env, "%s/%s: %s", env->data, LB_DL_FILE, lb_strerror(qrc));
		return (qrc);
	}
	fi->big_pending = 0;
	fi->in->in_received++;
	env->received++;
	bigframe_reset(&fi->big);
	return (0);
}

/* Reads (consumes) more of a streamed frame. 0: done with it; EAGAIN: more to come. */
static int
big_pump(struct indexd *env)
{
	struct fifo	*fi = &env->fifo;
	ssize_t		 r;
	size_t		 want;

	while (fi->big.got < fi->big.need) {
		want = fi->big.need - fi->big.got;
		if (want > 64 * 1024)
			want = 64 * 1024;
		if ((r = read(fi->in->in_fd, fi->scratch, want)) == -1) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return (EAGAIN);
			hold(env, "%s: read: %s", fi->in->in_name, strerror(errno));
			return (errno);
		}
		if (r == 0)
			return (EAGAIN);
		bigframe_feed(&fi->big, fi->scratch, (size_t)r);
		fi->in->in_bytes += (size_t)r;
	}
	return (big_store(env));
}

/*
 * Stores batches until the head holds no complete frame, a few at most before letting other
 * events run. Returns 0, or the error that made indexd hold. retry: called by the hold's
 * retry (which keeps env->holding set until everything works again).
 */
static int
fifo_pump(struct indexd *env, int retry)
{
	struct fifo	*fi = &env->fifo;
	struct timeval	 tv;
	size_t		 m, bigneed;
	int		 rc;

	for (int k = 0; k < IX_BATCHES_PER_CB; k++) {
		if ((!retry && env->holding[0] != '\0') || env->stopping)
			break;
		if (fi->pending && (rc = batch_store(env, NULL)) != 0)
			return (rc);
		if (fi->big_pending && (rc = big_store(env)) != 0)
			return (rc);
		/* Nothing new is taken while the disk is below its reserve (disk.c). */
		if ((rc = disk_check(env)) != 0)
			return (rc);
		if (fi->big.need != 0) {
			if ((rc = big_pump(env)) == EAGAIN)
				break;
			if (rc != 0)
				return (rc);
			continue;
		}
		if ((rc = fifo_peek(fi)) != 0) {
			hold(env, "%s: tee: %s", fi->in->in_name, strerror(rc));
			return (rc);
		}
		if (fi->vlen == 0) {
			/* At EOF the fd stays readable: poll every 100 ms instead of spinning. */
			if (fi->eof && !retry) {
				struct timeval tv100 = { 0, 100000 };

				event_del(fi->in->in_ev);
				fi->waiting = 1;
				evtimer_add(fi->ev_retry, &tv100);
			}
			break;
		}
		if ((rc = batch_build(env, 0, NULL, &m, &bigneed)) != 0)
			return (rc);
		if (m == 0) {
			if (bigneed != 0) {
				if ((rc = bigframe_start(&fi->big, bigneed, fi->in->in_bytes)) != 0) {
					hold(env, "%s: %s", fi->in->in_name, strerror(rc));
					return (rc);
				}
				continue;
			}
			/*
			 * Only a partial frame: do not spin on the readable FIFO; look again in a
			 * millisecond, backing off to 100 ms while the head stays the same (a
			 * writer that died in the middle of a frame).
			 */
			if (!retry) {
				fi->wait_us = fi->vlen == fi->wait_len ? fi->wait_us * 2 : 1000;
				if (fi->wait_us > 100000)
					fi->wait_us = 100000;
				fi->wait_len = fi->vlen;
				tv.tv_sec = 0;
				tv.tv_usec = (suseconds_t)fi->wait_us;
				event_del(fi->in->in_ev);
				fi->waiting = 1;
				evtimer_add(fi->ev_retry, &tv);
			}
			break;
		}
		fi->wait_len = 0;
		if ((rc = batch_record(env, m)) != 0 || (rc = batch_store(env, NULL)) != 0)
			return (rc);
		if (m < IX_SMALL_BATCH && !retry) {
			/* The collector trickles: let more gather before the next batch. */
			tv.tv_sec = 0;
			tv.tv_usec = IX_GATHER_US;
			event_del(fi->in->in_ev);
			fi->waiting = 1;
			evtimer_add(fi->ev_retry, &tv);
			break;
		}
	}
	ls_memory(env);
	return (0);
}

/* After a hold: finishes what was interrupted and tries the FIFO's head again. */
int
fifo_resume(struct indexd *env)
{
	if (env->fifo.in == NULL)
		return (0);
	return (fifo_pump(env, 1));
}

/* The FIFO is readable, or the 1 ms poll after a partial frame fired. */
void
fifo_cb(int fd, short what, void *arg)
{
	struct indexd	*env = arg;
	struct fifo	*fi = &env->fifo;

	(void)fd;
	if ((what & EV_TIMEOUT) && fi->waiting) {
		fi->waiting = 0;
		if (env->holding[0] == '\0' && !env->stopping)
			event_add(fi->in->in_ev, NULL);
	}
	(void)fifo_pump(env, 0);
}

/*
 * Start-up, before the FIFO is read: finishes the batch a killed indexd recorded, if the
 * FIFO's head still holds it (README.md "Exactly once").
 */
int
fifo_recover(struct indexd *env)
{
	struct fifo	*fi = &env->fifo;
	struct ix_intent rec;
	size_t		 m, bigneed, n;
	uint64_t	 skipped = 0;
	int		 rc;

	if ((rc = state_open(env->data, &fi->statefd)) != 0)
		fatalx("%s: %s/indexd/state: %s", __func__, env->data, strerror(rc));
	quarantine_count(env);
	if ((rc = state_read(fi->statefd, &rec)) != 0) {
		log_warnx("%s: %s/indexd/state: %s: no batch to finish", __func__, env->data,
		    lb_strerror(rc));
		memset(&rec, 0, sizeof(rec));
	}
	fi->intent.seq = rec.seq;
	if (rec.m == 0)
		return (0);
	if (fi->in == NULL) {
		log_warnx("%s: a batch of %u bytes was in progress, but there is no FIFO input: "
		    "ignored", __func__, rec.m);
		goto clear;
	}
	if ((rc = fifo_peek(fi)) != 0)
		fatalx("%s: tee: %s", __func__, strerror(rc));
	if (fi->vlen < rec.m || lb_crc32(fi->view, rec.m) != rec.crc ||
	    memcmp(fi->view, rec.head, rec.m < IX_STATE_HEAD ? rec.m : IX_STATE_HEAD) != 0) {
		log_info("the batch of %u bytes in progress at the last stop was consumed already "
		    "(or the FIFO was not kept open): nothing to finish", rec.m);
		goto clear;
	}
	rc = batch_build(env, rec.m, &rec, &m, &bigneed);
	if (rc != 0 && rc != LB_ECORRUPT)
		fatalx("%s: finishing the batch in progress: %s", __func__, lb_strerror(rc));
	if (rc != 0 || m != rec.m) {
		log_warnx("%s: the batch of %u bytes in progress does not decode as it did "
		    "(%s): ignored", __func__, rec.m, rc ? lb_strerror(rc) : "length");
		goto clear;
	}
	fi->intent.m = rec.m;
	fi->intent.crc = rec.crc;
	memcpy(fi->intent.head, rec.head, sizeof(rec.head));
	if ((rc = quarantine_marks(env, rec.seq, rec.crc, fi->fdead, fi->nframes)) != 0)
		fatalx("%s: %s/%s: %s", __func__, env->data, LB_DL_FILE, lb_strerror(rc));
	fi->m = m;
	fi->pending = 1;
	n = fi->nframes;
	if ((rc = batch_store(env, &skipped)) != 0)
		return (0);	/* holding: finished by the retry */
	log_info("finished the batch a previous indexd left: %u bytes, %zu frames, %llu of "
	    "them already stored", rec.m, n, (unsigned long long)skipped);
	return (0);
 clear:
	fi->intent.m = 0;
	fi->intent.nls = 0;
	if ((rc = state_write(fi->statefd, &fi->intent)) != 0)
		fatalx("%s: %s/indexd/state: %s", __func__, env->data, strerror(rc));
	return (0);
}
