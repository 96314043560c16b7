/*
 * archive.c — `logbox archive`: what the archive of sealed days to S3-compatible object storage
 * (indexer/ARCHIVE.md) needs from the store, which only liblogbox may read and write:
 *
 *   logbox archive days     --data DIR [--logspace L]             the days, closed or not (JSON)
 *   logbox archive manifest --data DIR [--logspace L] --day DAY   one day's files and catalog
 *                                                                  extract (JSON)
 *   logbox archive import   --data DIR [--logspace L] --dir DIR   a day's files (downloaded) back
 *                                                                  into the store, kept there
 *                                                                  (<day>/restored) until
 *   logbox archive release  --data DIR [--logspace L] --day DAY   lets retention remove it again
 *
 * The object store itself is logbox-archive's (rpc/logbox_core/archive.py): `logbox archive
 * run|once|verify|restore|status ...` runs it (LOGBOX_ARCHIVE_TOOL, else logbox-archive on the
 * PATH) with the same arguments.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "archive.h"
#include "lb_chain.h"
#include "lb_format.h"
#include "lb_util.h"
#include "logbox.h"
#include "search.h"

const char archive_usage[] =
    "       logbox archive days     --data DIR [--logspace L]\n"
    "       logbox archive manifest --data DIR [--logspace L] --day YYYYMMDD\n"
    "       logbox archive import   --data DIR [--logspace L] --dir DIR\n"
    "       logbox archive release  --data DIR [--logspace L] --day YYYYMMDD\n"
    "       logbox archive run|once|verify|restore|status ... (logbox-archive; ARCHIVE.md)\n";

struct aopts {
	const char	*data;
	const char	*ls;
	const char	*dir;
	uint32_t	 day;
};

static void
adie(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static int
touch(const char *path);

static void
adie(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cli_verr(fmt, ap);
	va_end(ap);
	exit(1);
}

static void
ausage(void)
{
	fputs("usage: ", stderr);
	fputs(archive_usage + 7, stderr);
	exit(2);
}

static uint32_t
parse_day(const char *s)
{
	char		*end;
	unsigned long	 v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || strlen(s) != 8 || v > UINT32_MAX ||
	    !lb_day_ok((uint32_t)v))
		adie("--day: YYYYMMDD, not %s", s);
	return ((uint32_t)v);
}

static void
parse_aopts(int argc, char *argv[], struct aopts *o)
{
	static const struct option longopts[] = {
		{ "data", required_argument, NULL, 'd' },
		{ "logspace", required_argument, NULL, 'l' },
		{ "day", required_argument, NULL, 'D' },
		{ "dir", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->ls = "main";
	while ((c = getopt_long(argc, argv, "d:l:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'd': o->data = optarg; break;
		case 'l': o->ls = optarg; break;
		case 'D': o->day = parse_day(optarg); break;
		case 'r': o->dir = optarg; break;
		case 'h': fputs(archive_usage, stdout); exit(0);
		default: ausage();
		}
	}
	if (optind != argc || o->data == NULL)
		ausage();
}

static struct lb_catalog *
cat_open(const struct aopts *o, int mode)
{
	struct lb_catalog	*cat;
	int			 rc;

	if ((rc = lb_catalog_open(o->data, mode, &cat)) != 0)
		adie("%s: the catalog: %s", o->data, lb_strerror(rc));
	return (cat);
}

static void
day_str(char *buf, size_t len, uint32_t d)
{
	snprintf(buf, len, "%04u-%02u-%02u", d / 10000, d / 100 % 100, d % 100);
}

/*
 * Why a day is not closed yet, or NULL when it is: not the logspace's newest day, every id of
 * it indexed, merged whole into one segment, and its chain final (its last record a seal when
 * the data directory seals, else the day root or the whole-day merge's segment).
 */
static const char *
day_open_why(const struct aopts *o, struct lb_catalog *cat, const struct lb_dayref *d,
    int newest, const struct lb_lsstate *st, int sealing)
{
	struct lb_segref	*segs = NULL;
	struct lb_chrec		*recs = NULL;
	size_t			 nseg = 0, nrec = 0;
	char			 dir[PATH_MAX], why[256];
	const char		*r = NULL;
	unsigned		 last;
	int			 rc;

	if (newest)
		return ("the logspace's newest day (its writer appends to it)");
	if (d->next_id > st->indexed_id)
		return ("not indexed yet");
	if (d->next_id == d->first_id)
		return (NULL);
	if ((rc = lb_catalog_segments(cat, o->ls, d->first_id, d->next_id - 1, &segs, &nseg)) != 0)
		adie("%s: segments: %s", o->ls, lb_strerror(rc));
	if (nseg != 1 || segs[0].first_id > d->first_id || segs[0].last_id + 1 < d->next_id ||
	    segs[0].day != d->day)
		r = "not merged whole yet";
	free(segs);
	if (r != NULL)
		return (r);
	if ((rc = lb_day_dir(dir, sizeof(dir), o->data, o->ls, d->day)) != 0)
		adie("%s: day directory: %s", o->ls, lb_strerror(rc));
	rc = lb_chain_load(dir, &recs, &nrec, why, sizeof(why));
	if (rc == ENOENT)
		return (NULL);
	if (rc != 0) {
		lb_chain_free(recs, nrec);
		return ("its chain is damaged (logbox verify)");
	}
	last = nrec > 0 ? recs[nrec - 1].kind : 0;
	lb_chain_free(recs, nrec);
	/* (a tombstone: retention removed the day before and recorded it here) */
	if (sealing ? last != LB_CH_SEAL : (last != LB_CH_DAYROOT && last != LB_CH_SEGMENT &&
	    last != LB_CH_TOMB))
		return ("its chain is not final yet (the day's end, then a seal)");
	return (NULL);
}

static void
load_days(const struct aopts *o, struct lb_catalog *cat, struct lb_dayref **days, size_t *n,
    struct lb_lsstate *st)
{
	int rc;

	if ((rc = lb_catalog_days(cat, o->ls, days, n)) != 0)
		adie("%s: days: %s", o->ls, lb_strerror(rc));
	if ((rc = lb_catalog_state_get(cat, o->ls, st)) != 0)
		adie("%s: state: %s", o->ls, lb_strerror(rc));
}

static int
sealing_on(const char *data)
{
	struct lb_sealstate s;

	return (lb_seal_state(data, &s) == 0);
}

static void
print_json(json_t *j)
{
	if (j == NULL || json_dumpf(j, stdout, JSON_COMPACT) != 0 || fputc('\n', stdout) == EOF ||
	    fflush(stdout) != 0)
		adie("writing the output: %s", strerror(errno ? errno : EIO));
	json_decref(j);
}

/* ---------------------------------------------------------------- days */

static int
cmd_days(const struct aopts *o)
{
	struct lb_catalog	*cat = cat_open(o, LB_RDONLY);
	struct lb_dayref	*days = NULL;
	struct lb_lsstate	 st;
	json_t			*arr = json_array();
	size_t			 n = 0;
	int			 sealing = sealing_on(o->data);
	char			 ds[16];

	load_days(o, cat, &days, &n, &st);
	for (size_t i = 0; i < n; i++) {
		const char *why = day_open_why(o, cat, &days[i], i + 1 == n, &st, sealing);

		day_str(ds, sizeof(ds), days[i].day);
		json_array_append_new(arr, json_pack("{s:i,s:s,s:I,s:b,s:s?}", "day",
		    (json_int_t)days[i].day, "date", ds, "messages",
		    (json_int_t)(days[i].next_id - days[i].first_id), "closed", why == NULL, "open",
		    why));
	}
	free(days);
	lb_catalog_close(cat);
	print_json(json_pack("{s:s,s:o}", "logspace", o->ls, "days", arr));
	return (0);
}

/* ---------------------------------------------------------------- manifest */

static json_t *
file_entry(const char *dir, const char *rel)
{
	struct stat	sb;
	char		path[PATH_MAX];

	if (lb_path(path, sizeof(path), "%s/%s", dir, rel) != 0)
		adie("%s/%s: path too long", dir, rel);
	if (stat(path, &sb) == -1) {
		if (errno == ENOENT)
			return (NULL);
		adie("%s: %s", path, strerror(errno));
	}
	if (!S_ISREG(sb.st_mode))
		adie("%s: not a file", path);
	return (json_pack("{s:s,s:I}", "name", rel, "size", (json_int_t)sb.st_size));
}

static int
cmd_manifest(const struct aopts *o)
{
	struct lb_catalog	*cat;
	struct lb_dayref	*days = NULL, *d = NULL;
	struct lb_lsstate	 st;
	struct lb_dayx		 x;
	json_error_t		 jerr;
	json_t			*root, *files, *e;
	const char		*why;
	char			*text, dir[PATH_MAX], rel[128];
	size_t			 n = 0;
	int			 rc;

	if (o->day == 0)
		adie("manifest: --day YYYYMMDD is needed");
	cat = cat_open(o, LB_RDONLY);
	load_days(o, cat, &days, &n, &st);
	for (size_t i = 0; i < n && d == NULL; i++)
		if (days[i].day == o->day)
			d = &days[i];
	if (d == NULL)
		adie("%s: no day %u in the catalog", o->ls, o->day);
	why = day_open_why(o, cat, d, d == &days[n - 1], &st, sealing_on(o->data));
	if ((rc = lb_dayx_load(cat, o->ls, o->day, &x)) != 0)
		adie("%s: day %u: %s", o->ls, o->day, lb_strerror(rc));
	if ((rc = lb_dayx_format(&x, &text)) != 0 ||
	    (root = json_loads(text, 0, &jerr)) == NULL)
		adie("%s: day %u: the extract: %s", o->ls, o->day, lb_strerror(rc ? rc : ENOMEM));
	free(text);
	if ((rc = lb_day_dir(dir, sizeof(dir), o->data, o->ls, d->day)) != 0)
		adie("%s: day directory: %s", o->ls, lb_strerror(rc));

	files = json_array();
	/* The message file and its WAL, the chain and the day's time stamp, then each segment. */
	if ((e = file_entry(dir, "messages")) != NULL)
		json_array_append_new(files, e);
	if ((e = file_entry(dir, "messages.wal")) != NULL)
		json_array_append_new(files, e);
	if ((e = file_entry(dir, "chain")) != NULL)
		json_array_append_new(files, e);
	if ((e = file_entry(dir, "root.tsr")) != NULL)
		json_array_append_new(files, e);
	for (size_t i = 0; i < x.nseg; i++) {
		snprintf(rel, sizeof(rel), "%s/%s", LB_DIR_INDEX, x.segs[i].file);
		if ((e = file_entry(dir, rel)) == NULL)
			adie("%s/%s: the catalog names it, but it is missing", dir, rel);
		json_array_append_new(files, e);
	}
	json_object_set_new(root, "closed", json_boolean(why == NULL));
	json_object_set_new(root, "open", why ? json_string(why) : json_null());
	json_object_set_new(root, "dir", json_string(dir));
	json_object_set_new(root, "files", files);
	print_json(root);
	lb_dayx_free(&x);
	free(days);
	lb_catalog_close(cat);
	return (0);
}

/* ---------------------------------------------------------------- import */

/* The file at path, whole (at most max bytes). */
static char *
slurp(const char *path, size_t max, size_t *len)
{
	FILE	*f;
	char	*buf;
	size_t	 n;

	if ((f = fopen(path, "rb")) == NULL)
		adie("%s: %s", path, strerror(errno));
	if ((buf = malloc(max + 1)) == NULL)
		adie("out of memory");
	n = fread(buf, 1, max + 1, f);
	if (ferror(f))
		adie("%s: %s", path, strerror(errno));
	fclose(f);
	if (n > max)
		adie("%s: larger than %zu bytes: not a day's extract", path, max);
	*len = n;
	return (buf);
}

/* The owner of <data>/<ls>, given to the imported files when root imports. */
static void
chown_tree(const char *dir, uid_t uid, gid_t gid, int depth)
{
	DIR		*dd;
	struct dirent	*de;
	char		 p[PATH_MAX];

	if (lchown(dir, uid, gid) == -1)
		adie("%s: chown: %s", dir, strerror(errno));
	if (depth == 0 || (dd = opendir(dir)) == NULL)
		return;
	while ((de = readdir(dd)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (lb_path(p, sizeof(p), "%s/%s", dir, de->d_name) != 0)
			adie("%s: path too long", dir);
		chown_tree(p, uid, gid, depth - 1);
	}
	closedir(dd);
}

static int
cmd_import(const struct aopts *o)
{
	struct lb_catalog	*cat;
	struct lb_dayx		 x;
	struct lb_msgfile	*mf;
	struct lb_segment	*sg;
	struct lb_seginfo	 si;
	struct stat		 sb;
	char			*text;
	size_t			 len, i;
	char			 path[PATH_MAX], daydir[PATH_MAX], lsdir[PATH_MAX], why[256];
	char			 ydir[PATH_MAX];
	int			 rc;

	if (o->dir == NULL)
		adie("import: --dir DIR is needed (a day's files as the archive holds them)");
	if (lb_path(path, sizeof(path), "%s/catalog.json", o->dir) != 0)
		adie("%s: path too long", o->dir);
	text = slurp(path, (size_t)1 << 30, &len);
	if (lb_dayx_parse(text, len, &x, why, sizeof(why)) != 0)
		adie("%s: %s", path, why);
	free(text);
	if (strcmp(x.ls, o->ls) != 0)
		adie("%s: a day of logspace %s, not of %s", path, x.ls, o->ls);
	/* Every file is checked before anything moves: a day is restored sound or not at all. */
	for (i = 0; i < x.nseg; i++) {
		if (lb_path(path, sizeof(path), "%s/%s/%s", o->dir, LB_DIR_INDEX,
		    x.segs[i].file) != 0)
			adie("%s: path too long", o->dir);
		if ((rc = lb_segment_open(path, &sg)) != 0)
			adie("%s: %s", path, lb_strerror(rc));
		lb_segment_info(sg, &si);
		rc = lb_segment_verify(sg, why, sizeof(why));
		lb_segment_close(sg);
		if (rc != 0)
			adie("%s: damaged: %s", path, why);
		if (si.first_id != x.segs[i].first_id || si.last_id != x.segs[i].last_id ||
		    si.count != x.segs[i].count || si.size != x.segs[i].size)
			adie("%s: not the segment catalog.json describes", path);
	}
	if (x.day.next_id > x.day.first_id) {
		uint64_t lo, hi;

		if ((rc = lb_msgfile_open(o->dir, LB_RDONLY, x.day.first_id, &mf)) != 0)
			adie("%s/messages: %s", o->dir, lb_strerror(rc));
		rc = lb_msgfile_verify(mf, why, sizeof(why));
		lb_msgfile_range(mf, &lo, &hi);
		lb_msgfile_close(mf);
		if (rc != 0)
			adie("%s/messages: damaged: %s", o->dir, why);
		if (lo > x.day.first_id || hi < x.day.next_id)
			adie("%s/messages: holds ids %llu to %llu, the day %llu to %llu", o->dir,
			    (unsigned long long)lo, (unsigned long long)hi - 1,
			    (unsigned long long)x.day.first_id, (unsigned long long)x.day.next_id - 1);
	}

	cat = cat_open(o, LB_RDWR);
	if ((rc = lb_day_dir(daydir, sizeof(daydir), o->data, o->ls, x.day.day)) != 0)
		adie("%s: day directory: %s", o->ls, lb_strerror(rc));
	if (lstat(daydir, &sb) == 0)
		adie("%s: exists already: the day is on local disk (remove it first, or keep it)",
		    daydir);
	if (lb_path(lsdir, sizeof(lsdir), "%s/%s", o->data, o->ls) != 0 ||
	    stat(lsdir, &sb) == -1)
		adie("%s/%s: %s", o->data, o->ls, strerror(errno));
	snprintf(ydir, sizeof(ydir), "%s", daydir);
	*strrchr(ydir, '/') = '\0';
	if (mkdir(ydir, 0750) == -1 && errno != EEXIST)
		adie("%s: %s", ydir, strerror(errno));
	/* Retention keeps the day until `logbox archive release` (indexd/settings.c). */
	if (lb_path(path, sizeof(path), "%s/%s", o->dir, LB_ARCHIVE_RESTORED) != 0 ||
	    touch(path) != 0)
		adie("%s: %s", path, strerror(errno));
	if (geteuid() == 0) {
		chown_tree(ydir, sb.st_uid, sb.st_gid, 0);
		chown_tree(o->dir, sb.st_uid, sb.st_gid, 2);
	}
	if (rename(o->dir, daydir) == -1)
		adie("moving %s to %s: %s (the same file system is needed)", o->dir, daydir,
		    strerror(errno));
	if ((rc = lb_fsync_dir(ydir)) != 0)
		adie("%s: fsync: %s", ydir, strerror(rc));
	rc = lb_catalog_day_import(cat, o->ls, &x.day, x.segs, x.nseg, x.t, x.ids, x.nt);
	if (rc != 0) {
		/* Put the files back where they came from: the store is as it was. */
		if (rename(daydir, o->dir) == -1)
			adie("%s: the catalog refused the day (%s), and moving the files back to "
			    "%s failed: %s", daydir, lb_strerror(rc), o->dir, strerror(errno));
		adie("%s: the catalog refused the day: %s", o->ls, rc == EEXIST ?
		    "it has the day already, or segments over its ids" : lb_strerror(rc));
	}
	lb_catalog_close(cat);
	if (lb_path(path, sizeof(path), "%s/catalog.json", daydir) == 0)
		(void)unlink(path);
	day_str(path, sizeof(path), x.day.day);
	printf("restored %s of %s: %llu messages, %zu segments\n", path, o->ls,
	    (unsigned long long)(x.day.next_id - x.day.first_id), x.nseg);
	lb_dayx_free(&x);
	return (0);
}

static int
touch(const char *path)
{
	int fd;

	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640)) == -1)
		return (-1);
	return (close(fd));
}

/* ---------------------------------------------------------------- release */

static int
cmd_release(const struct aopts *o)
{
	char	dir[PATH_MAX], path[PATH_MAX];
	int	rc;

	if (o->day == 0)
		adie("release: --day YYYYMMDD is needed");
	if ((rc = lb_day_dir(dir, sizeof(dir), o->data, o->ls, o->day)) != 0 ||
	    lb_path(path, sizeof(path), "%s/%s", dir, LB_ARCHIVE_RESTORED) != 0)
		adie("%s: day directory: %s", o->ls, lb_strerror(rc ? rc : ENAMETOOLONG));
	if (unlink(path) == -1)
		adie("%s: %s", path, errno == ENOENT ? "not a restored day" : strerror(errno));
	if ((rc = lb_fsync_dir(dir)) != 0)
		adie("%s: fsync: %s", dir, strerror(rc));
	printf("released %u of %s: retention removes it when it is past the logspace's days\n",
	    o->day, o->ls);
	return (0);
}

/* ---------------------------------------------------------------- the object store's verbs */

static int
run_tool(int argc, char *argv[])
{
	const char	*tool = getenv("LOGBOX_ARCHIVE_TOOL");
	char		**av;

	if (tool == NULL || *tool == '\0')
		tool = "logbox-archive";
	/* argv[0] is the verb ("restore"...): logbox-archive takes it as its first argument */
	if ((av = calloc((size_t)argc + 2, sizeof(*av))) == NULL)
		adie("out of memory");
	av[0] = (char *)(uintptr_t)tool;
	for (int i = 0; i < argc; i++)
		av[i + 1] = argv[i];
	execvp(tool, av);
	adie("%s: %s (logbox-archive runs the object store's side: ARCHIVE.md)", tool,
	    strerror(errno));
}

int
archive_main(int argc, char *argv[])
{
	struct aopts	 o;
	const char	*verb;

	if (argc < 2)
		ausage();
	verb = argv[1];
	if (strcmp(verb, "days") != 0 && strcmp(verb, "manifest") != 0 &&
	    strcmp(verb, "import") != 0 && strcmp(verb, "release") != 0)
		return (run_tool(argc - 1, argv + 1));
	parse_aopts(argc - 1, argv + 1, &o);
	if (strcmp(verb, "days") == 0)
		return (cmd_days(&o));
	if (strcmp(verb, "manifest") == 0)
		return (cmd_manifest(&o));
	if (strcmp(verb, "release") == 0)
		return (cmd_release(&o));
	return (cmd_import(&o));
}
