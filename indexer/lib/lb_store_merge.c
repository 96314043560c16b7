/*
 * lb_store_merge.c — tiered merging of a day's segments (FORMAT.md §4.9, §8): a run of
 * same-level segments becomes one segment of the next level, published in their place in one
 * catalog transaction before the inputs are deleted, so a crash at any point leaves either
 * the inputs or the output named by the catalog. lb_segment_merge() does the file work.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_store_priv.h"

#define STORE_FANOUT		8	/* merge this many same-level segments of a day */

/*
 * Merges a day's run of segments refs[a..b) into one, publishes it in place of them, then
 * deletes the inputs. A tier's merge is one a later merge of the day rewrites.
 */
static int
merge_run(struct lb_store *st, struct lb_segref *refs, size_t a, size_t b, int tier)
{
	struct lb_segment	**in;
	struct lb_segref	 out;
	char			 path[PATH_MAX];
	struct stat		 sb;
	int			 rc = 0, n = (int)(b - a);

	if ((in = calloc((size_t)n, sizeof(*in))) == NULL) {
		rc = errno;
		goto done;
	}
	memset(&out, 0, sizeof(out));
	out.first_id = refs[a].first_id;
	out.last_id = refs[b - 1].last_id;
	out.tmin = refs[a].tmin;
	out.tmax = refs[a].tmax;
	out.day = refs[a].day;
	for (size_t i = a; i < b; i++) {
		if ((rc = lb_store_seg_path(st, refs[i].day, refs[i].file, path,
		    sizeof(path))) != 0)
			goto done;
		if ((rc = lb_segment_open(path, &in[i - a])) != 0)
			goto done;
		out.count += refs[i].count;
		if (refs[i].tmin < out.tmin)
			out.tmin = refs[i].tmin;
		if (refs[i].tmax > out.tmax)
			out.tmax = refs[i].tmax;
		if (refs[i].level + 1 > out.level)
			out.level = refs[i].level + 1;
	}
	if ((rc = lb_store_seg_name(out.file, sizeof(out.file), out.first_id, out.last_id)) != 0)
		goto done;
	if ((rc = lb_store_seg_path(st, out.day, out.file, path, sizeof(path))) != 0)
		goto done;
	if ((rc = (tier ? lb_segment_merge_tier : lb_segment_merge)(in, n, path)) != 0)
		goto done;
	if (stat(path, &sb) == -1) {
		rc = errno;
		goto done;
	}
	out.size = (uint64_t)sb.st_size;
	if ((rc = lb_store_publish(st, out.day, refs + a, (size_t)n, &out, 1)) != 0) {
		unlink(path);
		goto done;
	}
	for (size_t i = a; i < b; i++) {
		if (lb_store_seg_path(st, refs[i].day, refs[i].file, path, sizeof(path)) == 0)
			(void)unlink(path);
	}
 done:
	if (in != NULL)
		for (int i = 0; i < n; i++)
			lb_segment_close(in[i]);
	free(in);
	return (rc);
}

/*
 * Tiered merging within a day: whenever STORE_FANOUT consecutive segments of one day share a
 * level, they become one segment of the next level. With all, every day but the current one
 * that has more than one segment is merged into one.
 */
int
lb_store_merge_day(struct lb_store *st, uint32_t day, int all)
{
	struct lb_segref	*refs = NULL;
	size_t			 n = 0, a, b, k = 0;
	int			 rc, again = 1;

	while (again) {
		again = 0;
		free(refs);
		refs = NULL;
		if ((rc = lb_catalog_segments(st->cat, st->ls, 0, UINT64_MAX, &refs, &n)) != 0)
			return (rc);
		/* Keep only the day's segments (they are contiguous in id order). */
		for (a = 0; a < n && refs[a].day != day; a++)
			;
		for (b = a; b < n && refs[b].day == day; b++)
			;
		if (all) {
			if (b - a > 1)
				rc = merge_run(st, refs, a, b, 0);
			break;
		}
		for (size_t i = a; i < b; i = k) {
			for (k = i + 1; k < b && refs[k].level == refs[i].level; k++)
				;
			if (k - i >= STORE_FANOUT) {
				if ((rc = merge_run(st, refs, i, i + STORE_FANOUT, 1)) != 0)
					goto done;
				again = 1;
				break;
			}
		}
	}
	/* A day merged whole has ended: its root is signed (FORMAT.md §14.6). */
	if (all)
		rc = lb_store_sign_day(st, day);
 done:
	free(refs);
	return (rc);
}
