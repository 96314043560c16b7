/*
 * status.c — what indexd tells the world about itself: the rates, systemd's STATUS= line, the
 * --status JSON file (written to FILE.tmp and renamed over FILE, so readers never see half of
 * one; the RPC and web status pages read it) and the malformed-frame log lines, which are
 * rate-limited (IX_LOG_PER_S a second, then one summary line for the rest of that second).
 * The file is padded with spaces to whole 4 KiB pages: when its file system is full (FILE.tmp
 * cannot be written) it is rewritten in place, in the pages it already has, so that it never
 * goes stale while indexd runs (readers retry a file they catch half written).
 */
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <systemd/sd-daemon.h>

#include "indexd.h"
#include "lb_util.h"

/* Escapes p[0..len) for a log line: printable ASCII as is, the rest as \xHH, \n, \0... */
void
escape_bytes(char *out, size_t outlen, const uint8_t *p, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t	o = 0;

	for (size_t i = 0; i < len && o + 5 < outlen; i++) {
		uint8_t c = p[i];

		if (c == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c >= 0x20 && c < 0x7f)
			out[o++] = (char)c;
		else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
}

/*
 * A new second of the malformed-frame log: the summary of the last one, if lines were left
 * out, and a new allowance. The tick calls it too, so the summary comes when input stops.
 */
void
malformed_second(struct indexd *env)
{
	int64_t	sec = now_mono_us() / 1000000;

	if (sec == env->log_second)
		return;
	if (env->log_dropped > 0)
		log_warnx("%llu more malformed frames not logged in the last second",
		    (unsigned long long)env->log_dropped);
	env->log_second = sec;
	env->log_tokens = IX_LOG_PER_S;
	env->log_dropped = 0;
}

/* One malformed stretch of input in at byte off: counted, logged (rate-limited). */
void
malformed(struct indexd *env, struct input *in, uint64_t off, const char *why,
    const uint8_t *p, size_t len)
{
	char	show[IX_SHOW_BYTES * 4 + 8];

	env->malformed++;
	in->in_malformed++;
	malformed_second(env);
	if (env->log_tokens == 0) {
		env->log_dropped++;
		return;
	}
	env->log_tokens--;
	escape_bytes(show, sizeof(show), p, len < IX_SHOW_BYTES ? len : IX_SHOW_BYTES);
	log_warnx("malformed frame from %s at byte %llu: %s: \"%s\"%s", in->in_name,
	    (unsigned long long)off, why != NULL ? why : "malformed", show,
	    len > IX_SHOW_BYTES ? "..." : "");
}

static void
eps_update(struct indexd *env, int64_t now)
{
	unsigned	last, old, n = sizeof(env->eps_n) / sizeof(env->eps_n[0]);
	int64_t		dt;

	if (env->eps_cnt > 0) {
		last = (env->eps_pos + n - 1) % n;
		if (now - env->eps_t[last] < 1000000)
			return;
	}
	env->eps_n[env->eps_pos] = env->stored;
	env->eps_t[env->eps_pos] = now;
	env->eps_pos = (env->eps_pos + 1) % n;
	if (env->eps_cnt < n)
		env->eps_cnt++;
	if (env->eps_cnt < 2) {
		env->eps_1s = env->eps_60s = 0;
		return;
	}
	last = (env->eps_pos + n - 1) % n;
	old = (env->eps_pos + n - 2) % n;
	dt = env->eps_t[last] - env->eps_t[old];
	env->eps_1s = dt > 0 ? (double)(env->eps_n[last] - env->eps_n[old]) * 1e6 / dt : 0;
	old = (env->eps_pos + n - env->eps_cnt) % n;
	dt = env->eps_t[last] - env->eps_t[old];
	env->eps_60s = dt > 0 ? (double)(env->eps_n[last] - env->eps_n[old]) * 1e6 / dt : 0;
}

static json_t *
status_inputs(struct indexd *env)
{
	json_t		*a = json_array(), *o;
	struct input	*in;

	TAILQ_FOREACH(in, &env->inputs, in_entry) {
		uint64_t r = in->in_received, mf = in->in_malformed, t = in->in_truncated;
		uint64_t q = in->in_quarantined;
		uint64_t b = in->in_bytes;
		struct input *c;

		if (in->in_kind == IN_CONN)
			continue;
		if (in->in_kind == IN_LISTEN)
			TAILQ_FOREACH(c, &env->inputs, in_entry)
				if (c->in_parent == in) {
					r += c->in_received;
					mf += c->in_malformed;
					t += c->in_truncated;
					q += c->in_quarantined;
					b += c->in_bytes;
				}
		o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I}",
		    "kind", in->in_kind == IN_FIFO ? "fifo" : in->in_kind == IN_SPOOL ? "spool" :
		    "listen",
		    "name", in->in_name,
		    "received", (json_int_t)r, "malformed", (json_int_t)mf,
		    "truncated", (json_int_t)t, "bytes", (json_int_t)b);
		if (o == NULL)
			continue;
		json_object_set_new(o, "quarantined", json_integer((json_int_t)q));
		if (in->in_kind == IN_FIFO)
			json_object_set_new(o, "kill_safe", json_boolean(env->fifo.kill_safe));
		else if (in->in_kind == IN_SPOOL)
			json_object_set_new(o, "kill_safe", json_true());
		else {
			json_object_set_new(o, "connections", json_integer((json_int_t)in->in_conns));
			json_object_set_new(o, "accepted", json_integer((json_int_t)in->in_accepted));
		}
		json_array_append_new(a, o);
	}
	return (a);
}

/* A logspace's settings as the catalog holds them (what --logspaces applied). */
static void
status_lsconf(struct indexd *env, const char *name, json_t *e)
{
	struct lb_lsconf	 c;
	json_t			*d;

	if (lb_catalog_logspace_get(env->cat, name, &c) != 0) {
		json_object_set_new(e, "retention_days", json_null());
		json_object_set_new(e, "delimiters", json_null());
		return;
	}
	json_object_set_new(e, "retention_days", json_integer((json_int_t)c.retention_days));
	d = json_string(c.delims);	/* (NULL when not UTF-8: set by other means) */
	json_object_set_new(e, "delimiters", d != NULL ? d : json_null());
}

static json_t *
status_settings(struct indexd *env)
{
	struct ix_settings	*s = &env->settings;
	json_t			*o = json_object();
	char			 t[40];

	json_object_set_new(o, "file", s->path != NULL ? json_string(s->path) : json_null());
	if (s->applied != 0) {
		lb_time_fmt(t, sizeof(t), s->applied, 0);
		json_object_set_new(o, "applied", json_string(t));
	} else
		json_object_set_new(o, "applied", json_null());
	json_object_set_new(o, "error", s->error[0] != '\0' ? json_string(s->error) :
	    json_null());
	return (o);
}

/* A logspace this process has not opened: what the catalog says (next_id as of its last
 * published segment). */
static int
status_closed_ls(void *arg, const char *name)
{
	struct { struct indexd *env; json_t *o; } *a = arg;
	struct lb_lsstate	 ss;
	json_t			*e;
	char			 t[40];

	if (json_object_get(a->o, name) != NULL)
		return (0);
	if (lb_catalog_state_get(a->env->cat, name, &ss) != 0)
		return (0);
	e = json_pack("{s:I, s:I, s:I, s:b}", "next_id", (json_int_t)ss.next_id,
	    "indexed_id", (json_int_t)ss.indexed_id, "stored", (json_int_t)0, "open", 0);
	if (e == NULL)
		return (0);
	status_lsconf(a->env, name, e);
	if (ss.last_received != LB_NOTIME) {
		lb_time_fmt(t, sizeof(t), ss.last_received, 0);
		json_object_set_new(e, "last_received", json_string(t));
	} else
		json_object_set_new(e, "last_received", json_null());
	json_object_set_new(a->o, name, e);
	return (0);
}

static json_t *
status_logspaces(struct indexd *env)
{
	json_t			*o = json_object();
	struct lb_lsstate	 ss;
	char			 t[40];
	struct { struct indexd *env; json_t *o; } a = { env, o };

	for (size_t i = 0; i < env->nls; i++) {
		struct lspace	*l = env->ls[i];
		json_t		*e;

		if (lb_catalog_state_get(env->cat, l->name, &ss) != 0)
			ss.indexed_id = 0;
		e = json_pack("{s:I, s:I, s:I, s:b}", "next_id", (json_int_t)l->next_id,
		    "indexed_id", (json_int_t)ss.indexed_id, "stored", (json_int_t)l->stored,
		    "open", 1);
		if (e == NULL)
			continue;
		status_lsconf(env, l->name, e);
		if (l->last_received != LB_NOTIME) {
			lb_time_fmt(t, sizeof(t), l->last_received, 0);
			json_object_set_new(e, "last_received", json_string(t));
		} else
			json_object_set_new(e, "last_received", json_null());
		json_object_set_new(o, l->name, e);
	}
	(void)lb_catalog_logspaces(env->cat, status_closed_ls, &a);
	return (o);
}

/* The dead-letter file: its path, its records (all time), the last one's reason and time. */
static json_t *
status_deadletter(struct indexd *env)
{
	json_t	*o = json_object();
	char	 p[PATH_MAX], t[40];

	snprintf(p, sizeof(p), "%s/%s", env->data, LB_DL_FILE);
	json_object_set_new(o, "file", json_string(p));
	json_object_set_new(o, "records",
	    json_integer((json_int_t)(env->dl_records + env->quarantined)));
	json_object_set_new(o, "last_reason", env->dl_last[0] != '\0' ?
	    json_string(env->dl_last) : json_null());
	if (env->dl_last_at != 0) {
		lb_time_fmt(t, sizeof(t), env->dl_last_at, 0);
		json_object_set_new(o, "last_at", json_string(t));
	} else
		json_object_set_new(o, "last_at", json_null());
	return (o);
}

#define STATUS_PAGE	4096

/* The --routes rules in force. */
static json_t *
status_routes(struct indexd *env)
{
	json_t	*o = json_object();
	char	 t[40];

	json_object_set_new(o, "file", env->routes_path != NULL ? json_string(env->routes_path) :
	    json_null());
	json_object_set_new(o, "rules", json_integer((json_int_t)routes_count(env->routes)));
	if (env->routes_loaded != 0) {
		lb_time_fmt(t, sizeof(t), env->routes_loaded, 0);
		json_object_set_new(o, "loaded", json_string(t));
	} else
		json_object_set_new(o, "loaded", json_null());
	json_object_set_new(o, "error", env->routes_error[0] != '\0' ?
	    json_string(env->routes_error) : json_null());
	json_object_set_new(o, "match_errors", json_integer((json_int_t)routes_errors(env->routes)));
	return (o);
}

/* Forward-secure sealing (FORMAT.md §14.5): set up or not, the key's epoch, the last seal. */
static json_t *
status_sealing(struct indexd *env)
{
	json_t	*o = json_object();
	char	 t[40];

	json_object_set_new(o, "setup", env->sealing == 1 ? json_true() : json_false());
	json_object_set_new(o, "epoch", env->sealing == 1 ?
	    json_integer((json_int_t)env->seal_epoch) : json_null());
	if (env->seal_last != 0) {
		lb_time_fmt(t, sizeof(t), env->seal_last, 0);
		json_object_set_new(o, "last_sealed", json_string(t));
	} else
		json_object_set_new(o, "last_sealed", json_null());
	json_object_set_new(o, "error", env->seal_error[0] != '\0' ?
	    json_string(env->seal_error) : json_null());
	json_object_set_new(o, "tsa_url", env->stamp.url != NULL ? json_string(env->stamp.url) :
	    json_null());
	if (env->stamp.on) {
		char e[sizeof(env->stamp.error)];

		pthread_mutex_lock(&env->stamp.mu);
		memcpy(e, env->stamp.error, sizeof(e));
		pthread_mutex_unlock(&env->stamp.mu);
		json_object_set_new(o, "tsa_error", e[0] != '\0' ? json_string(e) : json_null());
	} else
		json_object_set_new(o, "tsa_error", json_null());
	return (o);
}

/*
 * The file system of the status file is full: writes buf over FILE in place (the pages it
 * has), then cuts what is left of the old text.
 */
static int
status_in_place(const char *path, const char *buf, size_t len)
{
	int	fd, rc = 0;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return (errno);
	if ((rc = lb_write_all(fd, buf, len)) == 0 && ftruncate(fd, (off_t)len) == -1)
		rc = errno;
	close(fd);
	return (rc);
}

/* Writes the --status file (FILE.tmp, then rename; in place when its disk is full). */
int
status_write(struct indexd *env)
{
	char	tmp[PATH_MAX], started[40], written[40];
	char	*text, *buf = NULL;
	size_t	len, padded;
	json_t	*o;
	int	fd, rc = 0;

	if (env->status_path == NULL)
		return (0);
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", env->status_path) >= (int)sizeof(tmp))
		return (ENAMETOOLONG);
	lb_time_fmt(started, sizeof(started), env->started, 0);
	o = json_pack("{s:i, s:s, s:f, s:I, s:I, s:I, s:I, s:f, s:f, s:I, s:I}",
	    "pid", (int)getpid(),
	    "started", started,
	    "uptime_s", (double)(now_mono_us() - env->started_mono) / 1e6,
	    "received", (json_int_t)env->received,
	    "stored", (json_int_t)env->stored,
	    "malformed", (json_int_t)env->malformed,
	    "truncated", (json_int_t)env->truncated,
	    "eps_1s", env->eps_1s,
	    "eps_60s", env->eps_60s,
	    "memory_bytes", (json_int_t)ls_mem_total(env),
	    "connections", (json_int_t)env->conns);
	if (o == NULL)
		return (ENOMEM);
	lb_time_fmt(written, sizeof(written), now_real_us(), 0);
	json_object_set_new(o, "written", json_string(written));
	json_object_set_new(o, "interval_ms",
	    json_integer((json_int_t)env->conf.status_interval_ms));
	json_object_set_new(o, "max_memory_mb",
	    json_integer((json_int_t)env->conf.max_memory_mb));
	json_object_set_new(o, "holding", env->holding[0] != '\0' ?
	    json_string(env->holding) : json_null());
	json_object_set_new(o, "disk", disk_status(env));
	json_object_set_new(o, "stopping", json_boolean(env->stopping));
	json_object_set_new(o, "quarantined", json_integer((json_int_t)env->quarantined));
	json_object_set_new(o, "deadletter", status_deadletter(env));
	json_object_set_new(o, "inputs", status_inputs(env));
	json_object_set_new(o, "spool", spool_status(env));
	json_object_set_new(o, "routes", status_routes(env));
	json_object_set_new(o, "sealing", status_sealing(env));
	json_object_set_new(o, "settings", status_settings(env));
	json_object_set_new(o, "logspaces", status_logspaces(env));
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (text == NULL)
		return (ENOMEM);
	len = strlen(text);
	padded = (len + 1 + STATUS_PAGE - 1) / STATUS_PAGE * STATUS_PAGE;
	if ((buf = malloc(padded)) == NULL) {
		free(text);
		return (ENOMEM);
	}
	memcpy(buf, text, len);
	memset(buf + len, ' ', padded - len - 1);
	buf[padded - 1] = '\n';
	free(text);
	/* Readable by the status readers (the API, the web UI) whatever the umask: no secrets. */
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644)) == -1)
		rc = errno;
	else {
		rc = lb_write_all(fd, buf, padded);
		if (close(fd) == -1 && rc == 0)
			rc = errno;
		if (rc == 0 && fchmodat(AT_FDCWD, tmp, 0644, 0) == -1)
			rc = errno;
		if (rc == 0 && rename(tmp, env->status_path) == -1)
			rc = errno;
		if (rc != 0)
			unlink(tmp);
	}
	if (rc == ENOSPC || rc == EDQUOT)
		rc = status_in_place(env->status_path, buf, padded);
	free(buf);
	return (rc);
}

/* Every status interval: rates, STATUS=, the status file. */
void
status_tick(struct indexd *env)
{
	int	rc;

	eps_update(env, now_mono_us());
	sd_notifyf(0, "STATUS=stored %llu, %.0f msg/s, malformed %llu%s%s%s",
	    (unsigned long long)env->stored, env->eps_1s, (unsigned long long)env->malformed,
	    disk_full(env) ? ", disk full" : "",
	    env->holding[0] != '\0' ? ", holding: " : "", env->holding);
	if ((rc = status_write(env)) != 0) {
		int64_t now = now_mono_us();

		if (env->status_warned == 0 || now - env->status_warned > 60 * 1000000LL) {
			log_warnx("%s: %s: %s", __func__, env->status_path, strerror(rc));
			env->status_warned = now;
		}
	}
}
