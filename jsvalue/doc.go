// Package jsvalue is JavaScript's values in Go and their JSON text, read as
// JSON.parse reads it and written as JSON.stringify writes it.
//
// Object keeps the members of a JavaScript object in order, where a Go map
// has none, and Undefined stands for undefined, which is not null. Parse is
// the module's one strict JSON reader; AppendString and AppendNumber write
// strings and numbers byte for byte as JSON.stringify does, and
// FormatNumber as String(number) does.
//
// A key given twice means what it means to JSON.parse: the member keeps the
// position of its first occurrence and the value of its last. Parse merges
// repeated keys so; Object.Get, Object.Map and Object.Properties read an
// Object that holds them the same way.
package jsvalue
