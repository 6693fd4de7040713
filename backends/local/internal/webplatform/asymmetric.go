package webplatform

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"math/big"
)

// The asymmetric keys of crypto.subtle, as the glue holds them: an ECDSA
// P-256 private key is its 32-byte scalar, a public key its 65-byte
// uncompressed point; an Ed25519 private key is its 32-byte seed, a public
// key its 32 bytes.

func ecGenerate() (d, pub []byte) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil
	}
	d, _ = k.Bytes()
	pub, _ = k.PublicKey.Bytes()
	return d, pub
}

func ecPrivate(d []byte) (*ecdsa.PrivateKey, bool) {
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d)
	return k, err == nil
}

func ecPublicOf(d []byte) ([]byte, bool) {
	k, ok := ecPrivate(d)
	if !ok {
		return nil, false
	}
	pub, err := k.PublicKey.Bytes()
	return pub, err == nil
}

func ecPublic(pub []byte) (*ecdsa.PublicKey, bool) {
	k, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pub)
	return k, err == nil
}

func ecValidPublic(pub []byte) bool {
	_, ok := ecPublic(pub)
	return ok
}

// ecSign signs the digest of data with the IEEE P1363 encoding Web Crypto
// uses: r and s, 32 bytes each.
func ecSign(d []byte, hashName string, data []byte) ([]byte, bool) {
	k, ok := ecPrivate(d)
	if !ok {
		return nil, false
	}
	sum, ok := digest(hashName, data)
	if !ok {
		return nil, false
	}
	r, s, err := ecdsa.Sign(rand.Reader, k, sum)
	if err != nil {
		return nil, false
	}
	out := make([]byte, 64)
	r.FillBytes(out[:32])
	s.FillBytes(out[32:])
	return out, true
}

func ecVerify(pub []byte, hashName string, sig, data []byte) bool {
	k, ok := ecPublic(pub)
	if !ok || len(sig) != 64 {
		return false
	}
	sum, ok := digest(hashName, data)
	if !ok {
		return false
	}
	r := new(big.Int).SetBytes(sig[:32])
	s := new(big.Int).SetBytes(sig[32:])
	return ecdsa.Verify(k, sum, r, s)
}

func edGenerate() (seed, pub []byte) {
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil
	}
	return sk.Seed(), pk
}

func edPublicOf(seed []byte) ([]byte, bool) {
	if len(seed) != ed25519.SeedSize {
		return nil, false
	}
	return ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey), true
}

func edSign(seed, data []byte) ([]byte, bool) {
	if len(seed) != ed25519.SeedSize {
		return nil, false
	}
	return ed25519.Sign(ed25519.NewKeyFromSeed(seed), data), true
}

func edVerify(pub, sig, data []byte) bool {
	return len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, data, sig)
}

// parsePKCS8 reads a private key: its kind ("ECDSA" or "Ed25519"), private
// and public bytes.
func parsePKCS8(der []byte) (kind string, priv, pub []byte, ok bool) {
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return "", nil, nil, false
	}
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return "", nil, nil, false
		}
		d, err1 := k.Bytes()
		p, err2 := k.PublicKey.Bytes()
		return "ECDSA", d, p, err1 == nil && err2 == nil
	case ed25519.PrivateKey:
		return "Ed25519", k.Seed(), k.Public().(ed25519.PublicKey), true
	}
	return "", nil, nil, false
}

// parseSPKI reads a public key: its kind and bytes.
func parseSPKI(der []byte) (kind string, pub []byte, ok bool) {
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return "", nil, false
	}
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", nil, false
		}
		p, err := k.Bytes()
		return "ECDSA", p, err == nil
	case ed25519.PublicKey:
		return "Ed25519", k, true
	}
	return "", nil, false
}

// marshalPKCS8 writes a private key the glue holds as PKCS #8 DER.
func marshalPKCS8(kind string, priv []byte) ([]byte, bool) {
	return marshalDER(x509.MarshalPKCS8PrivateKey, goKey(kind, priv, true))
}

// marshalSPKI writes a public key the glue holds as SPKI DER.
func marshalSPKI(kind string, pub []byte) ([]byte, bool) {
	return marshalDER(x509.MarshalPKIXPublicKey, goKey(kind, pub, false))
}

// goKey is the Go key behind the bytes the glue holds for a private or a
// public key of a kind, or nil where the bytes are no such key.
func goKey(kind string, b []byte, private bool) any {
	switch {
	case kind == "ECDSA" && private:
		if k, ok := ecPrivate(b); ok {
			return k
		}
	case kind == "ECDSA":
		if k, ok := ecPublic(b); ok {
			return k
		}
	case kind == "Ed25519" && private && len(b) == ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b)
	case kind == "Ed25519" && !private && len(b) == ed25519.PublicKeySize:
		return ed25519.PublicKey(b)
	}
	return nil
}

func marshalDER(marshal func(key any) ([]byte, error), key any) ([]byte, bool) {
	if key == nil {
		return nil, false
	}
	der, err := marshal(key)
	return der, err == nil
}
