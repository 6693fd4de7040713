package jsvalue

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strings"
)

// UndefinedValue is the type of Undefined.
type UndefinedValue struct{}

// Undefined is JavaScript's undefined, distinct from nil (null).
var Undefined UndefinedValue

// Member is one key and value of an Object.
type Member struct {
	Key   string
	Value any
}

// Object is a JavaScript object whose members keep the order they were
// given in, as a JavaScript object keeps insertion order. Use it wherever
// the order of the keys matters; a Go map has none.
type Object []Member

// Get returns the value of the last member named key, the value JSON.parse
// gives a key written more than once.
func (o Object) Get(key string) (any, bool) {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].Key == key {
			return o[i].Value, true
		}
	}
	return nil, false
}

// Map returns the members as a map; of a repeated key the last value wins.
func (o Object) Map() map[string]any {
	m := make(map[string]any, len(o))
	for _, f := range o {
		m[f.Key] = f.Value
	}
	return m
}

// Properties returns the members in the order JavaScript enumerates the
// object built by assigning them in order: a repeated key keeps its first
// position and its last value, and array-index keys ("0", "1", …, up to
// "4294967294") come first in numeric order.
func (o Object) Properties() Object {
	seen := make(map[string]int, len(o))
	merged := make(Object, 0, len(o))
	hasIndex := false
	for _, m := range o {
		if i, ok := seen[m.Key]; ok {
			merged[i].Value = m.Value
			continue
		}
		seen[m.Key] = len(merged)
		merged = append(merged, m)
		if _, ok := arrayIndex(m.Key); ok {
			hasIndex = true
		}
	}
	if hasIndex {
		slices.SortStableFunc(merged, func(x, y Member) int { return indexOrder(x.Key, y.Key) })
	}
	return merged
}

// MarshalJSON writes the members in their order (repeated keys as given),
// the values with encoding/json.
func (o Object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, m := range o {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, m.Key)
		b = append(b, ':')
		v, err := json.Marshal(m.Value)
		if err != nil {
			return nil, err
		}
		b = append(b, v...)
	}
	return append(b, '}'), nil
}

// SortKeys orders distinct keys as JavaScript enumerates an object into
// which they were inserted in byte order: array-index keys first in numeric
// order, then the rest sorted.
func SortKeys(keys []string) {
	slices.SortFunc(keys, func(x, y string) int {
		if c := indexOrder(x, y); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
}

// SortedKeys returns m's keys ordered by SortKeys, the order JavaScript
// gives them when a Go map, which has no order, becomes an object.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	SortKeys(keys)
	return keys
}

// indexOrder compares two keys as JavaScript orders array indices: before
// every other key, in numeric order. Two keys that are not indices are
// equal to it.
func indexOrder(x, y string) int {
	a, aok := arrayIndex(x)
	b, bok := arrayIndex(y)
	switch {
	case aok && bok:
		return cmp.Compare(a, b)
	case aok:
		return -1
	case bok:
		return 1
	}
	return 0
}

// arrayIndex reports whether key is a canonical array index ("0" to
// "4294967294", no leading zeros), which JavaScript orders before every
// other property key, and returns its value.
func arrayIndex(key string) (uint64, bool) {
	if len(key) == 0 || len(key) > 10 || (key[0] == '0' && len(key) > 1) {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n <= math.MaxUint32-1
}
