// Package ckptio is the container format of tensorbuf's checkpoints: the
// file header, checksummed chunks grouped into sections, optional zstd
// compression, and the pipelines that stream large sections between a
// file and memory. It knows sections by kind and size, not what they
// mean: tensorbuf decides what a checkpoint holds and how it is loaded.
//
// Format, version 3 (all integers little-endian). A file starts with a
// 20-byte header: the magic "TRJRCKPT", the version (uint32), flags
// (uint32, 0) and the CRC-32C of those 16 bytes. Chunks follow, each a
// 24-byte chunk header and a payload:
//
//	section uint8   what the chunk belongs to (SecHeader ... SecHindsight)
//	flags   uint8   FlagZstd: the payload is one zstd frame; FlagLast: the section ends here
//	_       uint16  0
//	index   uint32  table or column number within its section kind, else 0
//	rawLen  uint32  bytes of the payload once decompressed, at most MaxChunkRaw
//	stored  uint32  bytes of the payload in the file
//	seq     uint32  the chunk's number in the file, from 0
//	crc     uint32  CRC-32C of the 20 bytes above and the stored payload
//
// A stream ends with the end section (Writer.End): the number of chunks
// before it and their raw bytes. A reader knows which section and chunk
// number must come next, checks every chunk before using it, and
// allocates at most MaxChunkRaw bytes for any of them. Version 2 differs
// only in what tensorbuf stores in its sections (every slot, not only
// the stored steps) and is still read; version 1 is refused with
// ErrCorrupt.
package ckptio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

const (
	// Magic starts every checkpoint.
	Magic = "TRJRCKPT"
	// Version is the version writers write: 3, stored steps only.
	Version = 3
	// VersionAll is version 2, every slot saved, which readers still
	// accept.
	VersionAll = 2
	// FileHeaderLen is the size of the file header.
	FileHeaderLen = 20
	// ChunkHeaderLen is the size of a chunk header.
	ChunkHeaderLen = 24
	// Chunk is the raw size of the chunks writers write.
	Chunk = 4 << 20
	// MaxChunkRaw bounds the raw size of a chunk readers accept.
	MaxChunkRaw = 16 << 20
	// Pipeline is the number of chunks in flight between the stage that
	// downloads (or reads) and the one that writes (or uploads).
	Pipeline = 3

	// FlagZstd marks a chunk whose payload is one zstd frame.
	FlagZstd = 1
	// FlagLast marks a section's last chunk.
	FlagLast = 2
)

// Section kinds, in the order tensorbuf writes a buffer's checkpoint:
// the header, the rows, one section per table, the metadata mirror, one
// section per ring arena, the end. A Hindsight relabeler's stream is the
// file header, SecHindsight, the end.
const (
	SecHeader = 1 + iota
	SecRows
	SecTable
	SecMeta
	SecArena
	SecEnd
	SecHindsight
)

// ErrCorrupt is wrapped by every error about a stream that is not a
// whole, unaltered checkpoint; tensorbuf exports it as its ErrCorrupt.
var ErrCorrupt = errors.New("tensorbuf: corrupt or foreign checkpoint")

// Castagnoli is the CRC-32C table of every checksum.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SectionName names a section in errors and summaries.
func SectionName(sec uint8, index uint32) string {
	switch sec {
	case SecHeader:
		return "header"
	case SecRows:
		return "rows"
	case SecTable:
		return fmt.Sprintf("table %d", index)
	case SecMeta:
		return "metadata"
	case SecArena:
		return fmt.Sprintf("arena %d", index)
	case SecEnd:
		return "end"
	case SecHindsight:
		return "hindsight"
	}
	return fmt.Sprintf("section kind %d", sec)
}

// Corrupt returns an ErrCorrupt error naming a section.
func Corrupt(sec uint8, index uint32, format string, args ...any) error {
	return fmt.Errorf("%w: section %q: %s", ErrCorrupt, SectionName(sec, index), fmt.Sprintf(format, args...))
}

// zstdBound bounds the stored size of a compressed chunk of n raw bytes;
// a chunk that would not shrink is stored raw.
func zstdBound(n int) int { return n }

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
		return fmt.Errorf("%w: section %q: %s: truncated: %w", ErrCorrupt, SectionName(sec, index), msg, err)
	}
	return fmt.Errorf("checkpoint: section %q: reading %s: %w", SectionName(sec, index), msg, err)
}

// putFileHeader fills h with the header of a file of the given version.
func putFileHeader(h *[FileHeaderLen]byte, version uint32) {
	copy(h[:], Magic)
	binary.LittleEndian.PutUint32(h[8:], version)
	binary.LittleEndian.PutUint32(h[12:], 0)
	binary.LittleEndian.PutUint32(h[16:], crc32.Checksum(h[:16], Castagnoli))
}

// checkFileHeader checks a whole file header's magic, checksum and
// version (not its flags) and returns the version.
func checkFileHeader(h *[FileHeaderLen]byte) (uint32, error) {
	if string(h[:len(Magic)]) != Magic {
		return 0, fmt.Errorf("%w: file header: not a trajring checkpoint (magic %q)", ErrCorrupt, h[:len(Magic)])
	}
	if crc32.Checksum(h[:16], Castagnoli) != binary.LittleEndian.Uint32(h[16:]) {
		return 0, fmt.Errorf("%w: file header: checksum mismatch", ErrCorrupt)
	}
	v := binary.LittleEndian.Uint32(h[8:])
	if v != Version && v != VersionAll {
		return 0, fmt.Errorf("%w: file header: version %d, this build reads versions %d and %d", ErrCorrupt, v, VersionAll, Version)
	}
	return v, nil
}

// Length returns the number of bytes the checkpoint at the start of r
// spans (r holds size bytes), from its file header and chunk headers
// alone: it reads 24 bytes per chunk and skips every payload, up to the
// last chunk of the end section. A checkpoint that runs past size or
// whose chunk headers are malformed or out of order is ErrCorrupt; a
// read error is returned wrapped. It checks neither checksums nor
// payloads. It is safe for concurrent use when r is.
func Length(r io.ReaderAt, size int64) (int64, error) {
	var h [ChunkHeaderLen]byte
	if size < FileHeaderLen {
		return 0, fmt.Errorf("%w: file header: truncated: %d bytes of %d", ErrCorrupt, max(size, 0), FileHeaderLen)
	}
	fh := (*[FileHeaderLen]byte)(h[:])
	if _, err := r.ReadAt(fh[:], 0); err != nil {
		return 0, fmt.Errorf("checkpoint: file header: %w", err)
	}
	if _, err := checkFileHeader(fh); err != nil {
		return 0, err
	}
	off, prev := int64(FileHeaderLen), uint8(SecHeader)
	for seq := uint32(0); ; seq++ {
		if ChunkHeaderLen > size-off {
			return 0, Corrupt(prev, 0, "truncated: chunk %d's header needs bytes %d-%d of a %d-byte file", seq, off, off+ChunkHeaderLen-1, size)
		}
		if _, err := r.ReadAt(h[:], off); err != nil {
			return 0, fmt.Errorf("checkpoint: chunk %d's header at byte %d: %w", seq, off, err)
		}
		sec, flags, index := h[0], h[1], binary.LittleEndian.Uint32(h[4:])
		rawLen, stored := binary.LittleEndian.Uint32(h[8:]), binary.LittleEndian.Uint32(h[12:])
		switch {
		case sec < SecHeader || sec > SecHindsight:
			return 0, Corrupt(sec, index, "chunk %d of an unknown section after section %q", seq, SectionName(prev, 0))
		case binary.LittleEndian.Uint32(h[16:]) != seq:
			return 0, Corrupt(sec, index, "chunk %d numbered %d", seq, binary.LittleEndian.Uint32(h[16:]))
		case flags&^(FlagZstd|FlagLast) != 0 || rawLen > MaxChunkRaw || stored > rawLen:
			return 0, Corrupt(sec, index, "chunk %d: flags %#x, %d bytes stored for %d", seq, flags, stored, rawLen)
		}
		off += ChunkHeaderLen
		if int64(stored) > size-off {
			return 0, Corrupt(sec, index, "truncated: chunk %d's %d bytes end at byte %d of a %d-byte file", seq, stored, off+int64(stored), size)
		}
		off += int64(stored)
		if sec == SecEnd && flags&FlagLast != 0 {
			return off, nil
		}
		prev = sec
	}
}
