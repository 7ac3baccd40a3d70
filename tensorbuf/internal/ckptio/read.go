package ckptio

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/klauspost/compress/zstd"
	"github.com/trajring/trajring/internal/scratch"
)

// Reader reads and checks a checkpoint stream's chunks; not safe for
// concurrent use.
type Reader struct {
	r       io.Reader
	version uint32        // the file's format version (Version or VersionAll)
	dec     *zstd.Decoder // made on the first compressed chunk
	seq     uint32
	raw     int64 // raw payload bytes read
}

// NewReader reads and checks the file header. A stream that ends before
// it, or that does not start as a checkpoint, is ErrCorrupt; a read
// error is returned wrapped (with ErrCorrupt too when it is the stream's
// end). Close the reader.
func NewReader(r io.Reader) (*Reader, error) {
	var h [FileHeaderLen]byte
	if n, err := io.ReadFull(r, h[:]); err != nil {
		switch {
		case !truncated(err):
			return nil, fmt.Errorf("checkpoint: file header: reading byte %d: %w", n, err)
		case n < len(Magic) || string(h[:len(Magic)]) != Magic:
			return nil, fmt.Errorf("%w: file header: not a trajring checkpoint (%d bytes): %w", ErrCorrupt, n, err)
		}
		return nil, fmt.Errorf("%w: file header: truncated: %w", ErrCorrupt, err)
	}
	v, err := checkFileHeader(&h)
	if err != nil {
		return nil, err
	}
	if f := binary.LittleEndian.Uint32(h[12:]); f != 0 {
		return nil, fmt.Errorf("%w: file header: unknown flags %#x", ErrCorrupt, f)
	}
	return &Reader{r: r, version: v}, nil
}

// Version is the file's format version (Version or VersionAll).
func (cr *Reader) Version() uint32 { return cr.version }

// Close releases the decompressor.
func (cr *Reader) Close() {
	if cr.dec != nil {
		cr.dec.Close()
	}
}

// chunkHead is a chunk header that head has checked.
type chunkHead struct {
	raw     [ChunkHeaderLen]byte
	flags   uint8
	rawLen  uint32
	stored  uint32
	crc     uint32
	sec     uint8
	index   uint32
	seq     uint32   // the chunk's number
	payload []byte   // set by the caller once read
	pieces  [][]byte // the rest of the payload, when the caller read it into several places
}

// head reads and checks the next chunk's header, which must belong to
// section sec/index.
func (cr *Reader) head(sec uint8, index uint32) (chunkHead, error) {
	c := chunkHead{sec: sec, index: index, seq: cr.seq}
	h := c.raw[:]
	if _, err := io.ReadFull(cr.r, h); err != nil {
		return c, readFailed(sec, index, err, "chunk %d's header", cr.seq)
	}
	gotSec, flags, index2 := h[0], h[1], binary.LittleEndian.Uint32(h[4:])
	rawLen, storedLen := binary.LittleEndian.Uint32(h[8:]), binary.LittleEndian.Uint32(h[12:])
	seq, crc := binary.LittleEndian.Uint32(h[16:]), binary.LittleEndian.Uint32(h[20:])
	switch {
	case gotSec != sec || index2 != index:
		return c, Corrupt(sec, index, "chunk %d belongs to section %q", cr.seq, SectionName(gotSec, index2))
	case seq != cr.seq:
		return c, Corrupt(sec, index, "chunk %d numbered %d", cr.seq, seq)
	case flags&^(FlagZstd|FlagLast) != 0 || h[2] != 0 || h[3] != 0:
		return c, Corrupt(sec, index, "chunk %d: flags %#x", cr.seq, flags)
	case rawLen > MaxChunkRaw:
		return c, Corrupt(sec, index, "chunk %d of %d bytes exceeds %d", cr.seq, rawLen, MaxChunkRaw)
	case flags&FlagZstd == 0 && storedLen != rawLen, flags&FlagZstd != 0 && storedLen >= uint32(zstdBound(int(rawLen))):
		return c, Corrupt(sec, index, "chunk %d: %d bytes stored for %d", cr.seq, storedLen, rawLen)
	}
	c.flags, c.rawLen, c.stored, c.crc = flags, rawLen, storedLen, crc
	return c, nil
}

// check verifies the checksum of a chunk whose stored payload is p (and
// then more, in order).
func (c *chunkHead) check(p []byte, more ...[]byte) error {
	crc := crc32.Update(crc32.Checksum(c.raw[:20], Castagnoli), Castagnoli, p)
	for _, q := range more {
		crc = crc32.Update(crc, Castagnoli, q)
	}
	if crc != c.crc {
		return Corrupt(c.sec, c.index, "chunk %d: checksum mismatch", c.seq)
	}
	return nil
}

// decode returns the raw payload of a chunk whose stored payload is p:
// p itself, or p decompressed into dst (grown as needed).
func (cr *Reader) decode(c *chunkHead, p []byte, dst *[]byte) ([]byte, error) {
	if c.flags&FlagZstd == 0 {
		return p, nil
	}
	if cr.dec == nil {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxChunkRaw),
			zstd.WithDecoderMaxWindow(MaxChunkRaw))
		if err != nil {
			return nil, fmt.Errorf("checkpoint: zstd: %w", err)
		}
		cr.dec = d
	}
	out := scratch.Grow(dst, int(c.rawLen))
	got, err := cr.dec.DecodeAll(p, out[:0])
	if err != nil || len(got) != int(c.rawLen) || (c.rawLen > 0 && &got[0] != &out[0]) {
		return nil, Corrupt(c.sec, c.index, "chunk %d: zstd payload does not decode to %d bytes", c.seq, c.rawLen)
	}
	return got, nil
}

// Next reads the next chunk, which must belong to section sec/index,
// into *stored (and *raw when compressed, both grown as needed) and
// returns its raw payload and whether it ends the section.
func (cr *Reader) Next(sec uint8, index uint32, stored, raw *[]byte) (payload []byte, last bool, err error) {
	c, err := cr.head(sec, index)
	if err != nil {
		return nil, false, err
	}
	buf := scratch.Grow(stored, int(c.stored))
	if _, err := io.ReadFull(cr.r, buf); err != nil {
		return nil, false, readFailed(sec, index, err, "chunk %d's payload", cr.seq)
	}
	if err := c.check(buf); err != nil {
		return nil, false, err
	}
	if payload, err = cr.decode(&c, buf, raw); err != nil {
		return nil, false, err
	}
	cr.seq++
	cr.raw += int64(len(payload))
	return payload, c.flags&FlagLast != 0, nil
}

// End reads the end section and checks that it counts the chunks and
// raw bytes read before it.
func (cr *Reader) End() error {
	seq, raw := cr.seq, cr.raw
	s := cr.Section(SecEnd, 0)
	if gotSeq, gotRaw := s.U64(), s.I64(); s.err == nil && (gotSeq != uint64(seq) || gotRaw != raw) {
		s.Fail("%d chunks of %d bytes read, the writer wrote %d of %d", seq, raw, gotSeq, gotRaw)
	}
	return s.Done()
}

// SecReader decodes one section chunk by chunk. Errors are sticky: after
// the first, getters return zero values and Err reports it. It is not
// safe for concurrent use.
type SecReader struct {
	cr          *Reader
	sec         uint8
	index       uint32
	stored, raw []byte
	cur         []byte
	last        bool
	err         error
}

// Section starts reading section sec/index, which must come next.
func (cr *Reader) Section(sec uint8, index uint32) *SecReader {
	return &SecReader{cr: cr, sec: sec, index: index}
}

// Err is the section's first error, nil while there is none.
func (s *SecReader) Err() error { return s.err }

// take returns the next n bytes of the section (n <= Chunk), reading
// chunks as needed; the slice is valid until the next call.
func (s *SecReader) take(n int) []byte {
	if s.err != nil {
		return nil
	}
	if len(s.cur) >= n {
		v := s.cur[:n]
		s.cur = s.cur[n:]
		return v
	}
	// A value spans chunks: gather it into scratch.
	var out []byte
	for len(out)+len(s.cur) < n {
		out = append(out, s.cur...)
		if s.last {
			s.err = Corrupt(s.sec, s.index, "section ends early")
			return nil
		}
		p, last, err := s.cr.Next(s.sec, s.index, &s.stored, &s.raw)
		if err != nil {
			s.err = err
			return nil
		}
		s.cur, s.last = p, last
	}
	k := n - len(out)
	out = append(out, s.cur[:k]...)
	s.cur = s.cur[k:]
	return out
}

// Fail records an ErrCorrupt error naming the section, unless it has
// failed already.
func (s *SecReader) Fail(format string, args ...any) {
	if s.err == nil {
		s.err = Corrupt(s.sec, s.index, format, args...)
	}
}

// U8 reads a byte.
func (s *SecReader) U8() uint8 {
	if v := s.take(1); v != nil {
		return v[0]
	}
	return 0
}

// U32 reads a uint32.
func (s *SecReader) U32() uint32 {
	if v := s.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

// U64 reads a uint64.
func (s *SecReader) U64() uint64 {
	if v := s.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

// I64 reads an int64.
func (s *SecReader) I64() int64 { return int64(s.U64()) }

// F64 reads a float64.
func (s *SecReader) F64() float64 { return math.Float64frombits(s.U64()) }

// Bool reads a byte that must be 0 or 1.
func (s *SecReader) Bool() bool {
	v := s.U8()
	if v > 1 {
		s.Fail("boolean %d", v)
	}
	return v == 1
}

// Count reads a uint64 count and checks it against limit (what names it
// in the error).
func (s *SecReader) Count(what string, limit uint64) int {
	v := s.U64()
	if v > limit {
		s.Fail("%s: %d exceeds %d", what, v, limit)
		return 0
	}
	return int(v)
}

// Bytes reads a length-prefixed byte string of at most limit bytes.
func (s *SecReader) Bytes(limit int) []byte {
	n := s.U32()
	if uint64(n) > uint64(limit) {
		s.Fail("string of %d bytes exceeds %d", n, limit)
		return nil
	}
	out := make([]byte, 0, n)
	for rem := int(n); rem > 0 && s.err == nil; {
		k := min(rem, Chunk)
		out = append(out, s.take(k)...)
		rem -= k
	}
	return out
}

// More reports whether the section has bytes left (reading its next
// chunk when the current one is used up): for optional trailing fields.
func (s *SecReader) More() bool {
	for s.err == nil && len(s.cur) == 0 && !s.last {
		p, last, err := s.cr.Next(s.sec, s.index, &s.stored, &s.raw)
		if err != nil {
			s.err = err
			return false
		}
		s.cur, s.last = p, last
	}
	return s.err == nil && len(s.cur) > 0
}

// Done checks that the section ended exactly here and returns its first
// error.
func (s *SecReader) Done() error {
	if s.err == nil && (len(s.cur) != 0 || !s.last) {
		if !s.last && len(s.cur) == 0 {
			// The writer always closes a section with a last chunk.
			p, last, err := s.cr.Next(s.sec, s.index, &s.stored, &s.raw)
			if err != nil {
				return err
			}
			s.cur, s.last = p, last
			if len(p) == 0 && last {
				return nil
			}
		}
		s.Fail("%d bytes left over at its end", len(s.cur))
	}
	return s.err
}

// ReadSpans reads section sec/index, which holds the bytes of spans in
// order, calling put with each piece and its offset in the spans' space:
// chunks are read and checked on one goroutine while put consumes the
// previous ones on this one (at most Pipeline in flight). A section of
// more or fewer bytes than the spans cover is ErrCorrupt; put's first
// error is returned as it is.
func (cr *Reader) ReadSpans(sec uint8, index uint32, spans []Span, put func(off int64, p []byte) error) error {
	type job struct{ stored, raw, p []byte }
	size, off := SpansLen(spans), int64(0)
	fill := func(j *job) (bool, error) {
		p, last, err := cr.Next(sec, index, &j.stored, &j.raw)
		switch {
		case err != nil:
			return false, err
		case int64(len(p)) > size-off:
			return false, Corrupt(sec, index, "more than the %d bytes of its stored steps", size)
		case last && off+int64(len(p)) != size:
			return false, Corrupt(sec, index, "%d bytes for stored steps of %d", off+int64(len(p)), size)
		}
		j.p = p
		off += int64(len(p))
		return last, nil
	}
	walk := SpanWalk{sp: spans}
	drain := func(j *job) error {
		return walk.Next(int64(len(j.p)), func(at, lo, hi int64) error { return put(at, j.p[lo:hi]) })
	}
	return pipe(func() *job { return &job{} }, fill, drain)
}
