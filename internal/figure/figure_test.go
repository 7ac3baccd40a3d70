package figure

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func TestSave(t *testing.T) {
	p := plot.New()
	p.Title.Text = "t"
	l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 50000, Y: 500}})
	if err != nil {
		t.Fatal(err)
	}
	p.Add(l)
	leg := plot.NewLegend()
	leg.Add("line", l)
	dir := t.TempDir()
	for _, name := range []string{"a.svg", "a.png"} {
		path := filepath.Join(dir, name)
		if err := Save(path, p, &leg, 4*vg.Inch, 3*vg.Inch, vg.Inch); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		switch name {
		case "a.svg":
			if !bytes.Contains(data, []byte("@font-face")) || !bytes.Contains(data, []byte("src: url(data:font/ttf")) {
				t.Errorf("the SVG does not embed its font")
			}
		case "a.png":
			if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
				t.Errorf("a.png is not a PNG")
			}
		}
	}
}
