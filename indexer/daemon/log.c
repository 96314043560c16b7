/*
 * log.c — the daemons' log (logbox-indexd, logbox-searchd): one line per event on stderr,
 * "<program>: <level><message>", which systemd's journal (or the test harness) collects with
 * its own time stamps. It owns only the format; callers put the name of
 * the function that failed at the start of error messages. Each line is built in a buffer and
 * written with one write(2), so lines from several threads or writers never interleave. fatal() and
 * fatalx() are for startup only: at run time errors are logged and serving goes on.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static const char	*log_name = "logbox";	/* the program, set by log_init() */
static int		 log_level = LOGL_INFO;	/* changed only by the main thread */

void
log_init(const char *name, int level)
{
	log_name = name;
	log_level = level;
}

void
log_setlevel(int level)
{
	log_level = level;
}

static void
log_vline(const char *level, const char *fmt, va_list ap, const char *err)
{
	char	buf[2048];
	int	n, m;

	n = snprintf(buf, sizeof(buf), "%s: %s", log_name, level);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return;
	m = vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
	if (m < 0)
		return;
	n = (size_t)(n + m) >= sizeof(buf) - 2 ? (int)sizeof(buf) - 2 : n + m;
	if (err != NULL) {
		m = snprintf(buf + n, sizeof(buf) - n, ": %s", err);
		if (m > 0)
			n = (size_t)(n + m) >= sizeof(buf) - 2 ? (int)sizeof(buf) - 2 : n + m;
	}
	buf[n++] = '\n';
	/* One write per line; a short write to stderr is not worth a retry loop here. */
	if (write(STDERR_FILENO, buf, n) == -1)
		return;
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	if (log_level > LOGL_INFO)
		return;
	va_start(ap, fmt);
	log_vline("", fmt, ap, NULL);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	if (log_level > LOGL_DEBUG)
		return;
	va_start(ap, fmt);
	log_vline("", fmt, ap, NULL);
	va_end(ap);
}

void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline("warning: ", fmt, ap, NULL);
	va_end(ap);
}

void
log_warn(const char *fmt, ...)
{
	va_list ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_vline("warning: ", fmt, ap, strerror(saved));
	va_end(ap);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline("fatal: ", fmt, ap, NULL);
	va_end(ap);
	exit(1);
}

void
fatal(const char *fmt, ...)
{
	va_list ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_vline("fatal: ", fmt, ap, strerror(saved));
	va_end(ap);
	exit(1);
}
