// DLPack managed tensors for the C ABI: allocation, the deleters consumers
// call, and a PyCapsule destructor for capsules never consumed. The Python
// C API is not linked: the package hands in PyCapsule_IsValid and
// PyCapsule_GetPointer at load (trj_set_capsule_api), so the library has no
// Python dependency and a plain C consumer can use the deleters alone.
#include <stdlib.h>
#include <string.h>
#include "trajring_abi.h"
#include "_cgo_export.h"

static const char name_legacy[] = "dltensor";
static const char name_versioned[] = "dltensor_versioned";

static int (*capsule_is_valid)(void *capsule, const char *name);
static void *(*capsule_get_pointer)(void *capsule, const char *name);

// trj_capsule_name returns the statically allocated capsule name DLPack
// prescribes: "dltensor_versioned" when versioned, else "dltensor".
const char *trj_capsule_name(int32_t versioned) {
	return versioned ? name_versioned : name_legacy;
}

// trj_set_capsule_api hands in the two Python C API functions the capsule
// destructor needs.
void trj_set_capsule_api(void *is_valid, void *get_pointer) {
	capsule_is_valid = (int (*)(void *, const char *))is_valid;
	capsule_get_pointer = (void *(*)(void *, const char *))get_pointer;
}

// trj_capsule_destructor is the destructor of every capsule the package
// makes: a capsule still named "dltensor" or "dltensor_versioned" was
// never consumed, so its tensor is deleted here; a consumer that took it
// renamed it ("used_...") and deletes the tensor itself. Runs with the GIL
// held; it sets no Python exception (IsValid checks before GetPointer).
void trj_capsule_destructor(void *capsule) {
	if (capsule_is_valid == NULL || capsule_get_pointer == NULL) {
		return;
	}
	if (capsule_is_valid(capsule, name_legacy)) {
		trj_dl_managed *m = capsule_get_pointer(capsule, name_legacy);
		if (m != NULL && m->deleter != NULL) {
			m->deleter(m);
		}
	} else if (capsule_is_valid(capsule, name_versioned)) {
		trj_dl_managed_versioned *m = capsule_get_pointer(capsule, name_versioned);
		if (m != NULL && m->deleter != NULL) {
			m->deleter(m);
		}
	}
}

// trj_dl_alloc returns zeroed memory for a managed tensor (legacy or
// versioned) followed by its shape and strides, or NULL.
void *trj_dl_alloc(int32_t versioned, int32_t ndim, int64_t **shape) {
	size_t head = versioned ? sizeof(trj_dl_managed_versioned) : sizeof(trj_dl_managed);
	head = (head + 7) & ~(size_t)7;
	char *p = calloc(1, head + 2 * (size_t)(ndim > 0 ? ndim : 1) * sizeof(int64_t));
	if (p == NULL) {
		return NULL;
	}
	*shape = (int64_t *)(p + head);
	return p;
}

// A view group: the DLPack tensors of one result handed out while any of
// them lives share one, counted here, so that Go hears of a drop once,
// when the group's last tensor is deleted, instead of once a tensor (a
// call into Go from a consumer's thread cost about as much as making the
// tensor). Go frees the group (trjViewDrop), under the result's lock, so
// a group that the result still names stays readable by
// trj_dl_group_acquire.
typedef struct {
	int64_t count; // tensors alive; 0 once the last was deleted
	uint64_t id;   // the Go side's id of the group
} trj_dl_group;

// Live DLPack tensors of the process (trj_live_counts).
static int64_t live_tensors;

// trj_dl_group_new returns a group holding one tensor, or NULL.
void *trj_dl_group_new(uint64_t id) {
	trj_dl_group *g = malloc(sizeof *g);
	if (g == NULL) {
		return NULL;
	}
	g->count = 1;
	g->id = id;
	return g;
}

// trj_dl_group_acquire adds a tensor to g unless its last tensor has
// been deleted already (then it returns 0 and g is dying).
int trj_dl_group_acquire(void *p) {
	trj_dl_group *g = p;
	int64_t c = __atomic_load_n(&g->count, __ATOMIC_ACQUIRE);
	while (c > 0) {
		if (__atomic_compare_exchange_n(&g->count, &c, c + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			return 1;
		}
	}
	return 0;
}

void trj_dl_live_add(int64_t d) { __atomic_add_fetch(&live_tensors, d, __ATOMIC_RELAXED); }

int64_t trj_dl_live(void) { return __atomic_load_n(&live_tensors, __ATOMIC_RELAXED); }

// trj_dl_group_unacquire takes back an acquire whose tensor was never
// made; the group's last one hands it to Go (trjViewDrop).
void trj_dl_group_unacquire(void *p) {
	trj_dl_group *g = p;
	if (__atomic_sub_fetch(&g->count, 1, __ATOMIC_ACQ_REL) == 0) {
		trjViewDrop(g->id);
	}
}

static void group_release(void *ctx) {
	trj_dl_live_add(-1);
	trj_dl_group_unacquire(ctx);
}

void trj_dlpack_deleter(trj_dl_managed *m) {
	if (m == NULL) {
		return;
	}
	group_release(m->manager_ctx);
	free(m);
}

void trj_dlpack_deleter_versioned(trj_dl_managed_versioned *m) {
	if (m == NULL) {
		return;
	}
	group_release(m->manager_ctx);
	free(m);
}

// trj_dl_set_ctx stores the data address, the tensor's view group as the
// manager context and the package's deleter in a tensor made by
// trj_dl_alloc, and counts it live.
void trj_dl_set_ctx(void *p, int32_t versioned, void *group, uint64_t data) {
	trj_dl_live_add(1);
	if (versioned) {
		trj_dl_managed_versioned *m = p;
		m->dl_tensor.data = (void *)(uintptr_t)data;
		m->manager_ctx = group;
		m->deleter = trj_dlpack_deleter_versioned;
	} else {
		trj_dl_managed *m = p;
		m->dl_tensor.data = (void *)(uintptr_t)data;
		m->manager_ctx = group;
		m->deleter = trj_dlpack_deleter;
	}
}
