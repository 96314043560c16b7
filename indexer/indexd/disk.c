/*
 * disk.c — the data directory's free space: the reserve indexd keeps free (README.md "Full
 * disk"), the hold that keeps it, and what the status says about it. It owns statvfs() of
 * --data, the reserve rule (the smaller of reserve_percent % of the file system and
 * reserve_mb MiB), the hysteresis that ends the hold, and noting that a store failed for want
 * of space. It does not store or retry anything: store.c holds and retries, fifo.c and sock.c
 * ask disk_check() before they take new frames.
 *
 * The one idea: indexd stops taking frames while the file system has less free than the
 * reserve, so the catalog, the accounts and the audit store (which share it) always find
 * room, and takes them again, by itself, once free space is back above the reserve plus a
 * quarter (so that a file system hovering at the line does not flap). A write that still
 * meets ENOSPC (something else filled the disk faster) holds the same way and clears the same
 * way.
 */
#include <sys/ioctl.h>
#include <sys/statvfs.h>

#include <errno.h>
#include <string.h>

#include <jansson.h>

#include "indexd.h"

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

/*
 * Before new frames are taken: 0 when there is room, else ENOSPC, and indexd holds (hold(),
 * which the retry every second ends once this returns 0 again). A failing statvfs() is not a
 * reason to hold: the stores' own errors still are.
 */
int
disk_check(struct indexd *env)
{
	struct ix_disk	*d = &env->disk;
	char		 a[32], b[32];

	if (disk_stat(env) != 0)
		return (0);
	if (!d->low && d->free < d->reserve) {
		d->low = 1;
		d->since = now_real_us();
	} else if (d->low && d->free >= d->reserve + d->reserve / 4) {
		d->low = 0;
		log_info("disk: %s has %s free again (reserve %s)", env->data,
		    human(a, sizeof(a), d->free), human(b, sizeof(b), d->reserve));
	}
	if (!d->low)
		return (0);
	hold(env, "disk full: %s has %s free, below the reserve of %s", env->data,
	    human(a, sizeof(a), d->free), human(b, sizeof(b), d->reserve));
	return (ENOSPC);
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

/* Is the disk full as far as the status is concerned? */
int
disk_full(const struct indexd *env)
{
	return (env->disk.low || env->disk.enospc);
}

/*
 * Bytes the inputs hold that are not stored yet: what waits in the FIFO, and in the
 * connections' buffers and sockets (FIONREAD). Frames cannot be counted without reading them.
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
	    "resume_bytes", (json_int_t)(d->reserve + d->reserve / 4),
	    "reserve_percent", (int)env->conf.reserve_percent,
	    "reserve_mb", (json_int_t)env->conf.reserve_mb,
	    "held_back_bytes", (json_int_t)disk_held_back(env));
	if (o == NULL)
		return (json_null());
	if (disk_full(env)) {
		lb_time_fmt(since, sizeof(since), d->since, 0);
		json_object_set_new(o, "since", json_string(since));
	} else
		json_object_set_new(o, "since", json_null());
	return (o);
}
