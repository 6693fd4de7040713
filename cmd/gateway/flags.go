package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
)

// newFlagSet is the flag set of one subcommand: its usage is the synopsis
// (what follows "usage: gateway "), a paragraph of what the command does,
// then the flags.
func newFlagSet(synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet("gateway "+synopsis, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: gateway %s\n\n%s\n", synopsis, about)
		if hasFlags(fs) {
			fmt.Fprint(fs.Output(), "\nflags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// parseFlags parses a subcommand's arguments. Asked for help (-h, --help)
// it prints the usage on stdout and the command exits 0; given a bad flag
// it prints what was wrong and the usage on stderr, and the command exits
// 2. done reports whether the command ends here, with code.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(stderr)
		return 0, true
	case err != nil:
		stderr.Write(out.Bytes())
		return 2, true
	}
	return 0, false
}
