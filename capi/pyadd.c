// A writer's add straight from Python objects: the package's one-row add
// spent more time reading six arrays' addresses, dtypes and shapes in
// Python (ctypes' .ctypes.data and the checks, about 1 µs an array) than
// the engine spent adding the row. trj_writer_add_py reads them through
// the buffer protocol here, in one foreign call, and calls trj_writer_add
// with the GIL released. The Python C API is not linked (see dlpack.c):
// the package hands in the few functions used (trj_set_python_api), and
// the Python package calls this function through ctypes.PyDLL, which
// keeps the GIL for the call.
//
// Anything that is not a C-contiguous NumPy array (numpy.ndarray itself,
// not a subclass) of a dtype the ABI knows returns TRJ_FALLBACK with
// nothing done: lists, torch tensors, other dtypes, columns of other
// lengths or ranks, more than 16 fields, and other objects with a buffer
// (bytes, bytearray, memoryview, array.array), which the general path
// converts to the field's dtype as it does lists, where read here as they
// are they would meet the engine's dtype check instead. The package then
// takes its general path, which converts or raises as it always did.
// Every check that can fail on an array the fast path takes is
// trj_writer_add's own, on the same trj_step the general path builds, so
// both paths raise the same errors.
#include <stddef.h>
#include <stdint.h>
#include "trajring_abi.h"
#include "_cgo_export.h"

// The layout of CPython's Py_buffer (stable ABI since 3.11, unchanged
// since 3.3).
typedef struct {
	void *buf;
	void *obj;
	intptr_t len;
	intptr_t itemsize;
	int readonly;
	int ndim;
	char *format;
	intptr_t *shape;
	intptr_t *strides;
	intptr_t *suboffsets;
	void *internal;
} trj_pybuffer;

#define TRJ_PYBUF_RECORDS_RO (0x0004 | 0x0008 | 0x0010) /* PyBUF_FORMAT | PyBUF_STRIDES */
#define TRJ_PYADD_MAX_FIELDS 16

static int (*py_check_buffer)(void *obj);
static int (*py_get_buffer)(void *obj, trj_pybuffer *view, int flags);
static void (*py_release_buffer)(trj_pybuffer *view);
static int (*py_is_contiguous)(const trj_pybuffer *view, char order);
static void *(*py_dict_get)(void *dict, void *key); /* PyDict_GetItem: borrowed, sets no error */
static intptr_t (*py_dict_size)(void *dict);
static void *(*py_save_thread)(void);
static void (*py_restore_thread)(void *state);
static void (*py_err_clear)(void);
static void *(*py_object_type)(void *obj); /* PyObject_Type: a new reference */
static void (*py_dec_ref)(void *obj);
static void *ndarray_type; /* numpy.ndarray, kept alive by the package */

// trj_set_python_api hands in, in this order, PyObject_CheckBuffer,
// PyObject_GetBuffer, PyBuffer_Release, PyBuffer_IsContiguous,
// PyDict_GetItem, PyDict_Size, PyEval_SaveThread, PyEval_RestoreThread,
// PyErr_Clear, PyObject_Type, Py_DecRef and the type object numpy.ndarray.
// Until it has been called with all twelve, trj_writer_add_py falls back.
void trj_set_python_api(void *const *fns, int64_t n) {
	if (fns == NULL || n != 12 || fns[11] == NULL) {
		return;
	}
	py_check_buffer = (int (*)(void *))fns[0];
	py_get_buffer = (int (*)(void *, trj_pybuffer *, int))fns[1];
	py_release_buffer = (void (*)(trj_pybuffer *))fns[2];
	py_is_contiguous = (int (*)(const trj_pybuffer *, char))fns[3];
	py_dict_get = (void *(*)(void *, void *))fns[4];
	py_dict_size = (intptr_t (*)(void *))fns[5];
	py_save_thread = (void *(*)(void))fns[6];
	py_restore_thread = (void (*)(void *))fns[7];
	py_err_clear = (void (*)(void))fns[8];
	py_object_type = (void *(*)(void *))fns[9];
	py_dec_ref = (void (*)(void *))fns[10];
	ndarray_type = fns[11];
}

// is_ndarray reports whether obj's type is numpy.ndarray.
static int is_ndarray(void *obj) {
	void *t = py_object_type(obj);
	if (t == NULL) {
		py_err_clear();
		return 0;
	}
	py_dec_ref(t);
	return t == ndarray_type;
}

// dtype_code maps a buffer's struct format to a TRJ_DT_* code, or -1. The
// formats are NumPy's for native-order arrays of the ABI's dtypes.
static int32_t dtype_code(const trj_pybuffer *b) {
	const char *f = b->format;
	if (f == NULL) {
		return b->itemsize == 1 ? 4 : -1; /* unsigned bytes */
	}
	if (f[0] == '@' || f[0] == '=') {
		f++;
	}
	if (f[0] == 0 || f[1] != 0) {
		return -1;
	}
	switch (f[0]) {
	case 'f':
		return b->itemsize == 4 ? 0 : -1;
	case 'd':
		return b->itemsize == 8 ? 1 : -1;
	case 'i':
		return b->itemsize == 4 ? 2 : -1;
	case 'l':
	case 'q':
		return b->itemsize == 8 ? 3 : -1;
	case 'B':
		return b->itemsize == 1 ? 4 : -1;
	case '?':
		return b->itemsize == 1 ? 5 : -1;
	}
	return -1;
}

// trj_writer_add_py adds one batched step of all the writer's rows from
// Python objects: the four columns (int32 step types, float32 rewards and
// discounts, one-dimensional, of one length), and fields, a dict holding
// exactly the nf objects named by names[0..nf) (the buffer's fields in
// order). The caller holds the GIL; it is released while the engine adds.
// Returns TRJ_FALLBACK, having done nothing, for input the general path
// must handle; else trj_writer_add's status.
int32_t trj_writer_add_py(uint64_t h, void *st, void *nst, void *rew, void *disc, void *fields,
                          void *const *names, int64_t nf, char *err, int64_t errcap) {
	trj_pybuffer views[4 + TRJ_PYADD_MAX_FIELDS];
	void *objs[4 + TRJ_PYADD_MAX_FIELDS];
	void *data[TRJ_PYADD_MAX_FIELDS];
	int64_t nbytes[TRJ_PYADD_MAX_FIELDS];
	int32_t dtype[TRJ_PYADD_MAX_FIELDS];
	int32_t ndim[TRJ_PYADD_MAX_FIELDS];
	int64_t shape[TRJ_PYADD_MAX_FIELDS * TRJ_MAX_DIMS];
	static const int32_t column_code[4] = {2, 2, 0, 0};
	int32_t rc = TRJ_FALLBACK;
	int64_t got = 0, ncols = 0, off = 0;
	if (ndarray_type == NULL || names == NULL || fields == NULL || nf < 0 || nf > TRJ_PYADD_MAX_FIELDS ||
	    py_dict_size(fields) != nf) {
		return TRJ_FALLBACK;
	}
	objs[0] = st, objs[1] = nst, objs[2] = rew, objs[3] = disc;
	for (int64_t i = 0; i < nf; i++) {
		objs[4 + i] = py_dict_get(fields, names[i]);
		if (objs[4 + i] == NULL) {
			return TRJ_FALLBACK;
		}
	}
	for (int64_t i = 0; i < 4 + nf; i++) {
		if (objs[i] == NULL || !is_ndarray(objs[i]) || !py_check_buffer(objs[i])) {
			goto done;
		}
		if (py_get_buffer(objs[i], &views[i], TRJ_PYBUF_RECORDS_RO) != 0) {
			py_err_clear();
			goto done;
		}
		got++;
		trj_pybuffer *v = &views[i];
		if (!py_is_contiguous(v, 'C') || v->ndim < 0 || v->ndim > TRJ_MAX_DIMS) {
			goto done;
		}
		int32_t code = dtype_code(v);
		if (i < 4) {
			if (code != column_code[i] || v->ndim != 1 || (i > 0 && v->shape[0] != ncols)) {
				goto done;
			}
			ncols = v->shape[0];
			continue;
		}
		if (code < 0) {
			goto done;
		}
		int64_t f = i - 4;
		data[f] = v->buf;
		nbytes[f] = v->len;
		dtype[f] = code;
		ndim[f] = v->ndim;
		for (int d = 0; d < v->ndim; d++) {
			shape[off++] = v->shape[d];
		}
	}
	trj_step s = {0};
	s.nrows = ncols;
	s.rows = NULL;
	s.step_type = views[0].buf;
	s.next_step_type = views[1].buf;
	s.reward = views[2].buf;
	s.discount = views[3].buf;
	s.ncols = ncols;
	s.nfields = nf;
	s.data = data;
	s.nbytes = nbytes;
	s.dtype = dtype;
	s.ndim = ndim;
	s.shape = shape;
	void *ts = py_save_thread();
	rc = trj_writer_add(h, &s, err, errcap);
	py_restore_thread(ts);
done:
	for (int64_t i = 0; i < got; i++) {
		py_release_buffer(&views[i]);
	}
	return rc;
}
