package bench

import (
	"os"
	"testing"
)

// TestReplot re-renders the plots of a saved report (TRAJRING_REPLOT=
// path/to/report.json) into TRAJRING_REPLOT_DIR, to look at them.
func TestReplot(t *testing.T) {
	in := os.Getenv("TRAJRING_REPLOT")
	if in == "" {
		t.Skip("set TRAJRING_REPLOT=report.json")
	}
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rep.Rows {
		rep.Rows[i].finish()
	}
	files, err := rep.Save(os.Getenv("TRAJRING_REPLOT_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	t.Log(files)
}
