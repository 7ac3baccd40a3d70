package tensorbuf

import (
	"reflect"
	"runtime"
	"slices"

	"gorgonia.org/tensor"
)

// Who frees the memory of a result.
//
// A Batch or Transitions owns one backend arena (an outArena), and the
// tensors it hands out view that arena's memory: host memory that may be
// mapped outside the Go heap, or device memory. Release frees it at once;
// a result the user drops without Release is freed by a runtime cleanup
// once the garbage collector finds it unreachable.
//
// The cleanup is attached to an arenaOwner, not to the Batch or
// Transitions: the user may keep a tensor and drop the result it came
// from, so the arena must live for as long as the result or any tensor
// handed out over it is reachable. Every handed-out tensor therefore
// takes the owner as its gorgonia engine (the owner embeds tensor.StdEng,
// so tensor operations behave exactly as with the default engine), and
// gorgonia copies a tensor's engine into the views it makes (Slice,
// ShallowClone) and into clones. So the owner is unreachable only when the
// result and every tensor over the arena are, and only then may the arena
// go. Device tensors keep their device engine (gpu.DeviceEngine, which keeps
// host code off device memory); the owner rides on it (WithKeeper) instead. (Results of arithmetic on handed-out tensors inherit the engine too:
// holding one keeps the arena until it is dropped, a cost in memory only.) The cleanup's argument (backend and arena) does not reference the
// owner, as runtime.AddCleanup requires.
//
// Slices taken from a tensor (Data, Float32s, ...) hold no engine. They
// are safe on the cpu backend because its output arenas come from the Go
// heap (cpu.Backend.AllocOutput), which the slice itself keeps alive; a
// device pointer taken from a device tensor is the caller's to keep valid.
//
// Release (and a sample that reallocates or reshapes a result) empties
// every tensor handed out over the arena, so that a tensor kept past it
// reaches neither freed nor reused memory and never shows other data:
// see empty.

// arenaOwner owns one output arena: it is the engine of every tensor
// handed out over the arena and carries the cleanup that frees the arena
// when neither the result nor any of those tensors is reachable.
type arenaOwner struct {
	tensor.StdEng
	kind    string          // "Batch" or "Transitions", for messages
	tensors []*tensor.Dense // handed out over the arena and not yet emptied
	cleanup runtime.Cleanup
	pinned  bool // a tensor could not take the owner as engine: no cleanup
}

// arenaRef is what the cleanup of an arenaOwner frees. It must not
// reference the owner.
type arenaRef struct {
	be Backend
	a  Arena
}

func freeDropped(r arenaRef) { _ = r.be.Free(r.a) }

// outputAllocator is implemented by backends that allocate result memory
// differently from ring memory (cpu.Backend: results on the Go heap).
type outputAllocator interface {
	AllocOutput(n int64) (Arena, error)
}

// allocOutput allocates the memory of a result.
func allocOutput(be Backend, n int64) (Arena, error) {
	if oa, ok := be.(outputAllocator); ok {
		return oa.AllocOutput(n)
	}
	return be.Alloc(n)
}

// newOwner takes charge of arena a of be for a result of the given kind.
func newOwner(be Backend, a Arena, kind string) *arenaOwner {
	o := &arenaOwner{kind: kind}
	o.cleanup = runtime.AddCleanup(o, freeDropped, arenaRef{be: be, a: a})
	return o
}

// adopt makes d, a tensor over the owner's arena, keep the owner alive and
// records it to be emptied when the arena goes.
func (o *arenaOwner) adopt(d *tensor.Dense) {
	switch e := d.Engine().(type) {
	case nil, tensor.StdEng, *tensor.StdEng:
		tensor.WithEngine(o)(d)
	case keeperEngine:
		// A device engine must stay (it keeps host code off the memory):
		// the owner rides on it instead.
		tensor.WithEngine(e.WithKeeper(o))(d)
	default:
		// The backend gave the tensor an engine of its own, which must
		// not be replaced: nothing then proves the arena unreachable,
		// so only Release frees it.
		if !o.pinned {
			o.pinned = true
			o.cleanup.Stop()
		}
	}
	o.tensors = append(o.tensors, d)
}

// drop empties every tensor handed out over the arena and cancels the
// cleanup: the caller frees the arena now.
func (o *arenaOwner) drop(why reason) {
	o.cleanup.Stop()
	for _, d := range o.tensors {
		empty(d, o.kind, why)
	}
	clear(o.tensors)
	o.tensors = nil
	runtime.KeepAlive(o) // reachable across Stop, as AddCleanup asks
}

// retire empties d, a tensor a result is about to replace, if it is one
// handed out over a live arena. Tensors the user put into a result (their
// own, or results of arithmetic, which inherit the engine) are left alone,
// and so are tensors already emptied.
func retire(d *tensor.Dense, why reason) {
	if d == nil {
		return
	}
	o, ok := ownerOf(d)
	if !ok {
		return
	}
	if i := slices.Index(o.tensors, d); i >= 0 {
		o.tensors = slices.Delete(o.tensors, i, i+1)
		empty(d, o.kind, why)
	}
}

// keeperEngine is an engine that carries a value for the life of its
// tensors (gpu.DeviceEngine): a result's owner rides on it instead of
// replacing it.
type keeperEngine interface {
	tensor.Engine
	WithKeeper(k any) tensor.Engine
	Keeper() any
}

// ownerOf returns the owner of a handed-out tensor: its engine, or the
// value its keeper engine carries.
func ownerOf(d *tensor.Dense) (*arenaOwner, bool) {
	switch e := d.Engine().(type) {
	case *arenaOwner:
		return e, true
	case keeperEngine:
		o, ok := e.Keeper().(*arenaOwner)
		return o, ok
	}
	return nil, false
}

// reason says why a tensor was emptied.
type reason int

const (
	released reason = iota // the result's Release
	replaced               // a later call reallocated or reshaped the result
	numReasons
)

// Messages of the panics raised by emptied tensors, by result kind.
var emptiedMessages = map[string][numReasons]string{
	"Batch": {
		released: "tensorbuf: tensor used after Batch.Release",
		replaced: "tensorbuf: tensor used after a later sample into its Batch reallocated or reshaped it (take the tensors from the Batch again after each call)",
	},
	"Transitions": {
		released: "tensorbuf: tensor used after Transitions.Release",
		replaced: "tensorbuf: tensor used after a later sample into its Transitions reallocated or reshaped them (take the tensors from the Transitions again after each call)",
	},
}

// emptiedType is the element type of an emptied tensor: the original one,
// except that asking its size or kind (which gorgonia does before reading
// any element: Data, At, Get, Clone, printing, arithmetic) panics with a
// message naming the misuse.
type emptiedType struct {
	reflect.Type
	msg string
}

func (e emptiedType) Size() uintptr      { panic(e.msg) }
func (e emptiedType) Kind() reflect.Kind { panic(e.msg) }
func (e emptiedType) String() string     { return e.Type.String() + " (emptied: " + e.msg + ")" }

// emptiedDtypes holds, per original dtype, kind and reason, the dtype of
// emptied tensors. They are registered with gorgonia at init, because
// tensor.Of registers the dtype it sets and gorgonia's registry is not
// safe for concurrent writes.
var emptiedDtypes = map[tensor.Dtype]map[string][numReasons]tensor.Dtype{}

func init() {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64, tensor.Int32, tensor.Int64, tensor.Uint8, tensor.Bool} {
		m := map[string][numReasons]tensor.Dtype{}
		for kind, msgs := range emptiedMessages {
			var ds [numReasons]tensor.Dtype
			for r, msg := range msgs {
				ds[r] = tensor.Dtype{Type: emptiedType{Type: dt.Type, msg: msg}}
				tensor.Register(ds[r])
			}
			m[kind] = ds
		}
		emptiedDtypes[dt] = m
	}
}

// empty neutralises a handed-out tensor whose memory is going away: it
// drops the tensor's backing (so nothing can reach the freed or reused
// memory), makes it a scalar and gives it an element type that panics with
// a message naming the misuse. Afterwards Data, Get, Clone and printing
// panic with that message, At fails with an error, and the typed slices
// (Float32s, ...) are empty. Emptying twice is harmless.
func empty(d *tensor.Dense, kind string, why reason) {
	orig := d.Dtype()
	if e, ok := orig.Type.(emptiedType); ok {
		orig = tensor.Dtype{Type: e.Type}
	}
	d.Header.Raw = nil
	tensor.WithShape()(d)
	if ds, ok := emptiedDtypes[orig]; ok {
		tensor.Of(ds[kind][why])(d)
	}
}
