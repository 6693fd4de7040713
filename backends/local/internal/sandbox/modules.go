package sandbox

import (
	"github.com/dop251/goja"
	"github.com/supolka/codemode-gateway/protocol"
)

// resolveStaticImports walks the static import graph from the entry and
// reports, before anything runs, the first name the map does not declare
// or the first module that does not compile.
func resolveStaticImports(imports []string, modules protocol.ModuleMap, declared []string) string {
	seen := map[string]bool{}
	queue := append([]string(nil), imports...)
	for len(queue) > 0 {
		spec := queue[0]
		queue = queue[1:]
		key := protocol.NormalizeModuleName(spec)
		if seen[key] {
			continue
		}
		seen[key] = true
		m, ok := modules[key]
		if !ok {
			return protocol.NewModuleNotFoundError(spec, declared).Error()
		}
		if m.Kind == protocol.KindJS {
			c := compileModule(key, string(m.Kind), m.Source)
			if c.err != "" {
				return c.err
			}
			queue = append(queue, c.imports...)
		}
	}
	return ""
}

// requireModule is the module loader behind imports: it resolves a name
// against the module map and evaluates the module once per run.
func (s *session) requireModule(call goja.FunctionCall) goja.Value {
	spec := call.Argument(0).String()
	key := protocol.NormalizeModuleName(spec)
	if inst, ok := s.instances[key]; ok {
		return inst.Get("exports")
	}
	m, ok := s.modules[key]
	if !ok {
		panic(s.newError(protocol.NewModuleNotFoundError(spec, s.declared).Error()))
	}
	module := s.vm.NewObject()
	exports := s.vm.NewObject()
	_ = module.Set("exports", exports)
	switch m.Kind {
	case protocol.KindJS, protocol.KindCJS:
		c := compileModule(key, string(m.Kind), m.Source)
		if c.err != "" {
			panic(s.newError(c.err))
		}
		s.instances[key] = module
		fnv, err := s.vm.RunProgram(c.program)
		if err != nil {
			delete(s.instances, key)
			panic(err)
		}
		fn, _ := goja.AssertFunction(fnv)
		if _, err := fn(goja.Undefined(), exports, s.require, module); err != nil {
			delete(s.instances, key)
			panic(err)
		}
	case protocol.KindText:
		_ = module.Set("exports", m.Source)
		s.instances[key] = module
	case protocol.KindJSON:
		v, err := s.jsonParse(goja.Undefined(), s.vm.ToValue(m.Source))
		if err != nil {
			panic(err)
		}
		_ = module.Set("exports", v)
		s.instances[key] = module
	case protocol.KindData:
		_ = module.Set("exports", s.vm.NewArrayBuffer(append([]byte(nil), m.Data...)))
		s.instances[key] = module
	default:
		panic(s.newError(protocol.NewUnsupportedModuleKindError(spec, string(m.Kind)).Error()))
	}
	return module.Get("exports")
}
