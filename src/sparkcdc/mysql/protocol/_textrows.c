/*
 * sparkcdc.mysql.protocol._textrows: the rows of a text-protocol result set straight into Arrow
 * buffers, one variable-length binary column per result column.
 *
 * The compiled half of sparkcdc/mysql/chunks/textrows.py (read its docstring first). A Splitter
 * is made for one result set of `ncols` columns; feed() takes the bytes read from the
 * connection after the column definitions, frames them into packets (3-byte little-endian
 * payload length, 1-byte sequence id; a payload of 0xFFFFFF bytes continues in the next
 * packet) and appends each row's values (length-encoded strings, 0xFB for NULL) to the
 * column buffers: validity bitmap, int64 offsets, bytes. finish() hands the buffers to Python
 * and starts over. Python casts each column to its type.
 *
 * Layouts:
 *   packets   https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_packets.html
 *   rows      https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_com_query_response_text_resultset_row.html
 *   EOF / ERR https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_response_packets.html
 *
 * Nothing is guessed: a sequence id out of order, a value running past its row, a row with
 * bytes left over, or a length prefix 0xFF raise ValueError, and the caller drops the
 * connection.
 */
#include "_arrowbuf.h"

#define HEADER 4
#define MAX_PAYLOAD 0xFFFFFF
#define NULL_VALUE 0xFB
#define LENENC_2 0xFC
#define LENENC_3 0xFD
#define LENENC_8 0xFE
#define EOF_HEADER 0xFE /* with a payload shorter than 9 bytes: the end of the rows */
#define ERR_HEADER 0xFF

/* what feed() found at the end of what it consumed */
enum { MORE = 0, END = 1, ERROR = 2 };

static void buf_free(Buf *b) {
    PyMem_Free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

typedef struct {
    Buf data, offsets, valid;
    Py_ssize_t nulls;
} Column;

typedef struct {
    PyObject_HEAD
    Column *cols;
    int ncols;
    Py_ssize_t rows;
    int seq;     /* the sequence id the next packet must carry */
    Buf payload; /* a payload spread over several packets, joined */
} Splitter;

static int column_start(Column *c) {
    int64_t zero = 0;
    c->data.len = c->offsets.len = c->valid.len = 0;
    c->nulls = 0;
    return buf_put(&c->offsets, &zero, sizeof zero);
}

static void splitter_clear(Splitter *s) {
    for (int i = 0; i < s->ncols; i++) {
        buf_free(&s->cols[i].data);
        buf_free(&s->cols[i].offsets);
        buf_free(&s->cols[i].valid);
    }
    PyMem_Free(s->cols);
    s->cols = NULL;
    s->ncols = 0;
    buf_free(&s->payload);
}

static void splitter_dealloc(Splitter *s) {
    splitter_clear(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* Splitter(ncols, seq): seq is the sequence id of the first row packet */
static int splitter_init(Splitter *s, PyObject *args, PyObject *kwds) {
    int ncols, seq;
    if (!PyArg_ParseTuple(args, "ii", &ncols, &seq)) return -1;
    if (ncols <= 0 || seq < 0 || seq > 255) {
        PyErr_SetString(PyExc_ValueError, "Splitter needs ncols > 0 and a sequence id 0..255");
        return -1;
    }
    splitter_clear(s);
    s->cols = PyMem_Calloc((size_t)ncols, sizeof(Column));
    if (!s->cols) {
        PyErr_NoMemory();
        return -1;
    }
    s->ncols = ncols;
    for (int i = 0; i < ncols; i++)
        if (column_start(&s->cols[i]) < 0) return -1;
    s->rows = 0;
    s->seq = seq;
    return 0;
}

static int malformed(const char *what) {
    PyErr_Format(PyExc_ValueError, "malformed text result row: %s", what);
    return -1;
}

/* one row payload into the columns; on error the columns may hold part of it (the caller
 * drops the result set and its connection) */
static int add_row(Splitter *s, const uint8_t *p, Py_ssize_t len) {
    Py_ssize_t at = 0, row = s->rows;
    for (int i = 0; i < s->ncols; i++) {
        Column *c = &s->cols[i];
        if (at >= len) return malformed("fewer values than columns");
        uint8_t first = p[at++];
        uint64_t n;
        if (first == NULL_VALUE) {
            c->nulls++;
            if (bit_put(&c->valid, row, 0) < 0) return -1;
        } else {
            if (first < NULL_VALUE) {
                n = first;
            } else {
                int width = first == LENENC_2 ? 2 : first == LENENC_3 ? 3 : first == LENENC_8 ? 8 : 0;
                if (!width) return malformed("length prefix 0xFF");
                if (len - at < width) return malformed("length prefix past the row's end");
                n = 0;
                for (int k = width - 1; k >= 0; k--) n = n << 8 | p[at + k];
                at += width;
            }
            if (n > (uint64_t)(len - at)) return malformed("value past the row's end");
            if (buf_put(&c->data, p + at, (Py_ssize_t)n) < 0) return -1;
            at += (Py_ssize_t)n;
            if (bit_put(&c->valid, row, 1) < 0) return -1;
        }
        int64_t end = (int64_t)c->data.len;
        if (buf_put(&c->offsets, &end, sizeof end) < 0) return -1;
    }
    if (at != len) return malformed("bytes left after the last value");
    s->rows++;
    return 0;
}

/* feed(data, pos) -> (pos, state): frames and adds the complete rows of data[pos:]; returns
 * where it stopped and why: MORE (bytes of an incomplete packet from there on), END (just
 * after the EOF packet that ends the rows), ERROR (at the start of an ERR packet's payload,
 * which runs to the returned end: (pos, ERROR, end)). */
static PyObject *splitter_feed(Splitter *s, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    if (!PyArg_ParseTuple(args, "y*n", &view, &pos)) return NULL;
    const uint8_t *d = view.buf;
    Py_ssize_t size = view.len;
    PyObject *result = NULL;
    if (pos < 0 || pos > size) {
        PyErr_SetString(PyExc_ValueError, "feed: position outside the data");
        goto done;
    }
    for (;;) {
        /* one payload: its packets must all be here */
        Py_ssize_t at = pos, total = 0;
        int packets = 0, seq = s->seq, complete = 0;
        for (;;) {
            if (size - at < HEADER) break;
            Py_ssize_t n = d[at] | d[at + 1] << 8 | d[at + 2] << 16;
            if (d[at + 3] != seq) {
                PyErr_Format(PyExc_ValueError,
                             "packet sequence id %d where %d was due: the connection is out of "
                             "step", d[at + 3], seq);
                goto done;
            }
            if (size - at - HEADER < n) break;
            seq = (seq + 1) & 0xFF;
            packets++;
            total += n;
            at += HEADER + n;
            if (n < MAX_PAYLOAD) {
                complete = 1;
                break;
            }
        }
        if (!complete) {
            result = Py_BuildValue("(ni)", pos, MORE);
            goto done;
        }
        const uint8_t *payload = d + pos + HEADER;
        if (packets > 1) { /* join the parts */
            s->payload.len = 0;
            Py_ssize_t q = pos;
            for (int k = 0; k < packets; k++) {
                Py_ssize_t n = d[q] | d[q + 1] << 8 | d[q + 2] << 16;
                if (buf_put(&s->payload, d + q + HEADER, n) < 0) goto done;
                q += HEADER + n;
            }
            payload = (const uint8_t *)s->payload.p;
        }
        s->seq = seq;
        if (total > 0 && payload[0] == ERR_HEADER) {
            result = Py_BuildValue("(nin)", pos + HEADER, ERROR, pos + HEADER + total);
            goto done;
        }
        if (total > 0 && total < 9 && payload[0] == EOF_HEADER) {
            result = Py_BuildValue("(ni)", at, END);
            goto done;
        }
        if (add_row(s, payload, total) < 0) goto done;
        pos = at;
    }
done:
    PyBuffer_Release(&view);
    return result;
}

/* finish() -> (rows, [(null_count, validity | None, offsets, values)]) */
static PyObject *splitter_finish(Splitter *s, PyObject *unused) {
    Py_ssize_t rows = s->rows;
    PyObject *columns = PyList_New(s->ncols);
    if (!columns) return NULL;
    for (int i = 0; i < s->ncols; i++) {
        Column *c = &s->cols[i];
        PyObject *valid;
        if (c->nulls) { /* every row set its bit: the bitmap is (rows + 7) / 8 bytes */
            valid = bytes_of(&c->valid, (rows + 7) / 8);
        } else {
            valid = Py_None;
            Py_INCREF(valid);
        }
        PyObject *offsets = bytes_of(&c->offsets, c->offsets.len);
        PyObject *data = bytes_of(&c->data, c->data.len);
        PyObject *item = NULL;
        if (valid && offsets && data) item = Py_BuildValue("(nNNN)", c->nulls, valid, offsets, data);
        else {
            Py_XDECREF(valid);
            Py_XDECREF(offsets);
            Py_XDECREF(data);
        }
        if (!item || column_start(c) < 0) {
            Py_XDECREF(item);
            Py_DECREF(columns);
            return NULL;
        }
        PyList_SET_ITEM(columns, i, item);
    }
    s->rows = 0;
    return Py_BuildValue("(nN)", rows, columns);
}

static PyObject *splitter_rows(Splitter *s, void *closure) { return PyLong_FromSsize_t(s->rows); }

static PyObject *splitter_buffered(Splitter *s, void *closure) {
    Py_ssize_t n = 0;
    for (int i = 0; i < s->ncols; i++) n += s->cols[i].data.len;
    return PyLong_FromSsize_t(n);
}

static PyMethodDef splitter_methods[] = {
    {"feed", (PyCFunction)splitter_feed, METH_VARARGS,
     "feed(data, pos) -> (pos, state[, end]): add the complete rows of data[pos:]"},
    {"finish", (PyCFunction)splitter_finish, METH_NOARGS,
     "finish() -> (rows, [(null_count, validity, offsets, values)]) and start over"},
    {NULL},
};

static PyGetSetDef splitter_getset[] = {
    {"rows", (getter)splitter_rows, NULL, "rows added since the last finish()", NULL},
    {"buffered", (getter)splitter_buffered, NULL, "value bytes held since the last finish()",
     NULL},
    {NULL},
};

static PyTypeObject SplitterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sparkcdc.mysql.protocol._textrows.Splitter",
    .tp_basicsize = sizeof(Splitter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Text-protocol result rows into Arrow binary columns (see mysql/chunks/textrows.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)splitter_init,
    .tp_dealloc = (destructor)splitter_dealloc,
    .tp_methods = splitter_methods,
    .tp_getset = splitter_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_textrows",
    "Text-protocol result rows into Arrow buffers (compiled; sparkcdc.mysql.chunks.textrows uses it).",
    -1, NULL,
};

PyMODINIT_FUNC PyInit__textrows(void) {
    if (PyType_Ready(&SplitterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&SplitterType);
    if (PyModule_AddObject(m, "Splitter", (PyObject *)&SplitterType) < 0) {
        Py_DECREF(&SplitterType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "MORE", MORE);
    PyModule_AddIntConstant(m, "END", END);
    PyModule_AddIntConstant(m, "ERROR", ERROR);
    return m;
}
