package protocol

// ModuleKind says how an entry of the module map is loaded.
type ModuleKind string

// The kinds a module-map entry may have. An entry given as a plain source
// string is an ES module (KindJS).
const (
	KindJS   ModuleKind = "js"   // an ES module
	KindCJS  ModuleKind = "cjs"  // a CommonJS module (module.exports)
	KindText ModuleKind = "text" // a string, the default export
	KindJSON ModuleKind = "json" // a parsed JSON value, the default export
	KindData ModuleKind = "data" // bytes, an ArrayBuffer as the default export
)

// Module is one entry of the module map.
type Module struct {
	Kind ModuleKind
	// Source is the text of js, cjs and text entries, and the JSON text of
	// json entries.
	Source string
	// Data is the content of data entries.
	Data []byte
}

// ModuleMap maps the names a program imports to module entries.
type ModuleMap map[string]Module
