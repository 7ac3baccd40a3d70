package bench

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// series is one line of a plot: a name and (x, GB/s) points.
type series struct {
	name string
	xys  plotter.XYs
}

// sweepSeries collects, over the rows of a group, ours, the two
// ceilings and every peer as GB/s against x(row).
func sweepSeries(rows []Row, group string, x func(*Row) float64) []series {
	var ours, plain, gather series
	ours.name, plain.name, gather.name = "trajring", "plain copy", "gather copy (ceiling)"
	peers := map[string]*series{}
	var order []string
	for i := range rows {
		r := &rows[i]
		if r.Group != group || r.GBps <= 0 {
			continue
		}
		xv := x(r)
		ours.xys = append(ours.xys, plotter.XY{X: xv, Y: r.GBps})
		if r.PlainGBps > 0 {
			plain.xys = append(plain.xys, plotter.XY{X: xv, Y: r.PlainGBps})
		}
		if r.GatherGBps > 0 {
			gather.xys = append(gather.xys, plotter.XY{X: xv, Y: r.GatherGBps})
		}
		for _, p := range r.Peers {
			// The rand.Perm peer spans five decades: it stays in the table
			// but would flatten every other line.
			if p.GBps <= 0 || p.Name == PeerGoPerm {
				continue
			}
			s, ok := peers[p.Name]
			if !ok {
				s = &series{name: p.Name}
				peers[p.Name] = s
				order = append(order, p.Name)
			}
			s.xys = append(s.xys, plotter.XY{X: xv, Y: p.GBps})
		}
	}
	out := []series{ours, gather, plain}
	for _, name := range order {
		out = append(out, *peers[name])
	}
	var kept []series
	for _, s := range out {
		if len(s.xys) > 0 {
			kept = append(kept, s)
		}
	}
	return kept
}

// plotSweep draws GB/s against a log x axis and saves it as SVG.
func plotSweep(path, title, xlabel string, ss []series) error {
	if len(ss) == 0 {
		return fmt.Errorf("bench: %s: nothing to plot", title)
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = "effective GB/s (2·B·L·S / p50)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	// The legend goes bottom right, in two empty decades below the data.
	lo := math.Inf(1)
	for _, s := range ss {
		for _, xy := range s.xys {
			lo = math.Min(lo, xy.Y)
		}
	}
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(lo))-2)
	p.Legend.Top = false
	p.Legend.Left = false
	var vs []any
	for _, s := range ss {
		vs = append(vs, s.name, s.xys)
	}
	if err := plotutil.AddLinePoints(p, vs...); err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

// Save writes the JSON report and the plots (throughput against batch
// size and against capacity) into dir, and returns the files written.
func (rep *Report) Save(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	jpath := filepath.Join(dir, rep.FileName())
	f, err := os.Create(jpath)
	if err != nil {
		return nil, err
	}
	err = rep.WriteJSON(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	files = append(files, jpath)
	base := strings.TrimSuffix(jpath, ".json")
	var errs []error
	plots := []struct {
		group, suffix, title, xlabel string
		x                            func(*Row) float64
	}{
		{"batch-sweep", "-batch.svg", "Sample L=1, low-dim steps, 1M-step buffer", "batch size B", func(r *Row) float64 { return float64(r.B) }},
		{"capacity-sweep", "-capacity.svg", "Sample B=256 L=1, low-dim steps", "buffer capacity (steps)", func(r *Row) float64 { return float64(r.Capacity) }},
	}
	for _, pl := range plots {
		ss := sweepSeries(rep.Rows, pl.group, pl.x)
		if len(ss) == 0 {
			continue
		}
		path := base + pl.suffix
		if err := plotSweep(path, pl.title+" ("+rep.Machine.CPU+")", pl.xlabel, ss); err != nil {
			errs = append(errs, err)
			continue
		}
		files = append(files, path)
	}
	return files, errors.Join(errs...)
}
