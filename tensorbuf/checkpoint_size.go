package tensorbuf

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// CheckpointLength returns the number of bytes the checkpoint at the
// start of r spans, found from its file header and chunk headers alone:
// each chunk header gives its payload's stored size, so the walk reads 24
// bytes per chunk and skips every payload, up to the last chunk of the
// end section. r holds size bytes. A checkpoint that runs past size (a
// truncated file) or whose chunk headers are malformed or out of order is
// ErrCorrupt, naming the section and chunk; a read error is returned
// wrapped. It accepts the streams of Save and Hindsight.Save. Bytes after the end section are not part of the checkpoint (Load
// stops before them): the result is then less than size.
//
// It checks neither checksums nor contents (Load does): it is the cheap
// check that a file is whole, for summaries such as ReadCheckpointInfo's
// that stop before the arenas. It is safe for concurrent use when r is.
func CheckpointLength(r io.ReaderAt, size int64) (int64, error) {
	var h [chunkHeaderLen]byte
	if size < fileHeaderLen {
		return 0, fmt.Errorf("%w: file header: truncated: %d bytes of %d", ErrCorrupt, max(size, 0), fileHeaderLen)
	}
	if _, err := r.ReadAt(h[:fileHeaderLen], 0); err != nil {
		return 0, fmt.Errorf("checkpoint: file header: %w", err)
	}
	if string(h[:len(ckptMagic)]) != ckptMagic {
		return 0, fmt.Errorf("%w: file header: not a trajring checkpoint (magic %q)", ErrCorrupt, h[:len(ckptMagic)])
	}
	if crc32.Checksum(h[:16], castagnoli) != binary.LittleEndian.Uint32(h[16:]) {
		return 0, fmt.Errorf("%w: file header: checksum mismatch", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != ckptVersion && v != ckptVersionAll {
		return 0, fmt.Errorf("%w: file header: version %d, this build reads versions %d and %d", ErrCorrupt, v, ckptVersionAll, ckptVersion)
	}
	off, prev := int64(fileHeaderLen), uint8(secHeader)
	for seq := uint32(0); ; seq++ {
		if chunkHeaderLen > size-off {
			return 0, corrupt(prev, 0, "truncated: chunk %d's header needs bytes %d-%d of a %d-byte file", seq, off, off+chunkHeaderLen-1, size)
		}
		if _, err := r.ReadAt(h[:], off); err != nil {
			return 0, fmt.Errorf("checkpoint: chunk %d's header at byte %d: %w", seq, off, err)
		}
		sec, flags, index := h[0], h[1], binary.LittleEndian.Uint32(h[4:])
		rawLen, stored := binary.LittleEndian.Uint32(h[8:]), binary.LittleEndian.Uint32(h[12:])
		switch {
		case sec < secHeader || sec > secHindsight:
			return 0, corrupt(sec, index, "chunk %d of an unknown section after section %q", seq, sectionName(prev, 0))
		case binary.LittleEndian.Uint32(h[16:]) != seq:
			return 0, corrupt(sec, index, "chunk %d numbered %d", seq, binary.LittleEndian.Uint32(h[16:]))
		case flags&^(chunkZstd|chunkLast) != 0 || rawLen > maxChunkRaw || stored > rawLen:
			return 0, corrupt(sec, index, "chunk %d: flags %#x, %d bytes stored for %d", seq, flags, stored, rawLen)
		}
		off += chunkHeaderLen
		if int64(stored) > size-off {
			return 0, corrupt(sec, index, "truncated: chunk %d's %d bytes end at byte %d of a %d-byte file", seq, stored, off+int64(stored), size)
		}
		off += int64(stored)
		if sec == secEnd && flags&chunkLast != 0 {
			return off, nil
		}
		prev = sec
	}
}
