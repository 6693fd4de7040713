// Package bearer holds the forms of a bearer credential that both the auth
// package and the gateway's configuration must agree on, so that neither
// builds on the other and neither keeps a copy: the WebSocket subprotocol
// entry that carries a credential, and the stored hash of an API key.
package bearer

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// SubprotocolPrefix marks the WebSocket subprotocol entry that carries a
// bearer credential for a browser, which cannot set an Authorization header:
//
//	new WebSocket(url, ["codemode.bearer." + token])
//
// It is on the wire: clients write it, so it never changes.
const SubprotocolPrefix = "codemode.bearer."

// HashPrefix names the hash function of a stored API key hash, so a later
// scheme can be added without ambiguity.
const HashPrefix = "sha256:"

// KeyHash is a stored API key's SHA-256 digest.
type KeyHash [sha256.Size]byte

// ParseKeyHash reads a stored hash, HashPrefix and 64 hex digits in either
// case; ok is false for anything else.
func ParseKeyHash(s string) (h KeyHash, ok bool) {
	hexSum, found := strings.CutPrefix(s, HashPrefix)
	if !found {
		return KeyHash{}, false
	}
	raw, err := hex.DecodeString(hexSum)
	if err != nil || len(raw) != sha256.Size {
		return KeyHash{}, false
	}
	return KeyHash(raw), true
}
