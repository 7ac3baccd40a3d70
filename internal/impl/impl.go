// Package impl is the one registry of the alternative loops of
// trajring's internal packages (the assembly of philox, treestep, explog
// and rowmove): each package registers its optional implementations and
// whether this CPU and build can run them, and tests and benchmarks
// switch them through this package instead of a hook of each package's
// own. A package runs its portable Go code where none is on.
package impl

import (
	"slices"
	"sync"
)

// Impl describes one registered implementation. A plain value.
type Impl struct {
	Pkg, Name string
	// Available reports whether it can run here (the CPU's features,
	// the build); one that is not is never switched on.
	Available bool
	// On reports whether it is switched on.
	On bool
}

type entry struct {
	Impl
	set func(on bool)
}

var (
	mu      sync.Mutex
	entries []*entry
)

// Register records implementation name of package pkg, switched on
// where available: set(on) switches it in the package, and is called
// now with available. A package registers its implementations in order
// of preference, the widest last (Select relies on the order), from its
// initialisation. Registering a name twice panics.
func Register(pkg, name string, available bool, set func(on bool)) {
	mu.Lock()
	defer mu.Unlock()
	if find(pkg, name) != nil {
		panic("impl: " + pkg + "/" + name + " registered twice")
	}
	e := &entry{Impl: Impl{Pkg: pkg, Name: name, Available: available, On: available}, set: set}
	entries = append(entries, e)
	set(available)
}

func find(pkg, name string) *entry {
	for _, e := range entries {
		if e.Pkg == pkg && e.Name == name {
			return e
		}
	}
	return nil
}

func (e *entry) switchTo(on bool) {
	e.On = on
	e.set(on)
}

// Set switches implementation pkg/name on or off and reports whether it
// now is as asked: switching on one that is unknown or not available
// fails and changes nothing. For implementations that are independent of
// each other (rowmove's wide and REP MOVSB moves). It is safe for
// concurrent use with other calls of this package, not with the
// switched package's work.
func Set(pkg, name string, on bool) bool {
	mu.Lock()
	defer mu.Unlock()
	e := find(pkg, name)
	if e == nil {
		return !on
	}
	if on && !e.Available {
		return false
	}
	e.switchTo(on)
	return true
}

// Select makes pkg run implementation name, for implementations that
// build on each other (an AVX-512 loop that uses the AVX2 one for the
// rest): name and every implementation registered before it are
// switched on, every one after it off; "" switches them all off (the Go
// code). It reports whether it could: a name unknown or not available,
// or one before it not available, fails and changes nothing. Safe for
// concurrent use as Set.
func Select(pkg, name string) bool {
	mu.Lock()
	defer mu.Unlock()
	var own []*entry
	for _, e := range entries {
		if e.Pkg == pkg {
			own = append(own, e)
		}
	}
	upto := -1
	if name != "" {
		upto = slices.IndexFunc(own, func(e *entry) bool { return e.Name == name })
		if upto < 0 {
			return false
		}
	}
	for _, e := range own[:upto+1] {
		if !e.Available {
			return false
		}
	}
	for i, e := range own {
		e.switchTo(i <= upto)
	}
	return true
}

// Reset switches every implementation of pkg back on where available,
// as at start. Safe for concurrent use as Set.
func Reset(pkg string) {
	mu.Lock()
	defer mu.Unlock()
	for _, e := range entries {
		if e.Pkg == pkg {
			e.switchTo(e.Available)
		}
	}
}

// List returns the implementations of pkg in registration order, or of
// every package when pkg is "". It is safe for concurrent use.
func List(pkg string) []Impl {
	mu.Lock()
	defer mu.Unlock()
	var out []Impl
	for _, e := range entries {
		if pkg == "" || e.Pkg == pkg {
			out = append(out, e.Impl)
		}
	}
	return out
}
