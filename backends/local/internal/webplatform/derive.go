package webplatform

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/subtle"
	"encoding/binary"
	"hash"

	"github.com/dop251/goja"
)

// MaxPBKDF2Bytes bounds what one PBKDF2 deriveBits produces: the result is
// allocated off the loop, where no guard asks the run's memory budget
// first, and no real use wants more than a few hundred bytes. HKDF has its
// own bound, 255 hash lengths (16,320 bytes for SHA-512).
const MaxPBKDF2Bytes = 1 << 20

// pbkdf2Stride is how many iterations PBKDF2 runs between two looks at the
// run's context: a few milliseconds of HMACs.
const pbkdf2Stride = 1 << 12

// pbkdf2Key is PBKDF2 (RFC 8018 section 5.2) with HMAC over h, n bytes long.
// It is written out rather than taken from crypto/pbkdf2 so that a run's
// end stops it between iterations: the iteration count is the guest's.
func pbkdf2Key(ctx context.Context, h func() hash.Hash, password, salt []byte, iterations, n int) ([]byte, error) {
	prf := hmac.New(h, password)
	size := prf.Size()
	out := make([]byte, 0, n+size)
	u := make([]byte, 0, size)
	var index [4]byte
	for block := uint32(1); len(out) < n; block++ {
		prf.Reset()
		prf.Write(salt)
		binary.BigEndian.PutUint32(index[:], block)
		prf.Write(index[:])
		u = prf.Sum(u[:0])
		t := append(out[len(out):], u...)
		for i := 1; i < iterations; i++ {
			if i%pbkdf2Stride == 0 && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			prf.Reset()
			prf.Write(u)
			u = prf.Sum(u[:0])
			subtle.XORBytes(t, t, u)
		}
		out = out[:len(out)+size]
	}
	return out[:n], nil
}

// hkdfKey is HKDF (RFC 5869) over the named hash, n bytes long; ok is false
// for an unknown hash or n past 255 hash lengths.
func hkdfKey(hashName string, secret, salt, info []byte, n int) ([]byte, bool) {
	h := hashFor(hashName)
	if h == nil {
		return nil, false
	}
	if n == 0 {
		return []byte{}, true
	}
	out, err := hkdf.Key(h, secret, salt, string(info), n)
	return out, err == nil
}

// pbkdf2 is the native behind PBKDF2's deriveBits:
//
//	pbkdf2(hash, password, salt, iterations, bytes, done(ArrayBuffer))
//
// The glue checked the arguments. The derivation runs off the loop, one of
// the run's at a time in the order asked, as guest work (the run clock
// runs) charged to the run, and stops when the run ends; done runs on the
// loop with the result.
func (p *platform) pbkdf2(c goja.FunctionCall) goja.Value {
	h := hashFor(c.Argument(0).String())
	// The runtime owns the buffers; the work crosses goroutines.
	password := append([]byte{}, p.bytesArg(c.Argument(1))...)
	salt := append([]byte{}, p.bytesArg(c.Argument(2))...)
	iterations, n := c.Argument(3).ToInteger(), c.Argument(4).ToInteger()
	done, ok := goja.AssertFunction(c.Argument(5))
	if h == nil || !ok || iterations < 1 || iterations > 1<<32-1 || n < 0 || n > MaxPBKDF2Bytes {
		panic(p.vm.NewTypeError("pbkdf2: bad arguments"))
	}
	start := func() {
		ctx := p.loop.Context()
		workDone := p.loop.GuestWork()
		go func() {
			offLoop := p.loop.OffLoop()
			out, err := pbkdf2Key(ctx, h, password, salt, int(iterations), int(n))
			offLoop()
			if err != nil {
				// The run ended: nothing is left to answer.
				return
			}
			p.loop.Post(func() {
				workDone()
				if next, ok := p.derivations.Done(); ok {
					next()
				}
				if _, err := done(goja.Undefined(), p.buffer(out)); err != nil {
					p.loop.Stop(err)
				}
			})
		}()
	}
	if now, _ := p.derivations.Add(start); now {
		start()
	}
	return goja.Undefined()
}
