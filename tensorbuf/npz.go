package tensorbuf

import (
	"fmt"
	"io"
	"sort"

	"github.com/trajring/trajring/internal/npy"
	"github.com/trajring/trajring/internal/rawbytes"
	"gorgonia.org/tensor"
)

// ExportNPZ writes every stored transition, as AllExperiences(mode) returns
// them, to w in NumPy's .npz format (numpy.savez: a zip of .npy arrays),
// so that Python reads what Go collected with numpy.load. The arrays are
// MATLAB's experience fields, each in the export's order (oldest first,
// time-major, env-minor):
//
//	observation/NAME, next_observation/NAME, action/NAME, policy_info/NAME
//	                        per user field, its dtype
//	reward, discount        float32
//	is_done                 uint8: 0 running, 1 terminated, 2 truncated
//	row, step               int64: the env row and absolute step t
//
// shaped [N, 1, ...] in ExportBatch mode, [1, N, ...] in ExportSequence
// mode and [N, 1, 1, ...] in ExportNone mode (the N experiences of shape
// [1, 1, ...] stacked); row and step are [N]. It returns N. A device
// buffer's data is
// copied to the host first. It fails with ErrInvalidArg for a mode that
// is not one and ErrEmpty when the buffer holds no transition, writing
// nothing; an error from w is returned as is, and what was written is then
// not a whole archive. It is safe for concurrent use, as AllExperiences is.
func (b *Buffer) ExportNPZ(w io.Writer, mode ExportMode) (int, error) {
	var lead func(n int) []int
	switch mode {
	case ExportBatch:
		lead = func(n int) []int { return []int{n, 1} }
	case ExportSequence:
		lead = func(n int) []int { return []int{1, n} }
	case ExportNone:
		lead = func(n int) []int { return []int{n, 1, 1} }
	default:
		return 0, fmt.Errorf("%w: export mode %v", ErrInvalidArg, mode)
	}
	exp, err := b.AllExperiences(ExportBatch) // the same order in every mode
	if err != nil {
		return 0, err
	}
	defer exp[0].Release()
	tr, err := exp[0].Host()
	if err != nil {
		return 0, err
	}
	defer tr.Release()
	n := len(tr.Rows)
	a := npy.NewArchive(w)
	add := func(name string, d *tensor.Dense) error {
		k, ok := npyKind(d.Dtype())
		if !ok {
			return fmt.Errorf("%w: %s has dtype %v", ErrDType, name, d.Dtype())
		}
		shape := append(lead(n), d.Shape()[2:]...)
		return a.Add(name, k, shape, d.Header.Raw[:d.DataSize()*k.Size()])
	}
	groups := []struct {
		prefix string
		m      map[string]*tensor.Dense
	}{
		{"observation/", tr.Observation}, {"next_observation/", tr.NextObservation},
		{"action/", tr.Action}, {"policy_info/", tr.PolicyInfo},
	}
	for _, g := range groups {
		names := make([]string, 0, len(g.m))
		for name := range g.m {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if err := add(g.prefix+name, g.m[name]); err != nil {
				return 0, err
			}
		}
	}
	for _, c := range []struct {
		name string
		d    *tensor.Dense
	}{{"reward", tr.Reward}, {"discount", tr.Discount}, {"is_done", tr.IsDone}} {
		if err := add(c.name, c.d); err != nil {
			return 0, err
		}
	}
	rows := make([]int64, n)
	for i, r := range tr.Rows {
		rows[i] = int64(r)
	}
	if err := a.Add("row", npy.Int64, []int{n}, rawbytes.Of(rows)); err != nil {
		return 0, err
	}
	if err := a.Add("step", npy.Int64, []int{n}, rawbytes.Of(tr.Steps)); err != nil {
		return 0, err
	}
	return n, a.Close()
}

// npyKind maps a tensor dtype to its .npy element kind.
func npyKind(dt tensor.Dtype) (npy.Kind, bool) {
	switch dt {
	case tensor.Float32:
		return npy.Float32, true
	case tensor.Float64:
		return npy.Float64, true
	case tensor.Int32:
		return npy.Int32, true
	case tensor.Int64:
		return npy.Int64, true
	case tensor.Uint8:
		return npy.Uint8, true
	case tensor.Bool:
		return npy.Bool, true
	}
	return 0, false
}
