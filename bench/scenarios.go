package bench

import (
	"context"
	"fmt"

	"github.com/trajring/trajring/tensorbuf"
)

// fixture is one filled buffer with its ceiling and Go peer.
type fixture struct {
	layout   Layout
	numEnvs  int
	capacity int
	buf      *tensorbuf.Buffer
	ceil     Ceiling
	peer     goPeer
}

// newFixture fills a buffer and builds the ceiling sized for outSteps
// output steps and plainBytes of plain copy.
func (r *runner) newFixture(l Layout, numEnvs, capacity int, outSteps, plainBytes int64) (*fixture, error) {
	r.status("bench: filling %s buffer %d x %d steps", l.Name, numEnvs, capacity)
	f := &fixture{layout: l, numEnvs: numEnvs, capacity: capacity}
	var err error
	if f.buf, err = Filled(l, numEnvs, capacity, r.be); err != nil {
		return nil, err
	}
	f.ceil, err = NewCeiling(r.be, CeilingConfig{Layout: l, NumEnvs: numEnvs, Capacity: capacity, OutSteps: outSteps, PlainBytes: plainBytes})
	if err != nil && !errorsIsNoCeiling(err) {
		f.close()
		return nil, err
	}
	if !r.opt.NoGoPeer {
		f.peer = newGoPeer(l, numEnvs, capacity)
	}
	return f, nil
}

func (f *fixture) close() {
	if f.ceil != nil {
		f.ceil.Close()
	}
	if f.peer != nil {
		f.peer.release()
	}
	if f.buf != nil {
		f.buf.Close()
	}
}

func (f *fixture) steps() int64 { return int64(f.numEnvs) * int64(f.capacity) }

// cycle returns a function that walks k draws round-robin.
func cycle(k int) func() int {
	i := -1
	return func() int {
		i++
		if i == k {
			i = 0
		}
		return i
	}
}

// sequenceScenario samples n sequences of l steps directly from the
// buffer (SampleSequencesInto).
func (r *runner) sequenceScenario(f *fixture, group, name string, n, l int, opt tensorbuf.SequenceOptions) (*scenario, func(), error) {
	sc := &scenario{row: Row{Scenario: name, Group: group, Layout: f.layout.Name, B: n, L: l, S: f.layout.StepBytes() + 1, Capacity: f.steps()}}
	bt := new(tensorbuf.Batch)
	sc.ours = r.syncOp(func() error { return f.buf.SampleSequencesInto(bt, n, l, opt) })
	if f.ceil != nil {
		d, err := SequenceDraws(f.buf, drawCount(n*l, f.steps()), n, l, opt)
		if err != nil {
			return nil, nil, err
		}
		next := cycle(len(d.Windows))
		moved := int64(n*l) * sc.row.S
		sc.plain = func() error { return f.ceil.Plain(moved) }
		sc.cold = coldOf(f.ceil, moved)
		if f.ceil.Gathers() {
			sc.gather = func() error { return f.ceil.Windows(d.Windows[next()], int64(l)) }
		}
		sc.pyIdx = windowIdx(d.Windows, int64(f.capacity), int64(l))
	}
	if f.peer != nil {
		sc.peers = []op{
			{PeerGoPerm, func() error { f.peer.samplePerm(n, l); return nil }},
			{PeerGoIntN, func() error { f.peer.sampleIntN(n, l); return nil }},
		}
	}
	sc.py = newPyJob(f.layout, f.numEnvs, f.capacity, "windows", n, l)
	sc.py.EpisodeAware = opt.EpisodeAware
	return sc, func() { bt.Release() }, nil
}

// run measures a scenario and releases what it holds.
func (r *runner) run(sc *scenario, release func(), err error) error {
	if err != nil {
		return err
	}
	defer release()
	return r.measure(sc)
}

// transitionScenario samples n transitions (SampleTransitionsInto).
func (r *runner) transitionScenario(f *fixture, group, name string, n int) (*scenario, func(), error) {
	sc := &scenario{row: Row{Scenario: name, Group: group, Layout: f.layout.Name, B: n, L: 1, S: transitionBytes(f.layout), Capacity: f.steps()}}
	tr := new(tensorbuf.Transitions)
	sc.ours = r.syncOp(func() error { return f.buf.SampleTransitionsInto(tr, n) })
	if f.ceil != nil {
		d, err := TransitionDraws(f.buf, drawCount(n, f.steps()), n)
		if err != nil {
			return nil, nil, err
		}
		next := cycle(len(d.Idx))
		moved := int64(n) * sc.row.S
		sc.plain = func() error { return f.ceil.Plain(moved) }
		sc.cold = coldOf(f.ceil, moved)
		if f.ceil.Gathers() {
			sc.gather = func() error { k := next(); return f.ceil.Transitions(d.Idx[k], d.Next[k]) }
		}
		sc.pyIdx, sc.pyNext = d.Idx, d.Next
	}
	if f.peer != nil {
		sc.peers = []op{
			{PeerGoPerm, func() error { f.peer.sampleTransitionsPerm(n); return nil }},
			{PeerGoIntN, func() error { f.peer.sampleTransitionsIntN(n); return nil }},
		}
	}
	sc.py = newPyJob(f.layout, f.numEnvs, f.capacity, "transitions", n, 1)
	return sc, func() { tr.Release() }, nil
}

// tableScenario samples n one-step items through a table holding one
// item per stored step (uniform or prioritized).
func (r *runner) tableScenario(f *fixture, t *tensorbuf.Table, group, name string, n int, uniform *tensorbuf.Table) (*scenario, func(), error) {
	sc := &scenario{row: Row{Scenario: name, Group: group, Layout: f.layout.Name, B: n, L: 1, S: f.layout.StepBytes() + 1, Capacity: f.steps()}}
	bt, ubt := new(tensorbuf.Batch), new(tensorbuf.Batch)
	ctx := context.Background()
	sc.ours = r.syncOp(func() error { return t.SampleInto(ctx, bt, n) })
	if uniform != nil {
		// The uniform table of the same items, in the same rounds: the
		// yardstick of a prioritized table.
		sc.peers = append(sc.peers, op{PeerUniformTable, r.syncOp(func() error { return uniform.SampleInto(ctx, ubt, n) })})
	}
	if f.ceil != nil {
		var d [][]tensorbuf.Window
		for range drawCount(n, f.steps()) {
			if err := t.SampleInto(ctx, bt, n); err != nil {
				bt.Release()
				return nil, nil, err
			}
			d = append(d, windowsOf(bt.Items))
		}
		next := cycle(len(d))
		moved := int64(n) * sc.row.S
		sc.plain = func() error { return f.ceil.Plain(moved) }
		sc.cold = coldOf(f.ceil, moved)
		if f.ceil.Gathers() {
			sc.gather = func() error { return f.ceil.Windows(d[next()], 1) }
		}
	}
	return sc, func() { bt.Release(); ubt.Release() }, nil
}

// fillTable inserts one item of one step per stored step of the first
// rows rows of the buffer, with priorities 1..16 cycling.
func fillTable(f *fixture, rows int, cfg tensorbuf.TableConfig) (*tensorbuf.Table, error) {
	t, err := f.buf.NewTable(cfg)
	if err != nil {
		return nil, err
	}
	k := 0
	for row := range rows {
		for s := f.buf.Oldest(row); s < f.buf.Cursor(row); s++ {
			k++
			if _, err := t.Insert(tensorbuf.Item{Row: row, Start: s, Len: 1, Priority: float64(1 + k%16)}); err != nil {
				return nil, err
			}
		}
	}
	return t, nil
}

// pixelGroup: the 3,092-byte steps of Flashbax's and TorchRL's published
// benchmarks.
func (r *runner) pixelGroup(ctx context.Context) error {
	const numEnvs, n = 256, 256
	capacity := 4096 // 1,048,576 steps
	if r.opt.Mode == Quick {
		capacity = 512 // 131,072 steps
	}
	names := []string{"sample pixels L=1", "transitions pixels", "table uniform pixels", "sample pixels L=64 padded", "transitions pixels stacked"}
	if !r.anyWanted(names) {
		return nil
	}
	l := Pixels()
	f, err := r.newFixture(l, numEnvs, capacity, 32*64, 2*32*64*l.StepBytes())
	if err != nil {
		return err
	}
	defer f.close()
	suffix := fmt.Sprintf(" (%s steps)", fmtRate(float64(f.steps())))
	if err := r.run(r.sequenceScenario(f, "sample", "sample pixels L=1 B=256"+suffix, n, 1, tensorbuf.SequenceOptions{})); err != nil {
		return err
	}
	if err := r.run(r.transitionScenario(f, "sample", "transitions pixels B=256"+suffix, n)); err != nil {
		return err
	}
	if err := r.run(r.sequenceScenario(f, "sample", "sample pixels L=64 padded B=32"+suffix, 32, 64, tensorbuf.SequenceOptions{EpisodeAware: true})); err != nil {
		return err
	}
	if r.want("table uniform pixels B=256" + suffix) {
		t, err := fillTable(f, f.numEnvs, tensorbuf.TableConfig{Name: "uniform", Selector: tensorbuf.Uniform, Seed: 11})
		if err != nil {
			return err
		}
		if err := r.run(r.tableScenario(f, t, "sample", "table uniform pixels B=256"+suffix, n, nil)); err != nil {
			return err
		}
	}
	// Frame stacking (issue 45, stack.go): DQN's Atari batch, and B=256
	// outside quick runs.
	for _, b := range stackedBatches(r.opt.Mode) {
		if err := r.run(r.stackedScenario(f, "sample", stackedRowName(4, b, suffix), b, 4)); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (r *runner) anyWanted(prefixes []string) bool {
	if r.opt.Filter == nil {
		return true
	}
	for _, p := range prefixes {
		if r.opt.Filter.MatchString(p) {
			return true
		}
	}
	return false
}

// lowDimGroup: 108-byte steps, 1,000,000 of them: L=4 sequences, the
// batch-size sweep, prioritized tables and the export.
func (r *runner) lowDimGroup(ctx context.Context) error {
	const numEnvs, capacity = 16, 62500
	l := LowDim()
	itemRows := numEnvs // one item per stored step: 1M items
	if r.opt.Mode == Quick {
		itemRows = numEnvs / 4 // 250k items: inserting is most of the cost
	}
	items := fmtRate(float64(itemRows * capacity))
	uniNames := []string{"table uniform lowdim B=256 (" + items + " items)", "table uniform lowdim B=65536 (" + items + " items)"}
	prioNames := []string{"prioritized lowdim B=256 (" + items + " items)", "prioritized lowdim B=65536 (" + items + " items)"}
	if !r.anyWanted(append(append([]string{"sample lowdim L=4 B=256 (1M steps)", "sample lowdim L=1 B=16 (1M steps)", "sample lowdim L=1 B=256 (1M steps)",
		"sample lowdim L=1 B=4096 (1M steps)", "sample lowdim L=1 B=65536 (1M steps)", "export lowdim batch (1.00M transitions)"},
		uniNames...), prioNames...)) {
		return nil
	}
	export := int64(numEnvs * capacity)
	f, err := r.newFixture(l, numEnvs, capacity, export, export*transitionBytes(l))
	if err != nil {
		return err
	}
	defer f.close()
	if err := r.run(r.sequenceScenario(f, "sample", "sample lowdim L=4 B=256 (1M steps)", 256, 4, tensorbuf.SequenceOptions{})); err != nil {
		return err
	}
	for _, b := range []int{16, 256, 4096, 65536} {
		if err := r.run(r.sequenceScenario(f, "batch-sweep", fmt.Sprintf("sample lowdim L=1 B=%d (1M steps)", b), b, 1, tensorbuf.SequenceOptions{})); err != nil {
			return err
		}
	}
	// A uniform table over the same items as the prioritized one: the
	// prioritized rows' yardstick, sampled in their rounds as a peer (Run
	// notes their ratio). Both stay until the fixture closes (a buffer
	// drops no table).
	var uniform *tensorbuf.Table
	for _, tc := range []struct {
		group string
		names []string
		cfg   tensorbuf.TableConfig
	}{
		{"sample", uniNames, tensorbuf.TableConfig{Name: "uniform", Selector: tensorbuf.Uniform, Seed: 13}},
		{"prioritized", prioNames, tensorbuf.TableConfig{Name: "prioritized", Selector: tensorbuf.Prioritized, PriorityExponent: 0.6, Beta: 0.4, Seed: 13}},
	} {
		prio := tc.cfg.Selector == tensorbuf.Prioritized
		if !r.anyWanted(tc.names) && (prio || !r.anyWanted(prioNames)) {
			continue
		}
		r.status("bench: inserting %s %s items", items, tc.cfg.Name)
		t, err := fillTable(f, itemRows, tc.cfg)
		if err != nil {
			return err
		}
		var yard *tensorbuf.Table
		if prio {
			yard = uniform
		} else {
			uniform = t
		}
		for i, b := range []int{256, 65536} {
			if !r.want(tc.names[i]) {
				continue
			}
			if err := r.run(r.tableScenario(f, t, tc.group, tc.names[i], b, yard)); err != nil {
				return err
			}
		}
	}
	if r.want("export lowdim batch (1.00M transitions)") {
		if err := r.run(r.exportScenario(f)); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// exportScenario exports every transition in batch mode
// (AllExperiences), MATLAB's allExperiences.
func (r *runner) exportScenario(f *fixture) (*scenario, func(), error) {
	name := fmt.Sprintf("export lowdim batch (%s transitions)", fmtRate(float64(f.steps())))
	first, err := f.buf.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		return nil, nil, err
	}
	n := len(first[0].Rows)
	idx, next := transitionIdx(first[0].Rows, first[0].Steps, int64(f.capacity))
	first[0].Release()
	sc := &scenario{row: Row{Scenario: name, Group: "export", Layout: f.layout.Name, B: n, L: 1, S: transitionBytes(f.layout), Capacity: f.steps()}}
	sc.budget = Budget{Time: r.bud.Time, MinOps: 3, MaxOps: 50, Warmup: 1}
	sc.ours = r.syncOp(func() error {
		out, err := f.buf.AllExperiences(tensorbuf.ExportBatch)
		if err != nil {
			return err
		}
		return out[0].Release()
	})
	if f.ceil != nil {
		moved := int64(n) * sc.row.S
		sc.plain = func() error { return f.ceil.Plain(moved) }
		sc.cold = coldOf(f.ceil, moved)
		if f.ceil.Gathers() {
			sc.gather = func() error { return f.ceil.Transitions(idx, next) }
		}
	}
	sc.py = newPyJob(f.layout, f.numEnvs, f.capacity, "export", n, 1)
	sc.py.MinOps = 3
	if r.opt.Mode == Quick {
		sc.py.MinOps = 1
	}
	return sc, func() {}, nil
}

// capacityGroup: B=256, L=1 low-dimensional samples from 10k to 10M
// steps (10M only in full mode); the time per sample must stay flat.
func (r *runner) capacityGroup(ctx context.Context) error {
	const numEnvs, n = 16, 256
	caps := []int{625, 6250, 62500}
	if r.opt.Mode == Full {
		caps = append(caps, 625000)
	}
	for _, c := range caps {
		name := fmt.Sprintf("sample lowdim L=1 B=256 capacity %s", fmtRate(float64(numEnvs*c)))
		if !r.want(name) {
			continue
		}
		f, err := r.newFixture(LowDim(), numEnvs, c, n, 2*n*LowDim().StepBytes())
		if err != nil {
			return err
		}
		err = r.run(r.sequenceScenario(f, "capacity-sweep", name, n, 1, tensorbuf.SequenceOptions{}))
		f.close()
		releaseMemory()
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// addGroup: adds of one batched step to W rows (a buffer of W rows that
// wrap, overwriting their oldest steps), pixels layout.
func (r *runner) addGroup(ctx context.Context) error {
	total := 1 << 20
	if r.opt.Mode == Quick {
		total = 1 << 16
	}
	l := Pixels()
	for _, w := range []int{1, 16, 128, 1024} {
		name := fmt.Sprintf("add pixels W=%d (%s steps)", w, fmtRate(float64(total)))
		if !r.want(name) {
			continue
		}
		capacity := total / w
		f, err := r.newFixture(l, w, capacity, int64(w), 2*int64(w)*l.StepBytes())
		if err != nil {
			return err
		}
		err = r.run(r.addScenario(f, name))
		f.close()
		releaseMemory()
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) addScenario(f *fixture, name string) (*scenario, func(), error) {
	w := f.numEnvs
	sc := &scenario{row: Row{Scenario: name, Group: "add", Layout: f.layout.Name, B: w, L: 1, S: f.layout.StepBytes(), Capacity: f.steps()}}
	wr, err := f.buf.NewWriter()
	if err != nil {
		return nil, nil, err
	}
	st := newStepper(f.layout, wr.Rows())
	t := f.buf.Cursor(0)
	sc.ours = r.syncOp(func() error { t++; return wr.Add(st.at(t - 1)) })
	if f.ceil != nil {
		idx := make([]int64, w)
		var ct int64
		moved := int64(w) * sc.row.S
		sc.plain = func() error { return f.ceil.Plain(moved) }
		sc.gather = func() error {
			for i := range idx {
				idx[i] = int64(i)*int64(f.capacity) + ct%int64(f.capacity)
			}
			ct++
			return f.ceil.Scatter(idx)
		}
		if !f.ceil.Gathers() {
			sc.gather = nil
		}
	}
	if f.peer != nil {
		cur := 0
		sc.peers = []op{{PeerGoIntN, func() error { f.peer.addRows(w, cur); cur++; return nil }}}
	}
	sc.py = newPyJob(f.layout, f.numEnvs, f.capacity, "scatter", w, 1)
	return sc, func() { wr.Close() }, nil
}

// coldOf returns the cold copy of moved bytes of a ceiling that measures
// one, or nil.
func coldOf(c Ceiling, moved int64) func() error {
	cc, ok := c.(ColdCopier)
	if !ok {
		return nil
	}
	return func() error { return cc.Cold(moved) }
}

// windowIdx converts windows into the ring step of each window's first
// step, for the Python peers, which gather l contiguous steps from it: a
// window that would wrap the ring starts instead l steps before the row's
// end (the peers' arrays do not wrap).
func windowIdx(wins [][]tensorbuf.Window, capacity, l int64) [][]int64 {
	out := make([][]int64, len(wins))
	for k, ws := range wins {
		out[k] = make([]int64, len(ws))
		for i, w := range ws {
			out[k][i] = w.Row*capacity + min(w.Start%capacity, capacity-l)
		}
	}
	return out
}

func errorsIsNoCeiling(err error) bool { return err != nil && isErr(err, ErrNoCeiling) }
