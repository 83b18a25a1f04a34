/*
 * Growing byte buffers for Arrow arrays built in C: the values, offsets and validity
 * bitmaps of sparkcdc.mysql.binlog._rowkernel (binlog row images) and
 * sparkcdc.mysql.protocol._textrows (text result rows). Included by both (setup.py puts this
 * directory on their include path); every function is static to its extension.
 */
#ifndef SPARKCDC_ARROWBUF_H
#define SPARKCDC_ARROWBUF_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) cap *= 2;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (n == 0) return 0; /* memcpy into a buffer not allocated yet is undefined */
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->p + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

/* bit `index` of a bitmap buffer grown as rows are added */
static int bit_put(Buf *b, Py_ssize_t index, int value) {
    Py_ssize_t need = index / 8 + 1;
    if (need > b->len) {
        if (buf_reserve(b, need - b->len) < 0) return -1;
        memset(b->p + b->len, 0, (size_t)(need - b->len));
        b->len = need;
    }
    uint8_t mask = (uint8_t)(1u << (index % 8));
    if (value)
        b->p[index / 8] |= mask;
    else
        b->p[index / 8] &= (uint8_t)~mask;
    return 0;
}

/* the first n bytes of a buffer as a bytes object (n may be past len only for bitmaps
 * the caller knows are that long) */
static PyObject *bytes_of(const Buf *b, Py_ssize_t n) {
    return PyBytes_FromStringAndSize(b->p ? b->p : "", n);
}

#endif
