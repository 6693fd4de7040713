// Command gateway is the codemode gateway: an edge gateway that runs untrusted,
// model-written JavaScript for several tenant applications at once.
//
// Subcommands:
//
//	gateway version        print the build version and the protocol version
//
// The serve, run and check-config subcommands arrive with the gateway issue.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/supolka/codemode-gateway/protocol"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
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
		fmt.Fprintf(stdout, "gateway %s (executor protocol %d)\n", version, protocol.ProtocolVersion)
		return 0
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
  version    print the build version and the executor protocol version
  help       print this text
`)
}
