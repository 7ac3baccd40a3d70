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

// floatOp matches an f32 or f64 add, sub, mul, fma or mad with its
// modifiers, such as "mul.rn.f64" or "add.f64".
var floatOp = regexp.MustCompile(`\b(add|sub|mul|fma|mad)((?:\.[a-z0-9]+)*)\.f(32|64)\b`)

// unfusable returns the float operations of a kernel entry's body in ptx
// that the PTX assembler or a JIT may contract or has contracted: an add,
// sub or mul without .rn (which ptxas, and the driver's JIT, may fuse into
// an fma), and any fma or mad. Functions the entry calls (.func, such as
// tr_pow) are not checked.
func unfusable(ptx string) []string {
	var bad []string
	in := false
	for _, line := range strings.Split(ptx, "\n") {
		switch {
		case strings.Contains(line, ".entry "):
			in = true
		case strings.Contains(line, ".func "), line == "}":
			in = false
		case in:
			for _, m := range floatOp.FindAllStringSubmatch(line, -1) {
				if m[1] == "fma" || m[1] == "mad" || !strings.Contains(m[2]+".", ".rn.") {
					bad = append(bad, strings.TrimSpace(line))
				}
			}
		}
	}
	return bad
}

// TestNoContractibleArithmetic: no kernel entry, in the committed PTX or
// in the PTX inside its fatbin (what a driver JITs on a GPU newer than the
// fatbin's SASS, or with CUDA_FORCE_PTX_JIT=1), has float arithmetic
// that may be fused into a multiply-add, which would break the bit
// equality with the host that the sum tree, the prioritized draws and the
// n-step rewards promise (kernels/host/rn.h).
func TestNoContractibleArithmetic(t *testing.T) {
	if got := unfusable(".visible .entry k(\n)\n{\n\tmul.f64 \t%fd1, %fd2, %fd3;\n\tadd.rn.f64 \t%fd1, %fd1, %fd3;\n" +
		"\tfma.rn.f32 \t%f1, %f2, %f3, %f4;\n\tmul.lo.s64 \t%rd1, %rd2, 8;\n}\n.func f()\n{\n\tadd.f64 \t%fd1, %fd1, %fd1;\n}\n"); len(got) != 2 ||
		!strings.HasPrefix(got[0], "mul.f64") || !strings.HasPrefix(got[1], "fma.rn.f32") {
		t.Fatalf("unfusable found %q in the sample, want its mul.f64 and fma.rn.f32 lines", got)
	}
	for _, k := range All {
		ptx, err := k.PTX()
		if err != nil {
			t.Fatal(err)
		}
		img, err := k.Image()
		if err != nil {
			t.Fatal(err)
		}
		i := strings.Index(img, ".version")
		if i < 0 {
			t.Fatalf("%s: no PTX in the fatbin", k.Module)
		}
		img = img[i:]
		if j := strings.IndexByte(img, 0); j >= 0 {
			img = img[:j]
		}
		for _, src := range []struct{ name, ptx string }{{"ptx", ptx}, {"fatbin", img}} {
			if bad := unfusable(src.ptx); len(bad) > 0 {
				t.Errorf("%s (%s): %d contractible operations in the entry, such as %q", k.Entry, src.name, len(bad), bad[0])
			}
		}
	}
}
