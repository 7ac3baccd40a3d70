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
	files, err := readReport(t, in).Save(os.Getenv("TRAJRING_REPLOT_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	t.Log(files)
}
