/* The fast lane: the common packet of a capture, taken from record to stream in C.
 *
 * Most packets of a Kafka capture are the next in-order segment of a connection already followed,
 * or a pure acknowledgement of one. For those the pure Python stages (capture.py -> packets.py -> tcp.py
 * -> frames.py) do a fixed, small amount of work; this module does the same work on the same
 * objects, through the fields of their four core types (below: the boundary, nothing else of those
 * objects is read), and hands every other packet back untouched.
 *
 * Lane.run(buf, pos, number, offset, linktype, ns_per_tick, big_endian, record_limit, until_ts,
 *          late_from, late_budget, until)
 * walks classic pcap records in buf from pos and, for each, either
 *   - takes it: the packet is exactly what the Python stages handle by their shortest branch (an
 *     existing, open, opened connection; no SYN/FIN/RST; the direction's next bytes in order, all
 *     captured, nothing queued in either direction), and the effect is theirs, slot for slot:
 *     Connection.last_ts, the live order (OrderedDict.move_to_end), HalfStream.last_ts/captured/nxt,
 *     and the Framer's: its buffer when the bytes fall inside a frame in progress; when they
 *     complete or start frames of a framer that knows where frames start, Framer.cut's loop
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

/* ---------------------------------------------------------------------------------------------
 * The boundary with the Python stages: four core classes.
 *
 * Everything of the Python stages' objects the lane reads or writes is a field of one of the core
 * classes of wire/cores.py: ConnCore, HalfCore, FramerCore and AcctCore, the bases of Connection,
 * HalfStream, Framer and Accounting. mypyc compiles them with the stages, and writes their structs
 * into the group's header, included here: the lane reads and writes the members the compiled
 * stages read and write (a field `x` is the member `_x`), so the layout has one source, cores.py.
 * mypyc stores an `int` field as a tagged integer (CPyTagged: the value shifted left by one, or a
 * pointer to an int object with the low bit set, for values beyond 62 bits), a `bool` field as a
 * char (0, 1; 2 when unset) and the others as object pointers (NULL when unset). Besides these
 * fields the lane only calls what Lane's constructor is given (Reassembler.feed), public methods
 * (Framer.data and Framer.cut, OrderedDict.move_to_end, the row builder's count and backlog) and
 * makes the two named tuples it is given (Segment, Frame).
 * ------------------------------------------------------------------------------------------- */
#include "__native__native.h" /* mypyc's header for the compiled stages (see setup.py) */

typedef spark_kafkawire___wire___cores___ConnCoreObject ConnCore;
typedef spark_kafkawire___wire___cores___HalfCoreObject HalfCore;
typedef spark_kafkawire___wire___cores___FramerCoreObject FramerCore;
typedef spark_kafkawire___wire___cores___AcctCoreObject AcctCore;

/* the fields read or written here, per core (_lane.FIELDS: tests/test_lane.py holds them equal to
   the cores' __slots__) */
static const char *const CONN_FIELDS[] = {"done", "self_connected", "opened", "last_ts", "halves", "log", NULL};
static const char *const HALF_FIELDS[] = {"nxt", "captured", "sink", "base", "pending", "last_ts", NULL};
static const char *const FRAMER_FIELDS[] = {"pos", "target", "rest_to", "max_frame", "on_frame", "acct", "buf",
                                            "synced", "first", "disabled", "f_ts", "f_num", "f_off", NULL};
static const char *const ACCT_FIELDS[] = {"frames", "frame_bytes", NULL};

/* tagged integers (mypyc's CPyTagged) */
#define TAG_MIN (PY_SSIZE_T_MIN >> 1)
#define TAG_MAX (PY_SSIZE_T_MAX >> 1)
/* a tagged field's value: 0, or -1 (and no error) when it is unset or beyond 62 bits */
static inline int tag_get(CPyTagged t, long long *out) {
    if (t & 1) return -1;
    *out = (long long)((Py_ssize_t)t >> 1);
    return 0;
}
/* set a tagged field to v: 0, or -1 with an error */
static inline int tag_set(CPyTagged *field, long long v) {
    CPyTagged old = *field, t;
    if (v >= TAG_MIN && v <= TAG_MAX) {
        t = (CPyTagged)((Py_ssize_t)v * 2);
    } else {
        PyObject *o = PyLong_FromLongLong(v);
        if (o == NULL) return -1;
        t = (CPyTagged)o | 1;
    }
    *field = t;
    if ((old & 1) && old != 1) Py_DECREF((PyObject *)(old & ~(CPyTagged)1));
    return 0;
}
/* set a tagged field to an int object's value: 0, or -1 with an error */
static inline int tag_set_obj(CPyTagged *field, PyObject *v) {
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) return -1;
    if (!overflow) return tag_set(field, x);
    CPyTagged old = *field;
    Py_INCREF(v);
    *field = (CPyTagged)v | 1;
    if ((old & 1) && old != 1) Py_DECREF((PyObject *)(old & ~(CPyTagged)1));
    return 0;
}
/* a tagged field's value as an int object (a new reference), NULL with an error when unset */
static inline PyObject *tag_obj(CPyTagged t) {
    if (!(t & 1)) return PyLong_FromSsize_t((Py_ssize_t)t >> 1);
    if (t == 1) {
        PyErr_SetString(PyExc_AttributeError, "a core's integer field is unset");
        return NULL;
    }
    PyObject *o = (PyObject *)(t & ~(CPyTagged)1);
    Py_INCREF(o);
    return o;
}
/* add d to a tagged field: 0, or -1 with an error (an int object there, beyond 62 bits, is added to
   by Python's arithmetic) */
static inline int tag_add(CPyTagged *field, long long d) {
    long long v;
    if (!tag_get(*field, &v) && v <= TAG_MAX - d) return tag_set(field, v + d);
    PyObject *o = tag_obj(*field), *dd = PyLong_FromLongLong(d), *sum = NULL;
    if (o != NULL && dd != NULL) sum = PyNumber_Add(o, dd);
    Py_XDECREF(o);
    Py_XDECREF(dd);
    if (sum == NULL) return -1;
    int r = tag_set_obj(field, sum);
    Py_DECREF(sum);
    return r;
}

#define CC(o) ((ConnCore *)(o))
#define HC(o) ((HalfCore *)(o))
#define FC(o) ((FramerCore *)(o))
#define AC(o) ((AcctCore *)(o))

typedef struct {
    PyObject_HEAD
    PyObject *table;    /* dict: (src, sport, dst, dport) -> (Connection, direction) */
    PyObject *live;     /* OrderedDict of open connections, least recently used first */
    PyObject *rows;     /* the row builder: count and backlog tell when batches are due */
    PyObject *conn_type, *half_type, *framer_type, *frame_type, *acct_type, *segment_type;
    PyObject *feed;     /* Reassembler.feed */
    PyObject *ports;    /* None, or a bytes bitmap of the ports kept (8192 bytes) */
    long long batch_limit, min_frame;
    long long log_limit; /* a connection's event log this long: its packets go to the reassembler */
    long long taken;    /* packets taken so far (the tests check the lane is used) */
    long long cut;      /* frames it cut itself so far (likewise) */
} Lane;

static PyObject *s_move_to_end, *s_data, *s_count, *s_backlog, *s_cut;

/* replace an object field's value, taking the new reference */
#define SET_FIELD(field, v) Py_XSETREF(field, v)

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

/* 0 when cls is built on the core class `name` of wire/cores.py as compiled by mypyc (the struct
   this file was compiled against: a compiled class, of that size); -1 with a TypeError otherwise */
static int check_core(PyObject *cls, const char *name, size_t size) {
    PyObject *mod = PyImport_ImportModule("spark_kafkawire.wire.cores");
    if (mod == NULL) return -1;
    PyObject *core = PyObject_GetAttrString(mod, name);
    Py_DECREF(mod);
    if (core == NULL) return -1;
    int ok = PyType_Check(core) && PyObject_HasAttrString(core, "__mypyc_attrs__") &&
             (size_t)((PyTypeObject *)core)->tp_basicsize == size && PyType_Check(cls) &&
             PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)core);
    Py_DECREF(core);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "the lane takes subclasses of the compiled cores (%s)", name);
        return -1;
    }
    return 0;
}

static int Lane_init(Lane *self, PyObject *args, PyObject *kw) {
    PyObject *table, *live, *rows, *ports, *ct, *ht, *ft, *frt, *at, *sgt, *feed;
    long long limit, min_frame, log_limit;
    if (!PyArg_ParseTuple(args, "O!OOLOOOOO!OLO!OL", &PyDict_Type, &table, &live, &rows, &limit, &ports, &ct, &ht,
                          &ft, &PyType_Type, &frt, &at, &min_frame, &PyType_Type, &sgt, &feed, &log_limit))
        return -1;
    PyObject *sfields = PyObject_GetAttrString(sgt, "_fields");
    if (sfields == NULL) return -1;
    int twelve = PyTuple_Check(sfields) && PyTuple_GET_SIZE(sfields) == 12;
    Py_DECREF(sfields);
    if (!twelve || !PyType_IsSubtype((PyTypeObject *)sgt, &PyTuple_Type) || !PyCallable_Check(feed)) {
        PyErr_SetString(PyExc_TypeError, "Segment: a named tuple of twelve fields; feed: callable");
        return -1;
    }
    /* Frame: a tuple of seven (ts_ns, number, offset, size, data, complete, last_ts), made as tuple.__new__
       would */
    PyObject *fields = PyObject_GetAttrString(frt, "_fields");
    if (fields == NULL) return -1;
    int seven = PyTuple_Check(fields) && PyTuple_GET_SIZE(fields) == 7;
    Py_DECREF(fields);
    if (!seven || !PyType_IsSubtype((PyTypeObject *)frt, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "Frame: a named tuple of seven fields");
        return -1;
    }
    if (ports != Py_None && (!PyBytes_Check(ports) || PyBytes_GET_SIZE(ports) != 8192)) {
        PyErr_SetString(PyExc_ValueError, "ports: None or an 8192-byte bitmap");
        return -1;
    }
    if (check_core(ct, "ConnCore", sizeof(ConnCore)) < 0 || check_core(ht, "HalfCore", sizeof(HalfCore)) < 0 ||
        check_core(ft, "FramerCore", sizeof(FramerCore)) < 0 || check_core(at, "AcctCore", sizeof(AcctCore)) < 0)
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
    self->log_limit = log_limit;
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

/* an int object as a C value; -1 and no error when it is not a small int */
static inline int small_int(PyObject *v, long long *out) {
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

static int touch(Lane *self, RunState *rs, PyObject *conn, long long ts_ns) {
    if (tag_set(&CC(conn)->_last_ts, ts_ns) < 0) return -1;
    if (rs->last_moved == conn) return 0; /* already the last: moving it again changes nothing */
    PyObject *r = PyObject_CallMethodOneArg(self->live, s_move_to_end, conn);
    if (r == NULL) return -1;
    Py_DECREF(r);
    rs->last_moved = conn;
    return 0;
}

/* may the lane take a packet of this connection: its event log is a bytearray with room */
static int log_room(Lane *self, PyObject *conn) {
    PyObject *log = CC(conn)->_log;
    return log != NULL && PyByteArray_CheckExact(log) && PyByteArray_GET_SIZE(log) < self->log_limit;
}

/* append a taken packet's event to its connection's log (health.EVENT: little-endian "<qIIIHBB") */
static int log_event(PyObject *conn, long long ts_ns, unsigned long seq, unsigned long ack, Py_ssize_t len,
                     unsigned win, unsigned flags, int dir) {
    PyObject *log = CC(conn)->_log;
    Py_ssize_t n = PyByteArray_GET_SIZE(log);
    if (PyByteArray_Resize(log, n + 24) < 0) return -1;
    unsigned char *p = (unsigned char *)PyByteArray_AS_STRING(log) + n;
    unsigned long long t = (unsigned long long)ts_ns;
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(t >> (8 * i));
    for (int i = 0; i < 4; i++) {
        p[8 + i] = (unsigned char)(seq >> (8 * i));
        p[12 + i] = (unsigned char)(ack >> (8 * i));
        p[16 + i] = (unsigned char)((unsigned long)len >> (8 * i));
    }
    p[20] = (unsigned char)win;
    p[21] = (unsigned char)(win >> 8);
    p[22] = (unsigned char)flags;
    p[23] = (unsigned char)dir;
    return 0;
}

static int empty_list(PyObject *v) { return v != NULL && PyList_CheckExact(v) && PyList_GET_SIZE(v) == 0; }

/* a Frame(ts, number, offset, size, data, True, last), taking the references to off, size and data */
static PyObject *new_frame(Lane *self, PyObject *ts, PyObject *num, PyObject *off, PyObject *size, PyObject *data,
                           PyObject *last) {
    PyObject *f = NULL;
    if (off != NULL && size != NULL && data != NULL)
        f = ((PyTypeObject *)self->frame_type)->tp_alloc((PyTypeObject *)self->frame_type, 7);
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
    Py_INCREF(last);
    PyTuple_SET_ITEM(f, 6, last);
    return f;
}

/* the framer as cut found it: synced, enabled, nothing held back by a gap, this buffer */
static int framing_as_before(Lane *self, PyObject *fr, PyObject *buf) {
    return FC(fr)->_buf == buf && FC(fr)->_synced == 1 && FC(fr)->_disabled == 0 && FC(fr)->_rest_to == 0;
}

/* size field of a frame: 4 bytes, the first `had` of them in the frame buffer */
static long long size_field(PyObject *buf, Py_ssize_t had, const unsigned char *c) {
    unsigned char b[4];
    memcpy(b, PyByteArray_AS_STRING(buf), had);
    memcpy(b + had, c, 4 - had);
    return (long long)(int32_t)u32be(b);
}

/* the frame in progress grows by n bytes towards `target` bytes in all (copied once into the
   frame's bytes when whole). Its buffer is sized for the whole frame as soon as a sixteenth of it
   has arrived (one allocation, no copies as it grows); before that it doubles, so a size field nothing backs yet
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

/* Framer.data(chunk) of a framer that knows where frames start (its cut loop), in C: 1 done, 0
   when the Python method must take the chunk (nothing has been changed: the framer is in another
   state, or a size field the chunk completes is out of bounds, which loses sync), -1 error. */
static int frame_chunk(Lane *self, PyObject *fr, const unsigned char *c, Py_ssize_t n, PyObject *ts, PyObject *num) {
    long long target, fpos, maxf;
    PyObject *buf = FC(fr)->_buf, *acct = FC(fr)->_acct, *on_frame = FC(fr)->_on_frame;
    if (FC(fr)->_first != 0 || buf == NULL || !PyByteArray_CheckExact(buf) ||
        !framing_as_before(self, fr, buf) || acct == NULL || !Py_IS_TYPE(acct, (PyTypeObject *)self->acct_type) ||
        on_frame == NULL || tag_get(FC(fr)->_target, &target) || tag_get(FC(fr)->_pos, &fpos) ||
        tag_get(FC(fr)->_max_frame, &maxf))
        return 0;
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
    if (tag_set(&FC(fr)->_pos, fpos + n) < 0) return -1;
    p = 0;
    while (p < n) {
        if (p > 0 && !framing_as_before(self, fr, buf)) { /* an on_frame changed the framer: its way */
            PyObject *rest = PyBytes_FromStringAndSize((const char *)c + p, n - p);
            PyObject *at = PyLong_FromLongLong(fpos + p);
            PyObject *r = rest && at ? PyObject_CallMethodObjArgs(fr, s_cut, rest, ts, num, at, NULL) : NULL;
            Py_XDECREF(rest);
            Py_XDECREF(at);
            if (r == NULL) return -1;
            Py_DECREF(r);
            return 1;
        }
        held = PyByteArray_GET_SIZE(buf);
        if (held == 0) { /* a frame starts at p */
            long long size = 0;
            if (n - p >= 4) {
                size = (long long)(int32_t)u32be(c + p);
                if (n - p - 4 >= size) { /* the whole frame is in this chunk */
                    if (tag_add(&AC(acct)->_frames, 1) < 0 || tag_add(&AC(acct)->_frame_bytes, 4 + size) < 0)
                        return -1;
                    PyObject *f = new_frame(self, ts, num, PyLong_FromLongLong(fpos + p), PyLong_FromLongLong(size),
                                            PyBytes_FromStringAndSize((const char *)c + p + 4, (Py_ssize_t)size), ts);
                    if (f == NULL) return -1;
                    self->cut += 1;
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
            int bad = tag_set(&FC(fr)->_target, n - p >= 4 ? 4 + size : 4) < 0 ||
                      tag_set_obj(&FC(fr)->_f_ts, ts) < 0 || tag_set_obj(&FC(fr)->_f_num, num) < 0 ||
                      tag_set_obj(&FC(fr)->_f_off, off) < 0;
            Py_DECREF(off);
            if (bad) return -1;
            return frame_append(buf, c + p, n - p, n - p >= 4 ? 4 + size : 4) < 0 ? -1 : 1;
        }
        /* continue the frame in progress */
        if (tag_get(FC(fr)->_target, &tg)) {
            PyErr_SetString(PyExc_RuntimeError, "a framer's target beyond 62 bits");
            return -1;
        }
        Py_ssize_t take = tg - held < n - p ? (Py_ssize_t)(tg - held) : n - p;
        if (frame_append(buf, c + p, take, tg) < 0) return -1;
        p += take;
        if (held + take < tg) return 1;
        if (tg == 4) { /* its size field is now complete (checked above) */
            if (tag_set(&FC(fr)->_target, 4 + (long long)(int32_t)u32be((const unsigned char *)PyByteArray_AS_STRING(buf))) < 0)
                return -1;
            continue;
        }
        if (tag_add(&AC(acct)->_frames, 1) < 0 || tag_add(&AC(acct)->_frame_bytes, tg) < 0) return -1;
        PyObject *ft = tag_obj(FC(fr)->_f_ts), *fn = ft ? tag_obj(FC(fr)->_f_num) : NULL;
        PyObject *fo = fn ? tag_obj(FC(fr)->_f_off) : NULL;
        if (fo == NULL) {
            Py_XDECREF(ft);
            Py_XDECREF(fn);
            return -1;
        }
        /* the frame's data is bytes, its size field left out (as cut makes it), and the framer
           takes a new buffer */
        PyObject *fresh = PyByteArray_FromStringAndSize(NULL, 0);
        PyObject *data = fresh ? PyBytes_FromStringAndSize(PyByteArray_AS_STRING(buf) + 4, PyByteArray_GET_SIZE(buf) - 4) : NULL;
        if (data == NULL || tag_set(&FC(fr)->_target, 4) < 0) {
            Py_XDECREF(fresh);
            Py_XDECREF(data);
            Py_DECREF(ft);
            Py_DECREF(fn);
            Py_DECREF(fo);
            return -1;
        }
        /* new_frame takes data's reference (and fo's); SET_FIELD drops the framer's old buffer */
        buf = fresh;
        SET_FIELD(FC(fr)->_buf, fresh);
        PyObject *f = new_frame(self, ft, fn, fo, PyLong_FromLongLong(tg - 4), data, ts);
        Py_DECREF(ft);
        Py_DECREF(fn);
        if (f == NULL) return -1;
        self->cut += 1;
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
                        Py_ssize_t wire_len, unsigned win) {
    PyObject *items[12] = {
        PyLong_FromLongLong(number), PyLong_FromLongLong(ts_ns),
        PyBytes_FromStringAndSize((const char *)src, alen), PyLong_FromUnsignedLong(sport),
        PyBytes_FromStringAndSize((const char *)dst, alen), PyLong_FromUnsignedLong(dport),
        PyLong_FromUnsignedLong(seq), PyLong_FromUnsignedLong(ack), PyLong_FromUnsignedLong(flags),
        PyBytes_FromStringAndSize((const char *)payload, caplen), PyLong_FromSsize_t(wire_len),
        PyLong_FromUnsignedLong(win),
    };
    PyObject *seg = NULL;
    int ok = 1;
    for (int i = 0; i < 12; i++) ok = ok && items[i] != NULL;
    if (ok) seg = ((PyTypeObject *)self->segment_type)->tp_alloc((PyTypeObject *)self->segment_type, 12);
    if (seg == NULL) {
        for (int i = 0; i < 12; i++) Py_XDECREF(items[i]);
        return FAILED;
    }
    for (int i = 0; i < 12; i++) PyTuple_SET_ITEM(seg, i, items[i]);
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
    unsigned long seq = u32be(t + 4), ack = u32be(t + 8);
    unsigned win = u16be(t + 14);
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
#define FEED return feed_segment(self, rs, number, ts_ns, src, dst, alen, sport, dport, seq, ack, flags, d + start, caplen, wire_len, win)
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
    if (CC(conn)->_done != 0 || CC(conn)->_self_connected != 0 || !log_room(self, conn)) FEED;
    /* a pure acknowledgement of a connection that carried payload: the connection is only touched
       (before that, the reassembler reads it: it may be the handshake's last step, see Connection.handshake) */
    if (wire_len == 0 && CC(conn)->_opened == 1) {
        if (log_event(conn, ts_ns, seq, ack, 0, win, flags, dir) < 0) return FAILED;
        return touch(self, rs, conn, ts_ns) < 0 ? FAILED : TAKEN;
    }
    if (caplen != wire_len) FEED; /* cut by the snaplen */
    if (CC(conn)->_opened != 1) FEED;
    PyObject *halves = CC(conn)->_halves;
    if (halves == NULL || !PyList_CheckExact(halves) || PyList_GET_SIZE(halves) != 2) FEED;
    PyObject *half = PyList_GET_ITEM(halves, dir), *other = PyList_GET_ITEM(halves, 1 - dir);
    if (!Py_IS_TYPE(half, (PyTypeObject *)self->half_type) || !Py_IS_TYPE(other, (PyTypeObject *)self->half_type))
        FEED;
    if ((flags & TCP_ACK) && !empty_list(HC(other)->_pending)) FEED;
    if (!empty_list(HC(half)->_pending)) FEED;
    long long base, nxt, captured;
    if (small_int(HC(half)->_base, &base) || tag_get(HC(half)->_nxt, &nxt) || tag_get(HC(half)->_captured, &captured) ||
        captured > TAG_MAX - wire_len || nxt > TAG_MAX - wire_len)
        FEED;
    if ((((unsigned long long)seq - (unsigned long long)base - (unsigned long long)nxt) & 0xFFFFFFFFull) != 0)
        FEED;
    PyObject *sink = HC(half)->_sink;
    if (sink == NULL || sink == Py_None) FEED;
    /* inside a frame in progress (Framer.data's first branch): the bytes join its buffer */
    int append = 0;
    PyObject *fbuf = NULL;
    long long target = 0, fpos = 0;
    if (Py_IS_TYPE(sink, (PyTypeObject *)self->framer_type)) {
        fbuf = FC(sink)->_buf;
        if (tag_get(FC(sink)->_target, &target) || tag_get(FC(sink)->_pos, &fpos)) FEED;
        if (FC(sink)->_rest_to == 0 && fbuf != NULL && PyByteArray_CheckExact(fbuf) &&
            PyByteArray_GET_SIZE(fbuf) > 0 && target > 4 && wire_len < target - PyByteArray_GET_SIZE(fbuf))
            append = 1;
    }
    /* taken: from here on, the Python stages' effects, in their order */
    if (log_event(conn, ts_ns, seq, ack, wire_len, win, flags, dir) < 0) return FAILED;
    if (touch(self, rs, conn, ts_ns) < 0 || tag_set(&HC(half)->_last_ts, ts_ns) < 0 ||
        tag_set(&HC(half)->_captured, captured + wire_len) < 0)
        return FAILED;
    const unsigned char *payload = d + start;
    int result = TAKEN;
    PyObject *ts = NULL;
    if (append) {
        if (frame_append(fbuf, payload, wire_len, target) < 0 || tag_set(&FC(sink)->_pos, fpos + wire_len) < 0)
            return FAILED;
    } else {
        ts = PyLong_FromLongLong(ts_ns);
        if (ts == NULL) return FAILED;
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
        Py_CLEAR(ts);
        if (tag_get(HC(half)->_nxt, &nxt) || nxt > TAG_MAX - wire_len) {
            PyErr_SetString(PyExc_RuntimeError, "a stream offset beyond 62 bits");
            return FAILED;
        }
    }
    return tag_set(&HC(half)->_nxt, nxt + wire_len) < 0 ? FAILED : result;
fail:
    Py_XDECREF(ts);
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
    {"cut", T_LONGLONG, offsetof(Lane, cut), READONLY, "frames it cut itself so far"},
    {NULL},
};

static PyTypeObject LaneType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "spark_kafkawire.wire._lane.Lane",
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

/* append(buf, chunk, pos, n, target): chunk[pos:pos + n] joins the frame in progress `buf` (a
   bytearray) of `target` bytes in all, by frame_append's rule. Framer.cut and Framer.data call it
   where the lane does not frame (a TLS direction's plaintext, a chunk the lane hands back): Python
   cannot size a bytearray ahead (bytearray += shrinks a buffer held less than half full), so a
   frame of megabytes grown from 16 KiB records was copied again at every step of its growth. */
static PyObject *lane_append(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyByteArray_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "append(buf: bytearray, chunk, pos, n, target)");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[2]), n = PyLong_AsSsize_t(args[3]);
    long long target = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0) return NULL;
    if (pos < 0 || n < 0 || pos > view.len || n > view.len - pos) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "append: bytes outside the chunk");
        return NULL;
    }
    int r = frame_append(args[0], (const unsigned char *)view.buf + pos, n, target);
    PyBuffer_Release(&view);
    if (r < 0) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"append", (PyCFunction)(void (*)(void))lane_append, METH_FASTCALL,
     "append(buf, chunk, pos, n, target): chunk[pos:pos + n] joins a frame in progress of target bytes"},
    {NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_lane", "The fast lane for common packets.", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__lane(void) {
    if (PyType_Ready(&LaneType) < 0) return NULL;
    s_move_to_end = PyUnicode_InternFromString("move_to_end");
    s_data = PyUnicode_InternFromString("data");
    s_count = PyUnicode_InternFromString("count");
    s_backlog = PyUnicode_InternFromString("backlog");
    s_cut = PyUnicode_InternFromString("cut");
    if (!s_move_to_end || !s_data || !s_count || !s_backlog || !s_cut) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&LaneType);
    if (PyModule_AddObject(m, "Lane", (PyObject *)&LaneType) < 0) {
        Py_DECREF(&LaneType);
        Py_DECREF(m);
        return NULL;
    }
    /* FIELDS: core -> the fields read or written here */
    PyObject *fields = PyDict_New();
    const char *const *lists[] = {CONN_FIELDS, HALF_FIELDS, FRAMER_FIELDS, ACCT_FIELDS};
    const char *names[] = {"ConnCore", "HalfCore", "FramerCore", "AcctCore"};
    for (int i = 0; fields != NULL && i < 4; i++) {
        Py_ssize_t n = 0;
        while (lists[i][n] != NULL) n++;
        PyObject *t = PyTuple_New(n);
        for (Py_ssize_t k = 0; t != NULL && k < n; k++) {
            PyObject *f = PyUnicode_FromString(lists[i][k]);
            if (f == NULL) Py_CLEAR(t);
            else PyTuple_SET_ITEM(t, k, f);
        }
        if (t == NULL || PyDict_SetItemString(fields, names[i], t) < 0) Py_CLEAR(fields);
        Py_XDECREF(t);
    }
    if (fields == NULL || PyModule_AddObject(m, "FIELDS", fields) < 0) {
        Py_XDECREF(fields);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
