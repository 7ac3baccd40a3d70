package remote

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/klauspost/compress/s2"
	"github.com/trajring/trajring/tensorbuf"
)

// Frame layout (little endian). The header is fixed size; the body is
// optionally S2-compressed (flagCompressed) and its uncompressed size is
// fully determined by the schema, R and K, so a wrong size is detected
// before anything is read.
//
//	off size
//	0   4    magic "TRJ1"
//	4   1    version (1)
//	5   1    flags: 1 = body is S2-compressed, 2 = bye (the actor leaves)
//	6   2    reserved, 0
//	8   8    schema hash (see Schema.Hash)
//	16  8    actor id
//	24  8    frame sequence number of the actor (0, 1, 2, ...)
//	32  4    actor rows B (the actor's batch size)
//	36  4    R, rows in this frame
//	40  4    K, steps per row
//	44  4    body length as stored
//	48  ...  body: R x uint32 local row, R x int64 first step number, then
//	         for every column (user fields sorted by name, then step_type,
//	         next_step_type, reward, discount) K x R steps, time-major:
//	         step k of every row is one contiguous [R, ...shape] block.
const (
	headerSize     = 48
	frameVersion   = 1
	flagCompressed = 1
	flagBye        = 2
	// MaxFrameBytes bounds the uncompressed body of a frame (64 MiB).
	MaxFrameBytes = 64 << 20
)

var magic = [4]byte{'T', 'R', 'J', '1'}

// Schema is the frame layout of a buffer's user fields. It is immutable
// and safe for concurrent use.
type Schema struct {
	fields    []tensorbuf.Field // sorted by name
	colBytes  []int             // bytes of one step per column, builtins last
	stepBytes int
	hash      uint64
}

// builtinBytes are the step bytes of step_type, next_step_type, reward and
// discount.
var builtinBytes = []int{4, 4, 4, 4}

// NewSchema returns the frame schema of a buffer's user fields (as
// Buffer.Fields returns them; the order does not matter). The hash covers
// every field's name, role, dtype and shape, not Min and Max.
func NewSchema(fields []tensorbuf.Field) (*Schema, error) {
	s := &Schema{fields: slices.Clone(fields)}
	slices.SortFunc(s.fields, func(a, b tensorbuf.Field) int { return strings.Compare(a.Name, b.Name) })
	h := fnv.New64a()
	var num [8]byte
	for i, f := range s.fields {
		if f.Name == "" || f.DType.Size() == 0 {
			return nil, fmt.Errorf("%w: field %d (%q, %v)", ErrConfig, i, f.Name, f.DType)
		}
		if i > 0 && s.fields[i-1].Name == f.Name {
			return nil, fmt.Errorf("%w: field %q given twice", ErrConfig, f.Name)
		}
		h.Write([]byte(f.Name))
		h.Write([]byte{0, byte(f.Role), byte(f.DType), byte(len(f.Shape))})
		for _, d := range f.Shape {
			binary.LittleEndian.PutUint64(num[:], uint64(d))
			h.Write(num[:])
		}
		s.colBytes = append(s.colBytes, f.StepBytes())
	}
	s.colBytes = append(s.colBytes, builtinBytes...)
	for _, b := range s.colBytes {
		s.stepBytes += b
	}
	s.hash = h.Sum64()
	return s, nil
}

// Hash returns the schema hash that frames carry.
func (s *Schema) Hash() uint64 { return s.hash }

// Fields returns the user fields in frame order (sorted by name).
func (s *Schema) Fields() []tensorbuf.Field { return slices.Clone(s.fields) }

// StepBytes returns the bytes of one step of one row over all columns.
func (s *Schema) StepBytes() int { return s.stepBytes }

// bodySize is the uncompressed body size of a frame of r rows, k steps,
// for sizes the encoder holds in memory (Decode uses checkedBodySize).
func (s *Schema) bodySize(r, k int) int64 {
	return int64(r)*12 + int64(r)*int64(k)*int64(s.stepBytes)
}

// checkedBodySize is the uncompressed body size of a frame of r rows, k
// steps, and false when it exceeds MaxFrameBytes. Computed on 128-bit
// products, since a header's R and K come from anyone who may publish and
// a size that wraps would pass any later bound.
func (s *Schema) checkedBodySize(r, k uint32) (int, bool) {
	hi, rk := bits.Mul64(uint64(r), uint64(k))
	if hi != 0 {
		return 0, false
	}
	hi, steps := bits.Mul64(rk, uint64(s.stepBytes))
	if hi != 0 {
		return 0, false
	}
	n, carry := bits.Add64(steps, 12*uint64(r), 0) // 12*r < 2^36
	if carry != 0 || n > MaxFrameBytes {
		return 0, false
	}
	return int(n), true
}

// fits reports whether a frame of r rows and k steps is within
// MaxFrameBytes.
func (s *Schema) fits(r, k uint32) bool {
	_, ok := s.checkedBodySize(r, k)
	return ok
}

// Frame is one decoded frame: K steps of R rows of one actor. Cols alias
// the decoded message (or the decoder's scratch) and are valid until the
// next Decode into the same Frame.
type Frame struct {
	Schema    uint64
	Actor     uint64
	Seq       uint64
	ActorRows int
	Bye       bool
	K         int
	Rows      []int   // local rows of the actor, 0 <= row < ActorRows
	First     []int64 // first step number of each row
	// Cols holds, per column in schema order, K*R steps time-major.
	Cols [][]byte

	scratch []byte // the decompressed body
	sorted  []int  // the rows, sorted, to find a repeated one
}

// reset makes f a frame of nothing, keeping its buffers.
func (f *Frame) reset() {
	f.Schema, f.Actor, f.Seq, f.ActorRows, f.Bye, f.K = 0, 0, 0, 0, false, 0
	f.Rows, f.First, f.Cols = f.Rows[:0], f.First[:0], f.Cols[:0]
}

// appendHeader appends a frame header.
func appendHeader(dst []byte, flags byte, hash, actor, seq uint64, actorRows, r, k, bodyLen int) []byte {
	dst = append(dst, magic[:]...)
	dst = append(dst, frameVersion, flags, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, hash)
	dst = binary.LittleEndian.AppendUint64(dst, actor)
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(actorRows))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(r))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(k))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(bodyLen))
	return dst
}

// EncodeBye returns the frame an actor sends when it leaves.
func (s *Schema) EncodeBye(actor, seq uint64, actorRows int) []byte {
	return appendHeader(nil, flagBye, s.hash, actor, seq, actorRows, 0, 0, 0)
}

// encode appends the frame of rows (local), first step numbers and k
// steps of column data (cols[c] holds k*len(rows)*colBytes[c] bytes) to
// dst, compressing the body with S2 when compress is set. An
// uncompressed body is written straight into dst; body is the scratch of
// a compressed one.
func (s *Schema) encode(dst, body []byte, compress bool, actor, seq uint64, actorRows int, rows []int, first []int64, k int, cols [][]byte) (out, scratch []byte) {
	appendBody := func(b []byte) []byte {
		for _, r := range rows {
			b = binary.LittleEndian.AppendUint32(b, uint32(r))
		}
		for _, f := range first {
			b = binary.LittleEndian.AppendUint64(b, uint64(f))
		}
		for _, c := range cols {
			b = append(b, c...)
		}
		return b
	}
	if !compress {
		n := int(s.bodySize(len(rows), k))
		dst = slices.Grow(dst, headerSize+n)
		dst = appendHeader(dst, 0, s.hash, actor, seq, actorRows, len(rows), k, n)
		return appendBody(dst), body
	}
	body = appendBody(body[:0])
	stored := s2.Encode(nil, body)
	dst = appendHeader(dst, flagCompressed, s.hash, actor, seq, actorRows, len(rows), k, len(stored))
	return append(dst, stored...), body
}

// Decode parses and validates a frame into f. It fails with ErrSchema for
// a frame of another schema and with ErrFrame for any other defect: bad
// magic, version or reserved bytes, a size that does not match R and K or
// exceeds MaxFrameBytes, rows out of range or repeated, negative step
// numbers, invalid step types, non-finite rewards or discounts, bool
// bytes other than 0 or 1. A frame that decodes is safe to write.
//
// Every size is checked, without overflow, against the frame before
// anything is allocated: the rows and first steps take at most the
// frame's length again, and a compressed body a scratch of the size its
// header declares (at most MaxFrameBytes, kept in f for the next Decode),
// since S2 can expand a few bytes to megabytes. On error f is left
// empty (no rows, no columns), so no stale frame survives a refused one.
// Decode is safe for concurrent use with distinct Frames.
func (s *Schema) Decode(data []byte, f *Frame) error {
	if err := s.decode(data, f); err != nil {
		f.reset()
		return err
	}
	return nil
}

// decode is Decode without the reset: on error f is partly filled.
func (s *Schema) decode(data []byte, f *Frame) error {
	if len(data) < headerSize {
		return fmt.Errorf("%w: %d bytes, header is %d", ErrFrame, len(data), headerSize)
	}
	if [4]byte(data[0:4]) != magic || data[4] != frameVersion {
		return fmt.Errorf("%w: bad magic or version", ErrFrame)
	}
	flags := data[5]
	if flags&^(flagCompressed|flagBye) != 0 {
		return fmt.Errorf("%w: unknown flags %#x", ErrFrame, flags)
	}
	if data[6] != 0 || data[7] != 0 {
		return fmt.Errorf("%w: reserved bytes %#x %#x", ErrFrame, data[6], data[7])
	}
	le := binary.LittleEndian
	f.Schema = le.Uint64(data[8:])
	f.Actor = le.Uint64(data[16:])
	f.Seq = le.Uint64(data[24:])
	actorRows, r, k := le.Uint32(data[32:]), le.Uint32(data[36:]), le.Uint32(data[40:])
	bodyLen := le.Uint32(data[44:])
	f.Bye = flags&flagBye != 0
	if f.Schema != s.hash {
		return fmt.Errorf("%w: schema %#x, buffer's is %#x", ErrSchema, f.Schema, s.hash)
	}
	body := data[headerSize:]
	if uint64(bodyLen) != uint64(len(body)) {
		return fmt.Errorf("%w: body of %d bytes, header says %d", ErrFrame, len(body), bodyLen)
	}
	if actorRows == 0 || actorRows > math.MaxInt32 {
		return fmt.Errorf("%w: actor rows %d", ErrFrame, actorRows)
	}
	f.ActorRows = int(actorRows)
	if f.Bye {
		if r != 0 || k != 0 || bodyLen != 0 || flags&flagCompressed != 0 {
			return fmt.Errorf("%w: bye frame with a body or compressed", ErrFrame)
		}
		f.K = 0
		f.Rows, f.First, f.Cols = f.Rows[:0], f.First[:0], f.Cols[:0]
		return nil
	}
	if r == 0 || r > actorRows || k == 0 {
		return fmt.Errorf("%w: %d rows of %d, %d steps", ErrFrame, r, actorRows, k)
	}
	want, ok := s.checkedBodySize(r, k)
	if !ok {
		return fmt.Errorf("%w: body of %d rows x %d steps x %d bytes exceeds %d bytes", ErrFrame, r, k, s.stepBytes, MaxFrameBytes)
	}
	if flags&flagCompressed != 0 {
		n, err := s2.DecodedLen(body)
		if err != nil || n != want {
			return fmt.Errorf("%w: compressed body decodes to %d bytes, want %d (%v)", ErrFrame, n, want, err)
		}
		if cap(f.scratch) < n {
			f.scratch = make([]byte, n)
		}
		if body, err = s2.Decode(f.scratch[:n], body); err != nil {
			return fmt.Errorf("%w: %v", ErrFrame, err)
		}
	} else if len(body) != want {
		return fmt.Errorf("%w: body of %d bytes, want %d for %d rows x %d steps", ErrFrame, len(body), want, r, k)
	}
	// From here every offset is within body: want bytes, 12*r of them
	// the rows and first steps, colBytes[c]*r*k each column.
	nr := int(r)
	f.K = int(k)
	f.Rows = slices.Grow(f.Rows[:0], nr)
	f.First = slices.Grow(f.First[:0], nr)
	for i := range nr {
		row := le.Uint32(body[4*i:])
		if row >= actorRows {
			return fmt.Errorf("%w: row %d of %d", ErrFrame, row, actorRows)
		}
		f.Rows = append(f.Rows, int(row))
	}
	if err := f.distinctRows(); err != nil {
		return err
	}
	for i := range nr {
		first := int64(le.Uint64(body[4*nr+8*i:]))
		if first < 0 || first > math.MaxInt64-int64(f.K) {
			return fmt.Errorf("%w: first step %d", ErrFrame, first)
		}
		f.First = append(f.First, first)
	}
	off := 12 * nr
	f.Cols = f.Cols[:0]
	for _, cb := range s.colBytes {
		n := cb * nr * f.K
		f.Cols = append(f.Cols, body[off:off+n])
		off += n
	}
	return s.checkValues(f)
}

// smallRows is the row count up to which distinctRows compares every pair
// rather than sorting a copy.
const smallRows = 64

// distinctRows fails with ErrFrame if f.Rows repeats a row. Quadratic
// only up to smallRows, so a frame of a million rows costs a sort, not
// half a trillion comparisons.
func (f *Frame) distinctRows() error {
	if len(f.Rows) <= smallRows {
		for i, row := range f.Rows {
			if slices.Contains(f.Rows[:i], row) {
				return fmt.Errorf("%w: row %d repeated", ErrFrame, row)
			}
		}
		return nil
	}
	f.sorted = append(f.sorted[:0], f.Rows...)
	slices.Sort(f.sorted)
	for i := 1; i < len(f.sorted); i++ {
		if f.sorted[i] == f.sorted[i-1] {
			return fmt.Errorf("%w: row %d repeated", ErrFrame, f.sorted[i])
		}
	}
	return nil
}

// checkValues fails with ErrFrame for a bool byte other than 0 or 1, a
// step type other than First, Mid or Last (0, 1, 2 as uint32) or a
// non-finite reward or discount (an exponent of all ones). It checks the
// bits with one branch per column and looks at values only on failure.
func (s *Schema) checkValues(f *Frame) error {
	le := binary.LittleEndian
	nc := len(s.fields)
	for c, fd := range s.fields {
		if fd.DType != tensorbuf.Bool {
			continue
		}
		col := f.Cols[c]
		var high byte
		for _, b := range col {
			high |= b
		}
		if high > 1 {
			for i, b := range col {
				if b > 1 {
					return fmt.Errorf("%w: field %q step %d: bool %d", ErrFrame, fd.Name, i, b)
				}
			}
		}
	}
	for c := nc; c < nc+2; c++ {
		bad := false
		for i := 0; i+4 <= len(f.Cols[c]); i += 4 {
			bad = bad || le.Uint32(f.Cols[c][i:]) > uint32(tensorbuf.Last)
		}
		if bad {
			for i := 0; i+4 <= len(f.Cols[c]); i += 4 {
				if st := tensorbuf.StepType(int32(le.Uint32(f.Cols[c][i:]))); st != tensorbuf.First && st != tensorbuf.Mid && st != tensorbuf.Last {
					return fmt.Errorf("%w: step type %d", ErrFrame, st)
				}
			}
		}
	}
	const expBits = 0x7f800000
	for c := nc + 2; c < nc+4; c++ {
		var inf uint32
		for i := 0; i+4 <= len(f.Cols[c]); i += 4 {
			if le.Uint32(f.Cols[c][i:])&expBits == expBits {
				inf = expBits
			}
		}
		if inf != 0 {
			for i := 0; i+4 <= len(f.Cols[c]); i += 4 {
				v := math.Float32frombits(le.Uint32(f.Cols[c][i:]))
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return fmt.Errorf("%w: reward or discount %v", ErrFrame, v)
				}
			}
		}
	}
	return nil
}
