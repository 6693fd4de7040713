package capnweb

import (
	"context"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// remap evaluates ["remap", id, path, captures, instructions], the body of
// a JavaScript promise.map(fn): the instructions run once per element of
// the value at path of our export id (once on a non-array value; null and
// undefined pass through). Caller holds s.mu.
func (ev *evaluator) remap(v []any, depth int) (any, error) {
	if len(v) != 5 {
		return nil, ev.unknown(v)
	}
	id, ok := intID(v[1])
	if !ok {
		return nil, ev.unknown(v)
	}
	path, err := parsePath(v[2])
	if err != nil {
		return nil, err
	}
	rawCaps, ok1 := v[3].([]any)
	instrs, ok2 := v[4].([]any)
	if !ok1 || !ok2 {
		return nil, ev.unknown(v)
	}
	s := ev.s
	base, err := s.reference(ev, id, path, nil, false)
	if err != nil {
		return nil, err
	}
	caps := make([]any, len(rawCaps))
	for i, rc := range rawCaps {
		c, ok := rc.([]any)
		if !ok || len(c) != 2 {
			return nil, ev.unknown(v)
		}
		tag, _ := c[0].(string)
		cid, ok := intID(c[1])
		if !ok {
			return nil, ev.unknown(v)
		}
		switch tag {
		case "import":
			val, err := s.reference(ev, cid, nil, nil, false)
			if err != nil {
				return nil, err
			}
			caps[i] = val
		case "export":
			st, err := s.introduceStub(ev, cid)
			if err != nil {
				return nil, err
			}
			caps[i] = st
		default:
			return nil, ev.unknown(v)
		}
	}
	// Check the instructions' shape now, so that malformed ones abort the
	// session like any other malformed message.
	for _, in := range instrs {
		if err := checkShape(in, depth+1, ev.maxDepth); err != nil {
			return nil, err
		}
	}
	out := newCell()
	ev.holes = true
	go func() {
		ctx := s.ctx
		b, err := fill(ctx, base)
		if err != nil {
			out.settle(nil, err)
			return
		}
		fcaps, err := fill(ctx, caps)
		if err != nil {
			out.settle(nil, err)
			return
		}
		capList := fcaps.([]any)
		switch x := b.(type) {
		case nil, jsvalue.UndefinedValue:
			out.settle(b, nil)
		case []any:
			res := make([]any, len(x))
			for i, el := range x {
				r, err := s.runMapper(ctx, el, capList, instrs)
				if err != nil {
					out.settle(nil, err)
					return
				}
				res[i] = r
			}
			out.settle(res, nil)
		default:
			out.settle(s.runMapper(ctx, b, capList, instrs))
		}
	}()
	return &hole{c: out}, nil
}

// runMapper runs a remap's instructions on one element. References in them
// name a private table: 0 the element, -1… the captures, 1… earlier
// instruction results.
func (s *Session) runMapper(ctx context.Context, elem any, caps []any, instrs []any) (any, error) {
	table := map[int64]any{0: elem}
	for i, c := range caps {
		table[-int64(i+1)] = c
	}
	var last any = jsvalue.Undefined
	for i, in := range instrs {
		s.mu.Lock()
		if s.ended {
			err := s.err
			s.mu.Unlock()
			return nil, err
		}
		ev := s.newEvaluator()
		ev.ref = func(id int64, path []string, args []any, hasArgs bool) (any, error) {
			base, ok := table[id]
			if !ok {
				return nil, &Error{Name: "Error", Message: "remap instruction refers to an unknown entry"}
			}
			c := newCell()
			ev.holes = true
			if !hasArgs {
				c.settle(base, nil) // no callbacks yet: safe under the lock
				return &hole{c: c, path: path}, nil
			}
			go func() {
				filled, err := fill(ctx, args)
				if err != nil {
					c.settle(nil, err)
					return
				}
				c.settle(callAt(ctx, base, path, filled.([]any)))
			}()
			return &hole{c: c}, nil
		}
		val, err := ev.eval(in, 0)
		s.mu.Unlock()
		for _, st := range ev.stubs {
			defer st.Release()
		}
		if err != nil {
			return nil, err
		}
		val, err = fill(ctx, val)
		if err != nil {
			return nil, err
		}
		table[int64(i+1)] = val
		last = val
	}
	return last, nil
}

// checkShape verifies that x is JSON of bounded depth; the detailed check
// happens when the instruction is evaluated.
func checkShape(x any, depth, max int) error {
	if depth >= max {
		return protoErrorf("message nested deeper than %d", max)
	}
	switch v := x.(type) {
	case []any:
		for _, el := range v {
			if err := checkShape(el, depth+1, max); err != nil {
				return err
			}
		}
	case jsvalue.Object:
		for _, f := range v {
			if err := checkShape(f.Value, depth+1, max); err != nil {
				return err
			}
		}
	}
	return nil
}
