/* Decimal text to float64, correctly rounded, for _body.c: the fast path for numbers of
 * at most 19 significant digits and a power of ten within 5**27 (exact 128-bit products,
 * or 0 when the product cannot decide the rounding: the caller then asks Python's parser),
 * and the digit reading, eight bytes at a time.
 *
 * Included by _body.c after it defines HAVE_FAST_PATH, u128 and cursor. */

#ifndef RATATOSKR_DECIMAL_H
#define RATATOSKR_DECIMAL_H


#if HAVE_FAST_PATH
#define MAX_E10 27 /* 5**27 < 2**63 */
static uint64_t POW5[MAX_E10 + 1];
/* RECIP[k] = ceil(2**RECIP_BITS[k] / 5**k), in [2**127, 2**128) */
static u128 RECIP[MAX_E10 + 1];
static int RECIP_BITS[MAX_E10 + 1];

static int
bit_length(u128 v)
{
    uint64_t hi = (uint64_t)(v >> 64), lo = (uint64_t)v;
    return hi ? 128 - __builtin_clzll(hi) : lo ? 64 - __builtin_clzll(lo) : 0;
}

static void
init_tables(void)
{
    POW5[0] = 1;
    for (int k = 1; k <= MAX_E10; k++) {
        POW5[k] = POW5[k - 1] * 5;
        uint64_t d = POW5[k];
        int b = 127 + (64 - __builtin_clzll(d));
        uint64_t words[3] = {0, 0, 0}; /* 2**b, most significant word first */
        words[2 - b / 64] = (uint64_t)1 << (b % 64);
        uint64_t quotient[3];
        u128 rem = 0;
        for (int i = 0; i < 3; i++) {
            u128 cur = (rem << 64) | words[i];
            quotient[i] = (uint64_t)(cur / d);
            rem = cur % d;
        }
        RECIP[k] = (((u128)quotient[1] << 64) | quotient[2]) + 1; /* 5**k never divides */
        RECIP_BITS[k] = b;
    }
}

/* m * 2**exp2 for m in [2**52, 2**53), a normal double: built from its bits. */
static inline double
from_parts(uint64_t m, int exp2)
{
    uint64_t bits = ((uint64_t)(exp2 + 52 + 1023) << 52) | (m & (((uint64_t)1 << 52) - 1));
    double value;
    memcpy(&value, &bits, sizeof(value));
    return value;
}

/* w * 10**e10 (w > 0, |e10| <= MAX_E10), correctly rounded, or 0 when this cannot tell
 * (then the slow path decides). A product by 5**e10 is exact and rounded as it is; a
 * quotient is a product by a reciprocal rounded up, off by less than w (< 2**64) units of
 * the product's last bit: its bits decide unless those below the rounding bit, above the
 * lowest 64, are all zero (the true value may then lie on the other side of a rounding
 * boundary, or on one: an exact value). */
/* p * 2**exp2 (p > 0) rounded to the nearest double, ties to even. */
static inline double
round_exact(u128 p, int exp2)
{
    int n = bit_length(p);
    if (n <= 53) {
        return from_parts((uint64_t)p << (53 - n), exp2 - (53 - n));
    }
    int shift = n - 53;
    uint64_t m = (uint64_t)(p >> shift);
    u128 rem = p & (((u128)1 << shift) - 1), half = (u128)1 << (shift - 1);
    if (rem > half || (rem == half && (m & 1))) {
        m++;
        if (m == (uint64_t)1 << 53) {
            m >>= 1;
            shift++;
        }
    }
    return from_parts(m, exp2 + shift);
}

static inline __attribute__((always_inline)) int
fast_number(uint64_t w, int e10, double *out)
{
    if (e10 >= 0) {
        *out = round_exact((u128)w * POW5[e10], e10);
        return 1;
    }
    int k = -e10;
    u128 r = RECIP[k];
    u128 low = (u128)w * (uint64_t)r, high = (u128)w * (uint64_t)(r >> 64);
    /* the product's upper 128 of 192 bits */
    u128 upper = high + (low >> 64);
    int n = bit_length(upper); /* >= 64: the reciprocal is >= 2**127 */
    int shift = n - 54;
    uint64_t upper_lo = (uint64_t)upper;
    int zeros = upper_lo ? __builtin_ctzll(upper_lo) : 64 + __builtin_ctzll((uint64_t)(upper >> 64));
    if (zeros >= shift) { /* every bit below the rounding bit is zero */
        /* undecided: most often a value double holds exactly (a float32's few bits), which
         * is w / 5**k times 2**-k exactly when 5**k divides w */
        if (w % POW5[k] != 0) {
            return 0;
        }
        *out = round_exact(w / POW5[k], -k);
        return 1;
    }
    uint64_t m54 = (uint64_t)(upper >> shift);
    uint64_t m = (m54 >> 1) + (m54 & 1);
    int exp2 = shift + 64 + 1 - RECIP_BITS[k] - k;
    if (m == (uint64_t)1 << 53) {
        m >>= 1;
        exp2++;
    }
    *out = from_parts(m, exp2);
    return 1;
}
#endif

/* The value of 8 decimal digits held as numbers 0..9 in the bytes of v, the first digit in
 * the lowest byte (fast_float's three multiplications). */
static inline uint64_t
eight_digits_value(uint64_t v)
{
    v = (v * 10) + (v >> 8);
    return (((v & 0x000000FF000000FFULL) * 0x000F424000000064ULL) +
            (((v >> 16) & 0x000000FF000000FFULL) * 0x0000271000000001ULL)) >>
           32;
}

static const uint64_t POW10_U64[9] = {
    1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
};
static const uint64_t LOW_BYTES[8] = {
    0,          0xFFULL,        0xFFFFULL,        0xFFFFFFULL,
    0xFFFFFFFFULL, 0xFFFFFFFFFFULL, 0xFFFFFFFFFFFFULL, 0xFFFFFFFFFFFFFFULL,
};

/* Digits from p: accumulated into *w (meaningful while *count stays <= 19). Eight bytes
 * at a time where the body has them: which of them are digits is read off in one go, so
 * the number's length costs no mispredicted branch per digit. */
static inline cursor
digits(cursor p, cursor end, uint64_t *w, int *count)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (end - p >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        uint64_t x = v ^ 0x3030303030303030ULL; /* a digit becomes 0..9, nothing else does */
        uint64_t other =
            (((x & 0x7F7F7F7F7F7F7F7FULL) + 0x7676767676767676ULL) | x) & 0x8080808080808080ULL;
        if (other == 0) {
            *w = *w * 100000000ULL + eight_digits_value(x);
            *count += 8;
            p += 8;
            continue;
        }
        int n = __builtin_ctzll(other) >> 3; /* digits before the first other byte: 0..7 */
        uint64_t head = ((x & LOW_BYTES[n]) << (8 * (7 - n))) << 8; /* as the last n of 8 */
        *w = *w * POW10_U64[n] + eight_digits_value(head);
        *count += n;
        return p + n;
    }
#endif
    while (p < end && (unsigned)(*p - '0') <= 9) {
        *w = *w * 10 + (uint64_t)(*p - '0');
        *count += 1;
        p++;
    }
    return p;
}

#endif /* RATATOSKR_DECIMAL_H */
