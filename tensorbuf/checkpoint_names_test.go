package tensorbuf

import (
	"io"

	"github.com/trajring/trajring/tensorbuf/internal/ckptio"
)

// Short names of the checkpoint format's constants and calls for the
// white-box checkpoint tests, which corrupt and rebuild files byte by
// byte.
const (
	secMeta        = ckptio.SecMeta
	secArena       = ckptio.SecArena
	ckptVersion    = ckptio.Version
	ckptVersionAll = ckptio.VersionAll
	fileHeaderLen  = ckptio.FileHeaderLen
	chunkHeaderLen = ckptio.ChunkHeaderLen
	ckptChunk      = ckptio.Chunk
)

var castagnoli = ckptio.Castagnoli

func sectionName(sec uint8, index uint32) string { return ckptio.SectionName(sec, index) }

func newChunkWriter(w io.Writer, compress bool) (*ckptio.Writer, error) {
	return ckptio.NewWriter(w, compress)
}
