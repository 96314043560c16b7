/*
 * quarantine.c — frames whose message can never be stored (lb_errclass() says the error is the
 * message's, not the environment's) go to the dead-letter file <data>/indexd/deadletter
 * (FORMAT.md §12) with the reason, the time, the logspace and the raw frame bytes; they are
 * counted and shown in the status file, and the input goes on with the next frame. Only errors
 * that clear themselves (a full disk, a locked logspace) hold an input (store.c).
 *
 * Exactly once from the FIFO: a record names the FIFO batch (its intent sequence number and
 * CRC) and the frame's position in it, and is fdatasync'ed before the next frame is appended.
 * A frame set aside takes no id, so when a killed batch is finished at start-up
 * (fifo_recover) the frames the file already holds are marked first (quarantine_marks) and
 * neither set aside again nor counted when ids are given to the others.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "indexd.h"
#include "lb_util.h"

static int
dl_path(struct indexd *env, char *buf, size_t len)
{
	return (lb_path(buf, len, "%s/%s", env->data, LB_DL_FILE));
}

/*
 * Sets frame f (raw[0..rawlen): its bytes as received) of input in aside for logspace
 * ls[0..lslen) because of code. batch, bcrc, index: its FIFO batch and position (0 for other
 * inputs). 0 when the record is durable; else an error (the caller holds: nothing is lost).
 */
int
quarantine(struct indexd *env, struct input *in, const uint8_t *ls, size_t lslen,
    const struct lb_frame *f, const uint8_t *raw, size_t rawlen, int code, uint64_t batch,
    uint32_t bcrc, uint32_t index)
{
	struct lb_dlrec	 r;
	char		 path[PATH_MAX], why[200];
	int		 rc;

	if (env->dl == NULL) {
		if ((rc = dl_path(env, path, sizeof(path))) != 0 ||
		    (rc = lb_dl_open(path, LB_RDWR, &env->dl)) != 0)
			return (rc);
	}
	memset(&r, 0, sizeof(r));
	r.when = now_real_us();
	r.received = f != NULL ? f->msg.received : LB_NOTIME;
	r.code = code;
	r.batch = batch;
	r.batch_crc = bcrc;
	r.index = index;
	if (lslen > LB_NAME_MAX)
		lslen = LB_NAME_MAX;
	memcpy(r.ls, ls, lslen);
	r.input.p = (const uint8_t *)in->in_name;
	r.input.len = strlen(in->in_name);
	snprintf(why, sizeof(why), "logspace %.*s: %s", (int)lslen, (const char *)ls,
	    lb_strerror(code));
	r.reason.p = (const uint8_t *)why;
	r.reason.len = strlen(why);
	r.frame.p = raw;
	r.frame.len = rawlen < LB_DL_FRAME_MAX ? rawlen : LB_DL_FRAME_MAX;
	if ((rc = lb_dl_append(env->dl, &r)) != 0)
		return (rc);
	env->quarantined++;
	in->in_quarantined++;
	env->dl_last_at = r.when;
	snprintf(env->dl_last, sizeof(env->dl_last), "%s", why);
	log_warnx("quarantined a frame of %zu bytes from %s: %s (dead-letter file %s/%s, record "
	    "%llu)", rawlen, in->in_name, why, env->data, LB_DL_FILE,
	    (unsigned long long)env->quarantined);
	return (0);
}

/*
 * Start-up, finishing FIFO batch (batch, bcrc) of n frames: sets dead[i] for each frame the
 * dead-letter file already holds. A torn last record is not a record: that frame is set aside
 * again (the writer cuts the torn one off when it opens the file).
 */
int
quarantine_marks(struct indexd *env, uint64_t batch, uint32_t bcrc, uint8_t *dead, size_t n)
{
	struct lb_dl	*dl;
	struct lb_dlrec	 r;
	char		 path[PATH_MAX];
	size_t		 found = 0;
	int		 rc;

	if ((rc = dl_path(env, path, sizeof(path))) != 0)
		return (rc);
	if ((rc = lb_dl_open(path, LB_RDONLY, &dl)) != 0)
		return (rc == LB_ENOTFOUND ? 0 : rc);
	while ((rc = lb_dl_next(dl, &r)) == 0)
		if (r.batch == batch && r.batch_crc == bcrc && r.index < n && batch != 0) {
			dead[r.index] = 1;
			found++;
		}
	lb_dl_close(dl);
	if (rc != LB_ENOTFOUND && rc != LB_ECORRUPT)
		return (rc);
	if (found > 0)
		log_info("%zu frames of the batch in progress were quarantined already", found);
	return (0);
}

/* How many records the dead-letter file holds (start-up: the status file shows it). */
void
quarantine_count(struct indexd *env)
{
	struct lb_dl	*dl;
	struct lb_dlrec	 r;
	char		 path[PATH_MAX];

	env->dl_records = 0;
	if (dl_path(env, path, sizeof(path)) != 0 || lb_dl_open(path, LB_RDONLY, &dl) != 0)
		return;
	while (lb_dl_next(dl, &r) == 0) {
		env->dl_records++;
		env->dl_last_at = r.when;
		snprintf(env->dl_last, sizeof(env->dl_last), "%.*s", (int)r.reason.len,
		    (const char *)r.reason.p);
	}
	lb_dl_close(dl);
}
