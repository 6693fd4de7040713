package gateway

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strings"
)

// The executionId a client sees is not the backend's: it carries the
// backend member, the tenant and the backend's id, sealed (AES-256-GCM)
// under a key the replicas share. So a replica that never saw the grant can
// still route it (scale-out without a shared store), a forged or altered id
// is simply not found, and the id's text tells its holder nothing of the
// deployment's names.
//
//	x2.<base64url(nonce[12] | AES-GCM(member, tenant, backend id) | tag[16])>
//
// The pin table stays the fast path and the place that tracks lifetimes.
// Ids of the earlier form, x1 (the same fields in the clear under an HMAC
// tag), are still read for one release, so that handles granted before an
// upgrade keep routing; none is made any more.

const (
	idPrefix   = "x2."
	idPrefixV1 = "x1."
	idMACBytes = 16
	// maxIDBytes bounds an id a client hands in, before any decoding.
	maxIDBytes = 1024
)

type idCodec struct {
	key  []byte      // the configured key: the x1 tags'
	aead cipher.AEAD // seals x2 ids, under a key derived from key
}

// newIDCodec uses key, or a fresh random key when it is empty: ids then
// route only on this process, which is enough for a single replica.
func newIDCodec(key []byte) idCodec {
	if len(key) == 0 {
		key = make([]byte, 32)
		rand.Read(key)
	}
	// The sealing key is derived rather than the configured one itself, so
	// that no key serves two algorithms.
	h := hmac.New(sha256.New, key)
	h.Write([]byte("codemode executionId sealing key " + idPrefix))
	block, err := aes.NewCipher(h.Sum(nil))
	if err != nil {
		panic(err) // a 32-byte key always makes a cipher
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return idCodec{key: key, aead: aead}
}

// wrap makes the client-facing id of a grant.
func (c idCodec) wrap(member, tenant, inner string) string {
	var p []byte
	for _, s := range []string{member, tenant, inner} {
		p = binary.AppendUvarint(p, uint64(len(s)))
		p = append(p, s...)
	}
	nonce := make([]byte, c.aead.NonceSize(), c.aead.NonceSize()+len(p)+c.aead.Overhead())
	rand.Read(nonce)
	return idPrefix + base64.RawURLEncoding.EncodeToString(c.aead.Seal(nonce, nonce, p, []byte(idPrefix)))
}

// unwrap opens an id and returns what it names; ok is false for anything
// this gateway (or a replica with the same key) did not make.
func (c idCodec) unwrap(id string) (member, tenant, inner string, ok bool) {
	if len(id) > maxIDBytes {
		return "", "", "", false
	}
	if strings.HasPrefix(id, idPrefixV1) {
		return c.unwrapV1(id)
	}
	body, found := strings.CutPrefix(id, idPrefix)
	if !found {
		return "", "", "", false
	}
	sealed, err := base64.RawURLEncoding.DecodeString(body)
	n := c.aead.NonceSize()
	if err != nil || len(sealed) < n {
		return "", "", "", false
	}
	p, err := c.aead.Open(nil, sealed[:n], sealed[n:], []byte(idPrefix))
	if err != nil {
		return "", "", "", false
	}
	return splitID(p)
}

// unwrapV1 checks an x1 id's tag and returns what it names.
func (c idCodec) unwrapV1(id string) (member, tenant, inner string, ok bool) {
	body, sig, found := strings.Cut(strings.TrimPrefix(id, idPrefixV1), ".")
	if !found {
		return "", "", "", false
	}
	enc := base64.RawURLEncoding
	p, err1 := enc.DecodeString(body)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, c.macV1(p)) {
		return "", "", "", false
	}
	return splitID(p)
}

func (c idCodec) macV1(payload []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	h.Write([]byte(idPrefixV1))
	h.Write(payload)
	return h.Sum(nil)[:idMACBytes]
}

// splitID reads the three length-prefixed fields of an id's payload.
func splitID(p []byte) (member, tenant, inner string, ok bool) {
	var parts [3]string
	for i := range parts {
		n, w := binary.Uvarint(p)
		if w <= 0 || n > uint64(len(p)-w) {
			return "", "", "", false
		}
		parts[i] = string(p[w : w+int(n)])
		p = p[w+int(n):]
	}
	if len(p) != 0 {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}
