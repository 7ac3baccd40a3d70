package tensorbuf

import (
	"math"

	"github.com/trajring/trajring/internal/explog"
)

// importance computes importance weights (w/wMin)^-beta, at most 1, for
// one sample: 1 without Beta or without a positive weight in the table.
//
// of returns exactly math.Min(1, math.Pow(w/wMin, -beta)), bit for bit,
// with the part of math.Pow that depends on beta alone done once per
// sample: for -beta = -(yi + yf), math.Pow computes Exp(yf*Log(x))
// (moving yf into [-0.5, 0.5]), multiplies in x^yi by squaring, and
// returns the reciprocal. TestImportanceMatchesPow checks it against
// math.Pow. many does a whole sample's weights with Exp and Log four or
// eight at a time (internal/explog), same results.
type importance struct {
	beta, wMin float64
	mode       int     // impOne, impPow (math.Pow itself) or impFrac
	yi         int64   // integer part of beta, after moving yf
	yf         float64 // fractional part of beta, in [-0.5, 0.5]
}

func newImportance(beta, wMin float64) importance {
	m := importance{beta: beta, wMin: wMin}
	switch {
	case beta == 0 || !(wMin > 0):
		m.mode = impOne
	case beta == 0.5 || beta == 1 || beta >= 1<<20:
		m.mode = impPow // math.Pow's own special cases
	default:
		yi, yf := math.Modf(beta)
		if yf > 0.5 {
			yf--
			yi++
		}
		m.mode, m.yi, m.yf = impFrac, int64(yi), yf
	}
	return m
}

// of returns the importance weight of a slot of weight w: in [0, 1].
func (m *importance) of(w float64) float64 {
	if m.mode == impOne || w <= 0 {
		return 1
	}
	x := w / m.wMin
	if m.mode == impPow || !(x <= math.MaxFloat64) || x == 0 {
		return math.Min(1, math.Pow(x, -m.beta)) // x == 0: w under wMin*2^-1074
	}
	a1 := 1.0
	if m.yf != 0 && x != 1 {
		a1 = math.Exp(m.yf * math.Log(x))
	}
	return m.frac(x, a1)
}

// many sets dst[i] = m.of(ws[i]) for every i (dst and ws must not
// overlap). In mode impFrac with beta's integer part 0 (every beta below
// 0.5, the usual annealed range), of is min(1, 1/Exp(yf*Log(w/wMin)))
// wherever w/wMin is a positive normal number (x = 1 included: Exp(0) is
// exactly 1), which explog.Weights computes eight or four at a time,
// identical bit for bit, calling of for the other weights. With a larger
// beta, Exp(yf*Log(x)) of every ratio x is computed first, in one
// explog.ExpScaledLog call, and the rest of math.Pow per weight after it.
// BenchmarkImportanceMany compares it with three plain Go loops.
func (m *importance) many(dst, ws []float64) {
	ws = ws[:len(dst)]
	if m.mode != impFrac || m.yf == 0 {
		for i, w := range ws {
			dst[i] = m.of(w)
		}
		return
	}
	if m.yi == 0 {
		explog.Weights(dst, ws, m.wMin, m.yf, m.of)
		return
	}
	for i, w := range ws {
		dst[i] = w / m.wMin
	}
	explog.ExpScaledLog(dst, dst, m.yf)
	for i, w := range ws {
		switch x := w / m.wMin; {
		case w <= 0:
			dst[i] = 1
		case !(x <= math.MaxFloat64) || x == 0:
			dst[i] = math.Min(1, math.Pow(x, -m.beta))
		default:
			dst[i] = m.frac(x, dst[i])
		}
	}
}

// frac returns of's weight for a ratio x, finite and positive, in mode
// impFrac, from a1 = Exp(yf*Log(x)) (1 where yf is 0): math.Pow(x,
// -beta), for -beta not in {0, 1, -1, 0.5, -0.5}, its special cases,
// from its fractional power on, at most 1. At x = 1 a1 is not read.
func (m *importance) frac(x, a1 float64) float64 {
	if x == 1 {
		return 1
	}
	// The builtin min(1, v) is math.Min(1, v) for every v (NaN, -0),
	// without its call; math.Ldexp(v, 0) is v.
	if m.yi == 0 {
		return min(1, 1/a1)
	}
	ae := 0
	x1, xe := math.Frexp(x)
	for i := m.yi; i != 0; i >>= 1 {
		if xe < -1<<12 || 1<<12 < xe {
			ae += xe
			break
		}
		if i&1 == 1 {
			a1 *= x1
			ae += xe
		}
		x1 *= x1
		xe <<= 1
		if x1 < .5 {
			x1 += x1
			xe--
		}
	}
	return min(1, math.Ldexp(1/a1, -ae))
}

const (
	impOne  = iota // every weight is 1
	impPow         // math.Pow
	impFrac        // the reduced math.Pow of of
)
