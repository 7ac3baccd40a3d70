package kernels

import "testing"

func TestLanes(t *testing.T) {
	cases := []struct{ words, want int64 }{
		{1, 1}, {2, 2}, {3, 2}, {4, 4}, {31, 16}, {32, 32}, {100, 32}, {128, 32},
		{129, 64}, {192, 64}, {256, 64}, {257, 128}, {1024, 256}, {4096, 256},
	}
	for _, c := range cases {
		if got := Lanes(c.words); got != c.want {
			t.Errorf("Lanes(%d) = %d, want %d", c.words, got, c.want)
		}
	}
}
