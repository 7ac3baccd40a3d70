package tensorbuf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/klauspost/compress/zstd"
)

// Checkpoint format, version 3 (all integers little-endian).
//
// A file starts with a 20-byte header: the magic "TRJRCKPT", the version
// (uint32), flags (uint32, 0) and the CRC-32C of those 16 bytes. Chunks
// follow, each a 24-byte chunk header and a payload:
//
//	section uint8   what the chunk belongs to (secHeader ... secEnd)
//	flags   uint8   chunkZstd: the payload is one zstd frame; chunkLast: the section ends here
//	_       uint16  0
//	index   uint32  table or column number within its section kind, else 0
//	rawLen  uint32  bytes of the payload once decompressed, at most maxChunkRaw
//	stored  uint32  bytes of the payload in the file
//	seq     uint32  the chunk's number in the file, from 0
//	crc     uint32  CRC-32C of the 20 bytes above and the stored payload
//
// Sections come in a fixed order: the header (specs, sizes, stats, the
// buffer's rng), the rows (cursors), one section per table (ending with
// an optional flags byte, tableDeviceSelection: files written before it
// end without, and load with no flag set), the metadata
// mirror (one byte per step), one section per ring arena of the buffer's
// layout (planLayout: the packed record arena of the small fields and the
// built-in columns, then one arena per large field in field order; the
// layout is recomputed from the header's field specs), and the end
// (the number of chunks before it and their raw bytes). A reader
// therefore knows which section and chunk number must come next, checks
// every chunk before using it, and refuses sizes other than what the
// header and the rows declare; chunks are at most maxChunkRaw bytes, so
// nothing larger is allocated for any of them.
//
// The metadata and arena sections hold the stored steps only: row after
// row, the first min(cursor, capacity) slots of the row (storedSlots),
// that is Σ min(cursor, capacity) bytes of metadata and as many records
// of the arena's stride. Version 2 held every slot (capacity slots per
// row, never-written ones as zeros) and is still read; version 1 (one
// section per column) is refused with ErrCorrupt.
const (
	ckptMagic = "TRJRCKPT"
	// ckptVersion is the version Save writes: 3, stored steps only.
	ckptVersion = 3
	// ckptVersionAll is version 2, every slot saved, which Load still
	// reads.
	ckptVersionAll = 2
	fileHeaderLen  = 20
	chunkHeaderLen = 24
	// ckptChunk is the raw size of the chunks Save writes.
	ckptChunk = 4 << 20
	// maxChunkRaw bounds the raw size of a chunk Load accepts.
	maxChunkRaw = 16 << 20
	// ckptPipeline is the number of chunks in flight between the stage
	// that downloads (or reads) and the one that writes (or uploads).
	ckptPipeline = 3

	chunkZstd = 1
	chunkLast = 2
)

// Section kinds.
const (
	secHeader = 1 + iota
	secRows
	secTable
	secMeta
	secArena
	secEnd
	// secHindsight is a Hindsight relabeler's state, in a stream of its
	// own (Hindsight.Save): the file header, this section, the end.
	secHindsight
)

// Table flags: a byte that ends a table section, optional (checkpoints
// written before it lack it and load with no flag set).
const (
	// tableDeviceSelection: TableConfig.DeviceSelection.
	tableDeviceSelection = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sectionName names a section in errors and summaries.
func sectionName(sec uint8, index uint32) string {
	switch sec {
	case secHeader:
		return "header"
	case secRows:
		return "rows"
	case secTable:
		return fmt.Sprintf("table %d", index)
	case secMeta:
		return "metadata"
	case secArena:
		return fmt.Sprintf("arena %d", index)
	case secEnd:
		return "end"
	case secHindsight:
		return "hindsight"
	}
	return fmt.Sprintf("section kind %d", sec)
}

// corrupt returns an ErrCorrupt error naming a section.
func corrupt(sec uint8, index uint32, format string, args ...any) error {
	return fmt.Errorf("%w: section %q: %s", ErrCorrupt, sectionName(sec, index), fmt.Sprintf(format, args...))
}

// zstdBound bounds the stored size of a compressed chunk of n raw bytes;
// a chunk that would not shrink is stored raw.
func zstdBound(n int) int { return n }

// chunkWriter writes chunks to w; not safe for concurrent use.
type chunkWriter struct {
	w       io.Writer
	enc     *zstd.Encoder // nil: no compression
	seq     uint32
	written int64 // bytes written, headers included
	raw     int64 // raw payload bytes
}

func newChunkWriter(w io.Writer, compress bool) (*chunkWriter, error) {
	cw := &chunkWriter{w: w}
	if compress {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithLowerEncoderMem(true))
		if err != nil {
			return nil, fmt.Errorf("checkpoint: zstd: %w", err)
		}
		cw.enc = enc
	}
	var h [fileHeaderLen]byte
	copy(h[:], ckptMagic)
	binary.LittleEndian.PutUint32(h[8:], ckptVersion)
	binary.LittleEndian.PutUint32(h[16:], crc32.Checksum(h[:16], castagnoli))
	if _, err := w.Write(h[:]); err != nil {
		return nil, err
	}
	cw.written = fileHeaderLen
	return cw, nil
}

// frame is one chunk made ready to write: out holds its header and its
// stored payload, contiguous, so that it takes one Write.
type frame struct {
	out []byte
	raw int
}

// seal fills f for a chunk whose raw bytes are buf[chunkHeaderLen:] (the
// first chunkHeaderLen bytes of buf are room for the header). When the
// writer compresses and zstd shrinks the chunk, the frame is built in
// comp instead, which seal returns (grown) for reuse. Sequence number and
// checksum are filled by write. seal may run on another goroutine than
// write.
func seal(f *frame, enc *zstd.Encoder, sec uint8, index uint32, buf, comp []byte, last bool) []byte {
	flags := uint8(0)
	if last {
		flags |= chunkLast
	}
	raw := buf[chunkHeaderLen:]
	f.out, f.raw = buf, len(raw)
	if enc != nil && len(raw) > 0 {
		if cap(comp) < chunkHeaderLen {
			comp = make([]byte, chunkHeaderLen, chunkHeaderLen+len(raw))
		}
		c := enc.EncodeAll(raw, comp[:chunkHeaderLen])
		if len(c)-chunkHeaderLen < zstdBound(len(raw)) {
			f.out, flags = c, flags|chunkZstd
		}
		comp = c
	}
	h := f.out[:chunkHeaderLen]
	h[0], h[1], h[2], h[3] = sec, flags, 0, 0
	binary.LittleEndian.PutUint32(h[4:], index)
	binary.LittleEndian.PutUint32(h[8:], uint32(len(raw)))
	binary.LittleEndian.PutUint32(h[12:], uint32(len(f.out)-chunkHeaderLen))
	return comp
}

// write numbers, checksums and writes a sealed frame.
func (cw *chunkWriter) write(f *frame) error {
	h := f.out[:chunkHeaderLen]
	binary.LittleEndian.PutUint32(h[16:], cw.seq)
	crc := crc32.Update(crc32.Checksum(h[:20], castagnoli), castagnoli, f.out[chunkHeaderLen:])
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
func (cw *chunkWriter) chunk(sec uint8, index uint32, buf []byte, last bool, comp *[]byte) error {
	var f frame
	*comp = seal(&f, cw.enc, sec, index, buf, *comp, last)
	return cw.write(&f)
}

// secWriter encodes one small or medium section into chunks of ckptChunk
// bytes. Errors are sticky and returned by close.
type secWriter struct {
	cw    *chunkWriter
	sec   uint8
	index uint32
	buf   []byte // chunkHeaderLen bytes of room, then the pending payload
	comp  []byte
	err   error
}

func (cw *chunkWriter) section(sec uint8, index uint32) *secWriter {
	return &secWriter{cw: cw, sec: sec, index: index, buf: make([]byte, chunkHeaderLen, 4096)}
}

func (s *secWriter) flushIfFull() {
	if len(s.buf)-chunkHeaderLen >= ckptChunk {
		if s.err == nil {
			s.err = s.cw.chunk(s.sec, s.index, s.buf[:chunkHeaderLen+ckptChunk], false, &s.comp)
		}
		n := copy(s.buf[chunkHeaderLen:], s.buf[chunkHeaderLen+ckptChunk:])
		s.buf = s.buf[:chunkHeaderLen+n]
	}
}

func (s *secWriter) u8(v uint8) { s.buf = append(s.buf, v); s.flushIfFull() }
func (s *secWriter) u32(v uint32) {
	s.buf = binary.LittleEndian.AppendUint32(s.buf, v)
	s.flushIfFull()
}
func (s *secWriter) u64(v uint64) {
	s.buf = binary.LittleEndian.AppendUint64(s.buf, v)
	s.flushIfFull()
}
func (s *secWriter) i64(v int64)   { s.u64(uint64(v)) }
func (s *secWriter) f64(v float64) { s.u64(math.Float64bits(v)) }
func (s *secWriter) bool(v bool) {
	if v {
		s.u8(1)
	} else {
		s.u8(0)
	}
}

// raw appends bytes without a length prefix.
func (s *secWriter) raw(v []byte) {
	for len(v) > 0 {
		n := min(len(v), chunkHeaderLen+ckptChunk-len(s.buf))
		s.buf = append(s.buf, v[:n]...)
		v = v[n:]
		s.flushIfFull()
	}
}
func (s *secWriter) bytes(v []byte) { s.u32(uint32(len(v))); s.raw(v) }
func (s *secWriter) str(v string)   { s.bytes([]byte(v)) }

// close writes the section's last chunk.
func (s *secWriter) close() error {
	if s.err != nil {
		return s.err
	}
	return s.cw.chunk(s.sec, s.index, s.buf, true, &s.comp)
}

// truncated reports whether a read error means the stream ended early.
func truncated(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// readFailed returns the error of a read of section sec/index that
// failed with err (what names the read): a stream that ends early is
// corrupt (ErrCorrupt, wrapping err), any other error is the reader's own,
// wrapped as it is, since it says nothing about the checkpoint.
func readFailed(sec uint8, index uint32, err error, what string, args ...any) error {
	msg := fmt.Sprintf(what, args...)
	if truncated(err) {
		return fmt.Errorf("%w: section %q: %s: truncated: %w", ErrCorrupt, sectionName(sec, index), msg, err)
	}
	return fmt.Errorf("checkpoint: section %q: reading %s: %w", sectionName(sec, index), msg, err)
}

// chunkReader reads and checks chunks; not safe for concurrent use.
type chunkReader struct {
	r       io.Reader
	version uint32        // the file's format version (ckptVersion or ckptVersionAll)
	dec     *zstd.Decoder // made on the first compressed chunk
	seq     uint32
	raw     int64 // raw payload bytes read
}

// newChunkReader reads and checks the file header. A stream that ends
// before it, or that does not start as a checkpoint, is ErrCorrupt; a
// read error is returned wrapped (with ErrCorrupt too when it is the
// stream's end).
func newChunkReader(r io.Reader) (*chunkReader, error) {
	var h [fileHeaderLen]byte
	if n, err := io.ReadFull(r, h[:]); err != nil {
		switch {
		case !truncated(err):
			return nil, fmt.Errorf("checkpoint: file header: reading byte %d: %w", n, err)
		case n < len(ckptMagic) || string(h[:len(ckptMagic)]) != ckptMagic:
			return nil, fmt.Errorf("%w: file header: not a trajring checkpoint (%d bytes): %w", ErrCorrupt, n, err)
		}
		return nil, fmt.Errorf("%w: file header: truncated: %w", ErrCorrupt, err)
	}
	if string(h[:8]) != ckptMagic {
		return nil, fmt.Errorf("%w: file header: not a trajring checkpoint (magic %q)", ErrCorrupt, h[:8])
	}
	if crc32.Checksum(h[:16], castagnoli) != binary.LittleEndian.Uint32(h[16:]) {
		return nil, fmt.Errorf("%w: file header: checksum mismatch", ErrCorrupt)
	}
	v := binary.LittleEndian.Uint32(h[8:])
	if v != ckptVersion && v != ckptVersionAll {
		return nil, fmt.Errorf("%w: file header: version %d, this build reads versions %d and %d", ErrCorrupt, v, ckptVersionAll, ckptVersion)
	}
	if f := binary.LittleEndian.Uint32(h[12:]); f != 0 {
		return nil, fmt.Errorf("%w: file header: unknown flags %#x", ErrCorrupt, f)
	}
	return &chunkReader{r: r, version: v}, nil
}

// chunkHead is a chunk header that head has checked.
type chunkHead struct {
	raw     [chunkHeaderLen]byte
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
func (cr *chunkReader) head(sec uint8, index uint32) (chunkHead, error) {
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
		return c, corrupt(sec, index, "chunk %d belongs to section %q", cr.seq, sectionName(gotSec, index2))
	case seq != cr.seq:
		return c, corrupt(sec, index, "chunk %d numbered %d", cr.seq, seq)
	case flags&^(chunkZstd|chunkLast) != 0 || h[2] != 0 || h[3] != 0:
		return c, corrupt(sec, index, "chunk %d: flags %#x", cr.seq, flags)
	case rawLen > maxChunkRaw:
		return c, corrupt(sec, index, "chunk %d of %d bytes exceeds %d", cr.seq, rawLen, maxChunkRaw)
	case flags&chunkZstd == 0 && storedLen != rawLen, flags&chunkZstd != 0 && storedLen >= uint32(zstdBound(int(rawLen))):
		return c, corrupt(sec, index, "chunk %d: %d bytes stored for %d", cr.seq, storedLen, rawLen)
	}
	c.flags, c.rawLen, c.stored, c.crc = flags, rawLen, storedLen, crc
	return c, nil
}

// check verifies the checksum of a chunk whose stored payload is p (and
// then more, in order).
func (c *chunkHead) check(p []byte, more ...[]byte) error {
	crc := crc32.Update(crc32.Checksum(c.raw[:20], castagnoli), castagnoli, p)
	for _, q := range more {
		crc = crc32.Update(crc, castagnoli, q)
	}
	if crc != c.crc {
		return corrupt(c.sec, c.index, "chunk %d: checksum mismatch", c.seq)
	}
	return nil
}

// decode returns the raw payload of a chunk whose stored payload is p:
// p itself, or p decompressed into dst (grown as needed).
func (cr *chunkReader) decode(c *chunkHead, p []byte, dst *[]byte) ([]byte, error) {
	if c.flags&chunkZstd == 0 {
		return p, nil
	}
	if cr.dec == nil {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxChunkRaw),
			zstd.WithDecoderMaxWindow(maxChunkRaw))
		if err != nil {
			return nil, fmt.Errorf("checkpoint: zstd: %w", err)
		}
		cr.dec = d
	}
	out := grow(dst, int(c.rawLen))
	got, err := cr.dec.DecodeAll(p, out[:0])
	if err != nil || len(got) != int(c.rawLen) || (c.rawLen > 0 && &got[0] != &out[0]) {
		return nil, corrupt(c.sec, c.index, "chunk %d: zstd payload does not decode to %d bytes", c.seq, c.rawLen)
	}
	return got, nil
}

// next reads the next chunk, which must belong to section sec/index,
// into *stored (and *raw when compressed, both grown as needed) and
// returns its raw payload and whether it ends the section.
func (cr *chunkReader) next(sec uint8, index uint32, stored, raw *[]byte) (payload []byte, last bool, err error) {
	c, err := cr.head(sec, index)
	if err != nil {
		return nil, false, err
	}
	buf := grow(stored, int(c.stored))
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
	return payload, c.flags&chunkLast != 0, nil
}

func (cr *chunkReader) close() {
	if cr.dec != nil {
		cr.dec.Close()
	}
}

// secReader decodes one section chunk by chunk. Errors are sticky: after
// the first, getters return zero values and err reports it.
type secReader struct {
	cr          *chunkReader
	sec         uint8
	index       uint32
	stored, raw []byte
	cur         []byte
	last        bool
	err         error
}

func (cr *chunkReader) section(sec uint8, index uint32) *secReader {
	return &secReader{cr: cr, sec: sec, index: index}
}

// take returns the next n bytes of the section (n <= ckptChunk), reading
// chunks as needed; the slice is valid until the next call.
func (s *secReader) take(n int) []byte {
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
			s.err = corrupt(s.sec, s.index, "section ends early")
			return nil
		}
		p, last, err := s.cr.next(s.sec, s.index, &s.stored, &s.raw)
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

func (s *secReader) fail(format string, args ...any) {
	if s.err == nil {
		s.err = corrupt(s.sec, s.index, format, args...)
	}
}

func (s *secReader) u8() uint8 {
	if v := s.take(1); v != nil {
		return v[0]
	}
	return 0
}
func (s *secReader) u32() uint32 {
	if v := s.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}
func (s *secReader) u64() uint64 {
	if v := s.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}
func (s *secReader) i64() int64   { return int64(s.u64()) }
func (s *secReader) f64() float64 { return math.Float64frombits(s.u64()) }
func (s *secReader) bool() bool {
	v := s.u8()
	if v > 1 {
		s.fail("boolean %d", v)
	}
	return v == 1
}

// count reads a uint64 count and checks it against limit.
func (s *secReader) count(what string, limit uint64) int {
	v := s.u64()
	if v > limit {
		s.fail("%s: %d exceeds %d", what, v, limit)
		return 0
	}
	return int(v)
}

// bytes reads a length-prefixed byte string of at most limit bytes.
func (s *secReader) bytes(limit int) []byte {
	n := s.u32()
	if uint64(n) > uint64(limit) {
		s.fail("string of %d bytes exceeds %d", n, limit)
		return nil
	}
	out := make([]byte, 0, n)
	for rem := int(n); rem > 0 && s.err == nil; {
		k := min(rem, ckptChunk)
		out = append(out, s.take(k)...)
		rem -= k
	}
	return out
}

// more reports whether the section has bytes left (reading its next
// chunk when the current one is used up): for optional trailing fields.
func (s *secReader) more() bool {
	for s.err == nil && len(s.cur) == 0 && !s.last {
		p, last, err := s.cr.next(s.sec, s.index, &s.stored, &s.raw)
		if err != nil {
			s.err = err
			return false
		}
		s.cur, s.last = p, last
	}
	return s.err == nil && len(s.cur) > 0
}

// done checks that the section ended exactly here.
func (s *secReader) done() error {
	if s.err == nil && (len(s.cur) != 0 || !s.last) {
		if !s.last && len(s.cur) == 0 {
			// The writer always closes a section with a last chunk.
			p, last, err := s.cr.next(s.sec, s.index, &s.stored, &s.raw)
			if err != nil {
				return err
			}
			s.cur, s.last = p, last
			if len(p) == 0 && last {
				return nil
			}
		}
		s.fail("%d bytes left over at its end", len(s.cur))
	}
	return s.err
}
