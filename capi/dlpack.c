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

void trj_dlpack_deleter(trj_dl_managed *m) {
	if (m == NULL) {
		return;
	}
	trjViewDrop((uint64_t)(uintptr_t)m->manager_ctx);
	free(m);
}

void trj_dlpack_deleter_versioned(trj_dl_managed_versioned *m) {
	if (m == NULL) {
		return;
	}
	trjViewDrop((uint64_t)(uintptr_t)m->manager_ctx);
	free(m);
}

// trj_dl_set_ctx stores the data address, a view id as the manager
// context and the package's deleter in a tensor made by trj_dl_alloc.
void trj_dl_set_ctx(void *p, int32_t versioned, uint64_t id, uint64_t data) {
	if (versioned) {
		trj_dl_managed_versioned *m = p;
		m->dl_tensor.data = (void *)(uintptr_t)data;
		m->manager_ctx = (void *)(uintptr_t)id;
		m->deleter = trj_dlpack_deleter_versioned;
	} else {
		trj_dl_managed *m = p;
		m->dl_tensor.data = (void *)(uintptr_t)data;
		m->manager_ctx = (void *)(uintptr_t)id;
		m->deleter = trj_dlpack_deleter;
	}
}
