/*
 * log.h — the daemons' log (daemon/log.c), shared by logbox-indexd and logbox-searchd.
 */
#ifndef LB_DAEMON_LOG_H
#define LB_DAEMON_LOG_H

enum log_levels { LOGL_DEBUG = 0, LOGL_INFO, LOGL_WARN };

/* Names the program in every line and sets the level; call it first in main(). */
void	log_init(const char *name, int level);
/* A new level (SIGHUP); main thread only. */
void	log_setlevel(int level);
void	log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void	fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
