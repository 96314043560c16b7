/*
 * disk.c — the data directory's free space: the reserve indexd keeps (README.md "Full disk"),
 * and what the status says about it. It owns statvfs() of --data, the reserve rule (the smaller
 * of reserve_percent % of the file system and reserve_mb MiB), the reserve file that holds it,
 * and noting that a store failed for want of space. It does not store or retry anything:
 * store.c holds and retries, fifo.c and spool.c call disk_check() before they take more.
 *
 * The one idea: the reserve is space indexd owns, not space it waits for. With the spool,
 * syslog-ng fills the file system to the last byte while indexd is behind, and only indexd can
 * free it (each spool file it stores and deletes frees more than the store takes); a rule "hold
 * while free space is below the reserve" would stop indexd for good then. So indexd keeps the
 * reserve allocated in <data>/indexd/reserve (fallocate). When free space falls below
 * a floor (IX_DISK_FLOOR, at most half the reserve) or a store write meets ENOSPC/EDQUOT, it gives the file up (truncates it),
 * stores from the spool into the space that freed, deletes the stored spool files, and takes
 * the reserve back once free space is above the reserve plus a quarter plus the floor (so that
 * a file system hovering at the line does not flap). A write that still meets ENOSPC holds
 * (store.c) and is retried every second.
 */
#include <sys/ioctl.h>
#include <sys/statvfs.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "indexd.h"
#include "lb_util.h"

/* The reserve for a file system of total bytes under c (0: none). */
uint64_t
disk_reserve(const struct ix_conf *c, uint64_t total)
{
	uint64_t	pct = total / 100 * c->reserve_percent +
	    total % 100 * c->reserve_percent / 100;
	uint64_t	abs = c->reserve_mb << 20;

	return (pct < abs ? pct : abs);
}

/* Formats bytes as "1.5 MiB" into buf. */
static const char *
human(char *buf, size_t len, uint64_t b)
{
	static const char	*unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double			 v = (double)b;
	int			 u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u == 0 ? "%.0f %s" : "%.1f %s", v, unit[u]);
	return (buf);
}

/* statvfs() of the data directory into env->disk. 0, or the errno (logged once a minute). */
static int
disk_stat(struct indexd *env)
{
	struct ix_disk	*d = &env->disk;
	struct statvfs	 sv;
	int64_t		 now = now_mono_us();

	if (statvfs(env->data, &sv) == -1) {
		int rc = errno;

		if (d->warned == 0 || now - d->warned > 60 * 1000000LL) {
			log_warnx("%s: statvfs %s: %s", __func__, env->data, strerror(rc));
			d->warned = now;
		}
		return (rc);
	}
	d->total = (uint64_t)sv.f_blocks * sv.f_frsize;
	d->free = (uint64_t)sv.f_bavail * sv.f_frsize;
	d->reserve = disk_reserve(&env->conf, d->total);
	d->checked = now;
	return (0);
}

/* Free space below this gives the reserve up: IX_DISK_FLOOR, or half the reserve if smaller. */
static uint64_t
disk_floor(const struct ix_disk *d)
{
	return (d->reserve / 2 < IX_DISK_FLOOR ? d->reserve / 2 : IX_DISK_FLOOR);
}

/* Frees the reserve file's space for the stores. */
static void
reserve_give(struct indexd *env, const char *why)
{
	struct ix_disk	*d = &env->disk;
	char		 a[32];

	if (!d->ropen || d->rheld == 0)
		return;
	if (ftruncate(d->rfd, 0) == -1) {
		log_warn("%s: truncating %s/indexd/reserve", __func__, env->data);
		return;
	}
	log_warnx("disk: gave up the reserve of %s (%s/indexd/reserve) to go on storing: %s",
	    human(a, sizeof(a), d->rheld), env->data, why);
	d->rheld = 0;
	d->given_up = now_real_us();
}

/* Allocates the reserve file to the reserve when free space allows (or shrinks it). */
static void
reserve_take(struct indexd *env)
{
	struct ix_disk	*d = &env->disk;
	char		 a[32];
	uint64_t	 want = d->reserve, need;

	if (!d->ropen || d->rheld == want)
		return;
	if (d->rheld > want) {
		if (ftruncate(d->rfd, (off_t)want) == 0)
			d->rheld = want;
		return;
	}
	need = want - d->rheld;
	if (d->free < need + want / 4 + disk_floor(d))
		return;
	if ((errno = posix_fallocate(d->rfd, 0, (off_t)want)) != 0) {
		log_warn("%s: fallocate %s/indexd/reserve", __func__, env->data);
		if (ftruncate(d->rfd, (off_t)d->rheld) == -1)
			log_warn("%s: truncating %s/indexd/reserve", __func__, env->data);
		return;
	}
	d->rheld = want;
	if (d->given_up != 0)
		log_info("disk: took the reserve of %s back", human(a, sizeof(a), want));
	d->given_up = 0;
	(void)disk_stat(env);
}

/* Start-up: opens <data>/indexd/reserve and allocates the reserve when there is room. */
void
disk_reserve_open(struct indexd *env)
{
	struct ix_disk	*d = &env->disk;
	struct stat	 sb;
	char		 path[PATH_MAX];

	if (lb_path(path, sizeof(path), "%s/indexd/reserve", env->data) != 0 ||
	    (d->rfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) == -1) {
		log_warn("%s: %s/indexd/reserve: no reserve", __func__, env->data);
		return;
	}
	d->ropen = 1;
	if (fstat(d->rfd, &sb) == 0)
		d->rheld = (uint64_t)sb.st_size;
	(void)disk_check(env);
	if (d->rheld < d->reserve && d->given_up == 0)
		d->given_up = now_real_us();	/* (not enough room for it at start) */
}

/*
 * Before more is taken: refreshes the numbers, gives the reserve up when free space is below
 * the floor or a write met ENOSPC, takes it back when there is room again. Returns 0: with
 * the reserve a file indexd can free, a low disk is no reason to stop reading (a write that
 * meets ENOSPC still holds, store.c).
 */
int
disk_check(struct indexd *env)
{
	struct ix_disk	*d = &env->disk;
	char		 a[32], b[48];

	if (disk_stat(env) != 0)
		return (0);
	/*
	 * A write that met ENOSPC holds (store.c) until it works, and the hold's end clears the
	 * mark. Not holding, no write is failing: a mark left by a failure that did not hold (a
	 * logspace that could not be opened is tried again in the next batch, spool.c) would keep
	 * the status saying "full" and the reserve given up for good.
	 */
	if (d->enospc && env->holding[0] == '\0')
		d->enospc = 0;
	if (d->rheld > 0 && (d->free < disk_floor(d) || d->enospc)) {
		snprintf(b, sizeof(b), "%s free", human(a, sizeof(a), d->free));
		reserve_give(env, d->enospc ? "a write met ENOSPC" : b);
		(void)disk_stat(env);
	} else if (d->rheld != d->reserve && !d->enospc)
		reserve_take(env);
	if (!d->low && d->free < disk_floor(d)) {
		d->low = 1;
		d->since = now_real_us();
	} else if (d->low && d->free >= disk_floor(d) + d->reserve / 4) {
		d->low = 0;
		log_info("disk: %s has %s free again", env->data, human(a, sizeof(a), d->free));
	}
	return (0);
}

/* A store failed with rc: a want of space makes the status say "disk full" until the hold ends. */
void
disk_note(struct indexd *env, int rc)
{
	if ((rc == ENOSPC || rc == EDQUOT) && !env->disk.enospc) {
		env->disk.enospc = 1;
		if (!env->disk.low)
			env->disk.since = now_real_us();
	}
}

/* The hold ended: a write that met ENOSPC has since worked. */
void
disk_hold_ended(struct indexd *env)
{
	env->disk.enospc = 0;
}

/* Is the disk full as far as the status is concerned? (Also while the reserve is given up.) */
int
disk_full(const struct indexd *env)
{
	return (env->disk.low || env->disk.enospc || env->disk.given_up != 0);
}

/*
 * Bytes the inputs hold that are not stored yet: what waits in the spool, in the FIFO, and in
 * the connections' buffers and sockets (FIONREAD). Frames cannot be counted without reading
 * them. (The spool input's descriptor is its inotify instance: what it has to read are
 * events, not messages.)
 */
uint64_t
disk_held_back(struct indexd *env)
{
	struct input	*in;
	uint64_t	 sum = 0;
	int		 n;

	TAILQ_FOREACH(in, &env->inputs, in_entry) {
		if (in->in_kind == IN_LISTEN)
			continue;
		if (in->in_kind == IN_SPOOL) {
			sum += spool_backlog(env, NULL, NULL);
			continue;
		}
		if (in->in_fd != -1 && ioctl(in->in_fd, FIONREAD, &n) == 0 && n > 0)
			sum += (uint64_t)n;
		if (in->in_kind == IN_CONN)
			sum += in->in_len;
	}
	return (sum);
}

/* The status file's "disk" member (refreshing the numbers when they are older than 1 s). */
json_t *
disk_status(struct indexd *env)
{
	struct ix_disk	*d = &env->disk;
	char		 since[40];
	json_t		*o;

	if (now_mono_us() - d->checked > 1000000)
		(void)disk_stat(env);
	o = json_pack("{s:b, s:I, s:I, s:I, s:I, s:i, s:I, s:I}",
	    "full", disk_full(env),
	    "free_bytes", (json_int_t)d->free,
	    "total_bytes", (json_int_t)d->total,
	    "reserve_bytes", (json_int_t)d->reserve,
	    "resume_bytes", (json_int_t)(d->reserve + d->reserve / 4 + disk_floor(d)),
	    "reserve_percent", (int)env->conf.reserve_percent,
	    "reserve_mb", (json_int_t)env->conf.reserve_mb,
	    "held_back_bytes", (json_int_t)disk_held_back(env));
	if (o == NULL)
		return (json_null());
	json_object_set_new(o, "reserve_held_bytes", json_integer((json_int_t)d->rheld));
	json_object_set_new(o, "floor_bytes", json_integer((json_int_t)disk_floor(d)));
	if (d->given_up != 0) {
		lb_time_fmt(since, sizeof(since), d->given_up, 0);
		json_object_set_new(o, "reserve_given_up", json_string(since));
	} else
		json_object_set_new(o, "reserve_given_up", json_null());
	if (disk_full(env)) {
		lb_time_fmt(since, sizeof(since), d->low || d->enospc ? d->since : d->given_up, 0);
		json_object_set_new(o, "since", json_string(since));
	} else
		json_object_set_new(o, "since", json_null());
	return (o);
}
