package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf"
)

// HugeOptions configures RunHuge. A plain value.
type HugeOptions struct {
	// Dir receives the file-backed buffers' directories (removed after
	// each capacity); its disk must hold the largest buffer with room to
	// spare, or larger capacities are skipped.
	Dir string
	// Max is the largest capacity in steps (1e9 when 0): the sweep runs
	// 1M, 10M, 100M and 1B steps up to it.
	Max int64
	// TableMax is the largest table in items (1e8 when 0); tables larger
	// than the memory available allows are skipped, saying what they need.
	TableMax int64
	// Ops and ColdOps are the samples timed per resident and per cold row
	// (2000 and 200 when 0).
	Ops, ColdOps int
	// Log, when not nil, receives progress lines.
	Log io.Writer
}

// HugeLayout is the layout of the huge sweep: CartPole's step (a float32
// [4] observation and an int64 action), 40 bytes a step with the built-in
// columns, so that 1B steps take about 41 GB of files (the issue's "about
// 40 GB"), which a 64 GB disk can hold beside the system; LowDim's 108
// bytes would need 109 GB.
func HugeLayout() Layout {
	return Layout{Name: "cartpole", Fields: []tensorbuf.Field{
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{4}},
		{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Int64},
	}}
}

// hugeRows is the rows of every huge buffer: each row holds capacity/256
// steps, and a batched add writes 256 steps.
const hugeRows = 256

// RunHuge measures sampling from file-backed buffers (tensorbuf
// Config.Dir) past the host's memory: B=256 low-dimensional samples of
// L=1 and L=4 at 1M, 10M, 100M and 1B steps (up to Max), resident and
// after Buffer.Evict (cold, read from disk), with the fraction resident,
// the disk's random 4 KiB read latency measured in the same run (O_DIRECT
// reads of the buffer's own ring file) and the ceiling it implies for the
// disk reads a sample makes; beside each in-memory buffer, in the same
// rounds, the machine's own random reads of a sample's lines and windows
// from a plain arena of the same bytes (the "huge yardstick" rows, whose
// 100M/1M ratio is the physical one the in-memory rows' is judged by);
// the cost of Sync against the bytes dirtied; and uniform and prioritized
// tables of 1M and TableMax items, with the host memory an item takes.
// Rows are named "huge ...", in the Report schema. It is not safe for
// concurrent use with other measurements (it measures the process's page
// faults).
func RunHuge(ctx context.Context, opt HugeOptions) (*Report, error) {
	if opt.Dir == "" {
		return nil, errors.New("bench: RunHuge needs a directory")
	}
	if opt.Max <= 0 {
		opt.Max = 1_000_000_000
	}
	if opt.TableMax <= 0 {
		opt.TableMax = 100_000_000
	}
	if opt.Ops <= 0 {
		opt.Ops = 2000
	}
	if opt.ColdOps <= 0 {
		opt.ColdOps = 200
	}
	h := &huge{opt: opt, memP50: map[int]float64{}, yardP50: map[[2]int]float64{}, rep: &Report{Date: time.Now().UTC(), Mode: "huge", Backend: "cpu", Machine: DescribeMachine()}}
	h.rep.Notes = append(h.rep.Notes, "file-backed buffers in "+opt.Dir+" on "+mountOf(opt.Dir))
	for _, c := range []int64{1_000_000, 10_000_000, 100_000_000, 1_000_000_000} {
		if c > opt.Max {
			break
		}
		if err := ctx.Err(); err != nil {
			return h.rep, err
		}
		if err := h.memory(c); err != nil {
			return h.rep, err
		}
		if err := h.capacity(c); err != nil {
			return h.rep, err
		}
	}
	for _, n := range []int64{1_000_000, opt.TableMax} {
		if err := ctx.Err(); err != nil {
			return h.rep, err
		}
		if err := h.tables(n); err != nil {
			return h.rep, err
		}
		if n >= opt.TableMax {
			break
		}
	}
	return h.rep, nil
}

type huge struct {
	opt       HugeOptions
	rep       *Report
	itemBytes map[tensorbuf.Selector]float64 // host bytes per table item, from the 1M tables
	memP50    map[int]float64                // p50 of the 1M-step in-memory rows, by L
	yardP50   map[[2]int]float64             // p50 of the 1M-step yardsticks, by L and kind
}

func (h *huge) logf(format string, args ...any) {
	if h.opt.Log != nil {
		fmt.Fprintf(h.opt.Log, format+"\n", args...)
	}
}

func (h *huge) add(r Row) {
	r.finish()
	h.rep.Rows = append(h.rep.Rows, r)
	h.logf("%-52s p50 %9s us  p99 %9s us  resident %5.1f%%  %s", r.Scenario, fmtDur(r.Ours.P50), fmtDur(r.Ours.P99), 100*r.Resident, r.Note)
}

// memory times the same samples from an in-memory buffer (anonymous
// memory, on huge pages where the kernel gives them) of the given steps:
// the yardstick of the file-backed rows, and at 100M steps the issue's
// "fits in RAM" case. Beside it, in the same rounds (ours and the
// yardsticks alternate, so load on a shared machine hits both alike), the
// physical yardsticks of huge_yardstick_linux.go on a plain arena of the
// buffer's ring bytes. It skips a buffer that would take more than half
// of the memory available, and the yardsticks when their arena would take
// more than half of what is left.
func (h *huge) memory(steps int64) error {
	l := HugeLayout()
	name := fmtRate(float64(steps))
	need := steps * (l.StepBytes() + 1)
	if avail, err := cpu.MemAvailable(); err == nil && need > avail/2 {
		h.rep.Skipped = append(h.rep.Skipped, Skip{What: "huge memory " + name + " steps",
			Reason: fmt.Sprintf("an in-memory buffer of %d bytes; %d available (half is the limit)", need, avail)})
		return nil
	}
	r0, g0 := anonPages()
	b, err := Filled(l, hugeRows, int(steps/hugeRows), nil)
	if err != nil {
		return err
	}
	defer b.Close()
	r1, g1 := anonPages()
	var y *yardstick
	ring := steps * l.StepBytes()
	if avail, err := cpu.MemAvailable(); err == nil && ring > avail/2 {
		h.rep.Skipped = append(h.rep.Skipped, Skip{What: "huge yardstick " + name + " steps",
			Reason: fmt.Sprintf("an arena of %d bytes beside the buffer; %d available (half is the limit)", ring, avail)})
	} else if y, err = newYardstick(ring); err != nil {
		return err
	} else {
		defer y.close()
	}
	r2, g2 := anonPages()
	hugeFrac, yardHuge := hugeShare(r0, g0, r1, g1), hugeShare(r1, g1, r2, g2)
	for _, sl := range []int{1, 4} {
		// The CartPole step is one packed 40-byte record (its small fields
		// and the built-in columns share a ring): a window of sl steps is
		// 40*sl contiguous bytes.
		yr := []yardRuns{lineRuns(256, sl, l.StepBytes()), windowRuns(256, sl, l.StepBytes())}
		var dist [2]int
		if y != nil {
			for k, r := range yr {
				dist[k], _ = y.calibrate(r)
			}
		}
		var ours []float64
		var yns [2][]float64
		per := max(1, h.opt.Ops/hugeRounds)
		for range hugeRounds {
			ns, _, err := sampleNS(b, sl, 256, per)
			if err != nil {
				return err
			}
			ours = append(ours, ns...)
			if y != nil {
				for k, r := range yr {
					yns[k] = append(yns[k], y.times(r, dist[k], per)...)
				}
			}
		}
		st, err := Summarise(ours)
		if err != nil {
			return err
		}
		note := fmt.Sprintf("in-memory buffer (anonymous memory, %.0f%% of what it added on 2 MiB pages: AnonHugePages)", 100*hugeFrac)
		if base, ok := h.memP50[sl]; ok {
			note += fmt.Sprintf(": p50 %.2fx the 1M-step buffer's", Ratio(st.P50, base))
		} else {
			note += ": the yardstick of the file-backed rows"
			h.memP50[sl] = st.P50
		}
		var ys [2]Stats
		if y != nil {
			for k := range yr {
				ys[k], _ = Summarise(yns[k])
			}
			note += fmt.Sprintf("; the random-line yardstick's p50 in the same rounds %s us (ours %.2fx it)", fmtDur(ys[0].P50), Ratio(st.P50, ys[0].P50))
		}
		h.add(Row{Scenario: fmt.Sprintf("huge memory sample %s L=%d B=256 (%s steps)", l.Name, sl, name), Group: "huge", Layout: l.Name,
			Backend: "cpu", B: 256, L: sl, S: l.StepBytes(), Capacity: b.Size(), Ours: st, Resident: 1, Note: note})
		if y == nil {
			continue
		}
		for k, r := range yr {
			kind := [2]string{"lines", "windows"}[k]
			what := fmt.Sprintf("%d random 64-byte line reads (the lines a B=256 L=%d sample of 40-byte records touches, on average)", r.n, sl)
			if k == 1 {
				what = fmt.Sprintf("256 random runs of %d bytes (a B=256 L=%d sample's windows of 40-byte records, each read line by line)", r.span, sl)
			}
			yn := fmt.Sprintf("%s from a plain anonymous arena of the ring's %d bytes (MADV_HUGEPAGE, %.0f%% of it on 2 MiB pages), prefetched in chunks of %d runs (the best p50 of %v in this run's calibration), in the same rounds as the buffer's row",
				what, ring, 100*yardHuge, dist[k], yardDistances)
			if base, ok := h.yardP50[[2]int{sl, k}]; ok {
				yn += fmt.Sprintf("; p50 %.2fx the 1M-step yardstick's (ours: %.2fx)", Ratio(ys[k].P50, base), Ratio(st.P50, h.memP50[sl]))
			} else {
				h.yardP50[[2]int{sl, k}] = ys[k].P50
			}
			h.add(Row{Scenario: fmt.Sprintf("huge yardstick %s %s L=%d B=256 (%s steps)", kind, l.Name, sl, name), Group: "huge-yardstick", Layout: l.Name,
				Backend: "cpu", B: 256, L: sl, S: l.StepBytes(), Capacity: steps, Ours: ys[k], Resident: 1, Note: yn})
		}
	}
	return nil
}

// hugeRounds is how many rounds the in-memory rows alternate ours and the
// yardsticks in (Ops/hugeRounds samples of each a round).
const hugeRounds = 4

// capacity runs the rows of one capacity.
func (h *huge) capacity(steps int64) error {
	if err := h.fileRows(steps, false); err != nil {
		return err
	}
	// Buffers that fit in memory again with DirHugePages: resident samples
	// and syncs on 2 MiB folios (no cold rows: a cold read would read
	// whole folios).
	l := HugeLayout()
	if avail, err := cpu.MemAvailable(); err == nil && steps*(l.StepBytes()+1) <= avail/2 {
		return h.fileRows(steps, true)
	}
	return nil
}

// fileRows runs the rows of one file-backed buffer: mapped with 4 KiB
// pages (the default) or, with hugePages, with Config.DirHugePages.
func (h *huge) fileRows(steps int64, hugePages bool) error {
	name := fmtRate(float64(steps))
	l := HugeLayout()
	fileBytes := steps*(l.StepBytes()+1) + 64<<20
	kind, suffix := "4 KiB pages", ""
	if hugePages {
		kind, suffix = "DirHugePages", ", huge pages"
	}
	free := diskFree(h.opt.Dir)
	// Keep a quarter of the disk's free space, and 4 GiB, free.
	if free >= 0 && fileBytes > free*3/4-4<<30 {
		h.rep.Skipped = append(h.rep.Skipped, Skip{What: "huge " + name + " steps",
			Reason: fmt.Sprintf("the buffer's files need %d bytes; %s has %d free (a quarter and 4 GiB are kept free)", fileBytes, h.opt.Dir, free)})
		h.logf("skipping %s steps: %d bytes needed, %d free", name, fileBytes, free)
		return nil
	}
	dir := filepath.Join(h.opt.Dir, "huge-"+name)
	if hugePages {
		dir += "-hp"
	}
	_ = os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	h.logf("filling %s steps (%.1f GB of files, %s) in %s", name, float64(fileBytes)/1e9, kind, dir)
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: hugeRows, Capacity: int(steps / hugeRows), Fields: l.Fields, Seed: 1, Dir: dir,
		DirHugePages: hugePages})
	if err != nil {
		return err
	}
	defer b.Close()
	w, err := b.NewWriter()
	if err != nil {
		return err
	}
	st := newStepper(l, w.Rows())
	start := time.Now()
	for t := range steps / hugeRows {
		if err := w.Add(st.at(t)); err != nil {
			return fmt.Errorf("bench: filling: %w", err)
		}
	}
	fill := time.Since(start)
	start = time.Now()
	if err := b.Sync(); err != nil {
		return err
	}
	syncFull := time.Since(start)
	h.rep.Notes = append(h.rep.Notes, fmt.Sprintf("huge %s steps (%s): filled in %.1f s (%.2f M steps/s, %.2f GB/s), then the first Sync wrote it in %.1f s",
		name, kind, fill.Seconds(), float64(steps)/fill.Seconds()/1e6, float64(steps*l.StepBytes())/fill.Seconds()/1e9, syncFull.Seconds()))
	h.logf("filled in %v, synced in %v", fill, syncFull)
	// The first samples after a fill run several times slower than later
	// ones (measured at 100M steps: 74-190 us against 25-37 us p50, with no
	// page fault either time): one untimed pass first, its p50 in the note.
	warm, _, err := sampleTimes(b, 1, 256, h.opt.Ops)
	if err != nil {
		return err
	}
	for _, sl := range []int{1, 4} {
		m0 := minorFaults()
		stats, faults, err := sampleTimes(b, sl, 256, h.opt.Ops)
		if err != nil {
			return err
		}
		minor := float64(minorFaults()-m0) / float64(h.opt.Ops+21)
		note := fmt.Sprintf("file-backed (%s, %.0f%% of it mapped as 2 MiB folios), resident (page cache); %.1f minor page faults a sample; after an untimed pass of L=1 samples (p50 %s us)",
			kind, 100*hugeMapped(dir), minor, fmtDur(warm.P50))
		if base, ok := h.memP50[sl]; ok {
			note += fmt.Sprintf("; p50 %.2fx the 1M-step in-memory buffer's", Ratio(stats.P50, base))
		}
		h.add(Row{Scenario: fmt.Sprintf("huge sample %s L=%d B=256 (%s steps%s)", l.Name, sl, name, suffix), Group: "huge", Layout: l.Name,
			Backend: "cpu-file", B: 256, L: sl, S: l.StepBytes(), Capacity: steps, Ours: stats, Resident: residency(b),
			ReadsPerOp: faults, Note: note})
	}
	if err := h.syncRows(b, w, st, steps, name, suffix); err != nil {
		return err
	}
	if hugePages {
		return nil
	}
	// Cold: the rings evicted, every sample reads its pages from disk.
	if err := b.Sync(); err != nil {
		return err
	}
	if err := b.Evict(); err != nil {
		return err
	}
	disk, err := diskReads(filepath.Join(dir, "ring-0"), 1000)
	if err != nil {
		h.rep.Skipped = append(h.rep.Skipped, Skip{What: "disk ceiling " + name, Reason: err.Error()})
	}
	for _, sl := range []int{1, 4} {
		before := residency(b)
		stats, faults, err := sampleTimes(b, sl, 256, h.opt.ColdOps)
		if err != nil {
			return err
		}
		r := Row{Scenario: fmt.Sprintf("huge cold sample %s L=%d B=256 (%s steps)", l.Name, sl, name), Group: "huge", Layout: l.Name,
			Backend: "cpu-file", B: 256, L: sl, S: l.StepBytes(), Capacity: steps, Ours: stats, Resident: residency(b), ReadsPerOp: faults}
		if disk != nil {
			r.Disk = disk
			r.DiskCeilingNS = faults * disk.P50
			r.Note = fmt.Sprintf("after Evict: resident %.2f%% before, %.2f%% after; p50 / disk ceiling %.2fx",
				100*before, 100*r.Resident, Ratio(stats.P50, r.DiskCeilingNS))
		}
		h.add(r)
	}
	return nil
}

// syncRows times Sync after dirtying 0, 0.1% and 1% of the buffer's steps
// (contiguous in each row, overwriting the oldest: the journal keeps the
// synced steps they replace).
func (h *huge) syncRows(b *tensorbuf.Buffer, w *tensorbuf.Writer, st *stepper, steps int64, name, suffix string) error {
	l := HugeLayout()
	for _, frac := range []float64{0, 0.001, 0.01} {
		adds := int64(frac * float64(steps) / hugeRows)
		t0 := b.Cursor(0)
		for t := range adds {
			if err := w.Add(st.at(t0 + t)); err != nil {
				return err
			}
		}
		fi, _ := b.FileInfo()
		dirty := adds*hugeRows*(l.StepBytes()+1) + fi.JournalBytes
		start := time.Now()
		if err := b.Sync(); err != nil {
			return err
		}
		d := float64(time.Since(start).Nanoseconds())
		h.add(Row{Scenario: fmt.Sprintf("huge sync dirty %.1f%% (%s steps%s)", 100*frac, name, suffix), Group: "huge-sync", Layout: l.Name,
			Backend: "cpu-file", B: int(adds * hugeRows), L: 1, S: l.StepBytes(), Capacity: steps,
			Ours: Stats{Ops: 1, P50: d, P99: d, Mean: d, Min: d}, Resident: residency(b),
			Note: fmt.Sprintf("%.1f MB dirtied (ring and metadata pages, %.1f MB of it journal) of a %.2f GB buffer: %.1f ms, %.0f MB/s",
				float64(dirty)/1e6, float64(fi.JournalBytes)/1e6, float64(fi.FileBytes)/1e9, d/1e6, float64(dirty)/d*1e3)})
	}
	return nil
}

// tables: uniform and prioritized tables of n items (Len 1, over the
// steps of a 1M-step in-memory buffer, each step under n/1M items),
// sampled B=256.
func (h *huge) tables(n int64) error {
	name := fmtRate(float64(n))
	if h.itemBytes == nil {
		h.itemBytes = map[tensorbuf.Selector]float64{}
	}
	const steps = 1 << 20
	for _, cfg := range []tensorbuf.TableConfig{
		{Name: "uniform", Selector: tensorbuf.Uniform, Seed: 13},
		{Name: "prioritized", Selector: tensorbuf.Prioritized, PriorityExponent: 0.6, Beta: 0.4, Seed: 13},
	} {
		if ib := h.itemBytes[cfg.Selector]; ib > 0 {
			// The records and the live list grow in place (tensorbuf's
			// growMapped); the rest (key generations, start heaps, the sum
			// tree) grows by copying: 15% more for that (the tree at 100M
			// items holds 128M leaves, and its old levels while it grows).
			need := int64(ib * float64(n) * 1.15)
			if avail, err := cpu.MemAvailable(); err == nil && need > avail {
				h.rep.Skipped = append(h.rep.Skipped, Skip{What: "huge table " + cfg.Name + " " + name + " items",
					Reason: fmt.Sprintf("%.0f bytes an item (resident memory at 1M items) need about %d bytes; %d available", ib, need, avail)})
				h.logf("skipping the %s table of %s items: %d bytes needed, %d available", cfg.Name, name, need, avail)
				continue
			}
		}
		b, err := Filled(HugeLayout(), hugeRows, steps/hugeRows, nil)
		if err != nil {
			return err
		}
		h.logf("inserting %s %s items", name, cfg.Name)
		before := heapBytes()
		t, err := b.NewTable(cfg)
		if err != nil {
			b.Close()
			return err
		}
		start := time.Now()
		per := int64(steps / hugeRows)
		for k := range n {
			s := k % steps
			if _, err := t.Insert(tensorbuf.Item{Row: int(s / per), Start: s % per, Len: 1, Priority: float64(1 + k%16)}); err != nil {
				b.Close()
				return err
			}
		}
		ins := time.Since(start)
		ib := float64(heapBytes()-before) / float64(n)
		if n == 1_000_000 {
			h.itemBytes[cfg.Selector] = ib
		}
		ns := make([]float64, 0, h.opt.Ops)
		for i := range h.opt.Ops + 20 {
			t0 := time.Now()
			bt, err := t.Sample(context.Background(), 256)
			if err != nil {
				b.Close()
				return err
			}
			d := time.Since(t0)
			_ = bt.Release()
			if i >= 20 {
				ns = append(ns, float64(d.Nanoseconds()))
			}
		}
		stats, _ := Summarise(ns)
		h.add(Row{Scenario: fmt.Sprintf("huge table %s %s B=256 (%s items)", cfg.Name, HugeLayout().Name, name), Group: "huge-table", Layout: HugeLayout().Name,
			Backend: "cpu", B: 256, L: 1, S: HugeLayout().StepBytes(), Capacity: steps, Ours: stats, Resident: 1,
			Note: fmt.Sprintf("%.0f bytes of host memory an item (resident memory growth over the inserts); inserted in %.1f s (%.0f ns an item)",
				ib, ins.Seconds(), float64(ins.Nanoseconds())/float64(n))})
		b.Close()
		t = nil
		runtime.GC()
		debug.FreeOSMemory()
	}
	return nil
}

// sampleTimes times ops samples of n sequences of l steps (after 20
// untimed ones) and returns their Stats and the 4 KiB pages read from disk
// per timed sample (read_bytes of /proc/self/io: page faults and the
// reads the prefetch queued alike).
func sampleTimes(b *tensorbuf.Buffer, l, n, ops int) (Stats, float64, error) {
	ns, faults, err := sampleNS(b, l, n, ops)
	if err != nil {
		return Stats{}, 0, err
	}
	st, err := Summarise(ns)
	return st, faults, err
}

// sampleNS is sampleTimes' measurement: the ops latencies in nanoseconds.
func sampleNS(b *tensorbuf.Buffer, l, n, ops int) ([]float64, float64, error) {
	bt, err := b.SampleSequences(n, l, tensorbuf.SequenceOptions{})
	if err != nil {
		return nil, 0, err
	}
	defer bt.Release()
	for range 20 {
		if err := b.SampleSequencesInto(bt, n, l, tensorbuf.SequenceOptions{}); err != nil {
			return nil, 0, err
		}
	}
	ns := make([]float64, 0, ops)
	f0 := readBytes()
	for range ops {
		t0 := time.Now()
		if err := b.SampleSequencesInto(bt, n, l, tensorbuf.SequenceOptions{}); err != nil {
			return nil, 0, err
		}
		ns = append(ns, float64(time.Since(t0).Nanoseconds()))
	}
	return ns, float64(readBytes()-f0) / 4096 / float64(ops), nil
}

func residency(b *tensorbuf.Buffer) float64 {
	r, t, err := b.Residency()
	if err != nil || t == 0 {
		return 0
	}
	return float64(r) / float64(t)
}

// readBytes is the bytes this process has read from storage (read_bytes
// of /proc/self/io).
func readBytes() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "read_bytes: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// hugeMapped returns the fraction of the resident bytes of the process's
// mappings of files under dir that are mapped as 2 MiB folios
// (FilePmdMapped over Rss in /proc/self/smaps), or -1 when unknown.
func hugeMapped(dir string) float64 {
	rss, pmd, err := smapsSum(func(fs []string) bool { return len(fs) >= 6 && strings.HasPrefix(fs[5], dir+"/") }, "FilePmdMapped:")
	if err != nil || rss == 0 {
		return -1
	}
	return float64(pmd) / float64(rss)
}

// smapsSum sums, over the mappings of /proc/self/smaps whose header line
// (split into fields) keep accepts, their Rss and their field key, in kB.
func smapsSum(keep func(header []string) bool, key string) (rss, val int64, err error) {
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, 0, err
	}
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		fs := strings.Fields(line)
		if len(fs) >= 5 && strings.Contains(fs[0], "-") && !strings.HasSuffix(fs[0], ":") {
			in = keep(fs) // a mapping's header: range, perms, offset, device, inode[, path]
			continue
		}
		if !in || len(fs) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(fs[1], 10, 64)
		switch fs[0] {
		case "Rss:":
			rss += v
		case key:
			val += v
		}
	}
	return rss, val, nil
}

func minorFaults() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Minflt
}

func heapBytes() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	// A table's item records past 8 MiB live outside the Go heap (see
	// tensorbuf's growItems): count the process's resident memory when it
	// is the larger.
	if rss, err := residentBytes(); err == nil && rss > int64(ms.HeapAlloc) {
		return rss
	}
	return int64(ms.HeapAlloc)
}

// residentBytes returns the process's resident memory (/proc/self/statm).
func residentBytes() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("statm: %q", b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize()), err
}

func diskFree(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// diskReads times n random 4 KiB reads of path with O_DIRECT (the page
// cache bypassed), one at a time: the disk's own random-read latency, the
// ceiling of a sample that must fault its pages in one after another.
func diskReads(path string, n int) (*Stats, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return nil, fmt.Errorf("bench: opening %s with O_DIRECT: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	pages := st.Size() / 4096
	buf, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, err
	}
	defer syscall.Munmap(buf)
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	ns := make([]float64, 0, n)
	for range n {
		off := rng.Int64N(pages) * 4096
		t0 := time.Now()
		if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("bench: O_DIRECT read of %s: %w", path, err)
		}
		ns = append(ns, float64(time.Since(t0).Nanoseconds()))
	}
	s, err := Summarise(ns)
	return &s, err
}

// mountOf names the device and file system holding dir (/proc/mounts).
func mountOf(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "?"
	}
	data, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "?"
	}
	best, what := "", "?"
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		if (abs == f[1] || strings.HasPrefix(abs, strings.TrimSuffix(f[1], "/")+"/")) && len(f[1]) > len(best) {
			best, what = f[1], f[0]+" ("+f[2]+", mounted at "+f[1]+")"
		}
	}
	if sz := diskSize(abs); sz > 0 {
		what += fmt.Sprintf(", %.0f GB, %.0f GB free", float64(sz)/1e9, float64(diskFree(abs))/1e9)
	}
	return what
}

func diskSize(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Blocks) * int64(st.Bsize)
}
