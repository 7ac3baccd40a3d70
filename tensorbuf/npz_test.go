package tensorbuf_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// npzBuffer returns a buffer of 3 rows with fields of every dtype, holding
// 5 steps per row: row 0 terminates at step 2 (boundary at 3), row 1 is
// truncated at step 1 (boundary at 2), row 2 runs on.
func npzBuffer(t *testing.T) *tensorbuf.Buffer {
	t.Helper()
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 3, Capacity: 8, Fields: []tensorbuf.Field{
		{Name: "pos", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{2}},
		{Name: "pix", Role: tensorbuf.Observation, DType: tensorbuf.Uint8, Shape: []int{2, 3}},
		{Name: "act", Role: tensorbuf.Action, DType: tensorbuf.Int64},
		{Name: "logp", Role: tensorbuf.PolicyInfo, DType: tensorbuf.Float64},
		{Name: "greedy", Role: tensorbuf.PolicyInfo, DType: tensorbuf.Bool},
		{Name: "id", Role: tensorbuf.PolicyInfo, DType: tensorbuf.Int32, Shape: []int{1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	F, M, L := tensorbuf.First, tensorbuf.Mid, tensorbuf.Last
	types := [][3][2]tensorbuf.StepType{ // per step, per row: step type, next step type
		{{F, M}, {F, M}, {F, M}},
		{{M, M}, {M, L}, {M, M}},
		{{M, L}, {L, F}, {M, M}},
		{{L, F}, {F, M}, {M, M}},
		{{F, M}, {M, M}, {M, M}},
	}
	for s, ty := range types {
		st := &tensorbuf.Step{Values: map[string]*tensor.Dense{}}
		pos, pix, act, logp, greedy, id := []float32{}, []uint8{}, []int64{}, []float64{}, []bool{}, []int32{}
		for r := 0; r < 3; r++ {
			v := 10*s + r
			st.StepType = append(st.StepType, ty[r][0])
			st.NextStepType = append(st.NextStepType, ty[r][1])
			st.Reward = append(st.Reward, float32(v)+0.5)
			d := float32(0.99)
			if ty[r][1] == L && r == 0 {
				d = 0 // row 0 terminates; row 1 is truncated (discount > 0)
			}
			st.Discount = append(st.Discount, d)
			pos = append(pos, float32(v), -float32(v))
			for k := 0; k < 6; k++ {
				pix = append(pix, uint8(v+k))
			}
			act = append(act, int64(v)<<33)
			logp = append(logp, -float64(v)/7)
			greedy = append(greedy, v%2 == 0)
			id = append(id, int32(-v))
		}
		st.Values["pos"] = tensor.New(tensor.WithShape(3, 2), tensor.WithBacking(pos))
		st.Values["pix"] = tensor.New(tensor.WithShape(3, 2, 3), tensor.WithBacking(pix))
		st.Values["act"] = tensor.New(tensor.WithShape(3), tensor.WithBacking(act))
		st.Values["logp"] = tensor.New(tensor.WithShape(3), tensor.WithBacking(logp))
		st.Values["greedy"] = tensor.New(tensor.WithShape(3), tensor.WithBacking(greedy))
		st.Values["id"] = tensor.New(tensor.WithShape(3, 1), tensor.WithBacking(id))
		if err := w.Add(st); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// npyArray is one array of an .npz archive as its header describes it.
type npyArray struct {
	Descr string `json:"descr"`
	Shape []int  `json:"shape"`
	Data  string `json:"data"` // hex of the element bytes
}

var npyDict = regexp.MustCompile(`^\{'descr': '([<>|][a-z][0-9])', 'fortran_order': False, 'shape': \(([0-9, ]*)\), \}$`)

// readNPZ parses an .npz archive with the format's own rules.
func readNPZ(t *testing.T, data []byte) map[string]npyArray {
	t.Helper()
	z, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]npyArray{}
	for _, f := range z.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) < 10 || string(raw[:8]) != "\x93NUMPY\x01\x00" {
			t.Fatalf("%s: not a version 1.0 .npy", f.Name)
		}
		hl := int(binary.LittleEndian.Uint16(raw[8:10]))
		if (10+hl)%64 != 0 {
			t.Errorf("%s: data starts at %d, not a multiple of 64", f.Name, 10+hl)
		}
		m := npyDict.FindStringSubmatch(strings.TrimRight(string(raw[10:10+hl]), " \n"))
		if m == nil {
			t.Fatalf("%s: header %q", f.Name, raw[10:10+hl])
		}
		var shape []int
		for _, d := range strings.Split(m[2], ",") {
			if d = strings.TrimSpace(d); d != "" {
				n, _ := strconv.Atoi(d)
				shape = append(shape, n)
			}
		}
		out[strings.TrimSuffix(f.Name, ".npy")] = npyArray{Descr: m[1], Shape: shape, Data: hex.EncodeToString(raw[10+hl:])}
	}
	return out
}

// wantNPZ builds the arrays ExportNPZ must write for mode from
// AllExperiences itself.
func wantNPZ(t *testing.T, b *tensorbuf.Buffer, mode tensorbuf.ExportMode) map[string]npyArray {
	t.Helper()
	dev, err := b.AllExperiences(mode)
	if err != nil {
		t.Fatal(err)
	}
	defer dev[0].Release()
	exps := make([]*tensorbuf.Transitions, len(dev)) // host copies: dev is device memory in cuda builds
	for i, e := range dev {
		h, err := e.Host()
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release()
		exps[i] = h
	}
	descr := map[tensor.Dtype]string{tensor.Float32: "<f4", tensor.Float64: "<f8", tensor.Int32: "<i4",
		tensor.Int64: "<i8", tensor.Uint8: "|u1", tensor.Bool: "|b1"}
	out := map[string]npyArray{}
	add := func(name string, pick func(*tensorbuf.Transitions) *tensor.Dense) {
		var shape []int
		var data []byte
		for _, e := range exps {
			d := pick(e)
			data = append(data, d.Header.Raw[:d.DataSize()*int(d.Dtype().Size())]...)
			shape = slices.Clone([]int(d.Shape()))
			out[name] = npyArray{Descr: descr[d.Dtype()]}
		}
		if mode == tensorbuf.ExportNone {
			shape = append([]int{len(exps)}, shape...)
		}
		out[name] = npyArray{Descr: out[name].Descr, Shape: shape, Data: hex.EncodeToString(data)}
	}
	for _, g := range []struct {
		prefix string
		m      func(*tensorbuf.Transitions) map[string]*tensor.Dense
	}{
		{"observation/", func(e *tensorbuf.Transitions) map[string]*tensor.Dense { return e.Observation }},
		{"next_observation/", func(e *tensorbuf.Transitions) map[string]*tensor.Dense { return e.NextObservation }},
		{"action/", func(e *tensorbuf.Transitions) map[string]*tensor.Dense { return e.Action }},
		{"policy_info/", func(e *tensorbuf.Transitions) map[string]*tensor.Dense { return e.PolicyInfo }},
	} {
		for name := range g.m(exps[0]) {
			add(g.prefix+name, func(e *tensorbuf.Transitions) *tensor.Dense { return g.m(e)[name] })
		}
	}
	add("reward", func(e *tensorbuf.Transitions) *tensor.Dense { return e.Reward })
	add("discount", func(e *tensorbuf.Transitions) *tensor.Dense { return e.Discount })
	add("is_done", func(e *tensorbuf.Transitions) *tensor.Dense { return e.IsDone })
	var rows, steps []byte
	for _, e := range exps {
		for i := range e.Rows {
			rows = binary.LittleEndian.AppendUint64(rows, uint64(e.Rows[i]))
			steps = binary.LittleEndian.AppendUint64(steps, uint64(e.Steps[i]))
		}
	}
	out["row"] = npyArray{Descr: "<i8", Shape: []int{len(rows) / 8}, Data: hex.EncodeToString(rows)}
	out["step"] = npyArray{Descr: "<i8", Shape: []int{len(steps) / 8}, Data: hex.EncodeToString(steps)}
	return out
}

func checkNPZ(t *testing.T, what string, got, want map[string]npyArray) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d arrays, want %d", what, len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: no array %q", what, k)
			continue
		}
		if g.Descr != w.Descr || !slices.Equal(g.Shape, w.Shape) || g.Data != w.Data {
			t.Errorf("%s: %s = %s%v %s, want %s%v %s", what, k, g.Descr, g.Shape, g.Data, w.Descr, w.Shape, w.Data)
		}
	}
}

var modes = []tensorbuf.ExportMode{tensorbuf.ExportNone, tensorbuf.ExportBatch, tensorbuf.ExportSequence}

// TestExportNPZ reads the archive back by the format's rules and checks
// every array against AllExperiences in each mode.
func TestExportNPZ(t *testing.T) {
	b := npzBuffer(t)
	defer b.Close()
	for _, mode := range modes {
		var buf bytes.Buffer
		if n, err := b.ExportNPZ(&buf, mode); err != nil || n != 10 {
			t.Fatalf("%v: %d transitions, %v; want 10", mode, n, err)
		}
		got, want := readNPZ(t, buf.Bytes()), wantNPZ(t, b, mode)
		checkNPZ(t, mode.String(), got, want)
		// 3 rows: row 0 holds transitions at 0, 1, 2 (3 is a boundary);
		// row 1 at 0, 1, 3; row 2 at 0..3: ten, time-major.
		if s := got["step"].Data; s != want["step"].Data || len(s) != 2*8*10 {
			t.Errorf("%v: steps %s", mode, s)
		}
		if sh := got["observation/pix"].Shape; len(sh) < 3 || sh[len(sh)-2] != 2 || sh[len(sh)-1] != 3 {
			t.Errorf("%v: pix shape %v", mode, sh)
		}
	}
}

func TestExportNPZRefuses(t *testing.T) {
	b := npzBuffer(t)
	defer b.Close()
	var buf bytes.Buffer
	if _, err := b.ExportNPZ(&buf, 0); !errors.Is(err, tensorbuf.ErrInvalidArg) || buf.Len() != 0 {
		t.Errorf("mode 0: %v, %d bytes written", err, buf.Len())
	}
	empty, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	if _, err := empty.ExportNPZ(&buf, tensorbuf.ExportBatch); !errors.Is(err, tensorbuf.ErrEmpty) || buf.Len() != 0 {
		t.Errorf("empty buffer: %v, %d bytes written", err, buf.Len())
	}
}

// numpyScript prints every array of an .npz as numpy.load reads it.
const numpyScript = `
import json, sys, numpy
with numpy.load(sys.argv[1]) as z:
    print(json.dumps({k: {"descr": z[k].dtype.str, "shape": list(z[k].shape), "data": z[k].tobytes().hex()} for k in z.files}))
`

// TestExportNPZNumPy reads the archive with numpy.load (Debian's
// python3-numpy). It is skipped, saying so, where NumPy is missing, unless
// TRAJRING_REQUIRE_NUMPY=1 (as in CI) makes that a failure.
func TestExportNPZNumPy(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import numpy").Run(); err != nil {
		if os.Getenv("TRAJRING_REQUIRE_NUMPY") == "1" {
			t.Fatalf("numpy is required (TRAJRING_REQUIRE_NUMPY=1) but %s cannot import it: %v", py, err)
		}
		t.Skipf("%s cannot import numpy (apt-get install python3-numpy): %v", py, err)
	}
	b := npzBuffer(t)
	defer b.Close()
	for _, mode := range modes {
		path := filepath.Join(t.TempDir(), "x.npz")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.ExportNPZ(f, mode); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(py, "-c", numpyScript, path).Output()
		if err != nil {
			t.Fatalf("numpy.load: %v", err)
		}
		got := map[string]npyArray{}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		checkNPZ(t, fmt.Sprint("numpy ", mode), got, wantNPZ(t, b, mode))
	}
}
