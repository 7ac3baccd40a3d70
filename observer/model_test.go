package observer_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// tfModel is a literal single-row transcription of TF-Agents' Reverb
// sequence observers, kept as a list of cached step labels: append a
// step, count it, write the last L cached entries when the rule holds;
// pad by appending "P" one at a time with the same rule.
type tfModel struct {
	length, stride int
	pad, tile, cut bool
	history        []string
	cached         int
	items          []string
}

func (m *tfModel) write() {
	if m.cached >= m.length && (m.cached-m.length)%m.stride == 0 {
		m.items = append(m.items, strings.Join(m.history[len(m.history)-m.length:], " "))
	}
}

func (m *tfModel) observe(label string, boundary bool) {
	m.history = append(m.history, label)
	m.cached++
	m.write()
	if m.cut && boundary {
		m.reset(m.pad)
	}
}

func (m *tfModel) reset(write bool) {
	if write && m.pad && m.cached > 0 {
		n := m.length - m.cached
		if m.tile {
			n = m.length - 1
		}
		for range max(n, 0) {
			m.history = append(m.history, "P")
			m.cached++
			m.write()
		}
	}
	m.cached = 0
	m.history = m.history[:0]
}

// cells renders an item's steps as count labels, P for pad steps.
func cells(v view) string {
	s := make([]string, len(v.Count))
	for k := range s {
		if v.Mask[k] {
			s[k] = fmt.Sprint(v.Count[k])
		} else {
			s[k] = "P"
		}
	}
	return strings.Join(s, " ")
}

// TestAgainstTFAgentsModel compares both sequence observers with the
// model over every sequence length 1..5, stride 1..3 and padding mode, on
// a stream of episodes of 1 to 6 steps (boundary included), ending with a
// Reset(true) in the middle of an episode.
func TestAgainstTFAgentsModel(t *testing.T) {
	var stream []tensorbuf.StepType
	for _, n := range []int{3, 1, 6, 2, 5, 4} {
		stream = append(stream, F)
		for k := 1; k < n; k++ {
			if k == n-1 {
				stream = append(stream, L)
			} else {
				stream = append(stream, M)
			}
		}
		if n == 1 { // a lone boundary step
			stream[len(stream)-1] = L
		}
	}
	stream = append(stream, F, M) // unfinished episode
	type mode struct{ pad, tile bool }
	for _, cut := range []bool{true, false} {
		for length := 1; length <= 5; length++ {
			for stride := 1; stride <= 3; stride++ {
				for _, md := range []mode{{false, false}, {true, false}, {true, true}} {
					name := fmt.Sprintf("cut=%v/L=%d/stride=%d/pad=%v/tile=%v", cut, length, stride, md.pad, md.tile)
					t.Run(name, func(t *testing.T) {
						m := &tfModel{length: length, stride: stride, pad: md.pad, tile: md.tile, cut: cut}
						buf := newBuffer(t, 1, 64, "q")
						var o interface {
							driver.Observer
							Reset(bool) error
						}
						var err error
						if cut {
							o, err = observer.NewAddTrajectory(buf, observer.AddTrajectoryConfig{
								Tables:           []observer.TableSequence{{Table: "q", SequenceLength: length, Stride: stride}},
								PadEndOfEpisodes: md.pad, TileEndOfEpisodes: md.tile})
						} else {
							o, err = observer.NewTrajectorySequence(buf, observer.SequenceConfig{
								Tables: []string{"q"}, SequenceLength: length, Stride: stride,
								PadEndOfEpisodes: md.pad, TileEndOfEpisodes: md.tile})
						}
						if err != nil {
							t.Fatal(err)
						}
						feed(t, o, stream, 0)
						if err := o.Reset(true); err != nil {
							t.Fatal(err)
						}
						for k, st := range stream {
							m.observe(fmt.Sprint(k), st == L)
						}
						m.reset(true)
						vs := items(t, buf, "q")
						got := make([]string, len(vs))
						for i, v := range vs {
							got[i] = cells(v)
						}
						if !slices.Equal(got, m.items) {
							t.Fatalf("items\n%q\nwant\n%q", got, m.items)
						}
						checkPads(t, vs)
					})
				}
			}
		}
	}
}
