/*
 * sparkcdc.mysql.binlog._rowkernel: binlog row images straight into Arrow column buffers.
 *
 * The compiled half of sparkcdc/mysql/binlog/arrowrows.py (read its docstring first). A Builder is
 * made for one table shape (one TABLE_MAP's columns, all present in every image) and one
 * output layout; add() decodes the row images of one ROWS event into growing Arrow
 * buffers (validity bitmap, int32 offsets, values), plus the change-row metadata (_op,
 * _op_ts, _seq); finish() hands the buffers to Python and starts over.
 *
 * The kernel never guesses. Anything it does not decode exactly as the pure-Python decoder
 * does (bytes past the event's end, invalid UTF-8, an ENUM index without a label, a
 * DECIMAL digit group out of range, a value that does not fit its output type) makes add()
 * return -1 with the builder as it was before the call: the caller then decodes that
 * event in Python, which gives the value or the error message.
 */
#include "_arrowbuf.h"

/* how an image column is read (arrowrows.Read) */
enum {
    R_INT = 1,      /* little-endian integer of `size` bytes; FLAG_SIGNED */
    R_YEAR,         /* 1 byte: 0, else 1900 + byte */
    R_BITS,         /* BIT: big-endian unsigned of `size` bytes */
    R_FLOAT,        /* 4-byte IEEE float */
    R_DOUBLE,       /* 8-byte IEEE double */
    R_DECIMAL,      /* binary DECIMAL of `size` bytes; a = precision, b = scale */
    R_DATE,         /* 3 bytes: year << 9 | month << 5 | day */
    R_DATETIME2,    /* 5 + a bytes big-endian; a = fraction bytes, b = fraction multiplier */
    R_TIMESTAMP2,   /* 4 + a bytes big-endian; a, b as DATETIME2 */
    R_STR,          /* `size`-byte length prefix, then the bytes; FLAG_UTF8; a = pad to */
    R_ENUM,         /* `size`-byte label index (0 = ''); labels */
    R_SKIP_FIXED,   /* `size` bytes not read */
    R_SKIP_VAR,     /* `size`-byte length prefix, then bytes not read */
};
enum { FLAG_SIGNED = 1, FLAG_UTF8 = 2, FLAG_NULLABLE = 4 };

/* the Arrow type of an output column (arrowrows.Out) */
enum {
    O_INT8 = 1, O_INT16, O_INT32, O_INT64, O_BOOL, O_DEC128, O_FLOAT32, O_FLOAT64,
    O_DATE32, O_TS, O_UTF8, O_BINARY,
};
enum { KIND_INSERT = 0, KIND_UPDATE = 1, KIND_DELETE = 2 };

#define SEQ_MAX_ROW 4095
#define MAX_OFFSET 2147483647LL

typedef struct {
    int read, size, flags, out;
    long long a, b;
    PyObject *labels; /* tuple of bytes (ENUM), owned */
} Spec;

typedef struct {
    int kind, precision;
    Buf data, offsets, valid;
    Py_ssize_t nulls;
} Out;

typedef struct {
    PyObject_HEAD
    Spec *specs;
    int nspecs;
    Out *outs; /* the columns, then _op, _op_ts, _seq */
    int nouts;
    Py_ssize_t rows;
} Builder;

/* ------------------------------------------------------------------ values */

static const long long POW10[19] = {
    1LL, 10LL, 100LL, 1000LL, 10000LL, 100000LL, 1000000LL, 10000000LL, 100000000LL,
    1000000000LL, 10000000000LL, 100000000000LL, 1000000000000LL, 10000000000000LL,
    100000000000000LL, 1000000000000000LL, 10000000000000000LL, 100000000000000000LL,
    1000000000000000000LL,
};
static const int LEFTOVER_BYTES[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};

static __int128 pow10_128(int n) {
    __int128 v = 1;
    while (n-- > 0) v *= 10;
    return v;
}

static uint64_t read_be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

static uint64_t read_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int is_leap(long long y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

static int days_in_month(long long y, long long m) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* whether Python's datetime.date(y, m, d) accepts it (else the decoder gives NULL) */
static int valid_date(long long y, long long m, long long d) {
    return y >= 1 && y <= 9999 && m >= 1 && m <= 12 && d >= 1 && d <= days_in_month(y, m);
}

/* days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil) */
static long long days_from_civil(long long y, long long m, long long d) {
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    long long yoe = y - era * 400;
    long long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* binary DECIMAL (MySQL strings/decimal.cc decimal2bin) into its unscaled integer; with
 * out NULL only judged (every digit group in range), which any precision allows: a value of
 * more than 38 digits does not fit the __int128 it would be summed in */
static int decode_decimal(const uint8_t *src, int size, int precision, int scale,
                          __int128 *out) {
    uint8_t raw[64];
    if (size > (int)sizeof raw || (out && precision > 38)) return -1;
    memcpy(raw, src, (size_t)size);
    int negative = !(raw[0] & 0x80);
    if (negative)
        for (int i = 0; i < size; i++) raw[i] = (uint8_t)~raw[i];
    raw[0] ^= 0x80;
    int intg = precision - scale;
    int int_left = intg % 9, int_groups = intg / 9;
    int frac_groups = scale / 9, frac_left = scale % 9;
    int pos = 0;
    __int128 ival = 0, fval = 0;
    if (int_left) {
        int n = LEFTOVER_BYTES[int_left];
        uint64_t g = read_be(raw, n);
        if (g >= (uint64_t)POW10[int_left]) return -1;
        ival = g;
        pos += n;
    }
    for (int i = 0; i < int_groups; i++, pos += 4) {
        uint64_t g = read_be(raw + pos, 4);
        if (g >= 1000000000u) return -1;
        if (out) ival = ival * 1000000000 + g;
    }
    for (int i = 0; i < frac_groups; i++, pos += 4) {
        uint64_t g = read_be(raw + pos, 4);
        if (g >= 1000000000u) return -1;
        if (out) fval = fval * 1000000000 + g;
    }
    if (frac_left) {
        int n = LEFTOVER_BYTES[frac_left];
        uint64_t g = read_be(raw + pos, n);
        if (g >= (uint64_t)POW10[frac_left]) return -1;
        if (out) fval = fval * POW10[frac_left] + g;
        pos += n;
    }
    if (pos != size) return -1;
    if (!out) return 0;
    __int128 v = ival * pow10_128(scale) + fval;
    *out = negative ? -v : v;
    return 0;
}

/* Python's strict UTF-8 (what bytes.decode('utf-8') accepts without a replacement) */
static int valid_utf8(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F; /* no surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            return 0;
        }
        if (i + len > n) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (int k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
        i += len;
    }
    return 1;
}

/* ------------------------------------------------------------------ outputs */

static int out_null(Out *o, Py_ssize_t row) {
    if (bit_put(&o->valid, row, 0) < 0) return -1;
    o->nulls++;
    switch (o->kind) {
    case O_INT8: { int8_t z = 0; return buf_put(&o->data, &z, 1); }
    case O_INT16: { int16_t z = 0; return buf_put(&o->data, &z, 2); }
    case O_INT32: case O_DATE32: case O_FLOAT32: { int32_t z = 0; return buf_put(&o->data, &z, 4); }
    case O_INT64: case O_TS: case O_FLOAT64: { int64_t z = 0; return buf_put(&o->data, &z, 8); }
    case O_DEC128: { char z[16] = {0}; return buf_put(&o->data, z, 16); }
    case O_BOOL: return bit_put(&o->data, row, 0);
    case O_UTF8: case O_BINARY: {
        int32_t last;
        memcpy(&last, o->offsets.p + o->offsets.len - 4, 4);
        return buf_put(&o->offsets, &last, 4);
    }
    }
    return -1;
}

/* an integer (signed unless `is_unsigned`) into an integer, BOOLEAN or DECIMAL output */
static int out_int(Out *o, Py_ssize_t row, int64_t v, int is_unsigned) {
    if (bit_put(&o->valid, row, 1) < 0) return -1;
    uint64_t u = (uint64_t)v;
    switch (o->kind) {
    case O_INT8:
        if (is_unsigned ? u > 127 : (v < -128 || v > 127)) return -1;
        { int8_t x = (int8_t)v; return buf_put(&o->data, &x, 1); }
    case O_INT16:
        if (is_unsigned ? u > 32767 : (v < -32768 || v > 32767)) return -1;
        { int16_t x = (int16_t)v; return buf_put(&o->data, &x, 2); }
    case O_INT32:
        if (is_unsigned ? u > 2147483647ULL : (v < INT32_MIN || v > INT32_MAX)) return -1;
        { int32_t x = (int32_t)v; return buf_put(&o->data, &x, 4); }
    case O_INT64:
        if (is_unsigned && u > (uint64_t)INT64_MAX) return -1;
        return buf_put(&o->data, &v, 8);
    case O_BOOL:
        return bit_put(&o->data, row, v != 0);
    case O_DEC128: {
        __int128 x = is_unsigned ? (__int128)u : (__int128)v;
        __int128 limit = pow10_128(o->precision);
        if (x >= limit || -x >= limit) return -1;
        return buf_put(&o->data, &x, 16);
    }
    }
    return -1;
}

static int out_bytes(Out *o, Py_ssize_t row, const uint8_t *p, Py_ssize_t n, Py_ssize_t pad) {
    Py_ssize_t width = n < pad ? pad : n;
    if (o->data.len + width > MAX_OFFSET) return -1; /* the caller flushes and retries */
    if (bit_put(&o->valid, row, 1) < 0 || buf_put(&o->data, p, n) < 0) return -1;
    if (width > n) {
        if (buf_reserve(&o->data, width - n) < 0) return -1;
        memset(o->data.p + o->data.len, 0, (size_t)(width - n));
        o->data.len += width - n;
    }
    int32_t end = (int32_t)o->data.len;
    return buf_put(&o->offsets, &end, 4);
}

static int out_fixed(Out *o, Py_ssize_t row, const void *p, Py_ssize_t n) {
    if (bit_put(&o->valid, row, 1) < 0) return -1;
    return buf_put(&o->data, p, n);
}

/* ------------------------------------------------------------------ decoding */

#define NEED(n)                              \
    do {                                     \
        if ((n) < 0 || pos + (n) > end) return -1; \
    } while (0)

/* one value of `s` at buf[pos]; into `o` unless o is NULL (the column is not wanted) */
static int decode_value(const Spec *s, Out *o, Py_ssize_t row, const uint8_t *buf,
                        Py_ssize_t *ppos, Py_ssize_t end) {
    Py_ssize_t pos = *ppos;
    int size = s->size;
    switch (s->read) {
    case R_INT: {
        NEED(size);
        uint64_t u = read_le(buf + pos, size);
        int64_t v;
        int is_unsigned = !(s->flags & FLAG_SIGNED);
        if (!is_unsigned && size < 8 && (u >> (8 * size - 1)) & 1)
            v = (int64_t)(u | (~0ULL << (8 * size)));
        else
            v = (int64_t)u;
        *ppos = pos + size;
        return o ? out_int(o, row, v, is_unsigned) : 0;
    }
    case R_YEAR: {
        NEED(1);
        int64_t v = buf[pos] ? buf[pos] + 1900 : 0;
        *ppos = pos + 1;
        return o ? out_int(o, row, v, 0) : 0;
    }
    case R_BITS: {
        NEED(size);
        uint64_t u = read_be(buf + pos, size);
        *ppos = pos + size;
        return o ? out_int(o, row, (int64_t)u, 1) : 0;
    }
    case R_FLOAT:
    case R_DOUBLE: {
        NEED(size);
        *ppos = pos + size;
        return o ? out_fixed(o, row, buf + pos, size) : 0;
    }
    case R_DECIMAL: {
        NEED(size);
        *ppos = pos + size;
        __int128 v; /* judged even when not wanted: an event is read whole or refused */
        if (decode_decimal(buf + pos, size, (int)s->a, (int)s->b, o ? &v : NULL) < 0) return -1;
        if (!o) return 0;
        __int128 limit = pow10_128(o->precision);
        if (v >= limit || -v >= limit) return -1;
        return out_fixed(o, row, &v, 16);
    }
    case R_DATE: {
        NEED(3);
        long long v = (long long)read_le(buf + pos, 3);
        *ppos = pos + 3;
        if (!o) return 0;
        long long y = v >> 9, m = (v >> 5) & 0xF, d = v & 0x1F;
        if (!valid_date(y, m, d)) return out_null(o, row);
        int32_t days = (int32_t)days_from_civil(y, m, d);
        return out_fixed(o, row, &days, 4);
    }
    case R_DATETIME2: {
        int fbytes = (int)s->a;
        NEED(5 + fbytes);
        uint64_t ip_raw = read_be(buf + pos, 5);
        long long us = (long long)read_be(buf + pos + 5, fbytes) * s->b;
        *ppos = pos + 5 + fbytes;
        if (!o) return 0;
        long long ip = (long long)ip_raw - 0x8000000000LL;
        if (ip < 0) return out_null(o, row);
        long long ymd = ip >> 17, ym = ymd >> 5;
        long long y = ym / 13, m = ym % 13, d = ymd & 0x1F;
        long long hms = ip & 0x1FFFF;
        long long hh = hms >> 12, mi = (hms >> 6) & 0x3F, ss = hms & 0x3F;
        if (!valid_date(y, m, d) || hh > 23 || mi > 59 || ss > 59 || us > 999999)
            return out_null(o, row);
        int64_t t = ((days_from_civil(y, m, d) * 24 + hh) * 60 + mi) * 60 + ss;
        t = t * 1000000 + us;
        return out_fixed(o, row, &t, 8);
    }
    case R_TIMESTAMP2: {
        int fbytes = (int)s->a;
        NEED(4 + fbytes);
        long long secs = (long long)read_be(buf + pos, 4);
        long long us = (long long)read_be(buf + pos + 4, fbytes) * s->b;
        *ppos = pos + 4 + fbytes;
        if (!o) return 0;
        if (!secs && !us) return out_null(o, row);
        int64_t t = secs * 1000000 + us;
        return out_fixed(o, row, &t, 8);
    }
    case R_STR:
    case R_SKIP_VAR: {
        NEED(size);
        Py_ssize_t n = (Py_ssize_t)read_le(buf + pos, size);
        pos += size;
        NEED(n);
        *ppos = pos + n;
        if (!o) return 0;
        if ((s->flags & FLAG_UTF8) && !valid_utf8(buf + pos, n)) return -1;
        return out_bytes(o, row, buf + pos, n, (Py_ssize_t)s->a);
    }
    case R_ENUM: {
        NEED(size);
        Py_ssize_t index = (Py_ssize_t)read_le(buf + pos, size);
        *ppos = pos + size;
        /* an index without a label is refused even when not wanted, as Python refuses it */
        if (index > PyTuple_GET_SIZE(s->labels)) return -1;
        if (!o) return 0;
        if (index == 0) return out_bytes(o, row, (const uint8_t *)"", 0, 0);
        PyObject *label = PyTuple_GET_ITEM(s->labels, index - 1);
        return out_bytes(o, row, (const uint8_t *)PyBytes_AS_STRING(label),
                         PyBytes_GET_SIZE(label), 0);
    }
    case R_SKIP_FIXED:
        NEED(size);
        *ppos = pos + size;
        return 0;
    }
    return -1;
}

static int put_meta(Builder *b, Py_ssize_t row, const char *op, int64_t ts, int64_t seq) {
    Out *o = &b->outs[b->nouts - 3];
    if (out_bytes(o, row, (const uint8_t *)op, 2, 0) < 0) return -1;
    if (out_fixed(&b->outs[b->nouts - 2], row, &ts, 8) < 0) return -1;
    return out_fixed(&b->outs[b->nouts - 1], row, &seq, 8);
}

static int decode_image(Builder *b, const uint8_t *buf, Py_ssize_t *ppos, Py_ssize_t end) {
    Py_ssize_t pos = *ppos;
    Py_ssize_t nb_bytes = (b->nspecs + 7) / 8;
    NEED(nb_bytes);
    const uint8_t *nb = buf + pos;
    pos += nb_bytes;
    Py_ssize_t row = b->rows;
    for (int i = 0; i < b->nspecs; i++) {
        const Spec *s = &b->specs[i];
        Out *o = s->out >= 0 ? &b->outs[s->out] : NULL;
        if ((s->flags & FLAG_NULLABLE) && (nb[i / 8] >> (i % 8)) & 1) {
            if (o && out_null(o, row) < 0) return -1;
            continue;
        }
        if (decode_value(s, o, row, buf, &pos, end) < 0) return -1;
    }
    *ppos = pos;
    return 0;
}

/* ------------------------------------------------------------------ the type */

typedef struct {
    Py_ssize_t data, offsets, nulls;
} Mark;

static int valid_spec(const Spec *s) {
    switch (s->read) {
    case R_INT: return s->size == 1 || s->size == 2 || s->size == 3 || s->size == 4 || s->size == 8;
    case R_YEAR: return s->size == 1;
    case R_BITS: return s->size >= 1 && s->size <= 8;
    case R_FLOAT: return s->size == 4;
    case R_DOUBLE: return s->size == 8;
    case R_DECIMAL: return s->size >= 1 && s->size <= 64 && s->a >= 1 && s->a <= 65 && s->b >= 0 && s->b <= s->a;
    case R_DATE: return s->size == 3;
    case R_DATETIME2: case R_TIMESTAMP2: return s->a >= 0 && s->a <= 3 && s->b >= 0 && s->b <= 10000;
    case R_STR: case R_SKIP_VAR: return s->size >= 1 && s->size <= 4 && s->a >= 0;
    case R_ENUM: return s->size == 1 || s->size == 2;
    case R_SKIP_FIXED: return s->size >= 0 && s->size <= 64;
    }
    return 0;
}

/* whether values read as `s` may go into an output of `kind` */
static int fits(const Spec *s, int kind) {
    switch (s->read) {
    case R_INT: case R_YEAR: case R_BITS:
        return kind == O_INT8 || kind == O_INT16 || kind == O_INT32 || kind == O_INT64 ||
               kind == O_BOOL || kind == O_DEC128;
    case R_FLOAT: return kind == O_FLOAT32;
    case R_DOUBLE: return kind == O_FLOAT64;
    case R_DECIMAL: return kind == O_DEC128;
    case R_DATE: return kind == O_DATE32;
    case R_DATETIME2: case R_TIMESTAMP2: return kind == O_TS;
    case R_STR: return kind == (s->flags & FLAG_UTF8 ? O_UTF8 : O_BINARY);
    case R_ENUM: return kind == O_UTF8;
    }
    return 0;
}

static void builder_clear(Builder *b) {
    for (int i = 0; i < b->nouts; i++) {
        Out *o = &b->outs[i];
        o->data.len = o->valid.len = 0;
        o->nulls = 0;
        o->offsets.len = 0;
        if (o->kind == O_UTF8 || o->kind == O_BINARY) {
            int32_t zero = 0;
            buf_put(&o->offsets, &zero, 4); /* reserved at init: cannot fail */
        }
    }
    b->rows = 0;
}

static void builder_dealloc(Builder *b) {
    for (int i = 0; i < b->nspecs; i++) Py_XDECREF(b->specs[i].labels);
    for (int i = 0; i < b->nouts; i++) {
        PyMem_Free(b->outs[i].data.p);
        PyMem_Free(b->outs[i].offsets.p);
        PyMem_Free(b->outs[i].valid.p);
    }
    PyMem_Free(b->specs);
    PyMem_Free(b->outs);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static int builder_init(Builder *b, PyObject *args, PyObject *kwds) {
    PyObject *specs, *outs;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &specs, &PyTuple_Type, &outs))
        return -1;
    if (b->specs) {
        PyErr_SetString(PyExc_TypeError, "Builder is initialised once");
        return -1;
    }
    Py_ssize_t nspecs = PyTuple_GET_SIZE(specs), nouts = PyTuple_GET_SIZE(outs);
    b->specs = PyMem_Calloc((size_t)nspecs + 1, sizeof(Spec));
    b->outs = PyMem_Calloc((size_t)nouts + 3, sizeof(Out));
    if (!b->specs || !b->outs) {
        PyErr_NoMemory();
        return -1;
    }
    b->nspecs = (int)nspecs;
    for (Py_ssize_t i = 0; i < nspecs; i++) {
        Spec *s = &b->specs[i];
        PyObject *labels = Py_None;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(specs, i), "iiiiLLO", &s->read, &s->size,
                              &s->flags, &s->out, &s->a, &s->b, &labels))
            return -1;
        if (s->out >= nouts || !valid_spec(s)) {
            PyErr_Format(PyExc_ValueError, "image column %zd: bad spec", i);
            return -1;
        }
        if (s->read == R_ENUM) {
            if (!PyTuple_Check(labels)) {
                PyErr_Format(PyExc_ValueError, "image column %zd: ENUM without labels", i);
                return -1;
            }
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(labels); k++)
                if (!PyBytes_Check(PyTuple_GET_ITEM(labels, k))) {
                    PyErr_SetString(PyExc_TypeError, "ENUM labels are UTF-8 bytes");
                    return -1;
                }
            Py_INCREF(labels);
            s->labels = labels;
        }
    }
    b->nouts = (int)nouts + 3;
    for (Py_ssize_t i = 0; i < nouts; i++) {
        Out *o = &b->outs[i];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(outs, i), "ii", &o->kind, &o->precision))
            return -1;
        if (o->kind < O_INT8 || o->kind > O_BINARY || o->precision < 0 || o->precision > 38) {
            PyErr_Format(PyExc_ValueError, "output %zd: bad kind", i);
            return -1;
        }
    }
    for (int i = 0; i < b->nspecs; i++) {
        const Spec *s = &b->specs[i];
        if (s->out >= 0 && !fits(s, b->outs[s->out].kind)) {
            PyErr_Format(PyExc_ValueError, "image column %d cannot go into output %d", i, s->out);
            return -1;
        }
    }
    b->outs[nouts].kind = O_UTF8;
    b->outs[nouts + 1].kind = O_INT64;
    b->outs[nouts + 2].kind = O_INT64;
    for (int i = 0; i < b->nouts; i++)
        if (buf_reserve(&b->outs[i].offsets, 4) < 0) return -1;
    builder_clear(b);
    return 0;
}

/* add(data, pos, end, kind, ts_us, seq_base, first_row, shared_seq) -> images, or -1 */
static PyObject *builder_add(Builder *b, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end;
    int kind, shared;
    long long ts, seq_base, first_row;
    if (!PyArg_ParseTuple(args, "y*nniLLLp", &view, &pos, &end, &kind, &ts, &seq_base,
                          &first_row, &shared))
        return NULL;
    if (pos < 0 || end > view.len || pos > end || kind < KIND_INSERT || kind > KIND_DELETE) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "add: bad range or kind");
        return NULL;
    }
    if (b->nspecs == 0) { /* images of no column take no bytes: the rows would never end */
        PyBuffer_Release(&view);
        return PyLong_FromLong(-1);
    }
    const uint8_t *buf = view.buf;
    Mark *marks = PyMem_Malloc(sizeof(Mark) * (size_t)b->nouts);
    if (!marks) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    for (int i = 0; i < b->nouts; i++)
        marks[i] = (Mark){b->outs[i].data.len, b->outs[i].offsets.len, b->outs[i].nulls};
    Py_ssize_t start_rows = b->rows;
    long long images = 0, row_index = first_row;
    int failed = 0;
    static const char *OPS[3][2] = {{"+I", "+I"}, {"-U", "+U"}, {"-D", "-D"}};
    while (pos < end) {
        int halves = kind == KIND_UPDATE ? 2 : 1;
        for (int h = 0; h < halves; h++) {
            if (decode_image(b, buf, &pos, end) < 0) {
                failed = 1;
                break;
            }
            long long r = shared ? row_index : first_row + images;
            int64_t seq = seq_base + (r < SEQ_MAX_ROW ? r : SEQ_MAX_ROW);
            if (put_meta(b, b->rows, OPS[kind][h], ts, seq) < 0) {
                failed = 1;
                break;
            }
            b->rows++;
            images++;
        }
        if (failed) break;
        row_index++;
    }
    PyBuffer_Release(&view);
    if (failed || PyErr_Occurred()) {
        for (int i = 0; i < b->nouts; i++) {
            b->outs[i].data.len = marks[i].data;
            b->outs[i].offsets.len = marks[i].offsets;
            b->outs[i].nulls = marks[i].nulls;
        }
        b->rows = start_rows;
        PyMem_Free(marks);
        if (PyErr_Occurred()) return NULL; /* out of memory */
        return PyLong_FromLong(-1);
    }
    PyMem_Free(marks);
    return PyLong_FromLongLong(images);
}

/* finish() -> (rows, [(null_count, validity | None, offsets | None, values)] ...) */
static PyObject *builder_finish(Builder *b, PyObject *unused) {
    Py_ssize_t rows = b->rows;
    PyObject *columns = PyList_New(b->nouts);
    if (!columns) return NULL;
    for (int i = 0; i < b->nouts; i++) {
        Out *o = &b->outs[i];
        PyObject *valid, *offsets, *data, *item;
        if (o->nulls) {
            valid = bytes_of(&o->valid, (rows + 7) / 8);
        } else {
            valid = Py_None;
            Py_INCREF(valid);
        }
        if (o->kind == O_UTF8 || o->kind == O_BINARY) {
            offsets = bytes_of(&o->offsets, o->offsets.len);
        } else {
            offsets = Py_None;
            Py_INCREF(offsets);
        }
        data = o->kind == O_BOOL ? bytes_of(&o->data, (rows + 7) / 8) : bytes_of(&o->data, o->data.len);
        if (o->kind == O_BOOL && o->data.len < (rows + 7) / 8) {
            Py_XDECREF(data);
            PyErr_SetString(PyExc_SystemError, "boolean buffer shorter than its rows");
            data = NULL;
        }
        if (!valid || !offsets || !data) {
            Py_XDECREF(valid);
            Py_XDECREF(offsets);
            Py_XDECREF(data);
            Py_DECREF(columns);
            return NULL;
        }
        item = Py_BuildValue("(nNNN)", o->nulls, valid, offsets, data);
        if (!item) {
            Py_DECREF(columns);
            return NULL;
        }
        PyList_SET_ITEM(columns, i, item);
    }
    builder_clear(b);
    return Py_BuildValue("(nN)", rows, columns);
}

static PyObject *builder_rows(Builder *b, void *closure) { return PyLong_FromSsize_t(b->rows); }

static PyMethodDef builder_methods[] = {
    {"add", (PyCFunction)builder_add, METH_VARARGS,
     "add(data, pos, end, kind, ts_us, seq_base, first_row, shared_seq) -> images or -1"},
    {"finish", (PyCFunction)builder_finish, METH_NOARGS,
     "finish() -> (rows, [(null_count, validity, offsets, values)]) and start over"},
    {NULL},
};

static PyGetSetDef builder_getset[] = {
    {"rows", (getter)builder_rows, NULL, "images added since the last finish()", NULL},
    {NULL},
};

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sparkcdc.mysql.binlog._rowkernel.Builder",
    .tp_basicsize = sizeof(Builder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Row images of one table shape into Arrow buffers (see arrowrows.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)builder_init,
    .tp_dealloc = (destructor)builder_dealloc,
    .tp_methods = builder_methods,
    .tp_getset = builder_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rowkernel",
    "Binlog row images into Arrow buffers (compiled; sparkcdc.mysql.binlog.arrowrows uses it).", -1,
    NULL,
};

PyMODINIT_FUNC PyInit__rowkernel(void) {
    if (PyType_Ready(&BuilderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&BuilderType);
    if (PyModule_AddObject(m, "Builder", (PyObject *)&BuilderType) < 0) {
        Py_DECREF(&BuilderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
