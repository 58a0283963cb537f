/* The float32 narrowing both C passes share: _pack.c from a list of Python floats, _body.c
 * from a body's text. One rule, so a vector is packed and flagged alike whichever way it
 * came: a value is BAD_VALUE when not finite or when it rounds to infinity in float32
 * (|v| >= limit; it is then stored as 0 and the vector refused), INEXACT when float32 does
 * not hold it exactly (the float64 bytes are then kept), and a vector whose float32 values
 * are all zero is ALL_ZERO. The flags' values are vector_pack.py's. */
#ifndef RATATOSKR_NARROW_H
#define RATATOSKR_NARROW_H

#include <math.h>

enum { INEXACT = 1, BAD_VALUE = 2, ALL_ZERO = 4 };

/* what the values of one vector have shown so far */
typedef struct {
    int inexact, bad, nonzero;
} narrow_seen;

static inline float
narrow_value(double value, double limit, narrow_seen *seen)
{
    int in_range = fabs(value) < limit; /* false for NaN too */
    double kept = in_range ? value : 0.0;
    float single = (float)kept;
    seen->bad |= !in_range;
    seen->inexact |= (double)single != kept;
    seen->nonzero |= single != 0.0f;
    return single;
}

static inline char
narrow_flag(const narrow_seen *seen)
{
    return (char)((seen->inexact ? INEXACT : 0) | (seen->bad ? BAD_VALUE : 0) |
                  (seen->nonzero ? 0 : ALL_ZERO));
}

#endif
