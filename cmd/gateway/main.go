// Command gateway is the codemode gateway: an edge gateway that runs untrusted,
// model-written JavaScript for several tenant applications at once.
//
// Subcommands:
//
//	gateway serve --config FILE       serve the gateway of a configuration
//	gateway serve --executor-server   serve ExecutorApi on the local backend
//	gateway check-config --config F   validate a configuration file
//	gateway reload                    re-read a running gateway's configuration
//	gateway hash-key                  hash an API key for the configuration
//	gateway version                   print the version, Go and protocol versions
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/supolka/codemode-gateway/backends/local"
)

func main() {
	// A process the local executor's pool started as a worker serves jobs
	// and exits inside this call; the gateway itself returns from it at once.
	local.RunWorkerIfRequested()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "version", "-version", "--version":
		fs := newFlagSet("version", "Print the gateway's version, the Go release and platform it was built for,\nand the executor protocol version it speaks.")
		if code, done := parseFlags(fs, args[1:], stdout, stderr); done {
			return code
		}
		fmt.Fprint(stdout, versionLine())
		return 0
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "run":
		return runProgram(args[1:], os.Stdin, stdout, stderr)
	case "reload":
		return reload(args[1:], stdout, stderr)
	case "check-config":
		return checkConfig(args[1:], stdout, stderr)
	case "hash-key":
		return hashKey(args[1:], os.Stdin, stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "gateway: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: gateway <command>

commands:
  serve --config FILE
             serve the gateway of a configuration file
  serve --executor-server [flags]
             serve the executor contract's ExecutorApi on a WebSocket,
             running programs on the embedded local backend
  run [flags] FILE
             run one program on the embedded local backend and print its
             result (FILE "-" reads standard input; run -h for the flags)
  check-config --config FILE
             validate a configuration file and report every problem
  reload [--config FILE | --admin ADDRESS] [--token-env NAME] [--ca FILE]
             make a running gateway re-read its configuration (as SIGHUP),
             through the admin listener FILE names (default config.yaml)
  hash-key   read an API key on standard input and print the hash to
             configure (--new makes a fresh key)
  version    print the gateway's version, the Go release it was built
             with and the executor protocol version
  help       print this text
`)
}
