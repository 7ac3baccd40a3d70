package ckptio

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/klauspost/compress/zstd"
)

// Writer writes a checkpoint stream: the file header, then chunks of
// sections. It is not safe for concurrent use.
type Writer struct {
	w       io.Writer
	enc     *zstd.Encoder // nil: no compression
	seq     uint32
	written int64 // bytes written, headers included
	raw     int64 // raw payload bytes
}

// NewWriter writes the file header to w and returns a writer of the
// stream's chunks, compressing each with zstd's fastest level when
// compress is set (chunks that do not shrink are stored raw). Close it.
func NewWriter(w io.Writer, compress bool) (*Writer, error) {
	cw := &Writer{w: w}
	if compress {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithLowerEncoderMem(true))
		if err != nil {
			return nil, fmt.Errorf("checkpoint: zstd: %w", err)
		}
		cw.enc = enc
	}
	var h [FileHeaderLen]byte
	putFileHeader(&h, Version)
	if _, err := w.Write(h[:]); err != nil {
		cw.Close()
		return nil, err
	}
	cw.written = FileHeaderLen
	return cw, nil
}

// Close releases the compressor; it writes nothing.
func (cw *Writer) Close() {
	if cw.enc != nil {
		cw.enc.Close()
	}
}

// Written is the bytes written so far, headers included; Raw the raw
// payload bytes of the chunks written.
func (cw *Writer) Written() int64 { return cw.written }

// Raw is the raw payload bytes of the chunks written so far.
func (cw *Writer) Raw() int64 { return cw.raw }

// frame is one chunk made ready to write: out holds its header and its
// stored payload, contiguous, so that it takes one Write.
type frame struct {
	out []byte
	raw int
}

// seal fills f for a chunk whose raw bytes are buf[ChunkHeaderLen:] (the
// first ChunkHeaderLen bytes of buf are room for the header). When enc
// is set and zstd shrinks the chunk, the frame is built in comp instead,
// which seal returns (grown) for reuse. Sequence number and checksum are
// filled by write. seal may run on another goroutine than write.
func seal(f *frame, enc *zstd.Encoder, sec uint8, index uint32, buf, comp []byte, last bool) []byte {
	flags := uint8(0)
	if last {
		flags |= FlagLast
	}
	raw := buf[ChunkHeaderLen:]
	f.out, f.raw = buf, len(raw)
	if enc != nil && len(raw) > 0 {
		if cap(comp) < ChunkHeaderLen {
			comp = make([]byte, ChunkHeaderLen, ChunkHeaderLen+len(raw))
		}
		c := enc.EncodeAll(raw, comp[:ChunkHeaderLen])
		if len(c)-ChunkHeaderLen < zstdBound(len(raw)) {
			f.out, flags = c, flags|FlagZstd
		}
		comp = c
	}
	h := f.out[:ChunkHeaderLen]
	h[0], h[1], h[2], h[3] = sec, flags, 0, 0
	binary.LittleEndian.PutUint32(h[4:], index)
	binary.LittleEndian.PutUint32(h[8:], uint32(len(raw)))
	binary.LittleEndian.PutUint32(h[12:], uint32(len(f.out)-ChunkHeaderLen))
	return comp
}

// write numbers, checksums and writes a sealed frame.
func (cw *Writer) write(f *frame) error {
	h := f.out[:ChunkHeaderLen]
	binary.LittleEndian.PutUint32(h[16:], cw.seq)
	crc := crc32.Update(crc32.Checksum(h[:20], Castagnoli), Castagnoli, f.out[ChunkHeaderLen:])
	binary.LittleEndian.PutUint32(h[20:], crc)
	if _, err := cw.w.Write(f.out); err != nil {
		return err
	}
	cw.seq++
	cw.written += int64(len(f.out))
	cw.raw += int64(f.raw)
	return nil
}

// chunk seals and writes one chunk (see seal for buf).
func (cw *Writer) chunk(sec uint8, index uint32, buf []byte, last bool, comp *[]byte) error {
	var f frame
	*comp = seal(&f, cw.enc, sec, index, buf, *comp, last)
	return cw.write(&f)
}

// SecWriter encodes one small or medium section into chunks of Chunk
// bytes. Errors are sticky and returned by Close. It is not safe for
// concurrent use.
type SecWriter struct {
	cw    *Writer
	sec   uint8
	index uint32
	buf   []byte // ChunkHeaderLen bytes of room, then the pending payload
	comp  []byte
	err   error
}

// Section starts section sec/index; write its values, then Close it
// before starting the next.
func (cw *Writer) Section(sec uint8, index uint32) *SecWriter {
	return &SecWriter{cw: cw, sec: sec, index: index, buf: make([]byte, ChunkHeaderLen, 4096)}
}

func (s *SecWriter) flushIfFull() {
	if len(s.buf)-ChunkHeaderLen >= Chunk {
		if s.err == nil {
			s.err = s.cw.chunk(s.sec, s.index, s.buf[:ChunkHeaderLen+Chunk], false, &s.comp)
		}
		n := copy(s.buf[ChunkHeaderLen:], s.buf[ChunkHeaderLen+Chunk:])
		s.buf = s.buf[:ChunkHeaderLen+n]
	}
}

// U8 appends a byte.
func (s *SecWriter) U8(v uint8) { s.buf = append(s.buf, v); s.flushIfFull() }

// U32 appends a uint32.
func (s *SecWriter) U32(v uint32) {
	s.buf = binary.LittleEndian.AppendUint32(s.buf, v)
	s.flushIfFull()
}

// U64 appends a uint64.
func (s *SecWriter) U64(v uint64) {
	s.buf = binary.LittleEndian.AppendUint64(s.buf, v)
	s.flushIfFull()
}

// I64 appends an int64 as its uint64 bits.
func (s *SecWriter) I64(v int64) { s.U64(uint64(v)) }

// F64 appends a float64 as its bits.
func (s *SecWriter) F64(v float64) { s.U64(math.Float64bits(v)) }

// Bool appends 1 for true, 0 for false.
func (s *SecWriter) Bool(v bool) {
	if v {
		s.U8(1)
	} else {
		s.U8(0)
	}
}

// Raw appends bytes without a length prefix.
func (s *SecWriter) Raw(v []byte) {
	for len(v) > 0 {
		n := min(len(v), ChunkHeaderLen+Chunk-len(s.buf))
		s.buf = append(s.buf, v[:n]...)
		v = v[n:]
		s.flushIfFull()
	}
}

// Bytes appends a uint32 length, then the bytes.
func (s *SecWriter) Bytes(v []byte) { s.U32(uint32(len(v))); s.Raw(v) }

// Str appends a string as Bytes does.
func (s *SecWriter) Str(v string) { s.Bytes([]byte(v)) }

// Close writes the section's last chunk and returns the section's first
// error.
func (s *SecWriter) Close() error {
	if s.err != nil {
		return s.err
	}
	return s.cw.chunk(s.sec, s.index, s.buf, true, &s.comp)
}

// End writes the end section: the number of chunks written before it
// and their raw bytes, which Reader.End checks.
func (cw *Writer) End() error {
	end := cw.Section(SecEnd, 0)
	end.U64(uint64(cw.seq))
	end.I64(cw.raw)
	return end.Close()
}

// StreamSections writes one section of kind sec per element of spans,
// section i (index i) holding the bytes of spans[i] in order, in chunks
// of Chunk bytes: get fills dst with the bytes at byte off of source i,
// once per span a chunk takes bytes from. Chunks are filled (and
// compressed) on one goroutine while the previous ones are written on
// this one, at most Pipeline in flight, so that the source is never
// copied whole. The first error, get's or the write's, ends the stream
// and is returned as it is.
func (cw *Writer) StreamSections(sec uint8, spans [][]Span, get func(dst []byte, i int, off int64) error) error {
	if len(spans) == 0 {
		return nil
	}
	type job struct {
		f         frame
		buf, comp []byte
	}
	i, off := 0, int64(0)
	size, walk := SpansLen(spans[0]), SpanWalk{sp: spans[0]}
	fill := func(j *job) (bool, error) {
		n := min(Chunk, size-off)
		last := off+n == size
		buf := j.buf[:ChunkHeaderLen+n]
		dst := buf[ChunkHeaderLen:]
		c := i
		if err := walk.Next(n, func(aoff, lo, hi int64) error { return get(dst[lo:hi], c, aoff) }); err != nil {
			return false, err
		}
		j.comp = seal(&j.f, cw.enc, sec, uint32(c), buf, j.comp, last)
		if !last {
			off += n
			return false, nil
		}
		if i++; i == len(spans) {
			return true, nil
		}
		off, size, walk = 0, SpansLen(spans[i]), SpanWalk{sp: spans[i]}
		return false, nil
	}
	newJob := func() *job { return &job{buf: make([]byte, ChunkHeaderLen+Chunk)} }
	return pipe(newJob, fill, func(j *job) error { return cw.write(&j.f) })
}
