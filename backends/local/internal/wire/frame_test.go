package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/backends/local/internal/sandbox"
	"github.com/supolka/codemode-gateway/protocol"
)

func frameBytes(t testing.TB, m *Message) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := writeFrame(&b, m, MaxParentFrame); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func rawFrame(body string) []byte {
	b := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	copy(b[4:], body)
	return b
}

func TestFrameRoundTrip(t *testing.T) {
	msgs := []*Message{
		{Kind: KindInit, Init: &Init{MemoryLimitMB: 128, AddressSpaceMB: 256}},
		{Kind: KindJob, Job: &sandbox.Job{Code: "async () => 1", HasDispatch: true, TimeoutMs: 30000,
			Modules: protocol.ModuleMap{"m": {Kind: protocol.KindData, Data: []byte{0, 1, 255}}}}},
		{Kind: KindDispatch, ID: 7, Provider: "store", Tool: "list", Args: `["a",1]`},
		{Kind: KindDispatchAnswer, ID: 7, Err: "", HasErr: true},
		{Kind: KindOutbound, ID: 8, OutboundRequest: &protocol.OutboundRequest{Method: "POST", URL: "https://x.test",
			Headers: []protocol.Header{{"a", "1"}, {"a", "2"}}, Body: []byte{}}},
		{Kind: KindOutboundAnswer, ID: 8, OutboundResponse: &protocol.OutboundResponse{Status: 200, Body: []byte("ok")}},
		{Kind: KindResult, Result: &protocol.ExecuteResult{ResultJSON: `{"a":"\u0000"}`,
			Logs: []protocol.LogLine{{Level: protocol.LogLevelWarn, Text: "w"}}}, OverLimit: true},
	}
	var stream bytes.Buffer
	var sizes []int
	for _, m := range msgs {
		b := frameBytes(t, m)
		sizes = append(sizes, len(b)-frameHeaderSize)
		stream.Write(b)
	}
	for i, want := range msgs {
		got, err := readFrame(&stream, MaxParentFrame)
		if err != nil {
			t.Fatal(err)
		}
		if got.Size != sizes[i] {
			t.Fatalf("frame %d: Size %d, want its length %d", i, got.Size, sizes[i])
		}
		got.Size = 0
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}
	if _, err := readFrame(&stream, MaxParentFrame); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: %v, want io.EOF", err)
	}
}

// A nil body (the wire's null) and an empty body stay apart.
func TestFrameKeepsNullBodyApartFromEmpty(t *testing.T) {
	for _, body := range [][]byte{nil, {}} {
		m := &Message{Kind: KindOutbound, OutboundRequest: &protocol.OutboundRequest{Body: body}}
		got, err := readFrame(bytes.NewReader(frameBytes(t, m)), MaxWorkerFrame)
		if err != nil {
			t.Fatal(err)
		}
		if (got.OutboundRequest.Body == nil) != (body == nil) {
			t.Fatalf("body %#v came back as %#v", body, got.OutboundRequest.Body)
		}
	}
}

func TestFrameRejects(t *testing.T) {
	for name, in := range map[string][]byte{
		"empty frame":      {0, 0, 0, 0},
		"over the bound":   {0, 0x40, 0, 1},
		"huge length":      {0xff, 0xff, 0xff, 0xff},
		"short header":     {0, 0},
		"short body":       rawFrame(`{"kind":"job"}`)[:10],
		"not json":         rawFrame(`not json`),
		"json but no kind": rawFrame(`{"id":1}`),
		"wrong type":       rawFrame(`{"kind":1}`),
		"trailing garbage": rawFrame(`{"kind":"job"} x`),
	} {
		t.Run(name, func(t *testing.T) {
			m, err := readFrame(bytes.NewReader(in), MaxWorkerFrame)
			if err == nil {
				t.Fatalf("accepted %+v", m)
			}
			if errors.Is(err, io.EOF) {
				t.Fatalf("a broken frame read as a clean end: %v", err)
			}
		})
	}
}

func TestWriteFrameRefusesOversize(t *testing.T) {
	var b bytes.Buffer
	err := writeFrame(&b, &Message{Kind: KindResult, Result: &protocol.ExecuteResult{ResultJSON: strings.Repeat("x", 100)}}, 64)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("got %v, want ErrFrameTooLarge", err)
	}
	if b.Len() != 0 {
		t.Fatal("an oversized frame was partly written")
	}
}

// FuzzReadFrame: whatever a worker writes, the decoder returns a message or
// an error and never panics, and a message it accepts encodes stably.
func FuzzReadFrame(f *testing.F) {
	f.Add(rawFrame(`{"kind":"result","result":{"ResultJSON":"1"}}`))
	f.Add(rawFrame(`{"kind":"dispatch","id":3,"provider":"p","tool":"t","args":"[]"}`))
	f.Add(rawFrame(`{"kind":"outbound","outboundRequest":{"Method":"GET","URL":"u","Headers":[["a","b"]],"Body":"AAE="}}`))
	f.Add(rawFrame(`{"kind":"ready","ready":{"pid":1}}`))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, '{'})
	f.Add(append(rawFrame(`{"kind":"result"}`), rawFrame(`{"kind":"x"}`)...))
	f.Fuzz(func(t *testing.T, in []byte) {
		const bound = 1 << 16
		r := bytes.NewReader(in)
		for {
			m, err := readFrame(r, bound)
			if err != nil {
				return
			}
			if m.Kind == "" {
				t.Fatal("accepted a message without a kind")
			}
			var b bytes.Buffer
			if err := writeFrame(&b, m, 1<<30); err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			first := append([]byte(nil), b.Bytes()...)
			again, err := readFrame(&b, 1<<30)
			if err != nil {
				t.Fatalf("re-read: %v", err)
			}
			var b2 bytes.Buffer
			if err := writeFrame(&b2, again, 1<<30); err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			if !bytes.Equal(first, b2.Bytes()) {
				t.Fatalf("round trip is not stable:\n%q\n%q", first, b2.Bytes())
			}
		}
	})
}

// One Writer and one Reader reuse their buffers from frame to
// frame: each frame is exactly json.Marshal's bytes behind its length, and
// every decoded message keeps its contents after later frames are read
// into the same buffer, whether they grow it past what is kept or not.
func TestFrameBufferReuse(t *testing.T) {
	var msgs []*Message
	for i, n := range []int{10, 3000, 2 * frameBufKeep, 7, frameBufKeep - 200, 1, 5 * frameBufKeep, 20} {
		msgs = append(msgs, &Message{Kind: KindDispatch, ID: uint64(i + 1), Provider: "p", Tool: "t",
			Args: `"` + strings.Repeat(string(rune('a'+i)), n) + `<&>"`})
	}
	var stream bytes.Buffer
	fw := Writer{w: &stream}
	for _, m := range msgs {
		before := stream.Len()
		if err := fw.Write(m, MaxParentFrame); err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := stream.Bytes()[before:]; !bytes.Equal(got, rawFrame(string(want))) {
			t.Fatalf("frame %d differs from its length and json.Marshal's bytes", m.ID)
		}
		if fw.buf.Cap() > frameBufKeep {
			t.Fatalf("frame %d: writer kept a %d-byte buffer", m.ID, fw.buf.Cap())
		}
	}
	fr := Reader{r: &stream}
	var got []*Message
	for range msgs {
		m, err := fr.Read(MaxParentFrame)
		if err != nil {
			t.Fatal(err)
		}
		if cap(fr.body) > frameBufKeep {
			t.Fatalf("frame %d: reader kept a %d-byte buffer", m.ID, cap(fr.body))
		}
		m.Size = 0
		got = append(got, m)
	}
	if !reflect.DeepEqual(got, msgs) {
		t.Fatal("messages changed after later frames were read")
	}
	if _, err := fr.Read(MaxParentFrame); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: %v, want io.EOF", err)
	}
}

// writeFrame encodes m as one frame; see Writer.write.
func writeFrame(w io.Writer, m *Message, max int) error {
	fw := Writer{w: w}
	return fw.Write(m, max)
}

// readFrame decodes one frame; see Reader.read.
func readFrame(r io.Reader, max int) (*Message, error) {
	fr := Reader{r: r}
	return fr.Read(max)
}
