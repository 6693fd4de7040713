package jsvalue

import (
	"math"
	"reflect"
	"strconv"
)

// AppendNumber appends f as JavaScript's Number.prototype.toString(10)
// writes it, which is also what JSON.stringify writes for a finite number.
// NaN and the infinities have no JSON form; callers write null for them.
//
// JavaScript and Go agree on the digits (both pick the shortest decimal that
// reads back as the same double), but not on where the decimal point goes:
// JavaScript writes plain notation for exponents from -7 to 20 and switches
// to exponential outside that range with an explicit sign ("1e+21",
// "1e-7"), while Go's 'g' format switches at different points and pads the
// exponent to two digits.
func AppendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // -0 included: JavaScript writes it as 0
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// 'e' with precision -1 gives the shortest round-trip digits as
	// d.ddddde±XX; take the digits and the exponent apart.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	var digits [24]byte
	k := 0
	i := 0
	for ; i < len(e) && e[i] != 'e'; i++ {
		if e[i] != '.' {
			digits[k] = e[i]
			k++
		}
	}
	exp, _ := strconv.Atoi(string(e[i+1:])) // AppendFloat always writes a valid exponent
	// In the terms of ECMA-262 Number::toString: the value is
	// 0.d1d2…dk × 10^n.
	n := exp + 1
	ds := digits[:k]
	switch {
	case k <= n && n <= 21:
		dst = append(dst, ds...)
		for j := 0; j < n-k; j++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, ds[:n]...)
		dst = append(dst, '.')
		dst = append(dst, ds[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for j := 0; j < -n; j++ {
			dst = append(dst, '0')
		}
		dst = append(dst, ds...)
	default:
		dst = append(dst, ds[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, ds[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

// FormatNumber formats f exactly as JavaScript's String(f) does: "0" for
// -0, "NaN", "Infinity" and "-Infinity" for the non-finite values, plain
// notation for exponents from -7 to 20 and exponential notation ("1e+21",
// "1.5e-7") outside them.
func FormatNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return string(AppendNumber(nil, f))
}

// Scalar is the JavaScript value of the Go boolean, string or number rv
// holds, whatever its named type: a bool, a string or a float64 (an
// integer as JavaScript holds it). It reports false for every other kind,
// so that an encoder of Go values writes scalars one way.
func Scalar(rv reflect.Value) (any, bool) {
	switch rv.Kind() {
	case reflect.Bool:
		return rv.Bool(), true
	case reflect.String:
		return rv.String(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return nil, false
}
