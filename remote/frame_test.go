package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/tensorbuf"
)

// TestDecodeRefuses checks every defect Decode must refuse, each in one
// otherwise valid frame of 2 rows x 3 steps (columns: action, obs,
// step_type, next_step_type, reward, discount).
func TestDecodeRefuses(t *testing.T) {
	s, err := NewSchema(testFields())
	if err != nil {
		t.Fatal(err)
	}
	const r, k = 2, 3
	valid := func() []byte {
		cols := fullCols(s, r, k)
		for i := range r * k { // reward and discount 1
			binary.LittleEndian.PutUint32(cols[4][4*i:], math.Float32bits(1))
			binary.LittleEndian.PutUint32(cols[5][4*i:], math.Float32bits(1))
		}
		data, _ := s.encode(nil, nil, false, 7, 0, 4, []int{3, 1}, []int64{10, 0}, k, cols)
		return data
	}
	nc := len(s.fields)
	// col returns the offset in the frame of step i of builtin column c.
	col := func(c, i int) int {
		off := headerSize + 12*r
		for j := range nc + c {
			off += s.colBytes[j] * r * k
		}
		return off + 4*i
	}
	put := func(off int, v uint32) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint32(b[off:], v) }
	}
	var f Frame
	if err := s.Decode(valid(), &f); err != nil {
		t.Fatalf("valid frame: %v", err)
	}
	if f.Actor != 7 || f.K != k || f.Rows[0] != 3 || f.Rows[1] != 1 || f.First[0] != 10 {
		t.Fatalf("decoded %+v", f)
	}
	for _, tc := range []struct {
		name  string
		patch func([]byte)
		want  error
	}{
		{"step type 3", put(col(0, 5), 3), ErrFrame},
		{"step type -1", put(col(0, 0), math.MaxUint32), ErrFrame},
		{"next step type 1<<31", put(col(1, 2), 1<<31), ErrFrame},
		{"reward NaN", put(col(2, 3), math.Float32bits(float32(math.NaN()))), ErrFrame},
		{"reward +Inf", put(col(2, 0), math.Float32bits(float32(math.Inf(1)))), ErrFrame},
		{"discount -Inf", put(col(3, 5), math.Float32bits(float32(math.Inf(-1)))), ErrFrame},
		{"row out of range", put(headerSize, 4), ErrFrame},
		{"row repeated", put(headerSize+4, 3), ErrFrame},
		{"first step negative", func(b []byte) { binary.LittleEndian.PutUint64(b[headerSize+8:], math.MaxUint64) }, ErrFrame},
		{"reserved byte 6", func(b []byte) { b[6] = 1 }, ErrFrame},
		{"reserved byte 7", func(b []byte) { b[7] = 0x80 }, ErrFrame},
		{"foreign schema", func(b []byte) { b[8]++ }, ErrSchema},
		{"body length", put(44, 1), ErrFrame},
		{"steps", put(40, k+1), ErrFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := valid()
			tc.patch(b)
			if err := s.Decode(b, &f); !errors.Is(err, tc.want) {
				t.Fatalf("Decode: %v, want %v", err, tc.want)
			}
		})
	}
	// The largest finite values and every step type decode.
	b := valid()
	put(col(2, 1), math.Float32bits(math.MaxFloat32))(b)
	put(col(3, 4), math.Float32bits(-math.MaxFloat32))(b)
	put(col(0, 1), 2)(b)
	put(col(1, 1), 1)(b)
	if err := s.Decode(b, &f); err != nil {
		t.Fatalf("finite extremes: %v", err)
	}
}

// rawFrame returns a frame of schema s with the given header fields and
// body, as a hostile publisher could send it.
func rawFrame(s *Schema, flags byte, actorRows, r, k uint32, body []byte) []byte {
	data := appendHeader(nil, flags, s.hash, 7, 0, int(actorRows), int(r), int(k), len(body))
	return append(data, body...)
}

// cartPoleSchema is the schema `trajring serve` ingests.
func cartPoleSchema(t testing.TB) *Schema {
	t.Helper()
	env, err := envs.NewCartPole(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSchema(append(env.ObservationSpec(), env.ActionSpec()...))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// boolSchema is testFields with a bool field: 41-byte steps.
func boolSchema(t testing.TB) *Schema {
	t.Helper()
	s, err := NewSchema(append(testFields(), tensorbuf.Field{Name: "done", Role: tensorbuf.Observation, DType: tensorbuf.Bool, Shape: []int{}}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDecodeOverflowingSizes checks headers whose body size R*12 +
// R*K*stepBytes wraps 64 bits to the length of a tiny body: Decode
// refuses them with ErrFrame before allocating anything.
func TestDecodeOverflowingSizes(t *testing.T) {
	t.Parallel()
	s41, cp := boolSchema(t), cartPoleSchema(t)
	if s41.StepBytes() != 41 || cp.StepBytes() != 40 {
		t.Fatalf("step bytes %d and %d, want 41 and 40", s41.StepBytes(), cp.StepBytes())
	}
	for _, tc := range []struct {
		name   string
		s      *Schema
		flags  byte
		r, k   uint32
		body   []byte
		rows   uint32 // actor rows
		substr string // in the error
	}{
		// The two headers of the issue (sizes wrap to exactly 1 and 8).
		{"41-byte steps, 1-byte body", s41, 0, 251587083, 3576658879, []byte{0}, 251587083, "exceeds"},
		{"CartPole, 8-byte body", cp, 0, 544370738, 2541477175, []byte{0, 0, 0, 0, 1, 0, 0, 0}, 544370738, "exceeds"},
		// The same sizes with an S2 body that decodes to 1 and 8 bytes.
		{"41-byte steps, compressed", s41, flagCompressed, 251587083, 3576658879, s2.Encode(nil, []byte{0}), math.MaxInt32, "exceeds"},
		{"CartPole, compressed", cp, flagCompressed, 544370738, 2541477175, s2.Encode(nil, []byte{0, 0, 0, 0, 1, 0, 0, 0}), math.MaxInt32, "exceeds"},
		// R*K itself past 64 bits, and the largest fields without a wrap.
		{"R*K past 2^64", cp, 0, math.MaxInt32, math.MaxUint32, make([]byte, 8), math.MaxInt32, "exceeds"},
		{"one step too many", cp, 0, 1, (MaxFrameBytes-12)/40 + 1, make([]byte, 8), 1, "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Frame
			err := tc.s.Decode(rawFrame(tc.s, tc.flags, tc.rows, tc.r, tc.k, tc.body), &f)
			if !errors.Is(err, ErrFrame) || !strings.Contains(err.Error(), tc.substr) {
				t.Fatalf("Decode: %v, want %v (%s)", err, ErrFrame, tc.substr)
			}
			if cap(f.Rows) != 0 || cap(f.First) != 0 || cap(f.Cols) != 0 || cap(f.scratch) != 0 {
				t.Fatalf("allocated rows %d, first %d, cols %d, scratch %d", cap(f.Rows), cap(f.First), cap(f.Cols), cap(f.scratch))
			}
		})
	}
	// The largest body that fits decodes: 1 row of (MaxFrameBytes-12)/40 steps.
	k := (MaxFrameBytes - 12) / 40
	cols := fullCols(cp, 1, k)
	data, _ := cp.encode(nil, nil, false, 7, 0, 1, []int{0}, []int64{0}, k, cols)
	var f Frame
	if err := cp.Decode(data, &f); err != nil || f.K != k || len(f.Rows) != 1 {
		t.Fatalf("largest frame: %v, K %d, rows %d", err, f.K, len(f.Rows))
	}
}

// TestDecodeBool checks that a bool byte other than 0 or 1 is refused
// wherever it is in the column, and that 0 and 1 decode.
func TestDecodeBool(t *testing.T) {
	s := boolSchema(t)
	const r, k = 2, 3
	// done is the first column (fields sorted: action, done, obs).
	off := headerSize + 12*r + s.colBytes[0]*r*k
	for _, tc := range []struct {
		name string
		i    int  // step of the column (time-major)
		v    byte // its byte
		want error
	}{
		{"1 at the first step", 0, 1, nil},
		{"1 at the last step", r*k - 1, 1, nil},
		{"2 at the first step", 0, 2, ErrFrame},
		{"2 at the last step", r*k - 1, 2, ErrFrame},
		{"0x80 in the middle", 3, 0x80, ErrFrame},
		{"0xff in the middle", 2, 0xff, ErrFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, _ := s.encode(nil, nil, false, 7, 0, 2, []int{0, 1}, []int64{0, 0}, k, fullCols(s, r, k))
			data[off+tc.i] = tc.v
			var f Frame
			err := s.Decode(data, &f)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode: %v, want %v", err, tc.want)
			}
			if err == nil && f.Cols[1][tc.i] != tc.v {
				t.Fatalf("done[%d] = %d, want %d", tc.i, f.Cols[1][tc.i], tc.v)
			}
			if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("bool %d", tc.v)) {
				t.Fatalf("Decode: %v, want it to name bool %d", err, tc.v)
			}
		})
	}
}

// TestDecodeRepeatedRows checks the repeated-row check on both sides of
// smallRows (pairwise below, sorted above), with the repeat anywhere.
func TestDecodeRepeatedRows(t *testing.T) {
	s, err := NewSchema(testFields())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		r, a, b int // rows; make row a a copy of row b (a == b: none)
		want    error
	}{
		{2, 1, 1, nil},
		{smallRows, 0, 0, nil},
		{smallRows, smallRows - 1, 0, ErrFrame},
		{smallRows + 1, 0, 0, nil},
		{smallRows + 1, smallRows, 0, ErrFrame},
		{1000, 500, 499, ErrFrame},
		{1000, 0, 999, ErrFrame},
	} {
		t.Run(fmt.Sprintf("%d rows, %d=%d", tc.r, tc.a, tc.b), func(t *testing.T) {
			rows := make([]int, tc.r)
			for i := range rows {
				rows[i] = tc.r - 1 - i // descending, so sorting matters
			}
			rows[tc.a] = rows[tc.b]
			data, _ := s.encode(nil, nil, false, 7, 0, tc.r, rows, make([]int64, tc.r), 1, fullCols(s, tc.r, 1))
			var f Frame
			err := s.Decode(data, &f)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode: %v, want %v", err, tc.want)
			}
			if tc.want != nil && !strings.Contains(err.Error(), fmt.Sprintf("row %d repeated", rows[tc.b])) {
				t.Fatalf("Decode: %v, want it to name row %d", err, rows[tc.b])
			}
			if tc.want == nil && !slices.Equal(f.Rows, rows) {
				t.Fatalf("rows %v, want %v", f.Rows, rows)
			}
		})
	}
}

// BenchmarkDecodeManyRows decodes a frame of 100,000 rows of one step
// (5.2 MB, under the embedded server's 8 MiB payload limit).
func BenchmarkDecodeManyRows(b *testing.B) {
	s, err := NewSchema(testFields())
	if err != nil {
		b.Fatal(err)
	}
	const r = 100000
	rows := make([]int, r)
	for i := range rows {
		rows[i] = i
	}
	data, _ := s.encode(nil, nil, false, 7, 0, r, rows, make([]int64, r), 1, fullCols(s, r, 1))
	var f Frame
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := s.Decode(data, &f); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeBye checks that a bye frame decodes only as EncodeBye writes
// it: no rows, steps or body, and not marked compressed.
func TestDecodeBye(t *testing.T) {
	s, err := NewSchema(testFields())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"bye", s.EncodeBye(7, 3, 2), nil},
		{"compressed", rawFrame(s, flagBye|flagCompressed, 2, 0, 0, nil), ErrFrame},
		{"rows", rawFrame(s, flagBye, 2, 1, 0, nil), ErrFrame},
		{"steps", rawFrame(s, flagBye, 2, 0, 1, nil), ErrFrame},
		{"body", rawFrame(s, flagBye, 2, 0, 0, []byte{0}), ErrFrame},
		{"no actor rows", rawFrame(s, flagBye, 0, 0, 0, nil), ErrFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Frame
			err := s.Decode(tc.frame, &f)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode: %v, want %v", err, tc.want)
			}
			if err == nil && (!f.Bye || f.Actor != 7 || f.Seq != 3 || f.ActorRows != 2 || f.K != 0 || len(f.Rows) != 0) {
				t.Fatalf("decoded %+v", f)
			}
		})
	}
}
