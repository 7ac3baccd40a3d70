package remote

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
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
