package envs

import "math"

// sinCos returns math.Cos(x) and math.Sin(x), bit for bit, computing them
// together when |x| < Pi/4 (every cart-pole angle short of a fall far
// past the 12 degree threshold) and calling package math otherwise.
//
// In that range Go's math.Sin and math.Cos (math/sin.go, pure Go on every
// architecture this builds for) reduce nothing: the octant is 0, the
// reduced argument is x itself, and each evaluates one polynomial in
// x*x. sinCos evaluates the same two polynomials with the same
// coefficients in the same order, sharing x*x and skipping the
// reduction, special-case tests and a second call; TestSinCosBitIdentical
// holds it to math's results. It saves a fifth of a batched cart-pole
// step, whose whole cost is arithmetic.
func sinCos(x float64) (cos, sin float64) {
	ax := math.Abs(x)
	if !(ax*(4/math.Pi) < 1) { // also NaN
		return math.Cos(x), math.Sin(x)
	}
	zz := ax * ax
	cos = 1.0 - 0.5*zz + zz*zz*((((((trigCos[0]*zz)+trigCos[1])*zz+trigCos[2])*zz+trigCos[3])*zz+trigCos[4])*zz+trigCos[5])
	if x == 0 {
		return cos, x // ±0, as math.Sin
	}
	sin = ax + ax*zz*((((((trigSin[0]*zz)+trigSin[1])*zz+trigSin[2])*zz+trigSin[3])*zz+trigSin[4])*zz+trigSin[5])
	if x < 0 {
		sin = -sin
	}
	return cos, sin
}

// trigSin and trigCos are the coefficients of math/sin.go (Cephes'
// sin.c), copied so that sinCos computes what math.Sin and math.Cos do.
var (
	trigSin = [...]float64{
		1.58962301576546568060e-10, // 0x3de5d8fd1fd19ccd
		-2.50507477628578072866e-8, // 0xbe5ae5e5a9291f5d
		2.75573136213857245213e-6,  // 0x3ec71de3567d48a1
		-1.98412698295895385996e-4, // 0xbf2a01a019bfdf03
		8.33333333332211858878e-3,  // 0x3f8111111110f7d0
		-1.66666666666666307295e-1, // 0xbfc5555555555548
	}
	trigCos = [...]float64{
		-1.13585365213876817300e-11, // 0xbda8fa49a0861a9b
		2.08757008419747316778e-9,   // 0x3e21ee9d7b4e3f05
		-2.75573141792967388112e-7,  // 0xbe927e4f7eac4bc6
		2.48015872888517045348e-5,   // 0x3efa01a019c844f5
		-1.38888888888730564116e-3,  // 0xbf56c16c16c14f91
		4.16666666666665929218e-2,   // 0x3fa555555555554b
	}
)
