package gateway

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strings"
)

// The executionId a client sees is not the backend's: it names the backend
// member and the tenant too, and is authenticated with a key the replicas
// share. So a replica that never saw the grant can still route it (scale-out
// without a shared store), and a forged or altered id is simply not found.
//
//	x1.<base64url(member, tenant, backend id)>.<base64url(HMAC-SHA256[:16])>
//
// The pin table stays the fast path and the place that tracks lifetimes.

const (
	idPrefix   = "x1."
	idMACBytes = 16
	// maxIDBytes bounds an id a client hands in, before any decoding.
	maxIDBytes = 1024
)

type idCodec struct {
	key []byte
}

// newIDCodec uses key, or a fresh random key when it is empty: ids then
// route only on this process, which is enough for a single replica.
func newIDCodec(key []byte) idCodec {
	if len(key) == 0 {
		key = make([]byte, 32)
		rand.Read(key)
	}
	return idCodec{key: key}
}

func (c idCodec) mac(payload []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	h.Write([]byte(idPrefix))
	h.Write(payload)
	return h.Sum(nil)[:idMACBytes]
}

// wrap makes the client-facing id of a grant.
func (c idCodec) wrap(member, tenant, inner string) string {
	var p []byte
	for _, s := range []string{member, tenant, inner} {
		p = binary.AppendUvarint(p, uint64(len(s)))
		p = append(p, s...)
	}
	enc := base64.RawURLEncoding
	return idPrefix + enc.EncodeToString(p) + "." + enc.EncodeToString(c.mac(p))
}

// unwrap checks an id's MAC and returns what it names; ok is false for
// anything this gateway (or a replica with the same key) did not make.
func (c idCodec) unwrap(id string) (member, tenant, inner string, ok bool) {
	if len(id) > maxIDBytes {
		return "", "", "", false
	}
	rest, found := strings.CutPrefix(id, idPrefix)
	if !found {
		return "", "", "", false
	}
	body, sig, found := strings.Cut(rest, ".")
	if !found {
		return "", "", "", false
	}
	enc := base64.RawURLEncoding
	p, err1 := enc.DecodeString(body)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, c.mac(p)) {
		return "", "", "", false
	}
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
