//go:build cgo

package capi

/*
#include <stdint.h>
*/
import "C"

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unsafe"

	"github.com/trajring/trajring/internal/atomicfile"
	"github.com/trajring/trajring/tensorbuf"
)

// bufferObj is a buffer handed out through the ABI, with the pool of
// results its samples reuse.
type bufferObj struct {
	b *tensorbuf.Buffer
	// fields is b.Fields(), read once and never modified: a buffer's
	// fields never change, and every fill, add and env step walks them
	// (Fields copies them, which was a tenth of a one-item sample's time
	// in the ABI).
	fields []tensorbuf.Field

	mu   sync.Mutex
	pool map[resultKind][]*result
}

// poolSize bounds the idle results a buffer keeps per kind: a learner
// holding one batch while the next is sampled needs two.
const poolSize = 2

// spec is the JSON form of a tensorbuf.Config that trj_buffer_new takes.
type spec struct {
	NumEnvs  int         `json:"num_envs"`
	Capacity int         `json:"capacity"`
	Seed     uint64      `json:"seed"`
	Fields   []fieldSpec `json:"fields"`
}

type fieldSpec struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
}

var roles = map[string]tensorbuf.Role{
	"observation": tensorbuf.Observation,
	"action":      tensorbuf.Action,
	"policy_info": tensorbuf.PolicyInfo,
}

// dtypeByName maps tensorbuf's dtype names ("float32", ...) to DTypes.
func dtypeByName(name string) (tensorbuf.DType, bool) {
	for d := tensorbuf.Float32; d <= tensorbuf.Bool; d++ {
		if d.String() == name {
			return d, true
		}
	}
	return 0, false
}

// decodeJSON decodes s into v strictly: unknown keys and trailing data
// are configuration errors, so a misspelt option is never ignored.
func decodeJSON(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", tensorbuf.ErrConfig, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: trailing data after the JSON object", tensorbuf.ErrConfig)
	}
	return nil
}

func (s *spec) config() (tensorbuf.Config, error) {
	cfg := tensorbuf.Config{NumEnvs: s.NumEnvs, Capacity: s.Capacity, Seed: s.Seed}
	for _, f := range s.Fields {
		role, ok := roles[f.Role]
		if !ok {
			return cfg, fmt.Errorf("%w: field %q: role %q (want observation, action or policy_info)", tensorbuf.ErrConfig, f.Name, f.Role)
		}
		dt, ok := dtypeByName(f.DType)
		if !ok {
			return cfg, fmt.Errorf("%w: field %q: dtype %q (want float32, float64, int32, int64, uint8 or bool)", tensorbuf.ErrConfig, f.Name, f.DType)
		}
		cfg.Fields = append(cfg.Fields, tensorbuf.Field{Name: f.Name, Role: role, DType: dt, Shape: f.Shape})
	}
	return cfg, nil
}

// goString copies a C string of at most max bytes; NULL is an error.
func goString(p *C.char, what string) (string, error) {
	if p == nil {
		return "", fmt.Errorf("%w: NULL %s", tensorbuf.ErrInvalidArg, what)
	}
	return C.GoString(p), nil
}

// setOut stores v at out, which must not be NULL.
func setOut[T any](out *T, v T) error {
	if out == nil {
		return errNullOut()
	}
	*out = v
	return nil
}

func errNullOut() error { return fmt.Errorf("%w: NULL output pointer", tensorbuf.ErrInvalidArg) }

// handleOut is the prologue of the exports that store something at out:
// the object of handle h, of kind k (ErrHandle unless there is one), and
// out checked not to be NULL (ErrInvalidArg), in that order.
func handleOut[T, O any](h C.uint64_t, k kind, out *O) (T, error) {
	obj, err := getAs[T](uint64(h), k)
	if err != nil {
		return obj, err
	}
	if out == nil {
		var zero T
		return zero, errNullOut()
	}
	return obj, nil
}

func newBufferObj(b *tensorbuf.Buffer) *bufferObj {
	return &bufferObj{b: b, fields: b.Fields(), pool: make(map[resultKind][]*result)}
}

//export trj_buffer_new
func trj_buffer_new(specJSON *C.char, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		if out == nil {
			return setOut(out, 0)
		}
		s, e := goString(specJSON, "spec")
		if e != nil {
			return e
		}
		var sp spec
		if e := decodeJSON(s, &sp); e != nil {
			return e
		}
		cfg, e := sp.config()
		if e != nil {
			return e
		}
		b, e := tensorbuf.New(cfg)
		if e != nil {
			return e
		}
		*out = C.uint64_t(handles.add(kindBuffer, newBufferObj(b)))
		return nil
	})
}

//export trj_buffer_load
func trj_buffer_load(path *C.char, capacity C.int64_t, out *C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		if out == nil {
			return setOut(out, 0)
		}
		p, e := goString(path, "path")
		if e != nil {
			return e
		}
		if capacity < 0 {
			return fmt.Errorf("%w: capacity %d", tensorbuf.ErrInvalidArg, capacity)
		}
		b, e := tensorbuf.LoadFile(p, tensorbuf.LoadOptions{Capacity: int(capacity)})
		if e != nil {
			return e
		}
		*out = C.uint64_t(handles.add(kindBuffer, newBufferObj(b)))
		return nil
	})
}

// trj_buffer_close closes the buffer and releases its handle. Results
// sampled from it stay readable until released; its writers and tables
// fail with TRJ_ECLOSED.
//
//export trj_buffer_close
func trj_buffer_close(h C.uint64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		obj, e := handles.remove(uint64(h), kindBuffer)
		if e != nil {
			return e
		}
		bo := obj.(*bufferObj)
		bo.mu.Lock()
		idle := bo.pool
		bo.pool = nil
		bo.mu.Unlock()
		for _, rs := range idle {
			for _, r := range rs {
				r.release()
			}
		}
		return bo.b.Close()
	})
}

type bufferInfo struct {
	NumEnvs     int         `json:"num_envs"`
	Capacity    int         `json:"capacity"`
	Size        int64       `json:"size"`
	Backend     string      `json:"backend"`
	Device      int         `json:"device"`
	MemoryBytes int64       `json:"memory_bytes"`
	Steps       int64       `json:"steps"`
	Cuts        int64       `json:"cuts"`
	Fields      []fieldSpec `json:"fields"`
	Tables      []string    `json:"tables"`
	Cursors     []int64     `json:"cursors"`
	Oldest      []int64     `json:"oldest"`
}

// writeJSON marshals v into buf (NUL-terminated), failing when it does
// not fit: *needed tells the size to retry with.
func writeJSON(v any, buf *C.char, cap C.int64_t, needed *C.int64_t) error {
	js, e := json.Marshal(v)
	if e != nil {
		return e
	}
	if needed != nil {
		*needed = C.int64_t(len(js) + 1)
	}
	if buf == nil || int64(cap) < int64(len(js))+1 {
		return fmt.Errorf("%w: output of %d bytes does not fit %d", tensorbuf.ErrInvalidArg, len(js)+1, cap)
	}
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), len(js)+1)
	copy(dst, js)
	dst[len(js)] = 0
	return nil
}

// trj_buffer_info writes a JSON description of the buffer (fields,
// sizes, cursors, table names) into out.
//
//export trj_buffer_info
func trj_buffer_info(h C.uint64_t, out *C.char, outcap C.int64_t, needed *C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		bo, e := getAs[*bufferObj](uint64(h), kindBuffer)
		if e != nil {
			return e
		}
		b := bo.b
		st := b.Stats()
		info := bufferInfo{
			NumEnvs: b.NumEnvs(), Capacity: b.Capacity(), Size: b.Size(), Backend: b.Backend().Name(),
			Device: deviceOf(b), MemoryBytes: b.MemoryBytes(), Steps: st.Steps, Cuts: st.Cuts,
			Fields: []fieldSpec{}, Tables: b.TableNames(),
		}
		for _, f := range b.Fields() {
			info.Fields = append(info.Fields, fieldSpec{Name: f.Name, Role: f.Role.String(), DType: f.DType.String(), Shape: append([]int{}, f.Shape...)})
		}
		for r := range b.NumEnvs() {
			info.Cursors = append(info.Cursors, b.Cursor(r))
			info.Oldest = append(info.Oldest, b.Oldest(r))
		}
		return writeJSON(info, out, outcap, needed)
	})
}

// trj_buffer_save writes a checkpoint of the buffer and its tables to
// path, atomically (tensorbuf.Buffer.SaveFile).
//
//export trj_buffer_save
func trj_buffer_save(h C.uint64_t, path *C.char, compress C.int32_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		bo, e := getAs[*bufferObj](uint64(h), kindBuffer)
		if e != nil {
			return e
		}
		p, e := goString(path, "path")
		if e != nil {
			return e
		}
		return bo.b.SaveFile(p, tensorbuf.SaveOptions{Compress: compress != 0})
	})
}

// trj_buffer_export_npz writes every stored transition to path as a NumPy
// .npz archive (tensorbuf.Buffer.ExportNPZ; mode 2 batch, 3 sequence),
// atomically, and stores their number at out.
//
//export trj_buffer_export_npz
func trj_buffer_export_npz(h C.uint64_t, path *C.char, mode C.int32_t, out *C.int64_t, err *C.char, errcap C.int64_t) C.int32_t {
	return guard(err, errcap, func() error {
		bo, e := getAs[*bufferObj](uint64(h), kindBuffer)
		if e != nil {
			return e
		}
		p, e := goString(path, "path")
		if e != nil {
			return e
		}
		if out == nil {
			return setOut(out, 0)
		}
		var n int
		var exportErr error
		e = atomicfile.Write(p, func(w io.Writer) error {
			n, exportErr = bo.b.ExportNPZ(w, tensorbuf.ExportMode(mode))
			return exportErr
		})
		if exportErr != nil {
			return exportErr
		}
		if e != nil {
			return e
		}
		*out = C.int64_t(n)
		return nil
	})
}
