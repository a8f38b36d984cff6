/* The fast lane: the common packet of a capture, taken from record to stream in C.
 *
 * Most packets of a Kafka capture are the next in-order segment of a connection already followed,
 * or a pure acknowledgement. For those the pure Python stages (capture.py -> packets.py -> tcp.py
 * -> frames.py) do a fixed, small amount of work; this module does the same work on the same
 * objects, reading and writing their slots directly (and the int fields of HalfStream's and Framer's
 * C bases, HalfCore and FramerCore, below), and hands every other packet back untouched.
 *
 * Lane.run(buf, pos, number, offset, linktype, ns_per_tick, big_endian, record_limit, until_ts,
 *          late_from, late_budget, until)
 * walks classic pcap records in buf from pos and, for each, either
 *   - takes it: the packet is exactly what the Python stages handle by their shortest branch (an
 *     existing, open, opened connection; no SYN/FIN/RST; the direction's next bytes in order, all
 *     captured, nothing queued in either direction), and the effect is theirs, slot for slot:
 *     Connection.last_ts, the live order (OrderedDict.move_to_end), HalfStream.last_ts/captured/nxt,
 *     and the Framer's: its buffer when the bytes fall inside a frame in progress; when they
 *     complete or start frames of a framer that knows where frames start, Framer._frames' loop
 *     (accounting, the frame in progress, a Frame for each whole one handed to its on_frame);
 *     otherwise the Framer's own data() is called, as HalfStream.feed calls it; or
 *   - hands it to the reassembler (any other packet of a link and network layer listed here: a new
 *     connection, a flag, a hole, a retransmission, bytes cut by the snaplen): the Segment
 *     packets.decode would make, given to Reassembler.feed as the reader gives it; or
 *   - stops before it (a damaged record, a link or network layer not listed here, a time past
 *     until_ts, the packet after late_budget packets timed past late_from): the Python stages
 *     read it. (until_ts: when the reassembler next forgets an ended connection, which only its
 *     feed does; asked again of until() after each segment handed to it.)
 * (late_from is a time filter's bound: the reader checks, every 512th packet past it, whether
 * reading can stop; the lane stops before each such packet and counts those it takes.)
 * Nothing is changed for a packet before every condition for taking it has been checked.
 *
 * Returns (pos, number, offset, flush, late): where the next record starts, the records counted so
 * far, its byte offset in the file, whether rows were made that the caller must hand on first, and
 * the packets taken timed past late_from.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>
#include <limits.h>

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_ACK 0x10

/* The stream offsets and frame sizes the lane moves on every packet live in C fields of the
 * classes' bases (HalfStream's HalfCore, Framer's FramerCore), not in object slots: Python reads
 * and writes them as ints, and the lane adds to them without making a new int for each packet. */
typedef struct {
    PyObject_HEAD
    long long nxt, captured;
} HalfCore;

static PyMemberDef HalfCore_members[] = {
    {"nxt", T_LONGLONG, offsetof(HalfCore, nxt), 0, "stream offset of the next byte to deliver"},
    {"captured", T_LONGLONG, offsetof(HalfCore, captured), 0, "distinct payload bytes the capture holds"},
    {NULL},
};

static PyTypeObject HalfCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "spark_kafkawire._lane.HalfCore",
    .tp_doc = "The int fields of a HalfStream the lane moves on every packet.",
    .tp_basicsize = sizeof(HalfCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_members = HalfCore_members,
};

typedef struct {
    PyObject_HEAD
    long long pos, target, rest_to, max_frame;
} FramerCore;

static PyMemberDef FramerCore_members[] = {
    {"pos", T_LONGLONG, offsetof(FramerCore, pos), 0, "stream offset of the next byte to arrive"},
    {"target", T_LONGLONG, offsetof(FramerCore, target), 0, "bytes the frame in progress needs in all"},
    {"rest_to", T_LONGLONG, offsetof(FramerCore, rest_to), 0, "end of a frame cut by a gap"},
    {"max_frame", T_LONGLONG, offsetof(FramerCore, max_frame), 0, "largest frame accepted"},
    {NULL},
};

static PyTypeObject FramerCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "spark_kafkawire._lane.FramerCore",
    .tp_doc = "The int fields of a Framer the lane moves on every packet.",
    .tp_basicsize = sizeof(FramerCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_members = FramerCore_members,
};

#define HC(o) ((HalfCore *)(o))
#define FC(o) ((FramerCore *)(o))

typedef struct {
    PyObject_HEAD
    PyObject *table;    /* dict: (src, sport, dst, dport) -> (Connection, direction) */
    PyObject *live;     /* OrderedDict of open connections, least recently used first */
    PyObject *rows;     /* the row builder: count and backlog tell when batches are due */
    PyObject *conn_type, *half_type, *framer_type, *frame_type, *acct_type, *segment_type;
    PyObject *feed;     /* Reassembler.feed */
    PyObject *ports;    /* None, or a bytes bitmap of the ports kept (8192 bytes) */
    long long batch_limit, min_frame;
    long long taken;    /* packets taken so far (the tests check the lane is used) */
    /* slot offsets, from the classes' member descriptors */
    Py_ssize_t c_done, c_self, c_opened, c_last_ts, c_halves;
    Py_ssize_t h_base, h_pending, h_last_ts, h_sink;
    Py_ssize_t f_buf;
    Py_ssize_t f_on_frame, f_synced, f_first, f_disabled, f_acct, f_ts, f_num, f_off;
    Py_ssize_t a_frames, a_frame_bytes;
} Lane;

static PyObject *s_move_to_end, *s_data, *s_count, *s_backlog, *s_frames;

static int slot_offset(PyObject *cls, const char *name, Py_ssize_t *out) {
    PyObject *d = PyObject_GetAttrString(cls, name);
    if (d == NULL) return -1;
    if (!Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s is not a slot", name);
        Py_DECREF(d);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%s is not an object slot", name);
        Py_DECREF(d);
        return -1;
    }
    *out = m->offset;
    Py_DECREF(d);
    return 0;
}

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* replace a slot's value, taking the new reference */
static inline void set_slot(PyObject *obj, Py_ssize_t off, PyObject *v) {
    PyObject *old = SLOT(obj, off);
    SLOT(obj, off) = v;
    Py_XDECREF(old);
}

static void Lane_dealloc(Lane *self) {
    Py_XDECREF(self->table);
    Py_XDECREF(self->live);
    Py_XDECREF(self->rows);
    Py_XDECREF(self->conn_type);
    Py_XDECREF(self->half_type);
    Py_XDECREF(self->framer_type);
    Py_XDECREF(self->frame_type);
    Py_XDECREF(self->acct_type);
    Py_XDECREF(self->segment_type);
    Py_XDECREF(self->feed);
    Py_XDECREF(self->ports);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Lane_init(Lane *self, PyObject *args, PyObject *kw) {
    PyObject *table, *live, *rows, *ports, *ct, *ht, *ft, *frt, *at, *sgt, *feed;
    long long limit, min_frame;
    if (!PyArg_ParseTuple(args, "O!OOLOOOOO!OLO!O", &PyDict_Type, &table, &live, &rows, &limit, &ports, &ct, &ht,
                          &ft, &PyType_Type, &frt, &at, &min_frame, &PyType_Type, &sgt, &feed))
        return -1;
    PyObject *sfields = PyObject_GetAttrString(sgt, "_fields");
    if (sfields == NULL) return -1;
    int eleven = PyTuple_Check(sfields) && PyTuple_GET_SIZE(sfields) == 11;
    Py_DECREF(sfields);
    if (!eleven || !PyType_IsSubtype((PyTypeObject *)sgt, &PyTuple_Type) || !PyCallable_Check(feed)) {
        PyErr_SetString(PyExc_TypeError, "Segment: a named tuple of eleven fields; feed: callable");
        return -1;
    }
    /* Frame: a tuple of six (ts_ns, number, offset, size, data, complete), made as tuple.__new__ would */
    PyObject *fields = PyObject_GetAttrString(frt, "_fields");
    if (fields == NULL) return -1;
    int six = PyTuple_Check(fields) && PyTuple_GET_SIZE(fields) == 6;
    Py_DECREF(fields);
    if (!six || !PyType_IsSubtype((PyTypeObject *)frt, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "Frame: a named tuple of six fields");
        return -1;
    }
    if (ports != Py_None && (!PyBytes_Check(ports) || PyBytes_GET_SIZE(ports) != 8192)) {
        PyErr_SetString(PyExc_ValueError, "ports: None or an 8192-byte bitmap");
        return -1;
    }
    if (!PyType_Check(ht) || !PyType_IsSubtype((PyTypeObject *)ht, &HalfCoreType) || !PyType_Check(ft) ||
        !PyType_IsSubtype((PyTypeObject *)ft, &FramerCoreType)) {
        PyErr_SetString(PyExc_TypeError, "HalfStream and Framer: subclasses of HalfCore and FramerCore");
        return -1;
    }
    if (slot_offset(ct, "done", &self->c_done) || slot_offset(ct, "self_connected", &self->c_self) ||
        slot_offset(ct, "opened", &self->c_opened) || slot_offset(ct, "last_ts", &self->c_last_ts) ||
        slot_offset(ct, "halves", &self->c_halves) || slot_offset(ht, "base", &self->h_base) ||
        slot_offset(ht, "pending", &self->h_pending) || slot_offset(ht, "last_ts", &self->h_last_ts) ||
        slot_offset(ht, "sink", &self->h_sink) || slot_offset(ft, "buf", &self->f_buf) ||
        slot_offset(ft, "on_frame", &self->f_on_frame) || slot_offset(ft, "synced", &self->f_synced) ||
        slot_offset(ft, "first", &self->f_first) || slot_offset(ft, "disabled", &self->f_disabled) ||
        slot_offset(ft, "acct", &self->f_acct) || slot_offset(ft, "f_ts", &self->f_ts) ||
        slot_offset(ft, "f_num", &self->f_num) || slot_offset(ft, "f_off", &self->f_off) ||
        slot_offset(at, "frames", &self->a_frames) || slot_offset(at, "frame_bytes", &self->a_frame_bytes))
        return -1;
#define KEEP(field, v) do { Py_INCREF(v); Py_XSETREF(self->field, v); } while (0)
    KEEP(table, table);
    KEEP(live, live);
    KEEP(rows, rows);
    KEEP(ports, ports);
    KEEP(conn_type, ct);
    KEEP(half_type, ht);
    KEEP(framer_type, ft);
    KEEP(frame_type, frt);
    KEEP(acct_type, at);
    KEEP(segment_type, sgt);
    KEEP(feed, feed);
#undef KEEP
    self->batch_limit = limit;
    self->min_frame = min_frame;
    return 0;
}

static inline unsigned u16be(const unsigned char *p) { return ((unsigned)p[0] << 8) | p[1]; }
static inline unsigned long u32be(const unsigned char *p) {
    return ((unsigned long)p[0] << 24) | ((unsigned long)p[1] << 16) | ((unsigned long)p[2] << 8) | p[3];
}
static inline unsigned long u32(const unsigned char *p, int big) {
    if (big) return u32be(p);
    return ((unsigned long)p[3] << 24) | ((unsigned long)p[2] << 16) | ((unsigned long)p[1] << 8) | p[0];
}

/* an int slot as a C value; -1 and no error when it is not a small int */
static inline int int_slot(PyObject *v, long long *out) {
    if (v == NULL || !PyLong_CheckExact(v)) return -1;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -1;
    }
    *out = x;
    return 0;
}

/* add n to an int slot */
static inline int add_slot(PyObject *obj, Py_ssize_t off, long long base, long long n) {
    PyObject *v = PyLong_FromLongLong(base + n);
    if (v == NULL) return -1;
    set_slot(obj, off, v);
    return 0;
}

#define CACHE 4
typedef struct {
    unsigned char key[36];
    int len;
    PyObject *conn; /* borrowed from the table: forgotten whenever a segment goes to feed() */
    int dir;
} KeyCache;

enum { TAKEN = 0, STOP = 1, TAKEN_FLUSH = 2, FAILED = -1 };

typedef struct {
    KeyCache cache[CACHE];
    int next;
    PyObject *last_moved; /* the connection last moved to the end of the live order this run */
    int fed;              /* a segment went to feed(): until_ts must be asked again */
} RunState;

static int lookup(Lane *self, RunState *rs, const unsigned char *src, const unsigned char *dst, int alen,
                  unsigned sport, unsigned dport, PyObject **conn, int *dir) {
    unsigned char key[36];
    int klen = 2 * alen + 4;
    memcpy(key, src, alen);
    key[alen] = sport >> 8;
    key[alen + 1] = sport & 0xff;
    memcpy(key + alen + 2, dst, alen);
    key[2 * alen + 2] = dport >> 8;
    key[2 * alen + 3] = dport & 0xff;
    for (int i = 0; i < CACHE; i++) {
        if (rs->cache[i].len == klen && memcmp(rs->cache[i].key, key, klen) == 0) {
            *conn = rs->cache[i].conn;
            *dir = rs->cache[i].dir;
            return 1;
        }
    }
    PyObject *t = Py_BuildValue("(y#Iy#I)", (const char *)src, (Py_ssize_t)alen, sport, (const char *)dst,
                                (Py_ssize_t)alen, dport);
    if (t == NULL) return -1;
    PyObject *hit = PyDict_GetItemWithError(self->table, t);
    Py_DECREF(t);
    if (hit == NULL) return PyErr_Occurred() ? -1 : 0;
    if (!PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 2) return 0;
    PyObject *c = PyTuple_GET_ITEM(hit, 0), *d = PyTuple_GET_ITEM(hit, 1);
    if (!Py_IS_TYPE(c, (PyTypeObject *)self->conn_type) || !PyLong_CheckExact(d)) return 0;
    long dv = PyLong_AsLong(d);
    if (dv != 0 && dv != 1) return 0;
    KeyCache *e = &rs->cache[rs->next];
    rs->next = (rs->next + 1) % CACHE;
    memcpy(e->key, key, klen);
    e->len = klen;
    e->conn = c;
    e->dir = (int)dv;
    *conn = c;
    *dir = (int)dv;
    return 1;
}

static int touch(Lane *self, RunState *rs, PyObject *conn, PyObject *ts) {
    Py_INCREF(ts);
    set_slot(conn, self->c_last_ts, ts);
    if (rs->last_moved == conn) return 0; /* already the last: moving it again changes nothing */
    PyObject *r = PyObject_CallMethodOneArg(self->live, s_move_to_end, conn);
    if (r == NULL) return -1;
    Py_DECREF(r);
    rs->last_moved = conn;
    return 0;
}

static int empty_list(PyObject *v) { return v != NULL && PyList_CheckExact(v) && PyList_GET_SIZE(v) == 0; }

/* a Frame(ts, number, offset, size, data, True), taking the references to off, size and data */
static PyObject *new_frame(Lane *self, PyObject *ts, PyObject *num, PyObject *off, PyObject *size, PyObject *data) {
    PyObject *f = NULL;
    if (off != NULL && size != NULL && data != NULL)
        f = ((PyTypeObject *)self->frame_type)->tp_alloc((PyTypeObject *)self->frame_type, 6);
    if (f == NULL) {
        Py_XDECREF(off);
        Py_XDECREF(size);
        Py_XDECREF(data);
        return NULL;
    }
    Py_INCREF(ts);
    Py_INCREF(num);
    Py_INCREF(Py_True);
    PyTuple_SET_ITEM(f, 0, ts);
    PyTuple_SET_ITEM(f, 1, num);
    PyTuple_SET_ITEM(f, 2, off);
    PyTuple_SET_ITEM(f, 3, size);
    PyTuple_SET_ITEM(f, 4, data);
    PyTuple_SET_ITEM(f, 5, Py_True);
    return f;
}

/* the framer as _frames found it: synced, enabled, nothing held back by a gap, this buffer */
static int framing_as_before(Lane *self, PyObject *fr, PyObject *buf) {
    return SLOT(fr, self->f_buf) == buf && SLOT(fr, self->f_synced) == Py_True &&
           SLOT(fr, self->f_disabled) == Py_False && FC(fr)->rest_to == 0;
}

/* size field of a frame: 4 bytes, the first `had` of them in the frame buffer */
static long long size_field(PyObject *buf, Py_ssize_t had, const unsigned char *c) {
    unsigned char b[4];
    memcpy(b, PyByteArray_AS_STRING(buf), had);
    memcpy(b + had, c, 4 - had);
    return (long long)(int32_t)u32be(b);
}

/* the frame in progress grows by n bytes towards `target` bytes in all. Its buffer becomes the
   frame's data, so it is sized for the whole frame as soon as a sixteenth of it has arrived (one
   allocation, no copies as it grows); before that it doubles, so a size field nothing backs yet
   reserves at most 16 times the bytes actually held. */
static int frame_append(PyObject *buf, const unsigned char *src, Py_ssize_t n, long long target) {
    PyByteArrayObject *b = (PyByteArrayObject *)buf;
    Py_ssize_t held = Py_SIZE(b), need = held + n;
    if (b->ob_exports > 0 || b->ob_start != b->ob_bytes || need + 1 > b->ob_alloc) {
        Py_ssize_t room = need;
        if (target > need) room = (long long)need * 16 >= target ? (Py_ssize_t)target : 2 * need;
        if (PyByteArray_Resize(buf, room) < 0) return -1;
    }
    memcpy(b->ob_start + held, src, n);
    Py_SET_SIZE(b, need);
    b->ob_start[need] = '\0';
    return 0;
}

/* Framer.data(chunk) of a framer that knows where frames start (its _frames loop), in C: 1 done, 0
   when the Python method must take the chunk (nothing has been changed: the framer is in another
   state, or a size field the chunk completes is out of bounds, which loses sync), -1 error. */
static int frame_chunk(Lane *self, PyObject *fr, const unsigned char *c, Py_ssize_t n, PyObject *ts, PyObject *num) {
    long long target, fpos, maxf;
    PyObject *buf = SLOT(fr, self->f_buf), *acct = SLOT(fr, self->f_acct), *on_frame = SLOT(fr, self->f_on_frame);
    if (SLOT(fr, self->f_first) != Py_False || buf == NULL || !PyByteArray_CheckExact(buf) ||
        !framing_as_before(self, fr, buf) || acct == NULL || !Py_IS_TYPE(acct, (PyTypeObject *)self->acct_type) ||
        on_frame == NULL)
        return 0;
    target = FC(fr)->target;
    fpos = FC(fr)->pos;
    maxf = FC(fr)->max_frame;
    /* first, without changing anything: every size field the chunk completes is within bounds */
    Py_ssize_t p = 0, held = PyByteArray_GET_SIZE(buf);
    long long tg = target;
    if (held > 0 && (tg < 4 || (tg == 4 && held >= 4) || held >= tg)) return 0;
    while (p < n) {
        long long size;
        if (held == 0) {
            if (n - p < 4) break;
            size = (long long)(int32_t)u32be(c + p);
            if (size < self->min_frame || size > maxf) return 0;
            if (n - p - 4 < size) break;
            p += 4 + size;
            continue;
        }
        if ((long long)(n - p) < tg - held) break; /* the frame in progress goes on after the chunk */
        if (tg == 4) {
            size = size_field(buf, held, c + p);
            if (size < self->min_frame || size > maxf) return 0;
            p += 4 - held;
            held = 4;
            tg = 4 + size;
            continue;
        }
        p += tg - held;
        held = 0;
        tg = 4;
    }
    /* then the loop's effects, in its order */
    FC(fr)->pos = fpos + n;
    long long frames, fbytes;
    p = 0;
    while (p < n) {
        if (p > 0 && !framing_as_before(self, fr, buf)) { /* an on_frame changed the framer: its way */
            PyObject *rest = PyBytes_FromStringAndSize((const char *)c + p, n - p);
            PyObject *at = PyLong_FromLongLong(fpos + p);
            PyObject *r = rest && at ? PyObject_CallMethodObjArgs(fr, s_frames, rest, ts, num, at, NULL) : NULL;
            Py_XDECREF(rest);
            Py_XDECREF(at);
            if (r == NULL) return -1;
            Py_DECREF(r);
            return 1;
        }
        held = PyByteArray_GET_SIZE(buf);
        if (int_slot(SLOT(acct, self->a_frames), &frames) || int_slot(SLOT(acct, self->a_frame_bytes), &fbytes)) {
            PyErr_SetString(PyExc_RuntimeError, "frame accounting is not an int");
            return -1;
        }
        if (held == 0) { /* a frame starts at p */
            long long size = 0;
            if (n - p >= 4) {
                size = (long long)(int32_t)u32be(c + p);
                if (n - p - 4 >= size) { /* the whole frame is in this chunk */
                    if (add_slot(acct, self->a_frames, frames, 1) < 0 ||
                        add_slot(acct, self->a_frame_bytes, fbytes, 4 + size) < 0)
                        return -1;
                    PyObject *f = new_frame(self, ts, num, PyLong_FromLongLong(fpos + p), PyLong_FromLongLong(size),
                                            PyBytes_FromStringAndSize((const char *)c + p + 4, (Py_ssize_t)size));
                    if (f == NULL) return -1;
                    PyObject *r = PyObject_CallOneArg(on_frame, f);
                    Py_DECREF(f);
                    if (r == NULL) return -1;
                    Py_DECREF(r);
                    p += 4 + size;
                    continue;
                }
            }
            PyObject *off = PyLong_FromLongLong(fpos + p);
            if (off == NULL) return -1;
            FC(fr)->target = n - p >= 4 ? 4 + size : 4;
            Py_INCREF(ts);
            set_slot(fr, self->f_ts, ts);
            Py_INCREF(num);
            set_slot(fr, self->f_num, num);
            set_slot(fr, self->f_off, off);
            return frame_append(buf, c + p, n - p, n - p >= 4 ? 4 + size : 4) < 0 ? -1 : 1;
        }
        /* continue the frame in progress */
        tg = FC(fr)->target;
        Py_ssize_t take = tg - held < n - p ? (Py_ssize_t)(tg - held) : n - p;
        if (frame_append(buf, c + p, take, tg) < 0) return -1;
        p += take;
        if (held + take < tg) return 1;
        if (tg == 4) { /* its size field is now complete (checked above) */
            FC(fr)->target = 4 + (long long)(int32_t)u32be((const unsigned char *)PyByteArray_AS_STRING(buf));
            continue;
        }
        if (add_slot(acct, self->a_frames, frames, 1) < 0 || add_slot(acct, self->a_frame_bytes, fbytes, tg) < 0)
            return -1;
        PyObject *ft = SLOT(fr, self->f_ts), *fn = SLOT(fr, self->f_num), *fo = SLOT(fr, self->f_off);
        if (ft == NULL || fn == NULL || fo == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "frame in progress without its start");
            return -1;
        }
        /* the buffer becomes the frame's data (its size field dropped by moving its start) and
           the framer takes a new one, as _frames does */
        PyObject *fresh = PyByteArray_FromStringAndSize(NULL, 0);
        if (fresh == NULL || PySequence_DelSlice(buf, 0, 4) < 0) {
            Py_XDECREF(fresh);
            return -1;
        }
        PyObject *data = buf;
        Py_INCREF(data); /* new_frame takes this reference; set_slot drops the framer's */
        Py_INCREF(fo);
        buf = fresh;
        set_slot(fr, self->f_buf, fresh);
        FC(fr)->target = 4;
        PyObject *f = new_frame(self, ft, fn, fo, PyLong_FromLongLong(tg - 4), data);
        if (f == NULL) return -1;
        PyObject *r = PyObject_CallOneArg(on_frame, f);
        Py_DECREF(f);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    return 1;
}

/* rows made: are batches due before the next packet? 1 yes, 0 no, -1 error */
static int flush_due(Lane *self) {
    PyObject *count = PyObject_GetAttr(self->rows, s_count);
    if (count == NULL) return -1;
    long long c = PyLong_AsLongLong(count);
    Py_DECREF(count);
    if (c == -1 && PyErr_Occurred()) return -1;
    PyObject *backlog = PyObject_GetAttr(self->rows, s_backlog);
    if (backlog == NULL) return -1;
    int full = PyObject_IsTrue(backlog);
    Py_DECREF(backlog);
    if (full < 0) return -1;
    return c >= self->batch_limit || full;
}

/* the Segment packets.decode makes of this packet, handed to Reassembler.feed as the reader hands
   it: TAKEN, TAKEN_FLUSH or FAILED */
static int feed_segment(Lane *self, RunState *rs, long long number, long long ts_ns, const unsigned char *src,
                        const unsigned char *dst, int alen, unsigned sport, unsigned dport, unsigned long seq,
                        unsigned long ack, unsigned flags, const unsigned char *payload, Py_ssize_t caplen,
                        Py_ssize_t wire_len) {
    PyObject *items[11] = {
        PyLong_FromLongLong(number), PyLong_FromLongLong(ts_ns),
        PyBytes_FromStringAndSize((const char *)src, alen), PyLong_FromUnsignedLong(sport),
        PyBytes_FromStringAndSize((const char *)dst, alen), PyLong_FromUnsignedLong(dport),
        PyLong_FromUnsignedLong(seq), PyLong_FromUnsignedLong(ack), PyLong_FromUnsignedLong(flags),
        PyBytes_FromStringAndSize((const char *)payload, caplen), PyLong_FromSsize_t(wire_len),
    };
    PyObject *seg = NULL;
    int ok = 1;
    for (int i = 0; i < 11; i++) ok = ok && items[i] != NULL;
    if (ok) seg = ((PyTypeObject *)self->segment_type)->tp_alloc((PyTypeObject *)self->segment_type, 11);
    if (seg == NULL) {
        for (int i = 0; i < 11; i++) Py_XDECREF(items[i]);
        return FAILED;
    }
    for (int i = 0; i < 11; i++) PyTuple_SET_ITEM(seg, i, items[i]);
    PyObject *r = PyObject_CallOneArg(self->feed, seg);
    Py_DECREF(seg);
    /* the reassembler may have added, ended, evicted or forgotten connections: nothing looked up
       so far in this run stands */
    memset(rs->cache, 0, sizeof rs->cache);
    rs->last_moved = NULL;
    rs->fed = 1;
    if (r == NULL) return FAILED;
    Py_DECREF(r);
    int due = flush_due(self);
    return due < 0 ? FAILED : due ? TAKEN_FLUSH : TAKEN;
}

/* one packet's captured bytes d[0:dl]: TAKEN, TAKEN_FLUSH, STOP or FAILED */
static int take(Lane *self, RunState *rs, const unsigned char *d, Py_ssize_t dl, int linktype, long long ts_ns,
                long long number) {
    unsigned et;
    Py_ssize_t off;
    switch (linktype) {
    case 1: /* Ethernet, with 802.1Q/QinQ tags */
        if (dl < 14) return STOP;
        et = u16be(d + 12);
        off = 14;
        while ((et == 0x8100 || et == 0x88A8 || et == 0x9100) && dl >= off + 4) {
            et = u16be(d + off + 2);
            off += 4;
        }
        break;
    case 113: /* Linux cooked */
        if (dl < 16) return STOP;
        et = u16be(d + 14);
        off = 16;
        break;
    case 276: /* Linux cooked v2 */
        if (dl < 20) return STOP;
        et = u16be(d);
        off = 20;
        break;
    default:
        return STOP;
    }
    const unsigned char *src, *dst;
    int alen;
    Py_ssize_t tcp, end, ipw;
    if (et == 0x0800) {
        if (dl < off + 20 || d[off] >> 4 != 4) return STOP;
        Py_ssize_t ihl = (d[off] & 0x0F) * 4;
        if (d[off + 9] != 6 || ihl < 20) return STOP;
        if (u16be(d + off + 6) & 0x3FFF) return STOP; /* a fragment */
        unsigned total = u16be(d + off + 2);
        if (total == 0) return STOP; /* segmentation offload: the Python stages decide */
        src = d + off + 12;
        dst = d + off + 16;
        alen = 4;
        tcp = off + ihl;
        end = off + total;
        ipw = (Py_ssize_t)total - ihl;
    } else if (et == 0x86DD) {
        if (dl < off + 40 || d[off] >> 4 != 6) return STOP;
        unsigned plen = u16be(d + off + 4);
        if (d[off + 6] != 6 || plen == 0) return STOP; /* extension headers, not TCP, or jumbo */
        src = d + off + 8;
        dst = d + off + 24;
        alen = 16;
        tcp = off + 40;
        end = tcp + plen;
        ipw = plen;
    } else {
        return STOP;
    }
    if (dl < tcp + 20) return STOP;
    const unsigned char *t = d + tcp;
    unsigned sport = u16be(t), dport = u16be(t + 2);
    unsigned long seq = u32be(t + 4);
    Py_ssize_t doff = (t[12] >> 4) * 4;
    unsigned flags = t[13];
    if (doff < 20) return STOP;
    Py_ssize_t start = tcp + doff;
    Py_ssize_t wire_len = ipw - doff;
    if (wire_len < 0 || start > dl) return STOP;
    Py_ssize_t stop = end < dl ? end : dl;
    if (start + wire_len < stop) stop = start + wire_len;
    Py_ssize_t caplen = stop > start ? stop - start : 0;
    /* from here on, a packet the lane does not take itself goes to the reassembler as the reader would give it */
#define FEED return feed_segment(self, rs, number, ts_ns, src, dst, alen, sport, dport, seq, u32be(t + 8), flags, d + start, caplen, wire_len)
    if (flags & (TCP_SYN | TCP_FIN | TCP_RST)) FEED;
    if (self->ports != Py_None) {
        const unsigned char *bits = (const unsigned char *)PyBytes_AS_STRING(self->ports);
        if (!(bits[sport >> 3] & (1 << (sport & 7))) && !(bits[dport >> 3] & (1 << (dport & 7))))
            return TAKEN; /* neither port is kept: the reassembler passes it over */
    }
    PyObject *conn;
    int dir;
    int found = lookup(self, rs, src, dst, alen, sport, dport, &conn, &dir);
    if (found < 0) return FAILED;
    if (!found) FEED;
    if (SLOT(conn, self->c_done) != Py_False || SLOT(conn, self->c_self) != Py_False) FEED;
    if (wire_len == 0) { /* a pure acknowledgement: the connection is only touched */
        PyObject *ts = PyLong_FromLongLong(ts_ns);
        if (ts == NULL) return FAILED;
        int r = touch(self, rs, conn, ts);
        Py_DECREF(ts);
        return r < 0 ? FAILED : TAKEN;
    }
    if (caplen != wire_len) FEED; /* cut by the snaplen */
    if (SLOT(conn, self->c_opened) != Py_True) FEED;
    PyObject *halves = SLOT(conn, self->c_halves);
    if (halves == NULL || !PyList_CheckExact(halves) || PyList_GET_SIZE(halves) != 2) FEED;
    PyObject *half = PyList_GET_ITEM(halves, dir), *other = PyList_GET_ITEM(halves, 1 - dir);
    if (!Py_IS_TYPE(half, (PyTypeObject *)self->half_type) || !Py_IS_TYPE(other, (PyTypeObject *)self->half_type))
        FEED;
    if ((flags & TCP_ACK) && !empty_list(SLOT(other, self->h_pending))) FEED;
    if (!empty_list(SLOT(half, self->h_pending))) FEED;
    long long base, nxt, captured;
    if (int_slot(SLOT(half, self->h_base), &base)) FEED;
    nxt = HC(half)->nxt;
    captured = HC(half)->captured;
    if ((((unsigned long long)seq - (unsigned long long)base - (unsigned long long)nxt) & 0xFFFFFFFFull) != 0)
        FEED;
    PyObject *sink = SLOT(half, self->h_sink);
    if (sink == NULL || sink == Py_None) FEED;
    /* inside a frame in progress (Framer.data's first branch): the bytes join its buffer */
    int append = 0;
    PyObject *fbuf = NULL;
    long long target = 0, fpos = 0;
    if (Py_IS_TYPE(sink, (PyTypeObject *)self->framer_type)) {
        fbuf = SLOT(sink, self->f_buf);
        target = FC(sink)->target;
        fpos = FC(sink)->pos;
        if (FC(sink)->rest_to == 0 && fbuf != NULL && PyByteArray_CheckExact(fbuf) &&
            PyByteArray_GET_SIZE(fbuf) > 0 && target > 4 && wire_len < target - PyByteArray_GET_SIZE(fbuf))
            append = 1;
    }
    /* taken: from here on, the Python stages' effects, in their order */
    PyObject *ts = PyLong_FromLongLong(ts_ns);
    if (ts == NULL) return FAILED;
    if (touch(self, rs, conn, ts) < 0) goto fail;
    Py_INCREF(ts);
    set_slot(half, self->h_last_ts, ts);
    HC(half)->captured = captured + wire_len;
    const unsigned char *payload = d + start;
    int result = TAKEN;
    if (append) {
        if (frame_append(fbuf, payload, wire_len, target) < 0) goto fail;
        FC(sink)->pos = fpos + wire_len;
    } else {
        PyObject *num = PyLong_FromLongLong(number);
        if (num == NULL) goto fail;
        int framed = Py_IS_TYPE(sink, (PyTypeObject *)self->framer_type) ?
            frame_chunk(self, sink, payload, wire_len, ts, num) : 0;
        if (framed < 0) {
            Py_DECREF(num);
            goto fail;
        }
        if (!framed) {
            PyObject *chunk = PyBytes_FromStringAndSize((const char *)payload, wire_len);
            if (chunk == NULL) {
                Py_DECREF(num);
                goto fail;
            }
            PyObject *r = PyObject_CallMethodObjArgs(sink, s_data, chunk, ts, num, NULL);
            Py_DECREF(chunk);
            if (r == NULL) {
                Py_DECREF(num);
                goto fail;
            }
            Py_DECREF(r);
        }
        Py_DECREF(num);
        /* rows may have been made: the caller hands full batches on before the next packet */
        int due = flush_due(self);
        if (due < 0) goto fail;
        if (due) result = TAKEN_FLUSH;
        /* the sink may have read or changed the stream's offset: take it again */
        nxt = HC(half)->nxt;
    }
    HC(half)->nxt = nxt + wire_len;
    Py_DECREF(ts);
    return result;
fail:
    Py_DECREF(ts);
    return FAILED;
}
#undef FEED

/* where a file's records are and what they hold: classic pcap, or a pcapng section's interfaces */
typedef struct {
    int big, pcapng, linktype;
    long long ns_per_tick, record_limit;
    PyObject *ifaces; /* pcapng: [(linktype, snaplen, ticks_per_second, offset_s)] */
} Format;

/* nanoseconds of a pcapng timestamp, as capture._ts_ns computes them; 0 when out of int64 range or
   of a resolution that does not divide a second into whole nanoseconds (the Python stages read it) */
static int ng_time(unsigned long long ticks, long long tps, long long tsoff, long long *out) {
    if (tps <= 0 || tps > 1000000000LL || 1000000000LL % tps) return 0;
    unsigned long long mult = (unsigned long long)(1000000000LL / tps);
    if (ticks > (unsigned long long)LLONG_MAX / mult) return 0;
    long long ns = (long long)(ticks * mult);
    if (tsoff > 9000000000LL || tsoff < -9000000000LL) return 0;
    long long off = tsoff * 1000000000LL;
    if ((off > 0 && ns > LLONG_MAX - off) || (off < 0 && ns < LLONG_MIN - off)) return 0;
    *out = ns + off;
    return 1;
}

/* the record at buf[pos:len]: 1 and its packet bytes, link type, time and length in the file, or 0
   when the lane cannot read it (cut short by the buffer's end, damaged, another kind of block) */
static int record(const Format *f, const unsigned char *buf, Py_ssize_t len, Py_ssize_t pos,
                  const unsigned char **data, Py_ssize_t *dlen, int *linktype, long long *ts, long long *rlen) {
    const unsigned char *h = buf + pos;
    int big = f->big;
    if (!f->pcapng) {
        if (len - pos < 16) return 0;
        unsigned long long sec = u32(h, big), frac = u32(h + 4, big);
        long long incl = (long long)u32(h + 8, big);
        if (incl > f->record_limit || pos + 16 + incl > len) return 0;
        *ts = (long long)(sec * 1000000000ull + frac * (unsigned long long)f->ns_per_tick);
        *data = h + 16;
        *dlen = (Py_ssize_t)incl;
        *linktype = f->linktype;
        *rlen = 16 + incl;
        return 1;
    }
    if (len - pos < 28 || u32(h, big) != 6) return 0; /* an Enhanced Packet Block, nothing else */
    long long blen = (long long)u32(h + 4, big);
    if (blen < 12 || blen % 4 || blen > f->record_limit || pos + blen > len) return 0;
    const unsigned char *body = h + 8;
    long long body_len = blen - 12; /* without the trailing copy of the length */
    if (body_len < 20) return 0;
    unsigned long iface = u32(body, big);
    unsigned long long ticks = ((unsigned long long)u32(body + 4, big) << 32) | u32(body + 8, big);
    long long caplen = (long long)u32(body + 12, big);
    if ((Py_ssize_t)iface >= PyList_GET_SIZE(f->ifaces) || 20 + caplen > body_len) return 0;
    PyObject *t = PyList_GET_ITEM(f->ifaces, iface);
    if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 4) return 0;
    long lt = PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
    long long tps = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 2));
    long long tsoff = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 3));
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (!ng_time(ticks, tps, tsoff, ts)) return 0;
    *data = body + 20;
    *dlen = (Py_ssize_t)caplen;
    *linktype = (int)lt;
    *rlen = blen;
    return 1;
}

/* take records from pos on, as the module's comment says, for either format */
static PyObject *walk(Lane *self, Py_buffer *view, Py_ssize_t pos, long long number, long long offset,
                      const Format *f, long long until_ts, long long late_from, long long budget, PyObject *until) {
    const unsigned char *buf = (const unsigned char *)view->buf;
    Py_ssize_t len = view->len;
    RunState rs;
    memset(&rs, 0, sizeof rs);
    int flush = 0;
    long long late = 0;
    const unsigned char *data;
    Py_ssize_t dlen;
    int linktype;
    long long ts, rlen;
    while (record(f, buf, len, pos, &data, &dlen, &linktype, &ts, &rlen)) {
        if (ts > until_ts || (ts > late_from && late >= budget)) break;
        int r = take(self, &rs, data, dlen, linktype, ts, number + 1);
        if (r == FAILED) {
            PyBuffer_Release(view);
            return NULL;
        }
        if (r == STOP) break;
        pos += rlen;
        offset += rlen;
        number += 1;
        self->taken += 1;
        if (ts > late_from) late += 1;
        if (rs.fed) { /* the reassembler may have ended a connection: when is the next one forgotten? */
            rs.fed = 0;
            PyObject *u = PyObject_CallNoArgs(until);
            until_ts = u != NULL ? PyLong_AsLongLong(u) : -1;
            Py_XDECREF(u);
            if (PyErr_Occurred()) {
                PyBuffer_Release(view);
                return NULL;
            }
        }
        if (r == TAKEN_FLUSH) {
            flush = 1;
            break;
        }
    }
    PyBuffer_Release(view);
    return Py_BuildValue("nLLOL", pos, number, offset, flush ? Py_True : Py_False, late);
}

static PyObject *Lane_run(Lane *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    long long number, offset, until_ts, late_from, budget;
    Format f = {0};
    PyObject *until;
    if (!PyArg_ParseTuple(args, "y*nLLiLpLLLLO", &view, &pos, &number, &offset, &f.linktype, &f.ns_per_tick, &f.big,
                          &f.record_limit, &until_ts, &late_from, &budget, &until))
        return NULL;
    return walk(self, &view, pos, number, offset, &f, until_ts, late_from, budget, until);
}

/* Lane.run_ng(buf, pos, number, offset, big_endian, interfaces, record_limit, until_ts, late_from,
   late_budget, until): as run(), over the Enhanced Packet Blocks of a pcapng section; interfaces:
   [(linktype, snaplen, ticks_per_second, offset_s)] as capture.py keeps them. Any other block
   stops it. */
static PyObject *Lane_run_ng(Lane *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    long long number, offset, until_ts, late_from, budget;
    Format f = {0};
    f.pcapng = 1;
    PyObject *until;
    if (!PyArg_ParseTuple(args, "y*nLLpO!LLLLO", &view, &pos, &number, &offset, &f.big, &PyList_Type, &f.ifaces,
                          &f.record_limit, &until_ts, &late_from, &budget, &until))
        return NULL;
    return walk(self, &view, pos, number, offset, &f, until_ts, late_from, budget, until);
}

static PyMethodDef Lane_methods[] = {
    {"run", (PyCFunction)Lane_run, METH_VARARGS, "Take the records it can from buf at pos; see the module."},
    {"run_ng", (PyCFunction)Lane_run_ng, METH_VARARGS, "As run, over pcapng Enhanced Packet Blocks."},
    {NULL},
};

static PyMemberDef Lane_members[] = {
    {"taken", T_LONGLONG, offsetof(Lane, taken), READONLY, "packets taken so far"},
    {NULL},
};

static PyTypeObject LaneType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "spark_kafkawire._lane.Lane",
    .tp_basicsize = sizeof(Lane),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Lane(table, live, rows, batch_limit, ports_bitmap, Connection, HalfStream, Framer, Frame, Accounting, "
              "min_frame, Segment, feed)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Lane_init,
    .tp_dealloc = (destructor)Lane_dealloc,
    .tp_methods = Lane_methods,
    .tp_members = Lane_members,
};

/* ---------------------------------------------------------------------------------------------
 * Pairing, for a decoder that makes one share of a file's rows (exchanges.Decoder, share=(k, n)).
 *
 * Every share follows every connection: a request whose rows another share makes is still parsed
 * and waits for its response (the order of rows, acks=0, topic ids and a connection's secrets are
 * the same in every share). A Side is a framer's on_frame for one direction of a connection; for
 * the common frame of another share's row it does in C what Decoder._request and _response do
 * with it, on the same objects:
 *   - a request (the connection's roles decided, no raw SASL): the row number is counted
 *     (Decoder.seq, as _mine() counts it); when the row is another share's, a header that parses
 *     by the header rules' shortest branches (client_id UTF-8 or null, no tagged fields), whose
 *     body is not one every share decodes (always_decode), not a SaslHandshake v0, whose
 *     correlation id is not already waiting and with room among the waiting requests: the
 *     RequestHeader and the skipped Request (Produce: acks read by leading_field_span and remembered
 *     by their bytes) are made as _request makes them and put among the connection's waiting
 *     requests;
 *   - a response to a waiting request of another share whose body teaches nothing (not
 *     always_decode): the request is taken off, and acks=0 Produce requests sent before it go too
 *     when they are all other shares' (nothing is shown of them).
 * Every other frame, and every frame of a whole read (n == 0), goes to the decoder's own methods:
 * _frame while the roles are undecided, else _request (given the row's share, already counted)
 * or _response. Nothing is changed before the frame is known to be one taken here.
 * ------------------------------------------------------------------------------------------- */

static int call_truth(PyObject *fn, PyObject *a, PyObject *b, PyObject *c);

#define MEMO_KEYS 128
#define MEMO_VERSIONS 32
#define ACKS_KEPT 8
#define ACKS_SPAN 64

typedef struct {
    PyObject_HEAD
    PyObject *decoder;
    PyObject *req_hv, *resp_hv, *always, *leading, *request_type, *header_type;
    long long k, n;         /* the share; n == 0: the whole read */
    int decode_bodies;
    Py_ssize_t max_pending;
    Py_ssize_t o_client_dir, o_framed, o_sasl_raw, o_pending;  /* _ConnState slots */
    long long skimmed, passed;  /* frames of other shares taken here; frames of a share handed on */
    /* the answers of req_hv, resp_hv and always (pure functions of the api key and version) for
       keys and versions below MEMO_KEYS and MEMO_VERSIONS, asked once: 0 not asked yet, else the
       header version + 2 (1: None), or the truth + 1 */
    unsigned char memo[4][MEMO_KEYS][MEMO_VERSIONS];
    /* Produce acks, by the bytes they were read from (leading_field_span: the same bytes from the
       body's start give the same value): the last ACKS_KEPT, each holding a reference to its value */
    struct {
        int ver;
        Py_ssize_t n;
        unsigned char b[ACKS_SPAN];
        PyObject *value;
    } acks[ACKS_KEPT];
    int acks_next;
} Pairing;

enum { MEMO_REQ_HV, MEMO_RESP_HV, MEMO_ALWAYS_REQ, MEMO_ALWAYS_RESP };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Pairing *pairing;
    PyObject *st;
    PyObject *d;  /* the direction, as an int object */
    long dir;
} Side;

static PyObject *s_seq, *s__frame, *s__request, *s__response, *s_acks_name, *s_zero;

/* Pairing and Side take part in garbage collection: a decoder holds its pairing (decoder.sides),
   which holds the decoder; a connection's state holds its framers, whose on_frame (a Side) holds
   the state. A read given up half way leaves such cycles for the collector. */
/* the object fields of each type, listed once for its traverse and clear */
#define PAIRING_OBJECTS(X) X(decoder) X(req_hv) X(resp_hv) X(always) X(leading) X(request_type) X(header_type)
#define SIDE_OBJECTS(X) X(pairing) X(st) X(d)
#define VISIT_FIELD(f) Py_VISIT(self->f);
#define CLEAR_FIELD(f) Py_CLEAR(self->f);

static int Pairing_traverse(Pairing *self, visitproc visit, void *arg) {
    PAIRING_OBJECTS(VISIT_FIELD)
    for (int i = 0; i < ACKS_KEPT; i++) Py_VISIT(self->acks[i].value);
    return 0;
}

static int Pairing_clear(Pairing *self) {
    PAIRING_OBJECTS(CLEAR_FIELD)
    for (int i = 0; i < ACKS_KEPT; i++) Py_CLEAR(self->acks[i].value);
    return 0;
}

static void Pairing_dealloc(Pairing *self) {
    PyObject_GC_UnTrack(self);
    Pairing_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Pairing_init(Pairing *self, PyObject *args, PyObject *kw) {
    PyObject *decoder, *share, *rq, *rs, *al, *le, *rt, *ht, *state;
    int bodies;
    Py_ssize_t most;
    if (!PyArg_ParseTuple(args, "OOpOOOOO!O!O!n", &decoder, &share, &bodies, &rq, &rs, &al, &le, &PyType_Type, &rt,
                          &PyType_Type, &ht, &PyType_Type, &state, &most))
        return -1;
    long long k = 0, n = 0;
    if (share != Py_None && !PyArg_ParseTuple(share, "LL", &k, &n)) return -1;
    if (share != Py_None && !(n >= 1 && 0 <= k && k < n)) {
        PyErr_SetString(PyExc_ValueError, "share: want (k, n) with 0 <= k < n");
        return -1;
    }
    if (!PyType_IsSubtype((PyTypeObject *)rt, &PyTuple_Type) || !PyType_IsSubtype((PyTypeObject *)ht, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "Request and RequestHeader: named tuples");
        return -1;
    }
    if (slot_offset(state, "client_dir", &self->o_client_dir) || slot_offset(state, "framed", &self->o_framed) ||
        slot_offset(state, "sasl_raw", &self->o_sasl_raw) || slot_offset(state, "pending", &self->o_pending))
        return -1;
    Pairing_clear(self);
    self->decoder = Py_NewRef(decoder);
    self->req_hv = Py_NewRef(rq);
    self->resp_hv = Py_NewRef(rs);
    self->always = Py_NewRef(al);
    self->leading = Py_NewRef(le);
    self->request_type = Py_NewRef(rt);
    self->header_type = Py_NewRef(ht);
    self->k = k;
    self->n = n;
    self->decode_bodies = bodies;
    self->max_pending = most;
    self->skimmed = self->passed = 0;
    memset(self->memo, 0, sizeof self->memo);
    self->acks_next = 0;
    return 0;
}

/* the acks of a Produce request of version ver whose body starts at b + pos (n bytes in all): a
   new reference, from the acks remembered by their bytes or from leading_field_span; NULL on error */
static PyObject *produce_acks(Pairing *P, PyObject *k_obj, PyObject *v_obj, int ver, PyObject *data,
                              const unsigned char *b, Py_ssize_t n, Py_ssize_t pos) {
    for (int i = 0; i < ACKS_KEPT; i++) {
        if (P->acks[i].value != NULL && P->acks[i].ver == ver && P->acks[i].n <= n - pos &&
            memcmp(b + pos, P->acks[i].b, P->acks[i].n) == 0)
            return Py_NewRef(P->acks[i].value);
    }
    PyObject *at = PyLong_FromSsize_t(pos);
    if (at == NULL) return NULL;
    PyObject *r = PyObject_CallFunctionObjArgs(P->leading, k_obj, v_obj, Py_True, data, at, s_acks_name, NULL);
    Py_DECREF(at);
    if (r == NULL) return NULL;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "leading_field_span: want (value, length)");
        return NULL;
    }
    PyObject *value = PyTuple_GET_ITEM(r, 0), *span = PyTuple_GET_ITEM(r, 1);
    Py_ssize_t len = PyLong_Check(span) ? PyLong_AsSsize_t(span) : -1;
    if (len == -1 && PyErr_Occurred()) PyErr_Clear();
    if (len >= 0 && len <= ACKS_SPAN && len <= n - pos) {
        int i = P->acks_next;
        P->acks_next = (i + 1) % ACKS_KEPT;
        Py_XSETREF(P->acks[i].value, Py_NewRef(value));
        P->acks[i].ver = ver;
        P->acks[i].n = len;
        memcpy(P->acks[i].b, b + pos, len);
    }
    Py_INCREF(value);
    Py_DECREF(r);
    return value;
}

/* the header version req_hv (which = MEMO_REQ_HV) or resp_hv gives for (key, ver): a new reference
   to it (an int or None), remembered for small keys and versions; NULL on error */
static PyObject *header_version(Pairing *P, int which, PyObject *k_obj, PyObject *v_obj, int key, int ver) {
    int small = key >= 0 && key < MEMO_KEYS && ver >= 0 && ver < MEMO_VERSIONS;
    unsigned char m = small ? P->memo[which][key][ver] : 0;
    if (m == 1) return Py_NewRef(Py_None);
    if (m > 1) return PyLong_FromLong(m - 2);
    PyObject *hv = PyObject_CallFunctionObjArgs(which == MEMO_REQ_HV ? P->req_hv : P->resp_hv, k_obj, v_obj, NULL);
    if (hv == NULL || !small) return hv;
    if (hv == Py_None) {
        P->memo[which][key][ver] = 1;
    } else if (PyLong_CheckExact(hv)) {
        long v = PyLong_AsLong(hv);
        if (v >= 0 && v < 200) P->memo[which][key][ver] = (unsigned char)(v + 2);
        else if (v == -1 && PyErr_Occurred()) PyErr_Clear();
    }
    return hv;
}

/* always(key, ver, request): 1, 0, -1 on error; remembered for small keys and versions */
static int always_decoded(Pairing *P, PyObject *k_obj, PyObject *v_obj, int key, int ver, int request) {
    int small = key >= 0 && key < MEMO_KEYS && ver >= 0 && ver < MEMO_VERSIONS;
    int which = request ? MEMO_ALWAYS_REQ : MEMO_ALWAYS_RESP;
    if (small && P->memo[which][key][ver]) return P->memo[which][key][ver] - 1;
    int t = call_truth(P->always, k_obj, v_obj, request ? Py_True : Py_False);
    if (t >= 0 && small) P->memo[which][key][ver] = (unsigned char)(t + 1);
    return t;
}

static inline int i16be(const unsigned char *p) { return (int)(int16_t)u16be(p); }

/* a named tuple of these items (references taken), or NULL with every reference given back */
static PyObject *new_tuple(PyObject *type, PyObject **items, Py_ssize_t n) {
    PyObject *t = NULL;
    int ok = 1;
    for (Py_ssize_t i = 0; i < n; i++) ok &= items[i] != NULL;
    if (ok) t = ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, n);
    if (t == NULL) {
        for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(items[i]);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(t, i, items[i]);
    return t;
}

/* call fn(a, b, c) and give its truth: 1, 0, or -1 on error */
static int call_truth(PyObject *fn, PyObject *a, PyObject *b, PyObject *c) {
    PyObject *r = PyObject_CallFunctionObjArgs(fn, a, b, c, NULL);
    if (r == NULL) return -1;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    return t;
}

/* a frame's data: bytes, or the bytearray of a frame that spanned segments (1), else 0 */
static int frame_data(PyObject *data, const unsigned char **b, Py_ssize_t *n) {
    if (PyBytes_CheckExact(data)) {
        *b = (const unsigned char *)PyBytes_AS_STRING(data);
        *n = PyBytes_GET_SIZE(data);
        return 1;
    }
    if (PyByteArray_CheckExact(data)) {
        *b = (const unsigned char *)PyByteArray_AS_STRING(data);
        *n = PyByteArray_GET_SIZE(data);
        return 1;
    }
    return 0;
}

/* another share's request: 1 taken (waiting now), 0 for _request, -1 error */
static int skim_request(Pairing *P, PyObject *st, PyObject *f) {
    PyObject *data = PyTuple_GET_ITEM(f, 4);
    PyObject *pending = SLOT(st, P->o_pending);
    const unsigned char *b;
    Py_ssize_t n;
    if (!frame_data(data, &b, &n) || SLOT(st, P->o_sasl_raw) != Py_False || pending == NULL ||
        !PyDict_CheckExact(pending))
        return 0;
    if (n < 8) return 0;
    int key = i16be(b), ver = i16be(b + 2);
    long corr = (long)(int32_t)u32be(b + 4);
    if (key == 17 && ver == 0) return 0; /* SaslHandshake v0: raw tokens follow */
    if (PyDict_GET_SIZE(pending) >= P->max_pending) return 0;
    int ret = -1;
    PyObject *k_obj = PyLong_FromLong(key), *v_obj = PyLong_FromLong(ver), *c_obj = PyLong_FromLong(corr);
    PyObject *hv = NULL, *client_id = NULL, *acks = NULL;
    if (k_obj == NULL || v_obj == NULL || c_obj == NULL) goto done;
    int known = PyDict_Contains(pending, c_obj);
    if (known) { ret = known < 0 ? -1 : 0; goto done; }
    hv = header_version(P, MEMO_REQ_HV, k_obj, v_obj, key, ver);
    if (hv == NULL) goto done;
    long hvv = -1;
    if (hv != Py_None) {
        hvv = PyLong_AsLong(hv);
        if (hvv == -1 && PyErr_Occurred()) goto done;
    }
    Py_ssize_t pos = 8;
    if (hvv == 0) {
        client_id = Py_NewRef(Py_None);
    } else {
        if (n < 10) { ret = 0; goto done; }
        int ln = i16be(b + 8);
        pos = 10;
        if (ln >= 0) {
            if (pos + ln > n) { ret = 0; goto done; }
            /* a NUL, \x01 or '=' may be a SASL token's (sasl.py): the Python stages decide */
            for (Py_ssize_t i = pos; i < pos + ln; i++)
                if (b[i] < 2 || b[i] == '=') { ret = 0; goto done; }
            client_id = PyUnicode_DecodeUTF8((const char *)b + pos, ln, "strict");
            if (client_id == NULL) {
                if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) { PyErr_Clear(); ret = 0; }
                goto done;
            }
            pos += ln;
        } else if (ln == -1) {
            client_id = Py_NewRef(Py_None);
        } else {
            ret = 0;
            goto done;
        }
        if (hvv == 2) {
            if (pos < n && b[pos] == 0) pos += 1;
            else { ret = 0; goto done; }
        }
    }
    if (hv != Py_None && P->decode_bodies) {
        int t = always_decoded(P, k_obj, v_obj, key, ver, 1);
        if (t != 0) { ret = t < 0 ? -1 : 0; goto done; }
    }
    if (key == 0 && hv != Py_None) {
        acks = produce_acks(P, k_obj, v_obj, ver, data, b, n, pos);
        if (acks == NULL) goto done;
    } else {
        acks = Py_NewRef(Py_None);
    }
    {
        PyObject *hitems[6] = {Py_NewRef(k_obj), Py_NewRef(v_obj), Py_NewRef(c_obj), client_id, Py_NewRef(hv),
                               PyLong_FromSsize_t(pos)};
        client_id = NULL;
        PyObject *h = new_tuple(P->header_type, hitems, 6);
        if (h == NULL) goto done;
        PyObject *ritems[7] = {Py_NewRef(f), h, acks, Py_NewRef(Py_None), Py_NewRef(Py_None), Py_NewRef(Py_True),
                               Py_NewRef(Py_None)};
        acks = NULL;
        PyObject *req = new_tuple(P->request_type, ritems, 7);
        if (req == NULL) goto done;
        int r = PyDict_SetItem(pending, c_obj, req);
        Py_DECREF(req);
        ret = r < 0 ? -1 : 1;
    }
done:
    Py_XDECREF(k_obj);
    Py_XDECREF(v_obj);
    Py_XDECREF(c_obj);
    Py_XDECREF(hv);
    Py_XDECREF(client_id);
    Py_XDECREF(acks);
    return ret;
}

/* the response to another share's request, teaching nothing: 1 taken, 0 for _response, -1 error */
static int skim_response(Pairing *P, PyObject *st, PyObject *f) {
    PyObject *pending = SLOT(st, P->o_pending);
    const unsigned char *b;
    Py_ssize_t n;
    if (!frame_data(PyTuple_GET_ITEM(f, 4), &b, &n) || n < 4 || pending == NULL || !PyDict_CheckExact(pending))
        return 0;
    PyObject *c_obj = PyLong_FromLong((long)(int32_t)u32be(b));
    if (c_obj == NULL) return -1;
    int ret = -1;
    PyObject *hv = NULL, *gone = NULL;
    PyObject *req = PyDict_GetItemWithError(pending, c_obj); /* borrowed */
    if (req == NULL) { ret = PyErr_Occurred() ? -1 : 0; goto done; }
    Py_INCREF(req);
    if (!PyTuple_Check(req) || PyTuple_GET_SIZE(req) != 7 || PyTuple_GET_ITEM(req, 5) != Py_True) { ret = 0; goto done; }
    PyObject *h = PyTuple_GET_ITEM(req, 1), *rf = PyTuple_GET_ITEM(req, 0);
    if (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) != 6 || !PyTuple_Check(rf) || PyTuple_GET_SIZE(rf) != 6) {
        ret = 0;
        goto done;
    }
    PyObject *key = PyTuple_GET_ITEM(h, 0), *ver = PyTuple_GET_ITEM(h, 1);
    if (!PyLong_CheckExact(key) || !PyLong_CheckExact(ver)) { ret = 0; goto done; }
    int kv = (int)PyLong_AsLong(key), vv = (int)PyLong_AsLong(ver);
    if (PyErr_Occurred()) goto done;
    hv = header_version(P, MEMO_RESP_HV, key, ver, kv, vv);
    if (hv == NULL) goto done;
    if (hv != Py_None && P->decode_bodies) {
        int t = always_decoded(P, key, ver, kv, vv, 0);
        if (t != 0) { ret = t < 0 ? -1 : 0; goto done; } /* its body teaches: _response decodes it */
    }
    /* Kafka answers in order: acks=0 requests sent before it were never going to be answered */
    gone = PyList_New(0);
    if (gone == NULL) goto done;
    PyObject *at = PyTuple_GET_ITEM(rf, 2);
    Py_ssize_t i = 0;
    PyObject *c, *r;
    while (PyDict_Next(pending, &i, &c, &r)) {
        if (r == req) continue;
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 7 || !PyTuple_Check(PyTuple_GET_ITEM(r, 0)) ||
            PyTuple_GET_SIZE(PyTuple_GET_ITEM(r, 0)) != 6) {
            ret = 0;
            goto done;
        }
        int zero = PyObject_RichCompareBool(PyTuple_GET_ITEM(r, 2), s_zero, Py_EQ);
        if (zero < 0) goto done;
        if (!zero) continue;
        int before = PyObject_RichCompareBool(PyTuple_GET_ITEM(PyTuple_GET_ITEM(r, 0), 2), at, Py_LT);
        if (before < 0) goto done;
        if (!before) continue;
        if (PyTuple_GET_ITEM(r, 5) != Py_True) { ret = 0; goto done; } /* a row to show: _response's */
        if (PyList_Append(gone, c) < 0) goto done;
    }
    if (PyDict_DelItem(pending, c_obj) < 0) goto done;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(gone); j++)
        if (PyDict_DelItem(pending, PyList_GET_ITEM(gone, j)) < 0) goto done;
    ret = 1;
done:
    Py_XDECREF(req);
    Py_DECREF(c_obj);
    Py_XDECREF(hv);
    Py_XDECREF(gone);
    return ret;
}

/* is the row beginning now this share's? (Decoder._mine: counts it) 1, 0, -1 */
static int next_mine(Pairing *P) {
    PyObject *seq = PyObject_GetAttr(P->decoder, s_seq);
    if (seq == NULL) return -1;
    long long s = PyLong_AsLongLong(seq);
    Py_DECREF(seq);
    if (s == -1 && PyErr_Occurred()) return -1;
    PyObject *next = PyLong_FromLongLong(s + 1);
    if (next == NULL) return -1;
    int r = PyObject_SetAttr(P->decoder, s_seq, next);
    Py_DECREF(next);
    if (r < 0) return -1;
    return s % P->n == P->k;
}

static PyObject *side_frame(Side *self, PyObject *f) {
    Pairing *P = self->pairing;
    if (P == NULL || P->decoder == NULL || self->st == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a side of a connection already collected");
        return NULL;
    }
    PyObject *st = self->st, *dec = P->decoder;
    PyObject *cd = SLOT(st, P->o_client_dir);
    if (cd == NULL || cd == Py_None || !PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 6) {
        if (P->n) P->passed++;
        return PyObject_CallMethodObjArgs(dec, s__frame, st, self->d, f, NULL);
    }
    long cdv = PyLong_AsLong(cd);
    if (cdv == -1 && PyErr_Occurred()) return NULL;
    set_slot(st, P->o_framed, Py_NewRef(Py_True));
    if (cdv == self->dir) {
        if (P->n == 0) return PyObject_CallMethodObjArgs(dec, s__request, st, f, NULL);
        int mine = next_mine(P);
        if (mine < 0) return NULL;
        if (!mine) {
            int r = skim_request(P, st, f);
            if (r < 0) return NULL;
            if (r) {
                P->skimmed++;
                Py_RETURN_NONE;
            }
        }
        P->passed++;
        return PyObject_CallMethodObjArgs(dec, s__request, st, f, mine ? Py_True : Py_False, NULL);
    }
    if (P->n) {
        int r = skim_response(P, st, f);
        if (r < 0) return NULL;
        if (r) {
            P->skimmed++;
            Py_RETURN_NONE;
        }
        P->passed++;
    }
    return PyObject_CallMethodObjArgs(dec, s__response, st, f, NULL);
}

static PyObject *Side_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "a side takes one frame");
        return NULL;
    }
    return side_frame((Side *)callable, args[0]);
}

static int Side_traverse(Side *self, visitproc visit, void *arg) {
    SIDE_OBJECTS(VISIT_FIELD)
    return 0;
}

static int Side_clear(Side *self) {
    SIDE_OBJECTS(CLEAR_FIELD)
    return 0;
}

static void Side_dealloc(Side *self) {
    PyObject_GC_UnTrack(self);
    Side_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject SideType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "spark_kafkawire._lane.Side",
    .tp_basicsize = sizeof(Side),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A framer's on_frame for one direction of a connection (Pairing.side)",
    .tp_traverse = (traverseproc)Side_traverse,
    .tp_clear = (inquiry)Side_clear,
    .tp_vectorcall_offset = offsetof(Side, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = (destructor)Side_dealloc,
};

/* Pairing.side(st, d): the on_frame of direction d of the connection whose _ConnState is st */
static PyObject *Pairing_side(Pairing *self, PyObject *args) {
    PyObject *st, *d;
    if (!PyArg_ParseTuple(args, "OO!", &st, &PyLong_Type, &d)) return NULL;
    long dir = PyLong_AsLong(d);
    if (dir == -1 && PyErr_Occurred()) return NULL;
    if (self->decoder == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Pairing not initialised");
        return NULL;
    }
    Side *s = PyObject_GC_New(Side, &SideType);
    if (s == NULL) return NULL;
    s->vectorcall = Side_vectorcall;
    s->pairing = (Pairing *)Py_NewRef(self);
    s->st = Py_NewRef(st);
    s->d = Py_NewRef(d);
    s->dir = dir;
    PyObject_GC_Track(s);
    return (PyObject *)s;
}

/* answers(key, ver): (request header version, response header version, always for a request, for
   a response) as the pairing takes them, through its memo (for the tests) */
static PyObject *Pairing_answers(Pairing *self, PyObject *args) {
    int key, ver;
    if (!PyArg_ParseTuple(args, "ii", &key, &ver)) return NULL;
    PyObject *k = PyLong_FromLong(key), *v = PyLong_FromLong(ver), *out = NULL;
    if (k == NULL || v == NULL) goto done;
    PyObject *rq = header_version(self, MEMO_REQ_HV, k, v, key, ver);
    PyObject *rs = rq ? header_version(self, MEMO_RESP_HV, k, v, key, ver) : NULL;
    int aq = rs ? always_decoded(self, k, v, key, ver, 1) : -1;
    int as = aq >= 0 ? always_decoded(self, k, v, key, ver, 0) : -1;
    if (as >= 0) out = Py_BuildValue("(OOOO)", rq, rs, aq ? Py_True : Py_False, as ? Py_True : Py_False);
    Py_XDECREF(rq);
    Py_XDECREF(rs);
done:
    Py_XDECREF(k);
    Py_XDECREF(v);
    return out;
}

/* acks(ver, data, pos): the acks of a Produce request body at data[pos:], as the pairing takes them
   (through its memory of earlier ones; for the tests) */
static PyObject *Pairing_acks(Pairing *self, PyObject *args) {
    int ver;
    PyObject *data;
    Py_ssize_t pos;
    if (!PyArg_ParseTuple(args, "iOn", &ver, &data, &pos)) return NULL;
    const unsigned char *b;
    Py_ssize_t n;
    if (!frame_data(data, &b, &n) || pos < 0 || pos > n) {
        PyErr_SetString(PyExc_ValueError, "acks: bytes or bytearray, and a position inside it");
        return NULL;
    }
    PyObject *k = PyLong_FromLong(0), *v = PyLong_FromLong(ver);
    PyObject *out = k && v ? produce_acks(self, k, v, ver, data, b, n, pos) : NULL;
    Py_XDECREF(k);
    Py_XDECREF(v);
    return out;
}

static PyMethodDef Pairing_methods[] = {
    {"acks", (PyCFunction)Pairing_acks, METH_VARARGS,
     "acks(ver, data, pos): a Produce request's acks as the pairing takes them, through its memory"},
    {"side", (PyCFunction)Pairing_side, METH_VARARGS, "side(st, d): the on_frame of one direction of a connection"},
    {"answers", (PyCFunction)Pairing_answers, METH_VARARGS,
     "answers(key, ver): the header versions and always-decoded answers the pairing uses, through its memo"},
    {NULL},
};

static PyMemberDef Pairing_members[] = {
    {"skimmed", T_LONGLONG, offsetof(Pairing, skimmed), READONLY, "frames of other shares' rows taken here"},
    {"passed", T_LONGLONG, offsetof(Pairing, passed), READONLY,
     "frames of a shared read handed to the decoder's own methods"},
    {NULL},
};

static PyTypeObject PairingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "spark_kafkawire._lane.Pairing",
    .tp_basicsize = sizeof(Pairing),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Pairing_traverse,
    .tp_clear = (inquiry)Pairing_clear,
    .tp_doc = "Pairing(decoder, share, decode_bodies, request_header_version, response_header_version, "
              "always_decode, leading_field_span, Request, RequestHeader, _ConnState, max_pending)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Pairing_init,
    .tp_dealloc = (destructor)Pairing_dealloc,
    .tp_methods = Pairing_methods,
    .tp_members = Pairing_members,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_lane", "The fast lane for common packets.", -1, NULL};

PyMODINIT_FUNC PyInit__lane(void) {
    if (PyType_Ready(&LaneType) < 0 || PyType_Ready(&SideType) < 0 || PyType_Ready(&PairingType) < 0 ||
        PyType_Ready(&HalfCoreType) < 0 || PyType_Ready(&FramerCoreType) < 0)
        return NULL;
    s_seq = PyUnicode_InternFromString("seq");
    s__frame = PyUnicode_InternFromString("_frame");
    s__request = PyUnicode_InternFromString("_request");
    s__response = PyUnicode_InternFromString("_response");
    s_acks_name = PyUnicode_InternFromString("Acks");
    s_zero = PyLong_FromLong(0);
    if (!s_seq || !s__frame || !s__request || !s__response || !s_acks_name || !s_zero) return NULL;
    s_move_to_end = PyUnicode_InternFromString("move_to_end");
    s_data = PyUnicode_InternFromString("data");
    s_count = PyUnicode_InternFromString("count");
    s_backlog = PyUnicode_InternFromString("backlog");
    s_frames = PyUnicode_InternFromString("_frames");
    if (!s_move_to_end || !s_data || !s_count || !s_backlog || !s_frames) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&LaneType);
    if (PyModule_AddObject(m, "Lane", (PyObject *)&LaneType) < 0) {
        Py_DECREF(&LaneType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "Pairing", (PyObject *)&PairingType) < 0 ||
        PyModule_AddObjectRef(m, "HalfCore", (PyObject *)&HalfCoreType) < 0 ||
        PyModule_AddObjectRef(m, "FramerCore", (PyObject *)&FramerCoreType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
