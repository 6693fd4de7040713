package capnweb

import (
	"bytes"
	"context"
	"testing"
)

var fuzzSeeds = []string{
	`["push",["pipeline",0,["echo"],[1,"two",[[3]],{"a":null}]]]`,
	`["push",["pipeline",0,["echo"],[["export",-1],["promise",-2],["bigint","123"],["date",0],["bytes","AQID","Uint8Array"]]]]`,
	`["push",["pipeline",0,["echo"],[["error","TypeError","x",null,{"code":"E","toJSON":1}],["undefined"],["nan"],["inf"],["-inf"]]]]`,
	`["push",["remap",1,[],[["import",0]],[["pipeline",-1,["echo"],[["pipeline",0,["id"]]]],["pipeline",1]]]]`,
	`["pull",1]`,
	`["release",1,1]`,
	`["resolve",1,[[1,2]]]`,
	`["reject",-1,["error","Error","boom"]]`,
	`["abort",["error","Error","bye"]]`,
	`["stream",["pipeline",1,["write"],["x"]]]`,
	`["pipe"]`,
	`["push",["pipeline",0,["echo"],[["url","https://x/"],["headers",[["a","b"]]],["readable",1]]]]`,
	`["push",["import",0,["echo"],[{"__proto__":{"x":1},"constructor":2}]]]`,
	`[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]`,
	`["bogus"]`,
	`{"a":1}`,
}

// FuzzDecodeValue: any JSON value either fails to decode with an error or
// decodes to a value whose encoding is stable: encode(decode(encode(v)))
// equals encode(v).
func FuzzDecodeValue(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, _ := Pipe()
		s := NewSession(a, echoMain(), Options{})
		defer s.Close()
		msg, err := parseMessage(append(append([]byte(`["x",`), data...), ']'), MaxDepth)
		if err != nil || len(msg) != 2 {
			return
		}
		s.mu.Lock()
		ev := s.newEvaluator()
		v, err := ev.eval(msg[1], 0)
		s.mu.Unlock()
		for _, st := range ev.stubs {
			st.Release()
		}
		if err != nil || ev.holes || len(ev.stubs) > 0 {
			return
		}
		e1 := &encoder{maxDepth: MaxDepth + 10}
		if err := e1.value(v, 0); err != nil {
			t.Fatalf("decoded value does not encode: %v", err)
		}
		m2, err := parseMessage(append(append([]byte(`["x",`), e1.buf...), ']'), MaxDepth+10)
		if err != nil {
			t.Fatalf("encoding is not valid JSON: %s: %v", e1.buf, err)
		}
		s.mu.Lock()
		ev2 := s.newEvaluator()
		ev2.maxDepth += 10
		v2, err := ev2.eval(m2[1], 0)
		s.mu.Unlock()
		if err != nil {
			t.Fatalf("re-decoding %s: %v", e1.buf, err)
		}
		e2 := &encoder{maxDepth: MaxDepth + 10}
		if err := e2.value(v2, 0); err != nil || !bytes.Equal(e1.buf, e2.buf) {
			t.Fatalf("unstable encoding:\n%s\n%s (%v)", e1.buf, e2.buf, err)
		}
	})
}

// FuzzDispatch: a sequence of frames (one per line) never panics or
// hangs the session, whatever it holds.
func FuzzDispatch(f *testing.F) {
	f.Add([]byte(fuzzSeeds[0] + "\n" + fuzzSeeds[4] + "\n" + fuzzSeeds[5]))
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte("[\"push\",[\"pipeline\",0,[\"echo\"],[1]]]\n[\"push\",[\"pipeline\",1,[\"x\"],[]]]\n[\"pull\",2]\n[\"release\",1,1]\n[\"release\",2,1]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := Pipe()
		s := NewSession(a, echoMain(), Options{})
		go func() {
			// Drain what the session writes.
			for {
				if _, err := b.ReadMessage(context.Background()); err != nil {
					return
				}
			}
		}()
		for _, frame := range bytes.Split(data, []byte("\n")) {
			if perr := s.dispatch(frame); perr != nil {
				s.protocolError(perr)
				break
			}
		}
		s.Close()
		<-s.Done()
	})
}
