package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/protocol"
)

// runProgram is `gateway run`: one program on the embedded local backend,
// as a gateway would run it, with the result on stdout and the console on
// stderr. For trying a model's program, or a module map, by hand.
func runProgram(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet(`run [flags] FILE     (FILE "-" reads standard input)`, `Runs one program (an async arrow, optionally after import lines) in a worker
process of the local backend. The result's JSON text goes to standard output,
console lines and the run's error to standard error. Exit status: 0 when the
run settled, 1 when its envelope carries an error, 2 for bad usage.`)
	timeout := fs.Int64("timeout-ms", 0, "the run's bound in ms (default: the contract's 30000)")
	memory := fs.Int("memory-mb", 0, "the run's memory limit in MB (default 128)")
	outbound := fs.String("outbound", "native", "where fetch goes: native (the network, private addresses denied) or disabled")
	asJSON := fs.Bool("json", false, "print the whole result envelope as the contract's JSON instead")
	toolsFile := fs.String("tools", "", `a JSON file {"provider": {"tool": result, …}, …}: declares those providers and answers every call of a tool with its result`)
	var modules moduleFlags
	fs.Var(&modules, "module", "a module-map entry NAME=PATH (kind from the extension: .js/.mjs js, .cjs cjs, .json json, .txt text, anything else data); repeatable")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	code, err := readProgram(fs.Arg(0), stdin)
	if err != nil {
		fmt.Fprintln(stderr, "gateway run:", err)
		return 2
	}
	req := &protocol.ExecuteRequest{Code: code, Modules: modules.m}
	if *timeout > 0 {
		req.Timeout = protocol.TimeoutOf(float64(*timeout))
	}
	switch *outbound {
	case "native":
	case "disabled":
		req.Outbound = protocol.NoOutbound()
	default:
		fmt.Fprintf(stderr, "gateway run: --outbound %q: use native or disabled\n", *outbound)
		return 2
	}
	if *toolsFile != "" {
		if req.Providers, req.Dispatch, err = fixedTools(*toolsFile, stderr); err != nil {
			fmt.Fprintln(stderr, "gateway run:", err)
			return 2
		}
	}

	exec, err := local.New(local.Options{MaxWorkers: 1, MemoryLimitMB: *memory})
	if err != nil {
		fmt.Fprintln(stderr, "gateway run:", err)
		return 1
	}
	defer exec.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := exec.Execute(ctx, req)
	if err != nil {
		fmt.Fprintln(stderr, "gateway run:", err)
		return 1
	}
	if *asJSON {
		out, err := json.MarshalIndent(protocol.ResultMessageOf(res), "", "  ")
		if err != nil {
			fmt.Fprintln(stderr, "gateway run:", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n", out)
	} else {
		for _, l := range res.Logs {
			fmt.Fprintf(stderr, "[%s] %s\n", l.Level, l.Text)
		}
		if res.HasError {
			fmt.Fprintln(stderr, "error:", res.Error)
		} else if res.ResultJSON != "" {
			fmt.Fprintln(stdout, res.ResultJSON)
		}
	}
	if res.HasError {
		return 1
	}
	return 0
}

func readProgram(name string, stdin io.Reader) (string, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return "", err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "", fmt.Errorf("%s: the program is empty", name)
	}
	return string(b), nil
}

// moduleFlags collects --module NAME=PATH into a module map.
type moduleFlags struct{ m protocol.ModuleMap }

func (f *moduleFlags) String() string { return "" }

func (f *moduleFlags) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	if !ok || name == "" || path == "" {
		return errors.New("want NAME=PATH")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if f.m == nil {
		f.m = protocol.ModuleMap{}
	}
	if _, dup := f.m[name]; dup {
		return fmt.Errorf("module %q given twice", name)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".js", ".mjs":
		f.m[name] = protocol.Module{Kind: protocol.KindJS, Source: string(b)}
	case ".cjs":
		f.m[name] = protocol.Module{Kind: protocol.KindCJS, Source: string(b)}
	case ".json":
		f.m[name] = protocol.Module{Kind: protocol.KindJSON, Source: string(b)}
	case ".txt":
		f.m[name] = protocol.Module{Kind: protocol.KindText, Source: string(b)}
	default:
		f.m[name] = protocol.Module{Kind: protocol.KindData, Data: b}
	}
	return nil
}

// fixedTools reads a tools file: providers whose tools answer with fixed
// results. Every call is echoed to log, so the program's calls can be read.
func fixedTools(path string, log io.Writer) ([]protocol.ProviderDescriptor, protocol.DispatchFunc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var spec map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, nil, fmt.Errorf("%s: want {\"provider\": {\"tool\": result, …}, …}: %v", path, err)
	}
	answers := map[[2]string]string{}
	var providers []protocol.ProviderDescriptor
	for name, tools := range spec {
		p := protocol.ProviderDescriptor{Name: name}
		for tool, result := range tools {
			p.Tools = append(p.Tools, tool)
			answers[[2]string{name, tool}] = `{"result":` + string(result) + `}`
		}
		sort.Strings(p.Tools)
		providers = append(providers, p)
	}
	sort.Slice(providers, func(i, j int) bool { return providers[i].Name < providers[j].Name })
	if err := protocol.ValidateProviders(providers); err != nil {
		return nil, nil, fmt.Errorf("%s: %v", path, err)
	}
	dispatch := func(ctx context.Context, provider, tool, argsJSON string) (string, error) {
		fmt.Fprintf(log, "[tool] %s.%s(%s)\n", provider, tool, argsJSON)
		if ans, ok := answers[[2]string{provider, tool}]; ok {
			return ans, nil
		}
		return protocol.ErrorEnvelope(protocol.NewToolNotFoundError(tool).Error()), nil
	}
	return providers, dispatch, nil
}
