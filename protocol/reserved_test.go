package protocol

import (
	"errors"
	"testing"
)

func providers(names ...string) []ProviderDescriptor {
	ps := make([]ProviderDescriptor, len(names))
	for i, n := range names {
		ps[i] = ProviderDescriptor{Name: n, Tools: []string{"any tool name at all", ""}}
	}
	return ps
}

func TestValidateProvidersAccepts(t *testing.T) {
	for _, name := range []string{"store", "_", "$", "a1", "$fetch_2", "Store", "fetch", "Response",
		"async", "of", "get", "set", "from", "as", "target", "meta", "_dispatch", "x__", "UNDEFINED"} {
		if err := ValidateProviders(providers(name)); err != nil {
			t.Errorf("%q refused: %v", name, err)
		}
	}
	if err := ValidateProviders(nil); err != nil {
		t.Errorf("no providers: %v", err)
	}
	if err := ValidateProviders(providers("crm", "store", "billing")); err != nil {
		t.Errorf("three providers: %v", err)
	}
}

func TestValidateProvidersInvalidShape(t *testing.T) {
	for _, name := range []string{"", "1store", "9", "my-store", "my store", "store.v2", "ünï", "a\x00", "a\n", "\u0430"} {
		var e *InvalidProviderNameError
		if err := ValidateProviders(providers(name)); !errors.As(err, &e) || e.Name != name {
			t.Errorf("%q: %v", name, err)
		}
	}
}

func TestValidateProvidersKeywords(t *testing.T) {
	for _, name := range []string{"class", "const", "enum", "await", "yield", "let", "static", "implements",
		"interface", "package", "private", "protected", "public", "null", "true", "false", "eval", "arguments",
		"this", "super", "import", "export", "typeof", "void", "with", "debugger"} {
		var e *KeywordProviderNameError
		if err := ValidateProviders(providers(name)); !errors.As(err, &e) {
			t.Errorf("%q: %v", name, err)
		}
	}
}

func TestValidateProvidersReserved(t *testing.T) {
	// At least one name of every group, and the contract's eight.
	for _, name := range []string{"__dispatch", "__stringifyForDispatch", "__parseForDispatch", "__BINARY_TAG",
		"__encodeBinaryValue", "__decodeBinaryValue", "__encodeBase64", "__decodeBase64",
		"Proxy", "undefined", "NaN", "Infinity", "globalThis", "crypto", "caches", "CompressionStream",
		"setTimeout", "clearInterval", "queueMicrotask", "JSON", "Uint8Array", "ArrayBuffer", "console", "__anything"} {
		var e *ReservedProviderNameError
		if err := ValidateProviders(providers(name)); !errors.As(err, &e) {
			t.Errorf("%q: %v", name, err)
		}
		if !IsReservedName(name) || ReservedNameReason(name) == "" {
			t.Errorf("%q is not reserved", name)
		}
	}
	for _, name := range []string{"fetch", "Response", "store", "_"} {
		if IsReservedName(name) || ReservedNameReason(name) != "" {
			t.Errorf("%q is reserved", name)
		}
	}
}

func TestValidateProvidersDuplicates(t *testing.T) {
	var e *DuplicateProviderNameError
	if err := ValidateProviders(providers("store", "crm", "store")); !errors.As(err, &e) || e.Name != "store" {
		t.Errorf("got %v", err)
	}
	// Names differing in case are distinct identifiers.
	if err := ValidateProviders(providers("store", "Store")); err != nil {
		t.Errorf("got %v", err)
	}
}

func TestValidateProvidersReportsFirstFailure(t *testing.T) {
	err := ValidateProviders(providers("ok", "1bad", "class"))
	var e *InvalidProviderNameError
	if !errors.As(err, &e) || e.Name != "1bad" {
		t.Errorf("got %v", err)
	}
}

func TestReservedGroupsDoNotOverlapKeywords(t *testing.T) {
	for name := range entryScopeReserved {
		if IsECMAScriptReservedWord(name) {
			t.Errorf("%q is both reserved and a keyword", name)
		}
		if !IsProviderIdentifier(name) {
			t.Errorf("%q is not an identifier; it cannot need reserving", name)
		}
	}
}
