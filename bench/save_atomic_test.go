package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSaveReportAtomic: the JSON report is replaced atomically: a save
// that fails while writing it (here a NaN, which JSON cannot hold) leaves
// the previous report whole and no temporary file. Before, Save created
// the report in place and a failed write left it truncated.
func TestSaveReportAtomic(t *testing.T) {
	rep := readReport(t, filepath.Join("results", "vm-20261201-195756.json"))
	dir := t.TempDir()
	if _, err := rep.Save(dir); err != nil {
		t.Fatal(err)
	}
	jpath := filepath.Join(dir, rep.FileName())
	old, err := os.ReadFile(jpath)
	if err != nil {
		t.Fatal(err)
	}
	rep.Rows[0].Ours.P50 = math.NaN()
	if _, err := rep.Save(dir); err == nil {
		t.Fatal("saving a report holding a NaN succeeded")
	}
	if now, err := os.ReadFile(jpath); err != nil || string(now) != string(old) {
		t.Fatalf("a failed save changed the report (%d bytes, was %d): %v", len(now), len(old), err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("a failed save left %s", e.Name())
		}
	}
}
