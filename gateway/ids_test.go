package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
)

// An executionId's text holds neither the backend member's nor the
// tenant's name, read as it is or decoded as base64 (any alphabet, padding
// and alignment) or hex, whole or by its dot-separated parts.
func TestExecutionIDsNameNothing(t *testing.T) {
	const member, tenant, inner = "local-backend-name", "tenant-acme", "inner-execution-id"
	c := newIDCodec([]byte(strings.Repeat("k", 32)))
	secrets := []string{member, tenant, inner, "local-backend", "acme"}
	for range 50 {
		id := c.wrap(member, tenant, inner)
		for _, s := range secrets {
			for _, text := range readings(id) {
				if bytes.Contains(bytes.ToLower(text), []byte(s)) {
					t.Fatalf("id %q reveals %q (read as %q)", id, s, text)
				}
			}
		}
	}
}

// readings are the ways to read an id's text: itself, and every part and
// suffix of it decoded as base64 or hex, at each alignment.
func readings(id string) [][]byte {
	out := [][]byte{[]byte(id)}
	texts := append([]string{id}, strings.Split(id, ".")...)
	encs := []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding}
	for _, s := range texts {
		for off := range 4 {
			if off > len(s) {
				break
			}
			part := s[off:]
			for _, enc := range encs {
				// Decode up to the first character the alphabet refuses.
				for n := len(part) - len(part)%4; n > 0; n -= 4 {
					if b, err := enc.DecodeString(part[:n]); err == nil {
						out = append(out, b)
						break
					}
				}
			}
			if b, err := hex.DecodeString(part[:len(part)-len(part)%2]); err == nil {
				out = append(out, b)
			}
		}
	}
	return out
}

// An id opens to what it was made of; an altered one, one made under
// another key and one of another's text do not; two grants of the same
// execution read differently.
func TestExecutionIDsOpenUnderTheirKeyOnly(t *testing.T) {
	c := newIDCodec([]byte(strings.Repeat("k", 32)))
	id := c.wrap("m", "t", "inner")
	if m, tn, in, ok := c.unwrap(id); !ok || m != "m" || tn != "t" || in != "inner" {
		t.Fatalf("unwrap(%q) = %q, %q, %q, %v", id, m, tn, in, ok)
	}
	if again := c.wrap("m", "t", "inner"); again == id {
		t.Fatalf("two grants read alike: %q", id)
	}
	flipped := []byte(id)
	flipped[len(flipped)-5] ^= 1
	other := newIDCodec([]byte(strings.Repeat("o", 32)))
	for name, bad := range map[string]string{
		"altered":     string(flipped),
		"truncated":   id[:len(id)-4],
		"bare prefix": idPrefix,
		"too long":    id + strings.Repeat("A", maxIDBytes),
		"not an id":   "unknown-id",
	} {
		if _, _, _, ok := c.unwrap(bad); ok {
			t.Errorf("%s: %q opened", name, bad)
		}
	}
	if _, _, _, ok := other.unwrap(id); ok {
		t.Error("an id opened under another key")
	}
}

// An x1 id, granted before the upgrade, still routes under the same key.
func TestExecutionIDsOfTheEarlierFormStillOpen(t *testing.T) {
	c := newIDCodec([]byte(strings.Repeat("k", 32)))
	var p []byte
	for _, s := range []string{"m", "t", "inner"} {
		p = binary.AppendUvarint(p, uint64(len(s)))
		p = append(p, s...)
	}
	enc := base64.RawURLEncoding
	v1 := idPrefixV1 + enc.EncodeToString(p) + "." + enc.EncodeToString(c.macV1(p))
	if m, tn, in, ok := c.unwrap(v1); !ok || m != "m" || tn != "t" || in != "inner" {
		t.Fatalf("unwrap(%q) = %q, %q, %q, %v", v1, m, tn, in, ok)
	}
	if _, _, _, ok := newIDCodec([]byte(strings.Repeat("o", 32))).unwrap(v1); ok {
		t.Error("an x1 id opened under another key")
	}
}
