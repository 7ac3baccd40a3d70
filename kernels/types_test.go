package kernels

import "testing"

// fakeArena is an Arena of a size only.
type fakeArena struct{ n int64 }

func (a *fakeArena) Size() int64 { return a.n }

// TestWritesRing: a column whose Out or NextOut is any column's ring, its
// own or another's, is found (the first such column); outputs apart from
// every ring are fine.
func TestWritesRing(t *testing.T) {
	r0, r1, o0, o1, o2 := &fakeArena{1}, &fakeArena{2}, &fakeArena{3}, &fakeArena{4}, &fakeArena{5}
	base := func() []Column {
		return []Column{{Ring: r0, Out: o0}, {Ring: r0, Out: o1}, {Ring: r1, Out: o2}}
	}
	for _, tc := range []struct {
		name string
		edit func(cols []Column)
		want int
		bad  bool
	}{
		{"apart", func([]Column) {}, 0, false},
		{"next outputs apart", func(c []Column) { c[0].NextOut, c[2].NextOut = o1, o0 }, 0, false},
		{"its own ring", func(c []Column) { c[2].Out = r1 }, 2, true},
		{"another column's ring", func(c []Column) { c[2].Out = r0 }, 2, true},
		{"next output into a ring", func(c []Column) { c[1].NextOut = r1 }, 1, true},
		{"the first of two", func(c []Column) { c[1].Out, c[2].NextOut = r1, r0 }, 1, true},
	} {
		cols := base()
		tc.edit(cols)
		if c, bad := WritesRing(cols); c != tc.want || bad != tc.bad {
			t.Errorf("%s: WritesRing = %d, %v; want %d, %v", tc.name, c, bad, tc.want, tc.bad)
		}
	}
}
