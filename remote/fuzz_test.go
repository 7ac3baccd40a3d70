package remote

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/trajring/trajring/tensorbuf"
)

// validFrame returns a frame of s whose r rows (a permutation of the
// first r of actorRows) and k steps hold random values Decode accepts.
func validFrame(s *Schema, rng *rand.Rand, actorRows, r, k int, compress bool) []byte {
	nc := len(s.fields)
	cols := fullCols(s, r, k)
	for c, col := range cols {
		for i := range col {
			col[i] = byte(rng.Uint32())
		}
		switch {
		case c < nc && s.fields[c].DType == tensorbuf.Bool:
			for i := range col {
				col[i] &= 1
			}
		case c < nc:
			// Any bits are valid in other user fields.
		case c < nc+2:
			for i := 0; i < len(col); i += 4 {
				binary.LittleEndian.PutUint32(col[i:], uint32(rng.IntN(3)))
			}
		default:
			for i := 0; i < len(col); i += 4 {
				binary.LittleEndian.PutUint32(col[i:], math.Float32bits(float32(rng.NormFloat64())))
			}
		}
	}
	rows := rng.Perm(actorRows)[:r]
	first := make([]int64, r)
	for i := range first {
		first[i] = rng.Int64N(1 << 40)
	}
	data, _ := s.encode(nil, nil, compress, rng.Uint64(), rng.Uint64N(100), actorRows, rows, first, k, cols)
	return data
}

// declaredBody is the uncompressed body size a frame header declares
// (R*12 + R*K*stepBytes in unbounded integers), or -1 for a header that is
// not a data frame or declares more than MaxFrameBytes.
func declaredBody(s *Schema, data []byte) int64 {
	if len(data) < headerSize || data[5]&flagBye != 0 {
		return -1
	}
	le := binary.LittleEndian
	r := new(big.Int).SetUint64(uint64(le.Uint32(data[36:])))
	k := new(big.Int).SetUint64(uint64(le.Uint32(data[40:])))
	n := new(big.Int).Mul(r, k)
	n.Mul(n, big.NewInt(int64(s.stepBytes)))
	n.Add(n, new(big.Int).Mul(r, big.NewInt(12)))
	if n.Cmp(big.NewInt(MaxFrameBytes)) > 0 {
		return -1
	}
	return n.Int64()
}

// fuzzArgs splits a frame into FuzzDecode's arguments after which.
func fuzzArgs(data []byte) (flags uint8, reserved uint16, actorRows, r, k uint32, body []byte) {
	le := binary.LittleEndian
	return data[5], le.Uint16(data[6:]), le.Uint32(data[32:]), le.Uint32(data[36:]), le.Uint32(data[40:]), data[headerSize:]
}

// FuzzDecode decodes frames of random headers and bodies for three
// schemas (which%3; which&0x80 set: a foreign schema hash) and checks
// that Decode neither panics nor allocates beyond the frame's own length
// (or, for a compressed body, the size its header declares), that a
// refusal wraps ErrFrame or ErrSchema and leaves the frame empty, and
// that a frame that decodes re-encodes to the same bytes (a compressed
// one to its decompressed body). The header's fields are arguments of
// their own so that the fuzzer mutates R and K as integers.
func FuzzDecode(f *testing.F) {
	schemas := []*Schema{nil, boolSchema(f), cartPoleSchema(f)}
	var err error
	if schemas[0], err = NewSchema(testFields()); err != nil {
		f.Fatal(err)
	}
	add := func(which uint8, data []byte) {
		flags, reserved, actorRows, r, k, body := fuzzArgs(data)
		f.Add(which, flags, reserved, actorRows, r, k, body)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for w, s := range schemas {
		for _, shape := range [][3]int{{1, 1, 1}, {2, 2, 3}, {4, 3, 2}, {70, 66, 1}} {
			for _, compress := range []bool{false, true} {
				add(uint8(w), validFrame(s, rng, shape[0], shape[1], shape[2], compress))
			}
		}
		add(uint8(w), s.EncodeBye(7, 3, 2))
	}
	// The headers of issue 25 whose sizes wrapped to their bodies.
	add(1, rawFrame(schemas[1], 0, 251587083, 251587083, 3576658879, []byte{0}))
	add(2, rawFrame(schemas[2], 0, 544370738, 544370738, 2541477175, []byte{0, 0, 0, 0, 1, 0, 0, 0}))
	add(2, rawFrame(schemas[2], flagCompressed, 544370738, 544370738, 2541477175, s2.Encode(nil, []byte{0, 0, 0, 0, 1, 0, 0, 0})))

	f.Fuzz(func(t *testing.T, which, flags uint8, reserved uint16, actorRows, r, k uint32, body []byte) {
		s := schemas[int(which&0x7f)%len(schemas)]
		hash := s.hash
		if which&0x80 != 0 {
			hash++
		}
		data := appendHeader(nil, flags, hash, 7, 3, int(actorRows), int(r), int(k), len(body))
		binary.LittleEndian.PutUint16(data[6:], reserved)
		data = append(data, body...)
		// Allowed: the rows and first steps (16 bytes a row for 12 of
		// body) and a scratch of the declared body when compressed.
		limit := int64(2 * len(data))
		if n := declaredBody(s, data); n >= 0 && flags&flagCompressed != 0 {
			limit += 3 * n
		}
		var fr Frame
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := s.Decode(data, &fr)
		runtime.ReadMemStats(&after)
		held := int64(8*cap(fr.Rows) + 8*cap(fr.First) + 24*cap(fr.Cols) + cap(fr.scratch) + 8*cap(fr.sorted))
		if held > limit+24*int64(len(s.colBytes)) {
			t.Fatalf("Decode of %d bytes holds %d bytes (limit %d): %v", len(data), held, limit, err)
		}
		// The heap counter is process-wide: 1 MiB of slack for the rest
		// of the process, far below the GiBs of a size that wrapped.
		if total := int64(after.TotalAlloc - before.TotalAlloc); total > limit+1<<20 {
			t.Fatalf("Decode of %d bytes allocated %d bytes (limit %d): %v", len(data), total, limit, err)
		}
		if err != nil {
			if !errors.Is(err, ErrFrame) && !errors.Is(err, ErrSchema) {
				t.Fatalf("error without ErrFrame or ErrSchema: %v", err)
			}
			if len(fr.Rows) != 0 || len(fr.Cols) != 0 || fr.K != 0 {
				t.Fatalf("refused frame left %d rows, %d columns, K %d", len(fr.Rows), len(fr.Cols), fr.K)
			}
			return
		}
		if !fr.Bye && declaredBody(s, data) < 0 {
			t.Fatalf("decoded %d rows x %d steps, over %d bytes", r, k, MaxFrameBytes)
		}
		if fr.Bye {
			if got := s.EncodeBye(fr.Actor, fr.Seq, fr.ActorRows); !bytes.Equal(got, data) {
				t.Fatalf("bye re-encodes to\n%x\nnot\n%x", got, data)
			}
			return
		}
		got, _ := s.encode(nil, nil, false, fr.Actor, fr.Seq, fr.ActorRows, fr.Rows, fr.First, fr.K, fr.Cols)
		want := data
		if flags&flagCompressed != 0 {
			raw, err := s2.Decode(nil, body)
			if err != nil {
				t.Fatalf("decoded a body s2 refuses: %v", err)
			}
			want = appendHeader(nil, 0, s.hash, fr.Actor, fr.Seq, fr.ActorRows, len(fr.Rows), fr.K, len(raw))
			want = append(want, raw...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("frame of %d rows x %d steps re-encodes to other bytes", len(fr.Rows), fr.K)
		}
		// The compressed re-encoding decodes to the same frame.
		again, _ := s.encode(nil, nil, true, fr.Actor, fr.Seq, fr.ActorRows, fr.Rows, fr.First, fr.K, fr.Cols)
		var fr2 Frame
		if err := s.Decode(again, &fr2); err != nil {
			t.Fatalf("compressed re-encoding: %v", err)
		}
		if fr2.Actor != fr.Actor || fr2.Seq != fr.Seq || fr2.K != fr.K || !slices.Equal(fr2.Rows, fr.Rows) ||
			!slices.Equal(fr2.First, fr.First) || !slices.EqualFunc(fr2.Cols, fr.Cols, bytes.Equal) {
			t.Fatal("compressed re-encoding decodes to another frame")
		}
	})
}
