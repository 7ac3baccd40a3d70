package kernels

import (
	"regexp"
	"strings"
	"testing"
)

// TestEmbeddedPTX checks the committed PTX against the Go side of every
// launch: one module per kernel, built for compute_80, with the entry
// point the wrappers look up, taking exactly the number of 8-byte
// parameters they pass, and free of nvcc's version banner (so that
// regenerating it is byte-stable).
func TestEmbeddedPTX(t *testing.T) {
	entry := regexp.MustCompile(`\.visible \.entry (\w+)\(([^)]*)\)`)
	for i, k := range All {
		if k.ID != i {
			t.Errorf("%s: ID %d at index %d of All", k.Entry, k.ID, i)
		}
		ptx, err := k.PTX()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(ptx, "\n.target sm_80\n") {
			t.Errorf("%s: not built for compute_80 (sm_80 target)", k.Module)
		}
		if strings.Contains(ptx, "//") {
			t.Errorf("%s: comment lines left in the PTX", k.Module)
		}
		m := entry.FindAllStringSubmatch(ptx, -1)
		if len(m) != 1 {
			t.Fatalf("%s: %d entry points, want 1 (one kernel per .cu file)", k.Module, len(m))
		}
		if m[0][1] != k.Entry {
			t.Errorf("%s: entry %q, want %q", k.Module, m[0][1], k.Entry)
		}
		params := strings.Count(m[0][2], ".param")
		wide := strings.Count(m[0][2], ".param .u64") + strings.Count(m[0][2], ".param .f64")
		if params != k.Args || wide != k.Args {
			t.Errorf("%s: %d parameters (%d of them .u64 or .f64), want %d 8-byte parameters", k.Entry, params, wide, k.Args)
		}
	}
	if _, err := (Kernel{Module: "missing"}).PTX(); err == nil {
		t.Error("PTX of a missing module succeeded")
	}
}

// TestFatbinImages: every kernel has an embedded fatbin (magic
// 0xBA55ED50) whose uncompressed PTX declares its entry point.
func TestFatbinImages(t *testing.T) {
	for _, k := range All {
		img, err := k.Image()
		if err != nil {
			t.Fatal(err)
		}
		if len(img) < 16 || img[0] != 0x50 || img[1] != 0xED || img[2] != 0x55 || img[3] != 0xBA {
			t.Errorf("%s: not a fatbin", k.Module)
		}
		if !strings.Contains(img, ".entry "+k.Entry+"(") {
			t.Errorf("%s: no uncompressed PTX entry %s", k.Module, k.Entry)
		}
	}
}
