//go:build cgo

package capi

import (
	"fmt"
	"sync"
)

// kind names what a handle refers to.
type kind uint8

const (
	kindBuffer kind = iota + 1
	kindWriter
	kindTable
	kindResult
	kindEnv
)

func (k kind) String() string {
	switch k {
	case kindBuffer:
		return "buffer"
	case kindWriter:
		return "writer"
	case kindTable:
		return "table"
	case kindResult:
		return "result"
	case kindEnv:
		return "env"
	}
	return "object"
}

// registry maps handles to the objects the ABI has handed out. Handles
// count up from 1 and are never reused, so a stale handle can only fail
// with ErrHandle, never reach another object. Safe for concurrent use.
type registry struct {
	mu   sync.RWMutex
	next uint64
	objs map[uint64]entry
}

type entry struct {
	k   kind
	obj any
}

var handles = registry{objs: make(map[uint64]entry)}

// add registers obj and returns its new handle.
func (r *registry) add(k kind, obj any) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	r.objs[r.next] = entry{k, obj}
	return r.next
}

// get returns the object of handle h, which must be of kind k.
func (r *registry) get(h uint64, k kind) (any, error) {
	r.mu.RLock()
	e, ok := r.objs[h]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s handle %d", ErrHandle, k, h)
	}
	if e.k != k {
		return nil, fmt.Errorf("%w: handle %d is a %s, not a %s", ErrHandle, h, e.k, k)
	}
	return e.obj, nil
}

// remove unregisters handle h of kind k and returns its object.
func (r *registry) remove(h uint64, k kind) (any, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.objs[h]
	if !ok {
		return nil, fmt.Errorf("%w: %s handle %d", ErrHandle, k, h)
	}
	if e.k != k {
		return nil, fmt.Errorf("%w: handle %d is a %s, not a %s", ErrHandle, h, e.k, k)
	}
	delete(r.objs, h)
	return e.obj, nil
}

// count returns the number of live handles of kind k.
func (r *registry) count(k kind) int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := 0
	for _, e := range r.objs {
		if e.k == k {
			n++
		}
	}
	return n
}

// getAs returns the object of handle h as a T of kind k.
func getAs[T any](h uint64, k kind) (T, error) {
	obj, err := handles.get(h, k)
	if err != nil {
		var zero T
		return zero, err
	}
	return obj.(T), nil
}
