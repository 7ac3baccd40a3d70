package bench

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/trajring/trajring/internal/atomicfile"
	"github.com/trajring/trajring/internal/figure"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// series is one line of a plot: a name and (x, GB/s) points.
type series struct {
	name string
	xys  plotter.XYs
}

// Line names of the plots.
const (
	lineOurs   = "trajring"
	lineGather = "gather copy"
	lineCold   = "cold copy"
	linePlain  = "plain copy (hot)"
)

// lineStyle gives every line its own colour and dash; trajring alone is
// drawn in blue, thickest, on top.
type lineStyle struct {
	c     color.RGBA
	width vg.Length
	dash  []vg.Length
	glyph draw.GlyphDrawer
}

var styles = map[string]lineStyle{
	lineOurs:   {color.RGBA{0, 84, 204, 255}, 3.2, nil, draw.CircleGlyph{}},
	lineGather: {color.RGBA{90, 90, 90, 255}, 1.3, []vg.Length{vg.Points(5), vg.Points(3)}, draw.BoxGlyph{}},
	lineCold:   {color.RGBA{30, 30, 30, 255}, 1.3, []vg.Length{vg.Points(1.5), vg.Points(2.5)}, draw.TriangleGlyph{}},
	linePlain:  {color.RGBA{170, 170, 170, 255}, 1.3, []vg.Length{vg.Points(8), vg.Points(3)}, draw.PlusGlyph{}},
	PeerNumPy:  {color.RGBA{230, 120, 0, 255}, 1.6, nil, draw.SquareGlyph{}},
	PeerTorch1: {color.RGBA{200, 30, 40, 255}, 1.6, nil, draw.TriangleGlyph{}},
	PeerTorch:  {color.RGBA{150, 60, 170, 255}, 1.6, []vg.Length{vg.Points(4), vg.Points(2)}, draw.PyramidGlyph{}},
	PeerGoIntN: {color.RGBA{20, 150, 70, 255}, 1.6, nil, draw.RingGlyph{}},
	PeerGoPerm: {color.RGBA{120, 170, 60, 255}, 1.2, nil, draw.CrossGlyph{}},
}

// sweepSeries collects, over the rows of a group, ours, the yardsticks
// and every peer as GB/s against x(row).
func sweepSeries(rows []Row, group string, x func(*Row) float64) []series {
	var ours, plain, gather, cold series
	ours.name, plain.name, gather.name, cold.name = lineOurs, linePlain, lineGather, lineCold
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
		if r.ColdGBps > 0 {
			cold.xys = append(cold.xys, plotter.XY{X: xv, Y: r.ColdGBps})
		}
		for _, p := range r.Peers {
			// The rand.Perm peer spans five decades: it stays in the table
			// but would flatten every other line.
			if p.GBps <= 0 || p.Name == PeerGoPerm || p.Name == PeerUniformTable {
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
	out := []series{gather, cold, plain}
	for _, name := range order {
		out = append(out, *peers[name])
	}
	out = append(out, ours) // drawn last: on top
	var kept []series
	for _, s := range out {
		if len(s.xys) > 0 {
			kept = append(kept, s)
		}
	}
	return kept
}

// niceTicks marks a log axis at 1, 2 and 5 times the powers of ten
// inside [min, max], labelled plainly ("0.5", "20", "1k"), or at the
// given values when vals is set.
type niceTicks struct {
	vals  []float64
	label func(float64) string
}

func (t niceTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	if t.vals != nil {
		for _, v := range t.vals {
			ts = append(ts, plot.Tick{Value: v, Label: t.label(v)})
		}
		return ts
	}
	for e := math.Floor(math.Log10(lo)) - 1; e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= lo*0.999 && v <= hi*1.001 {
				ts = append(ts, plot.Tick{Value: v, Label: t.label(v)})
			}
		}
	}
	return ts
}

func plainNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}

// bounds returns the range of the series' y values.
func bounds(ss []series) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, xy := range s.xys {
			lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
		}
	}
	return lo, hi
}

// plotSweep draws GB/s against log x and y axes fitted to the data, the
// legend in a column of its own right of the plot, and saves it (SVG or
// PNG by the path's extension).
func plotSweep(path, title, xlabel string, xlabel2 func(float64) string, ss []series) error {
	if len(ss) == 0 {
		return fmt.Errorf("bench: %s: nothing to plot", title)
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = "effective GB/s (2·B·L·S / p50)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	var xs []float64
	for _, xy := range ss[len(ss)-1].xys {
		xs = append(xs, xy.X)
	}
	p.X.Tick.Marker = niceTicks{vals: xs, label: xlabel2}
	p.Y.Tick.Marker = niceTicks{label: plainNum}
	lo, hi := bounds(ss)
	p.Y.Min, p.Y.Max = lo/1.25, hi*1.25
	p.X.Min, p.X.Max = xs[0]/1.3, xs[len(xs)-1]*1.3
	p.Add(plotter.NewGrid())
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.ThumbnailWidth = vg.Points(28)
	leg.Padding = vg.Points(3)
	for _, s := range ss {
		l, pts, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return err
		}
		st, ok := styles[s.name]
		if !ok {
			st = lineStyle{color.RGBA{0, 0, 0, 255}, 1, nil, draw.CircleGlyph{}}
		}
		l.Color, l.Width, l.Dashes = st.c, st.width, st.dash
		pts.Color, pts.Shape, pts.Radius = st.c, st.glyph, vg.Points(2.5)
		if s.name == lineOurs {
			pts.Radius = vg.Points(4)
		}
		if len(s.xys) > figure.MaxMarked {
			p.Add(l) // markers would blot a dense curve
			leg.Add(s.name, l)
			continue
		}
		p.Add(l, pts)
		leg.Add(s.name, l, pts)
	}
	return figure.Save(path, p, &leg, 9*vg.Inch, 4.5*vg.Inch, 2*vg.Inch)
}

// headline lists the rows of the bar chart: a prefix of the scenario's
// name and the bar group's label.
var headline = []struct{ prefix, label string }{
	{"sample pixels L=1 B=256", "sample pixels\nL=1 B=256"},
	{"transitions pixels B=256", "transitions\npixels B=256"},
	{"sample lowdim L=4 B=256", "sample low-dim\nL=4 B=256"},
	{"sample lowdim L=1 B=256 (", "sample low-dim\nL=1 B=256"},
	{"sample lowdim L=1 B=4096", "sample low-dim\nL=1 B=4096"},
	{"sample lowdim L=1 B=65536", "sample low-dim\nL=1 B=65536"},
	{"export lowdim", "export low-dim\n1M transitions"},
}

// plotBars draws the headline rows as groups of bars, one per contestant
// (ours and each peer), each the contestant's speed relative to
// trajring's in the same run (ours p50 over its p50: trajring is 1).
func plotBars(path, title string, rows []Row) error {
	names := []string{lineOurs, PeerNumPy, PeerTorch1, PeerTorch, PeerGoIntN}
	var labels []string
	vals := make([]plotter.Values, len(names))
	hi := 1.0
	for _, h := range headline {
		var r *Row
		for i := range rows {
			if strings.HasPrefix(rows[i].Scenario, h.prefix) {
				r = &rows[i]
				break
			}
		}
		if r == nil || r.Ours.P50 <= 0 {
			continue
		}
		labels = append(labels, h.label)
		for k, name := range names {
			v := 0.0
			if k == 0 {
				v = 1
			} else if p := r.Peer(name); p != nil && p.Stats.P50 > 0 {
				v = r.Ours.P50 / p.Stats.P50
			}
			vals[k] = append(vals[k], v)
			hi = math.Max(hi, v)
		}
	}
	if len(labels) == 0 {
		return fmt.Errorf("bench: %s: no headline rows", title)
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "speed relative to trajring (ours p50 / peer p50)"
	p.Y.Label.TextStyle.Font.Size = vg.Points(9)
	p.Y.Min, p.Y.Max = 0, hi*1.1
	p.Y.Tick.Marker = plot.ConstantTicks(barTicks(hi * 1.1))
	p.Add(plotter.NewGrid())
	one, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1}, {X: float64(len(labels)) - 0.5, Y: 1}})
	if err != nil {
		return err
	}
	one.Color, one.Width, one.Dashes = styles[lineOurs].c, vg.Points(1), []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(one)
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	w := vg.Points(11)
	for k, name := range names {
		b, err := plotter.NewBarChart(vals[k], w)
		if err != nil {
			return err
		}
		st := styles[name]
		b.Color = st.c
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(k)-float64(len(names)-1)/2)
		if name == lineOurs {
			b.LineStyle.Width = vg.Points(1)
			b.LineStyle.Color = color.Black
		}
		p.Add(b)
		leg.Add(name, b)
	}
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = 0
	p.X.Tick.Label.Font.Size = vg.Points(8)
	return figure.Save(path, p, &leg, 10*vg.Inch, 4.5*vg.Inch, 1.6*vg.Inch)
}

// barTicks marks a linear axis from 0 to hi every 0.25, 0.5 or 1.
func barTicks(hi float64) []plot.Tick {
	step := 0.25
	if hi > 3 {
		step = 0.5
	}
	if hi > 6 {
		step = 1
	}
	var ts []plot.Tick
	for v := 0.0; v <= hi; v += step {
		ts = append(ts, plot.Tick{Value: v, Label: fmt.Sprintf("%g", v)})
	}
	return ts
}

// Save writes the JSON report and the plots (throughput against batch
// size and against capacity, and the headline bar chart), each as SVG
// and PNG, into dir, and returns the files written. Each file is replaced
// atomically (atomicfile: a failed or killed save leaves the old file or
// none, never a partial one).
func (rep *Report) Save(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	jpath := filepath.Join(dir, rep.FileName())
	if err := atomicfile.Replace(jpath, 0o666, rep.WriteJSON); err != nil {
		return nil, fmt.Errorf("bench: report: %w", err)
	}
	files = append(files, jpath)
	base := strings.TrimSuffix(jpath, ".json")
	var errs []error
	plots := []struct {
		group, suffix, title, xlabel string
		x                            func(*Row) float64
		label                        func(float64) string
	}{
		{"batch-sweep", "-batch", "Sample L=1, low-dim steps, 1M-step buffer", "batch size B", func(r *Row) float64 { return float64(r.B) },
			func(v float64) string { return fmt.Sprintf("%.0f", v) }},
		{"capacity-sweep", "-capacity", "Sample B=256 L=1, low-dim steps", "buffer capacity (steps)", func(r *Row) float64 { return float64(r.Capacity) },
			func(v float64) string { return fmtRate(v) }},
	}
	for _, pl := range plots {
		ss := sweepSeries(rep.Rows, pl.group, pl.x)
		if len(ss) == 0 {
			continue
		}
		for _, ext := range []string{".svg", ".png"} {
			path := base + pl.suffix + ext
			if err := plotSweep(path, pl.title+" ("+rep.Machine.CPU+")", pl.xlabel, pl.label, ss); err != nil {
				errs = append(errs, err)
				continue
			}
			files = append(files, path)
		}
	}
	for _, ext := range []string{".svg", ".png"} {
		path := base + "-headline" + ext
		if err := plotBars(path, "Each peer's speed relative to trajring in the same run (trajring = 1, higher is faster; "+rep.Mode+" mode)", rep.Rows); err != nil {
			if strings.Contains(err.Error(), "no headline rows") {
				break
			}
			errs = append(errs, err)
			continue
		}
		files = append(files, path)
	}
	return files, errors.Join(errs...)
}
