package dqn

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"

	"github.com/trajring/trajring/internal/sgemm"
	"github.com/trajring/trajring/tensorbuf"
)

// mlp is the weights of a ReLU MLP as plain slices: layer l maps dims[l]
// inputs to dims[l+1] outputs, w[l] row-major [dims[l], dims[l+1]] and
// b[l] [dims[l+1]]. The target network is one, and so is the online
// network's forward pass outside the training graph.
type mlp struct {
	dims []int
	w, b [][]float32
}

// newMLP draws weights as PyTorch's nn.Linear does (uniform in
// ±1/sqrt(fan_in), biases too), from a PCG stream seeded with seed.
func newMLP(dims []int, seed uint64) *mlp {
	rng := rand.New(rand.NewPCG(seed, 0x646f6e))
	m := &mlp{dims: append([]int(nil), dims...)}
	for l := 0; l+1 < len(dims); l++ {
		bound := 1 / math.Sqrt(float64(dims[l]))
		w := make([]float32, dims[l]*dims[l+1])
		for i := range w {
			w[i] = float32((2*rng.Float64() - 1) * bound)
		}
		b := make([]float32, dims[l+1])
		for i := range b {
			b[i] = float32((2*rng.Float64() - 1) * bound)
		}
		m.w, m.b = append(m.w, w), append(m.b, b)
	}
	return m
}

// copyFrom copies o's weights into m (same dims).
func (m *mlp) copyFrom(o *mlp) {
	for l := range m.w {
		copy(m.w[l], o.w[l])
		copy(m.b[l], o.b[l])
	}
}

// forward computes the outputs of n inputs (row-major [n, dims[0]]) into
// out ([n, dims[last]]), with scratch for the hidden layers (grown as
// needed and returned).
func forward(dims []int, ws, bs [][]float32, in []float32, n int, out []float32, scratch [][]float32) [][]float32 {
	for len(scratch) < len(ws) {
		scratch = append(scratch, nil)
	}
	cur := in
	for l := range ws {
		k, m := dims[l], dims[l+1]
		dst := out
		if l+1 < len(ws) {
			if cap(scratch[l]) < n*m {
				scratch[l] = make([]float32, n*m)
			}
			dst = scratch[l][:n*m]
		}
		for r := range n {
			copy(dst[r*m:(r+1)*m], bs[l])
		}
		// The shapes are the network's own, so Gemm cannot fail.
		_ = sgemm.Gemm(false, false, n, m, k, 1, cur[:n*k], k, ws[l], m, 1, dst, m)
		if l+1 < len(ws) {
			relu(dst)
		}
		cur = dst
	}
	return scratch
}

// relu sets the negative values of xs to +0, without a branch per value:
// about half of a layer's values are negative in no predictable order,
// and mispredicted branches cost more than the arithmetic.
func relu(xs []float32) {
	for i, v := range xs {
		u := math.Float32bits(v)
		xs[i] = math.Float32frombits(u &^ uint32(int32(u)>>31))
	}
}

// savedNet is the payload of a network file: gob of the layer sizes and
// weights. Files written before the header (see netMagic) are this gob
// alone.
type savedNet struct {
	Format  string
	Dims    []int
	Weights [][]float32
	Biases  [][]float32
}

const netFormat = "trajring-dqn-mlp/1"

// A network file (Agent.Save, Network.Save) is a 24-byte header and the
// savedNet gob it checks:
//
//	offset  size  field
//	0       8     magic "\x89TRJMLP\n"
//	8       4     version, uint32 little-endian (netVersion)
//	12      4     CRC-32C (Castagnoli) of the payload, uint32 little-endian
//	16      8     payload length in bytes, uint64 little-endian
//	24      ...   payload: the savedNet gob
//
// Every field of the header is checked exactly (the magic, a known
// version, the length against the bytes that follow up to the end, the
// CRC against the payload), so a single flipped bit anywhere is refused.
// A legacy file (the gob alone, before version 2) cannot begin with the
// magic: a gob stream's first byte is a message length, and 0x89 is not
// a valid one.
const (
	netMagic      = "\x89TRJMLP\n"
	netVersion    = 2
	netHeaderSize = 24
	// maxNetPayload bounds the payload a header may announce (1 TiB),
	// so that a damaged length is refused at once.
	maxNetPayload = 1 << 40
)

// ErrNonFinite reports a network file whose weights or biases hold NaN
// or an infinity: ReadNetwork and LoadNetwork refuse it (the error also
// wraps ErrConfig).
var ErrNonFinite = errors.New("dqn: network weights are not finite")

// save writes m as a network file: the header, then the gob.
func (m *mlp) save(w io.Writer) error {
	var payload bytes.Buffer
	if err := gob.NewEncoder(&payload).Encode(savedNet{Format: netFormat, Dims: m.dims, Weights: m.w, Biases: m.b}); err != nil {
		return err
	}
	var h [netHeaderSize]byte
	copy(h[:8], netMagic)
	binary.LittleEndian.PutUint32(h[8:], netVersion)
	binary.LittleEndian.PutUint32(h[12:], crc32.Checksum(payload.Bytes(), castagnoli))
	binary.LittleEndian.PutUint64(h[16:], uint64(payload.Len()))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.Write(payload.Bytes())
	return err
}

// loadMLP reads a network file (see netMagic) or a legacy headerless
// one, and checks its shapes and weights (checkNet).
func loadMLP(r io.Reader) (*mlp, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(len(netMagic))
	if err != nil && len(head) == 0 {
		return nil, fmt.Errorf("%w: decoding a network: %w", ErrConfig, err)
	}
	var s savedNet
	if string(head) == netMagic {
		if err := readNetFile(br, &s); err != nil {
			return nil, err
		}
	} else if err := gob.NewDecoder(br).Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: decoding a network: %w", ErrConfig, err)
	}
	if err := checkNet(&s); err != nil {
		return nil, err
	}
	return &mlp{dims: s.Dims, w: s.Weights, b: s.Biases}, nil
}

// readNetFile reads a version-2 network file from r, which must end where
// the file does, into s, checking the header and the CRC.
func readNetFile(r io.Reader, s *savedNet) error {
	var h [netHeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return fmt.Errorf("%w: %w: a network file's header: %w", ErrConfig, tensorbuf.ErrCorrupt, err)
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != netVersion {
		return fmt.Errorf("%w: network file version %d; this build reads version %d (and headerless files)", ErrConfig, v, netVersion)
	}
	crc, n := binary.LittleEndian.Uint32(h[12:]), binary.LittleEndian.Uint64(h[16:])
	if n > maxNetPayload {
		return fmt.Errorf("%w: %w: network file announces %d bytes", ErrConfig, tensorbuf.ErrCorrupt, n)
	}
	// Read one byte more than announced: a file longer than its header
	// says is as damaged as a shorter one.
	payload, err := io.ReadAll(io.LimitReader(r, int64(n)+1))
	if err != nil {
		return fmt.Errorf("%w: reading a network: %w", ErrConfig, err)
	}
	if uint64(len(payload)) != n {
		return fmt.Errorf("%w: %w: network file of %d payload bytes, its header says %d", ErrConfig, tensorbuf.ErrCorrupt, len(payload), n)
	}
	if crc32.Checksum(payload, castagnoli) != crc {
		return fmt.Errorf("%w: %w: network file checksum mismatch", ErrConfig, tensorbuf.ErrCorrupt)
	}
	if err := gob.NewDecoder(bytes.NewReader(payload)).Decode(s); err != nil {
		return fmt.Errorf("%w: decoding a network: %w", ErrConfig, err)
	}
	return nil
}

// checkNet refuses a savedNet that is not a network this package can
// run: the wrong format, fewer than two layers, a layer size below 1
// (zero or negative), weights or biases whose lengths differ from the
// sizes' products (computed without overflow: a product beyond MaxInt
// matches no slice), or a weight or bias that is NaN or infinite
// (ErrNonFinite).
func checkNet(s *savedNet) error {
	if s.Format != netFormat || len(s.Dims) < 2 || len(s.Weights) != len(s.Dims)-1 || len(s.Biases) != len(s.Dims)-1 {
		return fmt.Errorf("%w: not a %s network", ErrConfig, netFormat)
	}
	for l, d := range s.Dims {
		if d < 1 {
			return fmt.Errorf("%w: layer %d of size %d (want at least 1) in layer sizes %v", ErrConfig, l, d, s.Dims)
		}
	}
	for l := range s.Weights {
		in, out := s.Dims[l], s.Dims[l+1]
		if in > math.MaxInt/out || len(s.Weights[l]) != in*out || len(s.Biases[l]) != out {
			return fmt.Errorf("%w: layer %d has the wrong size for layer sizes %v", ErrConfig, l, s.Dims)
		}
		for _, p := range []struct {
			what string
			xs   []float32
		}{{"weight", s.Weights[l]}, {"bias", s.Biases[l]}} {
			for i, x := range p.xs {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					return fmt.Errorf("%w: %w: layer %d %s %d is %v", ErrConfig, ErrNonFinite, l, p.what, i, x)
				}
			}
		}
	}
	return nil
}
