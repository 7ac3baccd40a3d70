package bench

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readReport reads a saved report and finishes its rows, as a run does
// before it saves them.
func readReport(t *testing.T, path string) *Report {
	t.Helper()
	f, err := os.Open(path)
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
	return rep
}

// TestPlotsPortable renders the plots of a committed report and checks
// what a machine without the plot's font needs: every SVG embeds the font
// its text was measured with (before, the SVGs only named Liberation
// Serif, and a viewer's wider fallback font clipped labels), a PNG beside
// every SVG, and bar labels that name their scenario.
func TestPlotsPortable(t *testing.T) {
	rep := readReport(t, filepath.Join("results", "vm-20261201-195756.json"))
	dir := t.TempDir()
	files, err := rep.Save(dir)
	if err != nil {
		t.Fatal(err)
	}
	svgs := 0
	text := regexp.MustCompile(`<text[^>]*>([^<]*)</text>`)
	for _, file := range files {
		if !strings.HasSuffix(file, ".svg") {
			continue
		}
		svgs++
		if _, err := os.Stat(strings.TrimSuffix(file, ".svg") + ".png"); err != nil {
			t.Errorf("no PNG beside %s: %v", file, err)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "@font-face") || !strings.Contains(string(data), "src: url(data:font/ttf") {
			t.Errorf("%s does not embed its font", file)
		}
		if strings.HasSuffix(file, "-headline.svg") {
			labels := 0
			for _, m := range text.FindAllStringSubmatch(string(data), -1) {
				if strings.HasPrefix(m[1], "B=") {
					t.Errorf("%s: bar label %q does not say which scenario it is", file, m[1])
				}
				if strings.HasPrefix(m[1], "sample low-dim") {
					labels++
				}
			}
			if labels != 4 {
				t.Errorf("%s: %d bar labels name a low-dim sample, want 4", file, labels)
			}
		}
	}
	if svgs != 3 {
		t.Errorf("%d SVGs written (%v), want 3", svgs, files)
	}
}
