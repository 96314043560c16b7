/*
 * settings.c — the logspace settings file (--logspaces, webui/UI.md "Logspace settings") and
 * retention. The web UI may not write the store, so it writes the settings it wants to a JSON
 * file; indexd reads it at start, on SIGHUP and when the file changes (its inode, size or
 * mtime, looked at every IX_SETTINGS_POLL_MS), checks all of it, and applies a good file to the
 * catalog (lb_catalog_logspace_set; a logspace that does not exist is created) and to the
 * writers it has open (lb_store_set_delims: new delimiters for the messages stored from then
 * on). A bad file is logged with the reason and changes nothing; a missing file is no settings.
 *
 * Retention: for each logspace with retention_days > 0, whole UTC days older than today minus
 * retention_days are removed — never the logspace's newest day (the one its writer appends to,
 * which is also always the current day or older), and for a logspace logbox-archive archives
 * only once the day's archived copy is verified (archive_held) — at start, after settings are applied and
 * every hour. The catalog goes first (lb_catalog_day_delete: the day, its segments, its time
 * map entries), then the files (<data>/<ls>/YYYY/MM-DD/), then the emptied directories, each
 * parent fsync'ed. A day directory older than the window that the catalog does not know (a kill
 * between the two steps) is removed by the next pass the same way.
 */
#include <sys/stat.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "indexd.h"
#include "lb_util.h"

#define RETENTION_MAX	36500	/* days */

/* One logspace of a good file. */
struct lsset {
	char	 name[LB_NAME_MAX + 1];
	int	 has_ret, has_delims;
	uint32_t ret;
	char	 delims[64];
};

/* ---------------------------------------------------------------- reading and checking */

/* Checks a "delimiters" value; NULL when good, else why not. */
static const char *
delims_bad(const char *s, size_t len)
{
	if (len > 63)
		return ("longer than 63 bytes");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f)
			return ("holds a control byte");
		if (c == ' ')
			return ("holds a space (white space is always a delimiter)");
		if (isalnum(c))
			return ("holds a letter or digit");
	}
	return (NULL);
}

/* A member name or key for a log line: at most 64 bytes, escaped. */
static const char *
shown(char *buf, size_t len, const char *s)
{
	size_t n = strlen(s);

	escape_bytes(buf, len, (const uint8_t *)s, n > 64 ? 64 : n);
	return (buf);
}

/*
 * Parses and checks the file open as f. On success *out is a malloc'ed array of *n entries
 * (NULL when none); otherwise a description goes to err and EINVAL is returned.
 */
static int
settings_parse(FILE *f, struct lsset **out, size_t *n, char *err, size_t errlen)
{
	json_error_t	 je;
	json_t		*root, *v, *lss = NULL, *lv, *mv;
	const char	*k, *name, *why, *mk;
	struct lsset	*a = NULL;
	size_t		 na = 0, len;
	json_int_t	 r;
	char		 sh[64 * 4 + 8];

	if ((root = json_loadf(f, JSON_REJECT_DUPLICATES, &je)) == NULL) {
		snprintf(err, errlen, "not JSON: %s (line %d, column %d)", je.text, je.line,
		    je.column);
		return (EINVAL);
	}
	if (!json_is_object(root)) {
		snprintf(err, errlen, "expected a JSON object");
		goto bad;
	}
	json_object_foreach(root, k, v) {
		if (strcmp(k, "version") == 0) {
			if (!json_is_integer(v) || json_integer_value(v) != 1) {
				snprintf(err, errlen, "version: expected 1");
				goto bad;
			}
		} else if (strcmp(k, "logspaces") == 0) {
			if (!json_is_object(v)) {
				snprintf(err, errlen, "logspaces: expected an object");
				goto bad;
			}
			lss = v;
		} else {
			snprintf(err, errlen, "unknown member '%s'", shown(sh, sizeof(sh), k));
			goto bad;
		}
	}
	if (json_object_get(root, "version") == NULL) {
		snprintf(err, errlen, "no version (expected \"version\": 1)");
		goto bad;
	}
	if (lss != NULL && json_object_size(lss) > 0 &&
	    (a = calloc(json_object_size(lss), sizeof(*a))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto bad;
	}
	if (lss != NULL) {
		json_object_foreach(lss, name, lv) {
			struct lsset *e = &a[na];

			if (!lb_logspace_name_ok((const uint8_t *)name, strlen(name), &why)) {
				snprintf(err, errlen, "logspace '%s': %s",
				    shown(sh, sizeof(sh), name), why);
				goto bad;
			}
			if (!json_is_object(lv)) {
				snprintf(err, errlen, "logspaces.%s: expected an object", name);
				goto bad;
			}
			memcpy(e->name, name, strlen(name) + 1);
			json_object_foreach(lv, mk, mv) {
				if (strcmp(mk, "retention_days") == 0) {
					if (!json_is_integer(mv) ||
					    (r = json_integer_value(mv)) < 0 || r > RETENTION_MAX) {
						snprintf(err, errlen, "logspaces.%s.retention_days: "
						    "expected an integer 0..%d", name, RETENTION_MAX);
						goto bad;
					}
					e->has_ret = 1;
					e->ret = (uint32_t)r;
				} else if (strcmp(mk, "delimiters") == 0) {
					if (!json_is_string(mv)) {
						snprintf(err, errlen, "logspaces.%s.delimiters: "
						    "expected a string", name);
						goto bad;
					}
					len = json_string_length(mv);
					if ((why = delims_bad(json_string_value(mv), len)) != NULL) {
						snprintf(err, errlen, "logspaces.%s.delimiters: %s",
						    name, why);
						goto bad;
					}
					e->has_delims = 1;
					memcpy(e->delims, json_string_value(mv), len);
					e->delims[len] = '\0';
				} else {
					snprintf(err, errlen, "logspaces.%s: unknown member '%s'",
					    name, shown(sh, sizeof(sh), mk));
					goto bad;
				}
			}
			na++;
		}
	}
	json_decref(root);
	*out = a;
	*n = na;
	return (0);
 bad:
	free(a);
	json_decref(root);
	return (EINVAL);
}

/* ---------------------------------------------------------------- applying */

static struct lspace *
ls_open_find(struct indexd *env, const char *name)
{
	for (size_t i = 0; i < env->nls; i++)
		if (strcmp(env->ls[i]->name, name) == 0)
			return (env->ls[i]);
	return (NULL);
}

/* Applies one logspace's settings to the catalog and its writer. */
static int
apply_one(struct indexd *env, const struct lsset *e, char *err, size_t errlen)
{
	struct lb_lsconf	 c, old;
	struct lspace		*l;
	int			 rc, create = 0;

	if ((rc = lb_catalog_logspace_get(env->cat, e->name, &c)) == LB_ENOTFOUND) {
		lb_lsconf_default(&c);
		create = 1;
	} else if (rc != 0) {
		snprintf(err, errlen, "logspace %s: reading its settings: %s", e->name,
		    lb_strerror(rc));
		return (rc);
	}
	old = c;
	if (e->has_ret)
		c.retention_days = e->ret;
	if (e->has_delims) {
		memset(c.delims, 0, sizeof(c.delims));
		memcpy(c.delims, e->delims, strlen(e->delims));
	}
	if (create) {
		if ((rc = lb_catalog_logspace_create(env->cat, e->name, &c)) != 0) {
			snprintf(err, errlen, "logspace %s: creating it: %s", e->name,
			    lb_strerror(rc));
			return (rc);
		}
		log_info("settings: logspace %s created", e->name);
	} else if (memcmp(&c, &old, sizeof(c)) != 0 &&
	    (rc = lb_catalog_logspace_set(env->cat, e->name, &c)) != 0) {
		snprintf(err, errlen, "logspace %s: storing its settings: %s", e->name,
		    lb_strerror(rc));
		return (rc);
	}
	if (e->has_delims && (l = ls_open_find(env, e->name)) != NULL &&
	    strcmp(old.delims, c.delims) != 0) {
		/* The open interval is flushed with the old delimiters; new messages the new way. */
		if ((rc = lb_store_set_delims(l->st, c.delims)) != 0) {
			log_warnx("settings: logspace %s: switching the writer's delimiters: %s "
			    "(they apply from the next start)", e->name, lb_strerror(rc));
			rc = 0;
		} else
			log_info("settings: logspace %s: messages stored from id %llu on are "
			    "tokenized with the new delimiters", e->name,
			    (unsigned long long)l->next_id);
	}
	return (0);
}

static void settings_read(struct indexd *, const char *);

/*
 * Reads, checks and applies the file; why: "start", "SIGHUP", "changed". After start the
 * status file is written at once, so that a page that changed the file sees the outcome.
 */
void
settings_load(struct indexd *env, const char *why)
{
	settings_read(env, why);
	if (env->last_status != 0)
		(void)status_write(env);
}

static void
settings_read(struct indexd *env, const char *why)
{
	struct ix_settings	*s = &env->settings;
	struct lsset		*a = NULL;
	struct stat		 sb;
	FILE			*f;
	char			 err[512], msg[2048], esc[64 * 4 + 8];
	size_t			 n = 0, o;
	int			 rc;

	if (s->path == NULL)
		return;
	if ((f = fopen(s->path, "re")) == NULL) {
		rc = errno;
		memset(&s->seen, 0, sizeof(s->seen));
		s->seen_ok = 0;
		if (rc == ENOENT) {
			log_info("settings: %s (%s): no such file: no settings to apply", s->path,
			    why);
			s->error[0] = '\0';
			return;
		}
		snprintf(s->error, sizeof(s->error), "%s: %s", s->path, strerror(rc));
		log_warnx("settings: %s: keeping the settings in force", s->error);
		return;
	}
	if (fstat(fileno(f), &sb) == 0) {
		s->seen = sb;
		s->seen_ok = 1;
	}
	rc = settings_parse(f, &a, &n, err, sizeof(err));
	fclose(f);
	if (rc != 0) {
		snprintf(s->error, sizeof(s->error), "%s: %s", s->path, err);
		log_warnx("settings: %s (%s): %s: keeping the settings in force", s->path, why,
		    err);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (apply_one(env, &a[i], err, sizeof(err)) != 0) {
			snprintf(s->error, sizeof(s->error), "%s: %s", s->path, err);
			log_warnx("settings: %s (%s): %s", s->path, why, err);
			free(a);
			return;
		}
	}
	s->error[0] = '\0';
	s->applied = now_real_us();
	o = (size_t)snprintf(msg, sizeof(msg), "%s", n == 0 ? "no logspaces" : "");
	for (size_t i = 0; i < n && o < sizeof(msg); i++) {
		o += (size_t)snprintf(msg + o, sizeof(msg) - o, "%s%s", i > 0 ? "; " : "",
		    a[i].name);
		if (a[i].has_ret && o < sizeof(msg))
			o += (size_t)snprintf(msg + o, sizeof(msg) - o, " retention %u d",
			    a[i].ret);
		if (a[i].has_delims && o < sizeof(msg)) {
			escape_bytes(esc, sizeof(esc), (const uint8_t *)a[i].delims,
			    strlen(a[i].delims));
			o += (size_t)snprintf(msg + o, sizeof(msg) - o, "%sdelimiters \"%s\"",
			    a[i].has_ret ? ", " : " ", esc);
		}
	}
	log_info("settings: applied %s: %s", s->path, msg);
	free(a);
	retention_run(env);
}

/* Every IX_SETTINGS_POLL_MS: loads the file again when it changed (or appeared). */
static void
settings_poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct indexd		*env = arg;
	struct ix_settings	*s = &env->settings;
	struct stat		 sb;

	(void)fd;
	(void)what;
	if (stat(s->path, &sb) == -1) {
		if (s->seen_ok)
			log_info("settings: %s is gone: the settings in force stay", s->path);
		s->seen_ok = 0;
		return;
	}
	if (s->seen_ok && sb.st_dev == s->seen.st_dev && sb.st_ino == s->seen.st_ino &&
	    sb.st_size == s->seen.st_size && sb.st_mtim.tv_sec == s->seen.st_mtim.tv_sec &&
	    sb.st_mtim.tv_nsec == s->seen.st_mtim.tv_nsec)
		return;
	settings_load(env, "changed");
	if (!s->seen_ok) {
		/* Unreadable: do not try again until it changes. */
		s->seen = sb;
		s->seen_ok = 1;
	}
}

static void
retention_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	retention_run(arg);
}

/* The timers: the file's poll (with --logspaces) and the hourly retention pass. */
void
settings_init(struct indexd *env)
{
	struct timeval	tv;

	if (env->settings.path != NULL) {
		tv.tv_sec = IX_SETTINGS_POLL_MS / 1000;
		tv.tv_usec = IX_SETTINGS_POLL_MS % 1000 * 1000;
		if ((env->settings.ev_poll = event_new(env->base_ev, -1, EV_PERSIST,
		    settings_poll_cb, env)) == NULL || evtimer_add(env->settings.ev_poll, &tv) == -1)
			fatalx("%s: cannot arm the settings timer", __func__);
	}
	tv.tv_sec = IX_RETENTION_S;
	tv.tv_usec = 0;
	if ((env->settings.ev_retention = event_new(env->base_ev, -1, EV_PERSIST, retention_cb,
	    env)) == NULL || evtimer_add(env->settings.ev_retention, &tv) == -1)
		fatalx("%s: cannot arm the retention timer", __func__);
}

void
settings_free(struct indexd *env)
{
	if (env->settings.ev_poll != NULL)
		event_free(env->settings.ev_poll);
	if (env->settings.ev_retention != NULL)
		event_free(env->settings.ev_retention);
	env->settings.ev_poll = env->settings.ev_retention = NULL;
}

/* ---------------------------------------------------------------- retention */

/* YYYYMMDD of a time (µs since the epoch, UTC). */
static uint32_t
ymd(int64_t us)
{
	time_t		t = (time_t)(us / 1000000);
	struct tm	tm;

	gmtime_r(&t, &tm);
	return ((uint32_t)(tm.tm_year + 1900) * 10000 + (uint32_t)(tm.tm_mon + 1) * 100 +
	    (uint32_t)tm.tm_mday);
}

/*
 * Removes dir and what it holds (files, and directories of files: a day's index/), adding the
 * files' sizes to *bytes. depth bounds the recursion. ENOENT is not an error.
 */
static int
rm_tree(const char *dir, int depth, uint64_t *bytes)
{
	DIR		*d;
	struct dirent	*de;
	struct stat	 sb;
	char		 path[PATH_MAX];
	int		 rc = 0;

	if ((d = opendir(dir)) == NULL)
		return (errno == ENOENT ? 0 : errno);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if ((rc = lb_path(path, sizeof(path), "%s/%s", dir, de->d_name)) != 0)
			break;
		if (lstat(path, &sb) == -1) {
			if (errno == ENOENT)
				continue;
			rc = errno;
			break;
		}
		if (S_ISDIR(sb.st_mode)) {
			if (depth <= 0) {
				rc = ENOTEMPTY;
				break;
			}
			if ((rc = rm_tree(path, depth - 1, bytes)) != 0)
				break;
			continue;
		}
		if (unlink(path) == -1 && errno != ENOENT) {
			rc = errno;
			break;
		}
		*bytes += (uint64_t)sb.st_size;
	}
	closedir(d);
	if (rc == 0 && rmdir(dir) == -1 && errno != ENOENT)
		rc = errno;
	return (rc);
}

/*
 * Removes the directory of day in logspace ls, fsyncs its year directory, and removes (and
 * fsyncs the parent of) the year directory when that is left empty.
 */
static int
day_files_remove(struct indexd *env, const char *ls, uint32_t day, uint64_t *bytes)
{
	char	ydir[PATH_MAX], ddir[PATH_MAX], lsdir[PATH_MAX];
	int	rc;

	if ((rc = lb_path(lsdir, sizeof(lsdir), "%s/%s", env->data, ls)) != 0 ||
	    (rc = lb_path(ydir, sizeof(ydir), "%s/%04u", lsdir, day / 10000)) != 0 ||
	    (rc = lb_path(ddir, sizeof(ddir), "%s/%02u-%02u", ydir, day / 100 % 100,
	    day % 100)) != 0)
		return (rc);
	if ((rc = rm_tree(ddir, 2, bytes)) != 0)
		return (rc);
	if ((rc = lb_fsync_dir(ydir)) != 0)
		return (rc == ENOENT ? 0 : rc);
	if (rmdir(ydir) == 0)
		return (lb_fsync_dir(lsdir));
	return (errno == ENOTEMPTY || errno == EEXIST || errno == ENOENT ? 0 : errno);
}

static void
day_name(char *buf, size_t len, uint32_t day)
{
	snprintf(buf, len, "%04u/%02u-%02u", day / 10000, day / 100 % 100, day % 100);
}

/* 1 when s is n decimal digits. */
static int
digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return (0);
	return (s[n] == '\0');
}

/*
 * Day directories of ls before cutoff that the catalog does not list (days[0..n)): left by a
 * kill between a catalog delete and the files' removal.
 */
static void
orphans_remove(struct indexd *env, const char *ls, uint32_t cutoff,
    const struct lb_dayref *days, size_t n)
{
	char		 lsdir[PATH_MAX], ydir[PATH_MAX], name[16];
	DIR		*ld, *yd;
	struct dirent	*ye, *de;
	uint32_t	 list[400];
	size_t		 nlist;
	uint64_t	 bytes;
	int		 rc;

	if (lb_path(lsdir, sizeof(lsdir), "%s/%s", env->data, ls) != 0 ||
	    (ld = opendir(lsdir)) == NULL)
		return;
	while ((ye = readdir(ld)) != NULL) {
		unsigned y = 0;

		if (strlen(ye->d_name) != 4 || !digits(ye->d_name, 4))
			continue;
		y = (unsigned)atoi(ye->d_name);
		if (y * 10000 > cutoff)
			continue;
		if (lb_path(ydir, sizeof(ydir), "%s/%s", lsdir, ye->d_name) != 0 ||
		    (yd = opendir(ydir)) == NULL)
			continue;
		/* Collect first: removing while reading a directory skips entries. */
		nlist = 0;
		while ((de = readdir(yd)) != NULL && nlist < sizeof(list) / sizeof(list[0])) {
			const char	*s = de->d_name;
			uint32_t	 day;
			int		 known = 0;

			if (strlen(s) != 5 || s[2] != '-' || !isdigit((unsigned char)s[0]) ||
			    !isdigit((unsigned char)s[1]) || !isdigit((unsigned char)s[3]) ||
			    !isdigit((unsigned char)s[4]))
				continue;
			day = y * 10000 + (uint32_t)((s[0] - '0') * 10 + (s[1] - '0')) * 100 +
			    (uint32_t)((s[3] - '0') * 10 + (s[4] - '0'));
			if (day >= cutoff)
				continue;
			for (size_t i = 0; i < n && !known; i++)
				known = days[i].day == day;
			if (!known)
				list[nlist++] = day;
		}
		closedir(yd);
		for (size_t i = 0; i < nlist; i++) {
			bytes = 0;
			day_name(name, sizeof(name), list[i]);
			if ((rc = day_files_remove(env, ls, list[i], &bytes)) != 0)
				log_warnx("retention: %s: removing the files of %s (not in the "
				    "catalog): %s", ls, name, strerror(rc));
			else
				log_info("retention: %s: removed %s, left by an interrupted "
				    "removal (%llu bytes)", ls, name, (unsigned long long)bytes);
		}
	}
	closedir(ld);
}

/* 1 when day was brought back by `logbox archive restore`: kept until `logbox archive release`. */
static int
day_restored(struct indexd *env, const char *ls, uint32_t day)
{
	struct stat	sb;
	char		path[PATH_MAX], dir[PATH_MAX];

	if (lb_day_dir(dir, sizeof(dir), env->data, ls, day) != 0 ||
	    lb_path(path, sizeof(path), "%s/%s", dir, LB_ARCHIVE_RESTORED) != 0)
		return (0);
	return (stat(path, &sb) == 0);
}

/*
 * 1 when a logspace that logbox-archive archives (it has made <archive-state>/<ls>/) has no
 * verified archived copy of day (<archive-state>/<ls>/verified/YYYYMMDD.json): such a day is
 * deleted only after its copy in the object store was verified (indexer/ARCHIVE.md).
 */
static int
archive_held(struct indexd *env, const char *ls, uint32_t day)
{
	struct stat	sb;
	char		path[PATH_MAX];

	if (env->archive_state == NULL)
		return (0);
	if (lb_path(path, sizeof(path), "%s/%s", env->archive_state, ls) != 0)
		return (1);
	if (stat(path, &sb) == -1) {
		if (errno == ENOENT)
			return (0);
		/* (unreadable: hold, rather than delete a day the archive may not have) */
		log_warnx("retention: %s: %s", path, strerror(errno));
		return (1);
	}
	if (lb_path(path, sizeof(path), "%s/%s/verified/%08u.json", env->archive_state, ls,
	    day) != 0)
		return (1);
	return (stat(path, &sb) == -1);
}

/* One logspace's pass. */
static void
retention_ls(struct indexd *env, const char *ls, int64_t now)
{
	struct lb_lsconf	 c;
	struct lb_dayref	*days = NULL;
	size_t			 n = 0;
	uint32_t		 cutoff;
	uint64_t		 bytes;
	char			 name[16];
	int			 rc;

	if ((rc = lb_catalog_logspace_get(env->cat, ls, &c)) != 0) {
		log_warnx("retention: %s: reading its settings: %s", ls, lb_strerror(rc));
		return;
	}
	if (c.retention_days == 0)
		return;
	/* Days before the cutoff are older than the window: today - retention_days. */
	cutoff = ymd(now - (int64_t)c.retention_days * 86400 * 1000000);
	if ((rc = lb_catalog_days(env->cat, ls, &days, &n)) != 0) {
		log_warnx("retention: %s: listing its days: %s", ls, lb_strerror(rc));
		return;
	}
	/* Never the newest day: its writer appends to it (and it may be today). */
	for (size_t i = 0; i + 1 < n && days[i].day < cutoff; i++) {
		day_name(name, sizeof(name), days[i].day);
		if (day_restored(env, ls, days[i].day))
			continue;
		if (archive_held(env, ls, days[i].day)) {
			log_info("retention: %s: keeping %s and the days after it: not in its "
			    "archive yet (ARCHIVE.md)", ls, name);
			break;
		}
		/* The next day's chain keeps the removed day's head (FORMAT.md §14). */
		if ((rc = lb_chain_tomb(env->data, env->cat, ls, &days[i], days[i + 1].day)) != 0) {
			log_warnx("retention: %s: the tombstone of %s: %s", ls, name,
			    lb_strerror(rc));
			break;
		}
		if ((rc = lb_catalog_day_delete(env->cat, ls, days[i].day)) != 0) {
			log_warnx("retention: %s: removing %s from the catalog: %s", ls, name,
			    lb_strerror(rc));
			break;
		}
		bytes = 0;
		if ((rc = day_files_remove(env, ls, days[i].day, &bytes)) != 0) {
			/* The next pass finds the rest (a day the catalog does not know). */
			log_warnx("retention: %s: removing the files of %s: %s", ls, name,
			    strerror(rc));
			continue;
		}
		log_info("retention: %s: removed %s (%llu messages, %llu bytes)", ls, name,
		    (unsigned long long)(days[i].next_id - days[i].first_id),
		    (unsigned long long)bytes);
	}
	free(days);
	days = NULL;
	if (lb_catalog_days(env->cat, ls, &days, &n) == 0)
		orphans_remove(env, ls, cutoff, days, n);
	free(days);
}

/* A retention pass over every logspace of the catalog. */
void
retention_run(struct indexd *env)
{
	char	(*names)[LB_NAME_MAX + 1] = NULL;
	size_t	  n = 0;
	int64_t	  now = now_real_us();
	int	  rc;

	/* The names first: deleting inside the catalog's read transaction is not allowed. */
	if ((rc = lb_catalog_logspace_names(env->cat, &names, &n)) != 0)
		log_warnx("retention: listing the logspaces: %s", lb_strerror(rc));
	else
		for (size_t i = 0; i < n; i++)
			retention_ls(env, names[i], now);
	free(names);
}
