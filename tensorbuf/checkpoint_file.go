package tensorbuf

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/trajring/trajring/internal/atomicfile"
	"github.com/trajring/trajring/tensorbuf/internal/ckptio"
)

// SaveFile saves a checkpoint (see Save) to path atomically: it writes a
// temporary file in the same directory, syncs it, renames it over path
// and syncs the directory, so that a crash or kill at any point leaves
// either the previous file at path or the new one, never a mix. A
// failed save removes its temporary file; a killed one may leave it
// behind (named "." + base name + ".tmp-*"), never at path. It is safe for
// concurrent use, though concurrent saves to one path race for the
// rename.
func (b *Buffer) SaveFile(path string, opts SaveOptions) error {
	var saveErr error
	err := atomicfile.Write(path, func(w io.Writer) error {
		saveErr = b.Save(w, opts)
		return saveErr
	})
	if saveErr != nil {
		return saveErr
	}
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// LoadFile loads a checkpoint file written by SaveFile or Save; see Load.
func LoadFile(path string, opts LoadOptions) (*Buffer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	return Load(bufio.NewReaderSize(f, 1<<16), opts)
}

// CheckpointInfo summarises a checkpoint without loading its arenas (see
// ReadCheckpointInfo). A plain value.
type CheckpointInfo struct {
	// Version is the file's format version: 3 (stored steps only) or 2
	// (every slot).
	Version  int
	NumEnvs  int
	Capacity int
	// Fields are the user fields; every checkpoint also holds the
	// built-in columns.
	Fields    []Field
	StepBytes int64
	// ArenaBytes is the size of the arenas (NumEnvs*Capacity*StepBytes).
	ArenaBytes int64
	// Cursors are the rows' cursors; StoredSteps the steps they hold.
	Cursors     []int64
	StoredSteps int64
	Stats       Stats
	Tables      []TableInfo
}

// TableInfo summarises one saved table. A plain value.
type TableInfo struct {
	Config      TableConfig
	Size        int
	Inserts     int64
	Samples     int64
	MaxPriority float64
}

// ReadCheckpointInfo reads a checkpoint's header, rows and tables and
// returns their summary; it stops before the metadata mirror and the
// arenas, so it is fast on large checkpoints and does not verify their
// chunks (Load does). Errors are as Load's. It is safe for concurrent use.
func ReadCheckpointInfo(r io.Reader) (CheckpointInfo, error) {
	if r == nil {
		return CheckpointInfo{}, fmt.Errorf("%w: nil reader", ErrInvalidArg)
	}
	cr, err := ckptio.NewReader(r)
	if err != nil {
		return CheckpointInfo{}, err
	}
	defer cr.Close()
	h, err := readHeader(cr)
	if err != nil {
		return CheckpointInfo{}, err
	}
	info := CheckpointInfo{
		Version: int(cr.Version()), NumEnvs: h.numEnvs, Capacity: int(h.capacity), Fields: h.fields,
		ArenaBytes: h.ringBytes, Stats: h.stats,
	}
	info.StepBytes = h.ringBytes / h.steps
	if info.Cursors, err = readRows(cr, h.numEnvs); err != nil {
		return CheckpointInfo{}, err
	}
	for _, c := range info.Cursors {
		info.StoredSteps += min(c, h.capacity)
	}
	for i := range h.nTables {
		ts, err := readTable(cr, uint32(i), h.numEnvs)
		if err != nil {
			return CheckpointInfo{}, err
		}
		mp := ts.maxPriority
		if !ts.hasMax {
			mp = 1
		}
		info.Tables = append(info.Tables, TableInfo{Config: ts.cfg, Size: len(ts.live), Inserts: ts.inserts, Samples: ts.samples, MaxPriority: mp})
	}
	return info, nil
}

// ReadCheckpointInfoFile is ReadCheckpointInfo on a file.
func ReadCheckpointInfoFile(path string) (CheckpointInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return CheckpointInfo{}, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	return ReadCheckpointInfo(bufio.NewReaderSize(f, 1<<16))
}

// String returns a readable multi-line summary: sizes, fields, rows and
// tables (whether each selects its items on the host or, with
// TableConfig.DeviceSelection, on the backend).
func (ci CheckpointInfo) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "trajring checkpoint, format version %d\n", ci.Version)
	fmt.Fprintf(&sb, "buffer: %d rows x %d steps, %d bytes per step, %s of arenas; %d steps stored (%.1f%%)\n",
		ci.NumEnvs, ci.Capacity, ci.StepBytes, byteSize(ci.ArenaBytes), ci.StoredSteps,
		100*float64(ci.StoredSteps)/float64(max(1, int64(ci.NumEnvs)*int64(ci.Capacity))))
	fmt.Fprintf(&sb, "written: %d steps, %d cuts, %d dropped transitions\n", ci.Stats.Steps, ci.Stats.Cuts, ci.Stats.DroppedTransitions)
	tw := tabwriter.NewWriter(&sb, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "field\trole\tdtype\tshape\tbytes/step")
	for _, f := range ci.Fields {
		fmt.Fprintf(tw, "%s\t%v\t%v\t%v\t%d\n", f.Name, f.Role, f.DType, f.Shape, f.StepBytes())
	}
	_ = tw.Flush()
	if len(ci.Cursors) > 0 {
		lo, hi := ci.Cursors[0], ci.Cursors[0]
		for _, c := range ci.Cursors {
			lo, hi = min(lo, c), max(hi, c)
		}
		fmt.Fprintf(&sb, "row cursors: min %d, max %d\n", lo, hi)
	}
	if len(ci.Tables) == 0 {
		sb.WriteString("no tables\n")
		return sb.String()
	}
	tw = tabwriter.NewWriter(&sb, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "table\tselector\titems\tinserts\tsamples\tmax size\tmax priority\tselects on\trate limiter")
	for _, t := range ci.Tables {
		rl := "none"
		if r := t.Config.RateLimiter; r != nil {
			rl = fmt.Sprintf("min %d, %g samples/insert, error buffer %g", r.MinSize, r.SamplesPerInsert, r.ErrorBuffer)
		}
		on := "host"
		if t.Config.DeviceSelection {
			on = "device"
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%d\t%d\t%g\t%s\t%s\n", t.Config.Name, t.Config.Selector, t.Size, t.Inserts, t.Samples,
			t.Config.MaxSize, t.MaxPriority, on, rl)
	}
	_ = tw.Flush()
	return sb.String()
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
