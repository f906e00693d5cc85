/* The error channel: a kernel that meets bad data reports here and returns;
 * Python raises the first report at the next Runtime.wait(). */
#include "internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;
static char error_msg[512];
static int error_set;

void nl_error(const char *fmt, ...)
{
    pthread_mutex_lock(&error_lock);
    if (!error_set) {  /* keep the first: later ones are usually its echoes */
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(error_msg, sizeof error_msg, fmt, ap);
        va_end(ap);
        error_set = 1;
    }
    pthread_mutex_unlock(&error_lock);
}

int nl_take_error(char *buf, int len)
{
    pthread_mutex_lock(&error_lock);
    int had = error_set;
    if (had) snprintf(buf, (size_t)len, "%s", error_msg);
    error_set = 0;
    pthread_mutex_unlock(&error_lock);
    return had;
}
