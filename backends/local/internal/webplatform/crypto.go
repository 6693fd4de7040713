package webplatform

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
)

// hashFor maps the Web Crypto hash names (already normalized by the glue)
// to Go's implementations.
func hashFor(name string) func() hash.Hash {
	switch name {
	case "SHA-1":
		return sha1.New
	case "SHA-256":
		return sha256.New
	case "SHA-384":
		return sha512.New384
	case "SHA-512":
		return sha512.New
	}
	return nil
}

func digest(name string, data []byte) ([]byte, bool) {
	h := hashFor(name)
	if h == nil {
		return nil, false
	}
	d := h()
	d.Write(data)
	return d.Sum(nil), true
}

func hmacSign(name string, key, data []byte) ([]byte, bool) {
	h := hashFor(name)
	if h == nil {
		return nil, false
	}
	m := hmac.New(h, key)
	m.Write(data)
	return m.Sum(nil), true
}

func hmacVerify(name string, key, sig, data []byte) bool {
	want, ok := hmacSign(name, key, data)
	return ok && hmac.Equal(want, sig)
}

// aesGCM seals or opens data. ok is false when the parameters are outside
// what Go's GCM supports (the glue checked the standard's own rules) or,
// on open, when authentication fails.
func aesGCM(seal bool, key, iv, aad, data []byte, tagBytes int) ([]byte, bool) {
	block, err := aes.NewCipher(key)
	if err != nil || len(iv) == 0 {
		return nil, false
	}
	var g cipher.AEAD
	switch {
	case tagBytes == 16:
		g, err = cipher.NewGCMWithNonceSize(block, len(iv))
	case len(iv) == 12:
		g, err = cipher.NewGCMWithTagSize(block, tagBytes)
	default:
		return nil, false
	}
	if err != nil {
		return nil, false
	}
	if seal {
		return g.Seal(nil, iv, data, aad), true
	}
	out, err := g.Open(nil, iv, data, aad)
	if err != nil {
		return nil, false
	}
	return out, true
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
