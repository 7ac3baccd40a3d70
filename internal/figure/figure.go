// Package figure saves gonum plots the way trajring's commands write them:
// the legend in a column of its own right of the plot, so that it never
// covers data, and SVGs that embed the font their text was measured with,
// so that they look the same on a machine without that font.
package figure

import (
	"io"
	"strings"

	"github.com/trajring/trajring/internal/atomicfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// MaxMarked is the most points a curve may have and still mark each: past
// it, markers blot the line.
const MaxMarked = 12

// Save draws p in the left part of a w x h canvas and leg (when not nil)
// in a column legW wide to its right, and writes it to path as PNG (110
// dpi) when path ends in ".png", else as SVG with its font embedded. The
// file is replaced atomically (atomicfile.Replace: a failed or killed save
// leaves the old one), keeping the mode of a file it replaces.
func Save(path string, p *plot.Plot, leg *plot.Legend, w, h, legW vg.Length) error {
	var c vg.CanvasWriterTo
	if strings.HasSuffix(path, ".png") {
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))}
	} else {
		c = vgsvg.NewWith(vgsvg.UseWH(w, h), vgsvg.EmbedFonts(true))
	}
	dc := draw.New(c)
	plotArea := dc
	if leg != nil {
		plotArea.Max.X -= legW
	}
	p.Draw(plotArea)
	if leg != nil {
		legArea := dc
		legArea.Min.X = dc.Max.X - legW + vg.Points(6)
		legArea.Max.Y -= vg.Points(30)
		leg.Draw(legArea)
	}
	return atomicfile.Replace(path, 0o666, func(w io.Writer) error {
		_, err := c.WriteTo(w)
		return err
	})
}
