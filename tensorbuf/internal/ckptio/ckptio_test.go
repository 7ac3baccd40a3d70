package ckptio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

// testStream is what the tests write: a section of values, a section
// streamed from src at spans (two sections, the second empty), and the
// end.
type testStream struct {
	u8    uint8
	u32   uint32
	i64   int64
	f64   float64
	flag  bool
	str   string
	src   []byte
	spans []Span
}

func newTestStream() testStream {
	src := make([]byte, 3000)
	for i := range src {
		src[i] = byte(i*7 + i/256) // compressible, not constant
	}
	return testStream{
		u8: 0xa5, u32: 0xdeadbeef, i64: -42, f64: 1.5, flag: true, str: "obs",
		src: src, spans: []Span{{Off: 10, N: 100}, {Off: 500, N: 0}, {Off: 1000, N: 1500}},
	}
}

func (ts *testStream) write(t testing.TB, compress bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	cw, err := NewWriter(&buf, compress)
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	s := cw.Section(SecHeader, 0)
	s.U8(ts.u8)
	s.U32(ts.u32)
	s.I64(ts.i64)
	s.F64(ts.f64)
	s.Bool(ts.flag)
	s.Str(ts.str)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	get := func(dst []byte, i int, off int64) error {
		if i != 0 {
			return fmt.Errorf("source %d", i)
		}
		copy(dst, ts.src[off:])
		return nil
	}
	if err := cw.StreamSections(SecArena, [][]Span{ts.spans, nil}, func(dst []byte, i int, off int64) error {
		return get(dst, i, off)
	}); err != nil {
		t.Fatal(err)
	}
	if err := cw.End(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// read reads a stream written by write, the arena section into a fresh
// buffer the size of src, in place or through ReadSpans.
func (ts *testStream) read(data []byte, inPlace bool) (got testStream, err error) {
	cr, err := NewReader(bytes.NewReader(data))
	if err != nil {
		return got, err
	}
	defer cr.Close()
	s := cr.Section(SecHeader, 0)
	got.u8, got.u32, got.i64, got.f64, got.flag = s.U8(), s.U32(), s.I64(), s.F64(), s.Bool()
	got.str = string(s.Bytes(16))
	if err := s.Done(); err != nil {
		return got, err
	}
	got.src, got.spans = make([]byte, len(ts.src)), ts.spans
	for i, sp := range [][]Span{ts.spans, nil} {
		if inPlace {
			err = cr.ReadSpansInto(SecArena, uint32(i), got.src, sp)
		} else {
			err = cr.ReadSpans(SecArena, uint32(i), sp, func(off int64, p []byte) error {
				copy(got.src[off:], p)
				return nil
			})
		}
		if err != nil {
			return got, err
		}
	}
	return got, cr.End()
}

// covered returns src with the bytes outside spans zeroed.
func (ts *testStream) covered() []byte {
	out := make([]byte, len(ts.src))
	for _, sp := range ts.spans {
		copy(out[sp.Off:sp.Off+sp.N], ts.src[sp.Off:])
	}
	return out
}

func (ts *testStream) equal(got testStream) bool {
	return got.u8 == ts.u8 && got.u32 == ts.u32 && got.i64 == ts.i64 && got.f64 == ts.f64 &&
		got.flag == ts.flag && got.str == ts.str && bytes.Equal(got.src, ts.covered())
}

func TestRoundTrip(t *testing.T) {
	ts := newTestStream()
	for _, compress := range []bool{false, true} {
		data := ts.write(t, compress)
		if n, err := Length(bytes.NewReader(data), int64(len(data))); err != nil || n != int64(len(data)) {
			t.Errorf("compress %v: Length %d, %v; want %d", compress, n, err, len(data))
		}
		// A header, four sections of one chunk each (the empty arena
		// section too), the end.
		if !compress {
			want := FileHeaderLen + 4*ChunkHeaderLen + (1 + 4 + 8 + 8 + 1 + 4 + 3) + 1600 + 16
			if len(data) != want {
				t.Errorf("plain stream of %d bytes, want %d", len(data), want)
			}
		}
		for _, inPlace := range []bool{false, true} {
			got, err := ts.read(data, inPlace)
			if err != nil || !ts.equal(got) {
				t.Errorf("compress %v, in place %v: %v, values equal %v", compress, inPlace, err, ts.equal(got))
			}
		}
	}
}

func TestReadErrors(t *testing.T) {
	ts := newTestStream()
	data := ts.write(t, false)
	headerEnd := FileHeaderLen + ChunkHeaderLen + 29
	cases := []struct {
		name    string
		data    []byte
		corrupt bool
		says    string
	}{
		{"empty", nil, true, "not a trajring checkpoint (0 bytes)"},
		{"cut in the file header", data[:12], true, "file header: truncated"},
		{"foreign", append([]byte("NOTACKPT"), data[8:]...), true, `magic "NOTACKPT"`},
		{"cut in a chunk header", data[:FileHeaderLen+10], true, `section "header": chunk 0's header: truncated`},
		{"cut in the arena", data[:headerEnd+ChunkHeaderLen+50], true, `section "arena 0": chunk 1's payload: truncated`},
		{"flipped arena byte", flip(data, headerEnd+ChunkHeaderLen+5), true, `section "arena 0": chunk 1: checksum mismatch`},
		{"no end", data[:len(data)-ChunkHeaderLen-16], true, `section "end": chunk 3's header: truncated`},
	}
	for _, tc := range cases {
		for _, inPlace := range []bool{false, true} {
			_, err := ts.read(tc.data, inPlace)
			if err == nil || errors.Is(err, ErrCorrupt) != tc.corrupt || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s, in place %v: %v; want ErrCorrupt %v saying %q", tc.name, inPlace, err, tc.corrupt, tc.says)
			}
		}
	}
	// A reader's own error is not ErrCorrupt.
	boom := errors.New("disk on fire")
	cr, err := NewReader(io.MultiReader(bytes.NewReader(data[:30]), iotestErr{boom}))
	if err != nil {
		t.Fatalf("header: %v", err)
	}
	s := cr.Section(SecHeader, 0)
	s.U8()
	if err := s.Err(); !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
		t.Errorf("failing reader: %v, want its error and not ErrCorrupt", err)
	}
}

type iotestErr struct{ err error }

func (r iotestErr) Read([]byte) (int, error) { return 0, r.err }

func flip(data []byte, i int) []byte {
	out := slices.Clone(data)
	out[i] ^= 0x5a
	return out
}

// TestPipeErrors checks that the first error of either stage ends a
// stream: get's (after the chunks before it are written) and the
// destination's, and put's on the way back.
func TestPipeErrors(t *testing.T) {
	ts := newTestStream()
	boom := errors.New("boom")
	var buf bytes.Buffer
	cw, err := NewWriter(&buf, false)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	err = cw.StreamSections(SecArena, [][]Span{ts.spans, ts.spans}, func(dst []byte, i int, off int64) error {
		calls++
		if i == 1 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || cw.seq != 1 || calls != 3 {
		t.Errorf("get fails on section 1: %v after %d chunks and %d calls, want boom after 1 chunk and 3 calls", err, cw.seq, calls)
	}

	cw, err = NewWriter(failAfter{n: FileHeaderLen, err: boom, w: &buf}.writer(), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := cw.StreamSections(SecArena, [][]Span{ts.spans}, func([]byte, int, int64) error { return nil }); !errors.Is(err, boom) {
		t.Errorf("write fails: %v, want boom", err)
	}

	data := ts.write(t, false)
	cr, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := cr.Section(SecHeader, 0).Done(); err == nil || !strings.Contains(err.Error(), "left over") {
		t.Fatalf("header section read as empty: %v", err)
	}
	cr, _ = NewReader(bytes.NewReader(data))
	s := cr.Section(SecHeader, 0)
	s.U8()
	s.U32()
	s.I64()
	s.F64()
	s.Bool()
	s.Bytes(16)
	if err := s.Done(); err != nil {
		t.Fatal(err)
	}
	puts := 0
	err = cr.ReadSpans(SecArena, 0, ts.spans, func(int64, []byte) error { puts++; return boom })
	if !errors.Is(err, boom) || puts != 1 {
		t.Errorf("put fails: %v after %d puts, want boom after 1", err, puts)
	}
}

// failAfter is a writer that fails once n bytes have been written.
type failAfter struct {
	n   int
	err error
	w   io.Writer
}

func (f failAfter) writer() io.Writer { return &f }

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, f.err
	}
	f.n -= len(p)
	return f.w.Write(p)
}

func TestSpanWalk(t *testing.T) {
	spans := []Span{{Off: 5, N: 3}, {Off: 20, N: 0}, {Off: 40, N: 4}}
	w := NewSpanWalk(spans)
	type piece struct{ off, lo, hi int64 }
	var got [][]piece
	for _, n := range []int64{2, 4, 1} {
		var ps []piece
		_ = w.Next(n, func(off, lo, hi int64) error { ps = append(ps, piece{off, lo, hi}); return nil })
		got = append(got, ps)
	}
	want := [][]piece{{{5, 0, 2}}, {{7, 0, 1}, {40, 1, 4}}, {{43, 0, 1}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pieces %v, want %v", got, want)
	}
	if n := SpansLen(spans); n != 7 {
		t.Errorf("SpansLen %d, want 7", n)
	}
	if got := ScaleSpans(spans, 8); !slices.Equal(got, []Span{{40, 24}, {160, 0}, {320, 32}}) {
		t.Errorf("ScaleSpans %v", got)
	}
}
