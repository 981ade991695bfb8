// err.c: formatting of the first failure's message.
#include "core/err.h"

#include <stdarg.h>

int ds_fail(ds_msg *msg, int status, const char *fmt, ...)
{
    if (msg && msg->text[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg->text, sizeof msg->text, fmt, ap);
        va_end(ap);
        // one line whatever a file put in it (a filter's or attribute's name with a newline, say)
        for (char *c = msg->text; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
    }
    return status;
}
