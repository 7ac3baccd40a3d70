// DLPack tensors straight from Python, without a call into Go: making a
// tensor through trj_result_dlpack cost about 4 µs from Python (ctypes'
// argument conversion, the C-to-Go transition, then PyCapsule_New through
// ctypes), four times what torch.from_dlpack of a NumPy array costs all
// told, so a result's ten tensors took longer than the sample itself.
//
// While a result's view group lives (dlpack.go: the tensors of a result
// handed out while any of them lives share one), a further tensor needs
// nothing Go decides: the group is counted here and the views cannot move
// (a refill keeps their memory while tensors live). So when trj_result_dlpack
// makes a new group for a result, Go publishes the group and the result's
// host views here, keyed by the result's handle (trj_export_publish); the
// entry goes when the group's last tensor is deleted (trjViewDrop) or the
// handle is freed (trj_export_forget). trj_result_dlpack_py, called
// through ctypes.PyDLL with the GIL held, makes a tensor and its capsule
// from the entry; with no entry, a dying group, an index out of range, a
// device view or any failure it returns None and the package takes the
// general path, which makes the group or raises. Handles are never reused,
// so a stale key finds nothing. The registry's mutex is the innermost lock
// of the library: nothing is called while it is held but the group's
// atomic acquire.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "trajring_abi.h"
#include "_cgo_export.h"

void *trj_dl_alloc(int32_t versioned, int32_t ndim, int64_t **shape);
void trj_dl_set_ctx(void *p, int32_t versioned, void *group, uint64_t data);
int trj_dl_group_acquire(void *g);
const char *trj_capsule_name(int32_t versioned);
void trj_capsule_destructor(void *capsule);
void trj_dl_live_add(int64_t d);
void trj_dl_group_unacquire(void *g);

#include "pydlpack.h"

// The registry: a short chained hash table, sized for the handful of
// results a program holds tensors of at once (more only lengthens chains).
#define TRJ_EXPORT_BUCKETS 256
static trj_export *exports[TRJ_EXPORT_BUCKETS];
static pthread_mutex_t exports_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t fast_tensors; // tensors made by trj_result_dlpack_py, for tests
static int poisoned;         // set by trj_export_poison, under exports_mu

void trj_export_forget(uint64_t handle, void *group);

static trj_export **slot_of(uint64_t handle) {
	trj_export **p = &exports[(handle * 0x9E3779B97F4A7C15ull) >> 56];
	while (*p != NULL && (*p)->handle != handle) {
		p = &(*p)->next;
	}
	return p;
}

// trj_export_publish installs a copy of *src (its handle's group and
// its first n views, n at most TRJ_EXPORT_MAX_VIEWS) in place of the
// handle's previous entry; out of memory, it removes that entry instead
// (every tensor then takes the general path).
void trj_export_publish(const trj_export *src) {
	trj_export *e = malloc(sizeof *e), *old;
	if (e == NULL) {
		trj_export_forget(src->handle, NULL);
		return;
	}
	*e = *src;
	if (e->n < 0 || e->n > TRJ_EXPORT_MAX_VIEWS) {
		e->n = 0;
	}
	pthread_mutex_lock(&exports_mu);
	if (poisoned) {
		pthread_mutex_unlock(&exports_mu);
		free(e);
		return;
	}
	trj_export **s = slot_of(e->handle);
	old = *s;
	e->next = old != NULL ? old->next : NULL;
	*s = e;
	pthread_mutex_unlock(&exports_mu);
	free(old);
}

// trj_export_poison empties the registry for good: Go calls it once an
// export has panicked, after which every call must fail (errors.go).
void trj_export_poison(void) {
	pthread_mutex_lock(&exports_mu);
	poisoned = 1;
	for (int b = 0; b < TRJ_EXPORT_BUCKETS; b++) {
		while (exports[b] != NULL) {
			trj_export *e = exports[b];
			exports[b] = e->next;
			free(e);
		}
	}
	pthread_mutex_unlock(&exports_mu);
}

// trj_export_forget removes handle's entry if it is for group (any group
// when group is NULL).
void trj_export_forget(uint64_t handle, void *group) {
	trj_export *e = NULL;
	pthread_mutex_lock(&exports_mu);
	trj_export **s = slot_of(handle);
	if (*s != NULL && (group == NULL || (*s)->group == group)) {
		e = *s;
		*s = e->next;
	}
	pthread_mutex_unlock(&exports_mu);
	free(e);
}

int64_t trj_dl_fast_count(void) { return __atomic_load_n(&fast_tensors, __ATOMIC_RELAXED); }

static void *(*py_capsule_new)(void *pointer, const char *name, void (*destructor)(void *));
static void (*py_incref)(void *obj);
static void (*py_err_clear2)(void);
static void *py_none;

// trj_set_dlpack_python_api hands in PyCapsule_New, Py_IncRef, PyErr_Clear
// and the address of None; until then trj_result_dlpack_py returns NULL
// (the package binds it only after this call).
void trj_set_dlpack_python_api(void *capsule_new, void *incref, void *err_clear, void *none) {
	py_capsule_new = (void *(*)(void *, const char *, void (*)(void *)))capsule_new;
	py_incref = (void (*)(void *))incref;
	py_err_clear2 = (void (*)(void))err_clear;
	py_none = none;
}

static void *none_ref(void) {
	py_incref(py_none);
	return py_none;
}

// trj_result_dlpack_py returns a new reference: a DLPack capsule of host
// tensor i of result handle (versioned: "dltensor_versioned", else
// "dltensor"), or None when the general path must make it. Called with
// the GIL held.
void *trj_result_dlpack_py(uint64_t handle, int64_t i, int32_t versioned) {
	if (py_capsule_new == NULL || py_none == NULL) {
		return NULL; // unreachable: the package binds this after the API
	}
	versioned = versioned != 0;
	trj_export_view v;
	void *group = NULL;
	pthread_mutex_lock(&exports_mu);
	trj_export *e = *slot_of(handle);
	if (e != NULL && i >= 0 && i < e->n && trj_dl_group_acquire(e->group)) {
		v = e->views[i];
		group = e->group;
	}
	pthread_mutex_unlock(&exports_mu);
	if (group == NULL) {
		return none_ref();
	}
	int64_t *shape;
	void *p = trj_dl_alloc(versioned, v.ndim, &shape);
	if (p == NULL) {
		trj_dl_group_unacquire(group);
		return none_ref();
	}
	int64_t stride = 1;
	for (int32_t j = v.ndim - 1; j >= 0; j--) {
		shape[j] = v.shape[j];
		shape[v.ndim + j] = stride;
		stride *= v.shape[j] > 0 ? v.shape[j] : 1;
	}
	trj_dl_tensor t = {0};
	t.device.device_type = 1; // kDLCPU: device views are never published
	t.ndim = v.ndim;
	t.dtype = v.dtype;
	if (v.ndim > 0) {
		t.shape = shape;
		t.strides = shape + v.ndim;
	}
	if (versioned) {
		trj_dl_managed_versioned *m = p;
		m->major = 1;
		m->minor = 1;
		m->dl_tensor = t;
	} else {
		((trj_dl_managed *)p)->dl_tensor = t;
	}
	trj_dl_set_ctx(p, versioned, group, v.data);
	void *cap = py_capsule_new(p, trj_capsule_name(versioned), trj_capsule_destructor);
	if (cap == NULL) {
		py_err_clear2();
		if (versioned) {
			((trj_dl_managed_versioned *)p)->deleter(p);
		} else {
			((trj_dl_managed *)p)->deleter(p);
		}
		return none_ref();
	}
	__atomic_add_fetch(&fast_tensors, 1, __ATOMIC_RELAXED);
	return cap;
}
