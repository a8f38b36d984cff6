/* The fast lane: capture records to TCP segments, in C.
 *
 * This is capture.py's record walk (classic pcap records, pcapng Enhanced Packet Blocks) and
 * packets.dissect (Ethernet with 802.1Q/QinQ tags, Linux cooked v1 and v2; IPv4 without fragments;
 * IPv6 without extension headers; TCP) for the packets most captures are made of. Each packet it
 * reads becomes the segment packets.dissect makes of it (its fields), and the segments of up to
 * BATCH packets go to the reassembler at a time, as a table of their numbers with a list of their
 * payloads and one of their addresses (lane.Batch.feed, compiled, gives each to
 * Reassembler.segment): TCP reassembly, framing and everything after stay in the Python stages
 * (compiled by mypyc, see setup.py), written once. What is here is only what a Python loop over a
 * file's records cannot do at the speed of the bytes: one object per field of every packet.
 *
 * Lane(feed)
 * Lane.run(buf, pos, number, offset, linktype, ns_per_tick, big_endian, record_limit, late_from,
 *          late_budget)
 * walks classic pcap records in buf from pos and, for each,
 *   - adds its segment to the batch, handed to feed(table, n, payloads, addrs) when full, or
 *   - counts it and goes on, where packets.dissect would make no segment of it whatever it holds
 *     (shorter than its link header, or a link payload neither IPv4 nor IPv6), or
 *   - stops before it (handing on the batch first): a record cut by the buffer's end or damaged, a
 *     link or network layer not listed above, IP without TCP, a segmentation-offload packet (IPv4
 *     total length 0), or the packet after late_budget packets timed past late_from; the Python
 *     stages read it.
 * (late_from is a time filter's bound: the reader checks, every 512th packet past it, whether
 * reading can stop; the lane stops before each such packet and counts those it reads.)
 * feed returns how many packets it handed on: all of them, or (negated) fewer when rows became
 * due after the last of those, as the reader's loop checks after each packet. The lane then
 * returns at once, after that packet: the records after it are read again at the next call.
 *
 * Returns (pos, number, offset, flush, late): where the next record starts, the records counted so
 * far, its byte offset in the file, whether rows were made that the caller must hand on first, and
 * the packets read timed past late_from.
 *
 * The module also has append(buf, chunk, pos, n, target), the frame buffer's growth (see there).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>
#include <limits.h>

#define ADDRS 8
#define BATCH 64      /* packets handed to the reassembler at a time */
#define ROW_FIELDS 11  /* a packet's row of int64 in the batch's table (lane.py: ROW_FIELDS) */

/* where the records after a batch's packet start, for starting again after it */
typedef struct {
    Py_ssize_t pos;
    long long offset, number;
    int late;
} After;

typedef struct {
    PyObject_HEAD
    PyObject *feed;     /* lane.Batch.feed: feed(table, n, payloads, addrs) -> packets handed on */
    PyObject *table;    /* bytes: BATCH rows of ROW_FIELDS little-endian int64 (made anew if someone kept it) */
    PyObject *payloads; /* list: each packet's TCP payload */
    PyObject *addrs;    /* list: each packet's source and destination address */
    int n;              /* packets in the batch */
    After after[BATCH];
    long long taken;    /* packets read so far (the tests check the lane is used) */
    PyObject *seen[ADDRS]; /* address bytes made lately (see address) */
    int next_addr;
} Lane;

static void Lane_dealloc(Lane *self) {
    Py_XDECREF(self->feed);
    Py_XDECREF(self->table);
    Py_XDECREF(self->payloads);
    Py_XDECREF(self->addrs);
    for (int i = 0; i < ADDRS; i++) Py_XDECREF(self->seen[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *filled_list(Py_ssize_t n) {
    PyObject *l = PyList_New(n);
    if (l == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(Py_None);
        PyList_SET_ITEM(l, i, Py_None);
    }
    return l;
}

static int Lane_init(Lane *self, PyObject *args, PyObject *kw) {
    (void)kw;
    PyObject *feed;
    if (!PyArg_ParseTuple(args, "O", &feed)) return -1;
    if (!PyCallable_Check(feed)) {
        PyErr_SetString(PyExc_TypeError, "Lane(feed): feed, a callable taking a batch (lane.Batch.feed)");
        return -1;
    }
    PyObject *table = PyBytes_FromStringAndSize(NULL, BATCH * ROW_FIELDS * 8);
    PyObject *payloads = filled_list(BATCH), *addrs = filled_list(2 * BATCH);
    if (table == NULL || payloads == NULL || addrs == NULL) {
        Py_XDECREF(table);
        Py_XDECREF(payloads);
        Py_XDECREF(addrs);
        return -1;
    }
    memset(PyBytes_AS_STRING(table), 0, BATCH * ROW_FIELDS * 8);
    Py_INCREF(feed);
    Py_XSETREF(self->feed, feed);
    Py_XSETREF(self->table, table);
    Py_XSETREF(self->payloads, payloads);
    Py_XSETREF(self->addrs, addrs);
    self->n = 0;
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

/* the frame in progress grows by n bytes towards `target` bytes in all (copied once into the
   frame's bytes when whole, by Framer.cut). Its buffer is sized for the whole frame as soon as a sixteenth of it
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

enum { TAKEN = 0, STOP = 1, SKIP = 2, FAILED = -1 };

/* the bytes of an address (a new reference): one of the last ADDRS made when it has the same
   bytes (a connection's packets repeat them: no object made and freed for each, and the table's
   lookup finds their hash kept). */
static PyObject *address(Lane *self, const unsigned char *a, int alen) {
    for (int i = 0; i < ADDRS; i++) {
        PyObject *b = self->seen[i];
        if (b != NULL && PyBytes_GET_SIZE(b) == alen && memcmp(PyBytes_AS_STRING(b), a, alen) == 0) {
            Py_INCREF(b);
            return b;
        }
    }
    PyObject *b = PyBytes_FromStringAndSize((const char *)a, alen);
    if (b == NULL) return NULL;
    Py_INCREF(b);
    Py_XSETREF(self->seen[self->next_addr], b);
    self->next_addr = (self->next_addr + 1) % ADDRS;
    return b;
}

static void put_le64(unsigned char *p, long long v) {
    unsigned long long u = (unsigned long long)v;
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(u >> (8 * i));
}

/* the packet's segment (the fields packets.dissect gives a Segment) joins the batch: its numbers a
   row of the table, its payload and addresses items of the lists. TAKEN or FAILED */
static int add_segment(Lane *self, long long number, long long ts_ns, const unsigned char *src,
                       const unsigned char *dst, int alen, unsigned sport, unsigned dport, unsigned long seq,
                       unsigned long ack, unsigned flags, const unsigned char *payload, Py_ssize_t caplen,
                       Py_ssize_t wire_len, unsigned win, long long ip_id, long long dsack) {
    int i = self->n;
    if (i == 0 && Py_REFCNT(self->table) != 1) { /* the last batch's table is still held: a new one */
        PyObject *t = PyBytes_FromStringAndSize(NULL, BATCH * ROW_FIELDS * 8);
        if (t == NULL) return FAILED;
        memset(PyBytes_AS_STRING(t), 0, BATCH * ROW_FIELDS * 8);
        Py_SETREF(self->table, t);
    }
    PyObject *pl = PyBytes_FromStringAndSize((const char *)payload, caplen);
    PyObject *a = address(self, src, alen), *b = address(self, dst, alen);
    if (pl == NULL || a == NULL || b == NULL) {
        Py_XDECREF(pl);
        Py_XDECREF(a);
        Py_XDECREF(b);
        return FAILED;
    }
    PyList_SetItem(self->payloads, i, pl); /* (steals the new items, drops the last batch's) */
    PyList_SetItem(self->addrs, 2 * i, a);
    PyList_SetItem(self->addrs, 2 * i + 1, b);
    unsigned char *row = (unsigned char *)PyBytes_AS_STRING(self->table) + (Py_ssize_t)i * ROW_FIELDS * 8;
    long long fields[ROW_FIELDS] = {number, ts_ns, sport, dport, (long long)seq, (long long)ack, flags,
                                    (long long)wire_len, win, ip_id, dsack};
    for (int f = 0; f < ROW_FIELDS; f++) put_le64(row + 8 * f, fields[f]);
    self->n = i + 1;
    return TAKEN;
}

/* the batch to the reassembler (lane.Batch.feed): the packets handed on (all of them, or fewer
   when rows became due after the last of those: *due), or -1 on an error */
static int hand_on(Lane *self, int *due) {
    *due = 0;
    int n = self->n;
    if (n == 0) return 0;
    self->n = 0;
    PyObject *count = PyLong_FromLong(n);
    if (count == NULL) return -1;
    PyObject *args[4] = {self->table, count, self->payloads, self->addrs};
    PyObject *r = PyObject_Vectorcall(self->feed, args, 4, NULL);
    Py_DECREF(count);
    if (r == NULL) return -1;
    long k = PyLong_AsLong(r);
    Py_DECREF(r);
    if (k == -1 && PyErr_Occurred()) return -1;
    if (k < 0) {
        *due = 1;
        k = -k;
    }
    if (k < 1 || k > n || (k < n && !*due)) {
        PyErr_Format(PyExc_ValueError, "the lane's feed handed on %ld of %d packets", k, n);
        return -1;
    }
    return (int)k;
}

/* the D-SACK block among a segment's TCP options t[20:doff] (packets._dsack): (length << 32) | left
   of a first SACK block the cumulative ACK covers, or that the second block holds; -1 for none */
static long long dsack_of(const unsigned char *t, Py_ssize_t doff, unsigned long ack) {
    Py_ssize_t pos = 20;
    while (pos < doff) {
        unsigned kind = t[pos];
        if (kind == 0) return -1;
        if (kind == 1) {
            pos++;
            continue;
        }
        if (pos + 1 >= doff) return -1;
        unsigned len = t[pos + 1];
        if (len < 2) return -1;
        if (kind == 5) {
            if (len < 10 || pos + 10 > doff) return -1;
            unsigned long left = u32be(t + pos + 2), right = u32be(t + pos + 6);
            int dup = ((ack - right) & 0xFFFFFFFFUL) < 0x80000000UL;
            if (!dup && len >= 18 && pos + 18 <= doff) {
                unsigned long l2 = u32be(t + pos + 10), r2 = u32be(t + pos + 14);
                dup = ((left - l2) & 0xFFFFFFFFUL) < 0x80000000UL && ((r2 - right) & 0xFFFFFFFFUL) < 0x80000000UL;
            }
            return dup ? (long long)((((right - left) & 0x7FFFFFFFUL) << 32) | left) : -1;
        }
        pos += len;
    }
    return -1;
}

/* one packet's captured bytes d[0:dl], as packets.dissect reads them, into the batch: TAKEN, STOP,
   SKIP (a packet packets.dissect makes no segment of whatever it holds: shorter than its link
   header, or neither IPv4 nor IPv6; counted and passed over here, not handed to the Python stages
   one by one) or FAILED */
static int take(Lane *self, const unsigned char *d, Py_ssize_t dl, int linktype, long long ts_ns,
                long long number) {
    unsigned et;
    Py_ssize_t off;
    switch (linktype) {
    case 1: /* Ethernet, with 802.1Q/QinQ tags */
        if (dl < 14) return SKIP;
        et = u16be(d + 12);
        off = 14;
        while ((et == 0x8100 || et == 0x88A8 || et == 0x9100) && dl >= off + 4) {
            et = u16be(d + off + 2);
            off += 4;
        }
        break;
    case 113: /* Linux cooked */
        if (dl < 16) return SKIP;
        et = u16be(d + 14);
        off = 16;
        break;
    case 276: /* Linux cooked v2 */
        if (dl < 20) return SKIP;
        et = u16be(d);
        off = 20;
        break;
    default:
        return STOP;
    }
    const unsigned char *src, *dst;
    int alen;
    Py_ssize_t tcp, end, ipw;
    long long ip_id = -1; /* IPv4's identification field; IPv6 has none */
    if (et == 0x0800) {
        if (dl < off + 20 || d[off] >> 4 != 4) return STOP;
        Py_ssize_t ihl = (d[off] & 0x0F) * 4;
        if (d[off + 9] != 6 || ihl < 20) return STOP;
        if (u16be(d + off + 6) & 0x3FFF) return STOP; /* a fragment */
        unsigned total = u16be(d + off + 2);
        if (total == 0) return STOP; /* segmentation offload: the Python stages decide */
        ip_id = u16be(d + off + 4);
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
        return SKIP; /* (ARP, LLDP, ...: packets._network's ethertype, neither IP) */
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
    long long dsack = -1; /* (the common options, timestamps alone, hold none) */
    if (doff > 20 && !(doff == 32 && t[20] == 1 && t[21] == 1 && t[22] == 8 && t[23] == 10) && start <= dl)
        dsack = dsack_of(t, doff, ack);
    Py_ssize_t stop = end < dl ? end : dl;
    if (start + wire_len < stop) stop = start + wire_len;
    Py_ssize_t caplen = stop > start ? stop - start : 0;
    return add_segment(self, number, ts_ns, src, dst, alen, sport, dport, seq, ack, flags, d + start, caplen,
                       wire_len, win, ip_id, dsack);
}

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

/* read records from pos on, as the module's comment says, for either format */
static PyObject *walk(Lane *self, Py_buffer *view, Py_ssize_t pos, long long number, long long offset,
                      const Format *f, long long late_from, long long budget) {
    const unsigned char *buf = (const unsigned char *)view->buf;
    Py_ssize_t len = view->len;
    int flush = 0, due = 0, ended = 0;
    long long late = 0;         /* packets handed on timed past late_from */
    long long pending_late = 0; /* the same in the batch not yet handed on */
    long long skipped_late = 0; /* of those, packets passed over (SKIP) since the batch's last packet */
    const unsigned char *data;
    Py_ssize_t dlen;
    int linktype;
    long long ts, rlen;
    self->n = 0;
    while (!ended) {
        if (!record(f, buf, len, pos, &data, &dlen, &linktype, &ts, &rlen) ||
            (ts > late_from && late + pending_late >= budget)) {
            ended = 1; /* the Python stages read from here: the batch goes before */
        } else {
            int r = take(self, data, dlen, linktype, ts, number + 1);
            if (r == FAILED) goto failed;
            if (r == SKIP) { /* no segment: counted, as the Python loop counts it */
                pos += rlen;
                offset += rlen;
                number += 1;
                if (ts > late_from) { /* (counted with the next packet taken: read again after it if due) */
                    skipped_late += 1;
                    pending_late += 1;
                }
                continue;
            }
            if (r == STOP) {
                ended = 1;
            } else {
                pos += rlen;
                offset += rlen;
                number += 1;
                int is_late = ts > late_from;
                pending_late += is_late;
                self->after[self->n - 1] = (After){pos, offset, number, is_late + (int)skipped_late};
                skipped_late = 0;
                if (self->n < BATCH) continue;
            }
        }
        if (self->n == 0) continue;
        int k = hand_on(self, &due);
        if (k < 0) goto failed;
        self->taken += k;
        for (int i = 0; i < k; i++) late += self->after[i].late;
        pending_late = skipped_late; /* (passed over after the batch's last packet: still to count) */
        if (due) { /* rows to hand on after the k-th packet: the records after it are read again */
            pos = self->after[k - 1].pos;
            offset = self->after[k - 1].offset;
            number = self->after[k - 1].number;
            flush = 1;
            break;
        }
    }
    if (!flush)
        late += skipped_late; /* passed over after the last packet taken, and not to be read again */
    PyBuffer_Release(view);
    return Py_BuildValue("nLLOL", pos, number, offset, flush ? Py_True : Py_False, late);
failed:
    self->n = 0;
    PyBuffer_Release(view);
    return NULL;
}

static PyObject *Lane_run(Lane *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    long long number, offset, late_from, budget;
    Format f = {0};
    if (!PyArg_ParseTuple(args, "y*nLLiLpLLL", &view, &pos, &number, &offset, &f.linktype, &f.ns_per_tick, &f.big,
                          &f.record_limit, &late_from, &budget))
        return NULL;
    return walk(self, &view, pos, number, offset, &f, late_from, budget);
}

/* Lane.run_ng(buf, pos, number, offset, big_endian, interfaces, record_limit, late_from, late_budget):
   as run(), over the Enhanced Packet Blocks of a pcapng section; interfaces: [(linktype, snaplen,
   ticks_per_second, offset_s)] as capture.py keeps them. Any other block stops it. */
static PyObject *Lane_run_ng(Lane *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    long long number, offset, late_from, budget;
    Format f = {0};
    f.pcapng = 1;
    if (!PyArg_ParseTuple(args, "y*nLLpO!LLL", &view, &pos, &number, &offset, &f.big, &PyList_Type, &f.ifaces,
                          &f.record_limit, &late_from, &budget))
        return NULL;
    return walk(self, &view, pos, number, offset, &f, late_from, budget);
}

static PyMethodDef Lane_methods[] = {
    {"run", (PyCFunction)Lane_run, METH_VARARGS, "Read the records it can from buf at pos; see the module."},
    {"run_ng", (PyCFunction)Lane_run_ng, METH_VARARGS, "As run, over pcapng Enhanced Packet Blocks."},
    {NULL},
};

static PyMemberDef Lane_members[] = {
    {"taken", T_LONGLONG, offsetof(Lane, taken), READONLY, "packets read so far"},
    {NULL},
};

static PyTypeObject LaneType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "spark_kafkawire.wire._lane.Lane",
    .tp_basicsize = sizeof(Lane),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Lane(feed)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Lane_init,
    .tp_dealloc = (destructor)Lane_dealloc,
    .tp_methods = Lane_methods,
    .tp_members = Lane_members,
};

/* append(buf, chunk, pos, n, target): chunk[pos:pos + n] joins the frame in progress `buf` (a
   bytearray) of `target` bytes in all, by frame_append's rule. Framer.cut and Framer.data call it: Python
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

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_lane", "The fast lane: capture records to TCP segments.",
                                    -1, module_methods};

PyMODINIT_FUNC PyInit__lane(void) {
    if (PyType_Ready(&LaneType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&LaneType);
    if (PyModule_AddObject(m, "Lane", (PyObject *)&LaneType) < 0) {
        Py_DECREF(&LaneType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
