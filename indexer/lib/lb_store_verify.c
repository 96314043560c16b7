/*
 * lb_store_verify.c — checking a whole store (every message file, every segment, and that the
 * catalog, the days and the segments agree) and its statistics. It reports what it finds and
 * changes nothing.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_store_priv.h"

struct vctx {
	void	(*report)(void *, const char *, const char *);
	void	*arg;
	int	 bad;
};

static void
vreport(struct vctx *v, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
vreport(struct vctx *v, const char *path, const char *fmt, ...)
{
	char	buf[512];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	v->bad = 1;
	if (v->report != NULL)
		v->report(v->arg, path, buf);
}

int
lb_store_verify(struct lb_store *st,
    void (*report)(void *arg, const char *path, const char *what), void *arg)
{
	struct vctx		 v = { report, arg, 0 };
	struct lb_segref	*refs = NULL;
	struct lb_segment	*sg;
	struct lb_seginfo	 si;
	struct lb_msgfile	*mf;
	uint64_t		 first, next, expect = 0, msgs_next = 0;
	size_t			 n = 0;
	char			 path[PATH_MAX], why[512];
	int			 rc;

	if ((rc = lb_store_days_load(st)) != 0)
		return (rc);
	for (size_t i = 0; i < st->ndays; i++) {
		const struct lb_dayref *d = &st->days[i].ref;

		if ((rc = lb_store_day_dir(st, d->day, path, sizeof(path))) != 0)
			goto done;
		if ((rc = lb_store_days_file(st, i, &mf)) != 0) {
			char file[PATH_MAX];

			/*
			 * The writer names a day in the catalog before it creates the day's
			 * message file (writer_open_day): a writer killed in between leaves
			 * the newest day with no file and no message. Not damage: the next
			 * writer creates the file.
			 */
			if (rc == ENOENT && i == st->ndays - 1 && d->next_id == d->first_id) {
				rc = 0;
				continue;
			}
			if (lb_path(file, sizeof(file), "%s/%s", path, LB_FILE_MESSAGES) != 0)
				snprintf(file, sizeof(file), "%s", path);
			vreport(&v, file, "cannot open the message file: %s", lb_strerror(rc));
			continue;
		}
		why[0] = '\0';
		if ((rc = lb_msgfile_verify(mf, why, sizeof(why))) != 0)
			vreport(&v, path, "%s", why[0] ? why : lb_strerror(rc));
		lb_msgfile_range(mf, &first, &next);
		if (next > first && first != d->first_id)
			vreport(&v, path, "messages start at id %llu, the catalog says %llu",
			    (unsigned long long)first, (unsigned long long)d->first_id);
		if (next < d->next_id) {
			char file[PATH_MAX];

			/* The newest messages of a day live in the WAL until their block is sealed. */
			if (lb_path(file, sizeof(file), "%s/%s", path, LB_FILE_WAL) != 0)
				snprintf(file, sizeof(file), "%s", path);
			vreport(&v, file, "messages end before id %llu, the catalog says %llu "
			    "(messages or their WAL records are missing)",
			    (unsigned long long)next, (unsigned long long)d->next_id);
		}
		if (i > 0 && d->first_id != msgs_next)
			vreport(&v, path, "day starts at id %llu, the previous day ends before %llu",
			    (unsigned long long)d->first_id, (unsigned long long)msgs_next);
		msgs_next = next;
	}
	if ((rc = lb_catalog_segments(st->cat, st->ls, 0, UINT64_MAX, &refs, &n)) != 0)
		goto done;
	expect = st->ndays > 0 ? st->days[0].ref.first_id : 1;
	for (size_t i = 0; i < n; i++) {
		const struct lb_segref *r = &refs[i];

		if ((rc = lb_store_seg_path(st, r->day, r->file, path, sizeof(path))) != 0)
			goto done;
		if (r->first_id != expect)
			vreport(&v, path, "segment starts at id %llu, expected %llu (gap or overlap)",
			    (unsigned long long)r->first_id, (unsigned long long)expect);
		if (r->last_id < r->first_id || r->count != r->last_id - r->first_id + 1)
			vreport(&v, path, "segment ids %llu-%llu do not match its count %llu",
			    (unsigned long long)r->first_id, (unsigned long long)r->last_id,
			    (unsigned long long)r->count);
		expect = r->last_id + 1;
		if ((rc = lb_segment_open(path, &sg)) != 0) {
			vreport(&v, path, "cannot open: %s", lb_strerror(rc));
			continue;
		}
		why[0] = '\0';
		if ((rc = lb_segment_verify(sg, why, sizeof(why))) != 0)
			vreport(&v, path, "%s", why[0] ? why : lb_strerror(rc));
		lb_segment_info(sg, &si);
		if (si.first_id != r->first_id || si.last_id != r->last_id ||
		    si.count != r->count || si.size != r->size)
			vreport(&v, path, "file (ids %llu-%llu, %llu messages, %llu bytes) does not "
			    "match the catalog (ids %llu-%llu, %llu messages, %llu bytes)",
			    (unsigned long long)si.first_id, (unsigned long long)si.last_id,
			    (unsigned long long)si.count, (unsigned long long)si.size,
			    (unsigned long long)r->first_id, (unsigned long long)r->last_id,
			    (unsigned long long)r->count, (unsigned long long)r->size);
		lb_segment_close(sg);
	}
	if (n > 0 && refs[n - 1].last_id >= msgs_next)
		vreport(&v, st->data, "segments index id %llu but messages end before %llu",
		    (unsigned long long)refs[n - 1].last_id, (unsigned long long)msgs_next);
	rc = 0;
 done:
	free(refs);
	if (rc == 0 && v.bad)
		rc = LB_ECORRUPT;
	return (rc);
}

static uint64_t
disk_bytes(const char *path)
{
	struct stat sb;

	if (stat(path, &sb) == -1)
		return (0);
	return ((uint64_t)sb.st_blocks * 512 < (uint64_t)sb.st_size ?
	    (uint64_t)sb.st_blocks * 512 : (uint64_t)sb.st_size);
}

int
lb_store_stats(struct lb_store *st, struct lb_storestats *ss)
{
	struct lb_segref	*refs = NULL;
	struct lb_msgfile	*mf;
	uint64_t		 disk, raw, first, next;
	size_t			 n = 0;
	char			 path[PATH_MAX];
	int			 rc;

	memset(ss, 0, sizeof(*ss));
	if (st->mode != LB_RDWR && (rc = lb_store_days_load(st)) != 0)
		return (rc);
	for (size_t i = 0; i < st->ndays; i++) {
		if ((rc = lb_store_days_file(st, i, &mf)) != 0) {
			/* The newest day named before its file exists: empty (lb_store_verify). */
			if (rc == ENOENT && i == st->ndays - 1 &&
			    st->days[i].ref.next_id == st->days[i].ref.first_id)
				continue;
			return (rc);
		}
		lb_msgfile_sizes(mf, &disk, &raw);
		ss->messages_bytes += disk;
		ss->raw_bytes += raw;
	}
	ss->days = st->ndays;
	lb_store_range(st, &first, &next);
	ss->messages = next - first;
	if ((rc = lb_catalog_segments(st->cat, st->ls, 0, UINT64_MAX, &refs, &n)) != 0)
		return (rc);
	ss->segments = n;
	for (size_t i = 0; i < n; i++)
		ss->index_bytes += refs[i].size;
	free(refs);
	if (lb_path(path, sizeof(path), "%s/%s/data.mdb", st->data, LB_DIR_CATALOG) == 0)
		ss->catalog_bytes = disk_bytes(path);
	return (0);
}
