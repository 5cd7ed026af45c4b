package main

// What every command shares: --help, flag errors, exit status, version.
//
// Exit status: 0 on success and for --help; 1 for a mistake on the command
// line (an unknown flag, a bad flag value, a missing or extra argument),
// printed as one line with the command's usage line under it, and 1 when
// the command ran and failed (the cluster refused, a plan that does not add
// up), printed as one line.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
)

// cmdDoc is one command's help: `strata NAME --help` prints usage, about and
// the flags with their text.
type cmdDoc struct {
	name  string // "topics create"
	usage string // "strata topics create NAME [--partitions N] ..."
	about string // what it does, one or more paragraphs (may be empty)
}

// usageError is a mistake on the command line: run prints it with the
// command's usage line and exits 1.
type usageError struct {
	doc cmdDoc
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef is a usageError for doc.
func usagef(doc cmdDoc, format string, args ...any) error {
	return &usageError{doc: doc, err: fmt.Errorf(format, args...)}
}

// asUsage turns a non-nil err into a usageError for doc.
func asUsage(doc cmdDoc, err error) error {
	if err == nil {
		return nil
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return err
	}
	return &usageError{doc: doc, err: err}
}

// printHelp writes doc and fs's flags (each with its text and default).
func printHelp(w io.Writer, fs *flag.FlagSet, doc cmdDoc) {
	fmt.Fprintf(w, "Usage:\n  %s\n", strings.ReplaceAll(strings.TrimSpace(doc.usage), "\n", "\n  "))
	if doc.about != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(doc.about))
	}
	has := false
	fs.VisitAll(func(*flag.Flag) { has = true })
	if has {
		fmt.Fprint(w, "\nFlags:\n")
		out := fs.Output()
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
}

// parseFlags parses args with fs. With interspersed, flags may come before,
// between and after positional arguments; otherwise the first positional
// argument ends the flags. --help (-h) prints doc and the flags to stdout
// and returns flag.ErrHelp; a bad flag returns a usageError (nothing is
// printed here: run prints the one line and the usage line).
func parseFlags(fs *flag.FlagSet, args []string, doc cmdDoc, interspersed bool, stdout io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard) // the flag package would print the error and every flag
	fs.Usage = func() {}
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, fs, doc)
			return nil, flag.ErrHelp
		}
		if err != nil {
			return nil, &usageError{doc: doc, err: err}
		}
		if !interspersed || fs.NArg() == 0 {
			return append(pos, fs.Args()...), nil
		}
		// A "--" ends the flags: everything after it is positional.
		if n := len(args) - fs.NArg(); n > 0 && args[n-1] == "--" {
			return append(pos, fs.Args()...), nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// verbDoc is one verb of a command with verbs (topics, groups).
type verbDoc struct {
	verb    string
	summary string
	doc     cmdDoc
}

// verbsHelp lists a command's verbs with their usage lines.
func verbsHelp(w io.Writer, cmd, about string, verbs []verbDoc) {
	fmt.Fprintf(w, "Usage:\n  strata %s VERB [flags]\n\n%s\n\nVerbs:\n", cmd, strings.TrimSpace(about))
	width := 0
	for _, v := range verbs {
		width = max(width, len(v.verb))
	}
	for _, v := range verbs {
		fmt.Fprintf(w, "  %-*s  %s\n", width, v.verb, v.summary)
	}
	fmt.Fprintf(w, "\nRun \"strata %s VERB --help\" for a verb's flags.\n", cmd)
}

// dispatchVerb finds args[0] among verbs. It answers --help and a missing or
// unknown verb itself (ok false, err flag.ErrHelp or a usageError).
func dispatchVerb(cmd, about string, verbs []verbDoc, args []string, stdout io.Writer) (verbDoc, bool, error) {
	top := cmdDoc{name: cmd, usage: "strata " + cmd + " VERB [flags]   (VERB: " + verbNames(verbs) + ")"}
	if len(args) == 0 {
		return verbDoc{}, false, usagef(top, "missing verb")
	}
	if isHelp(args[0]) {
		verbsHelp(stdout, cmd, about, verbs)
		return verbDoc{}, false, flag.ErrHelp
	}
	for _, v := range verbs {
		if v.verb == args[0] {
			return v, true, nil
		}
	}
	return verbDoc{}, false, usagef(top, "unknown verb %q", args[0])
}

func verbNames(verbs []verbDoc) string {
	names := make([]string, len(verbs))
	for i, v := range verbs {
		names[i] = v.verb
	}
	return strings.Join(names, ", ")
}

// exitCode prints err for command cmd to stderr and returns the exit status.
func exitCode(cmd string, err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		name := ue.doc.name
		if name == "" {
			name = cmd
		}
		fmt.Fprintf(stderr, "strata %s: %v\nUsage: %s\nRun \"strata %s --help\" for its flags.\n",
			name, ue.err, strings.ReplaceAll(strings.TrimSpace(ue.doc.usage), "\n", "\n       "), name)
		return 1
	default:
		fmt.Fprintf(stderr, "strata %s: %v\n", cmd, err)
		return 1
	}
}

// Brokers for the admin commands: --brokers, else $STRATA_BROKERS, else
// the local default.
const (
	brokersEnv     = "STRATA_BROKERS"
	defaultBrokers = "127.0.0.1:9092"
	brokersHelp    = "seed brokers, host:port[,host:port...] (default: $" + brokersEnv + ", else " + defaultBrokers + ")"
)

// resolveBrokers is flagValue, else $STRATA_BROKERS, else 127.0.0.1:9092.
func resolveBrokers(flagValue string, getenv func(string) string) string {
	if strings.TrimSpace(flagValue) != "" {
		return flagValue
	}
	if v := strings.TrimSpace(getenv(brokersEnv)); v != "" {
		return v
	}
	return defaultBrokers
}

// outputFormat is the --format of the read commands: text (for people,
// the default) or json (one document, for programs).
type outputFormat string

const (
	formatText outputFormat = "text"
	formatJSON outputFormat = "json"
	formatHelp              = "output `format`: text or json"
)

func (f *outputFormat) String() string { return string(*f) }

func (f *outputFormat) Set(v string) error {
	switch outputFormat(v) {
	case formatText, formatJSON:
		*f = outputFormat(v)
		return nil
	}
	return errors.New("want text or json")
}

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// interruptContext is canceled by the first SIGINT or SIGTERM; from then
// on the signals are no longer caught, so a second one ends the process
// the default way (while the command winds down).
func interruptContext() (ctx context.Context, stop context.CancelFunc) {
	ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}

// buildVersion describes this binary: from the release build's stamp
// (main.go's version, commit and date; version.go) when it has one, else
// from its build information: the module version ("(devel)" for a build
// from a work tree), the VCS revision and time, "modified" when the tree
// had uncommitted changes, the Go version and platform. A binary built
// without VCS information (go run, go test, -buildvcs=false) says
// "revision unknown".
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	return versionString(stamp{version: version, commit: commit, date: date}, bi, ok)
}

func formatVersion(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "strata (unknown version) " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, when string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	src := "revision unknown"
	if rev != "" {
		var notes []string
		if when != "" {
			notes = append(notes, when)
		}
		if modified {
			notes = append(notes, "modified")
		}
		src = "revision " + rev
		if len(notes) > 0 {
			src += " (" + strings.Join(notes, ", ") + ")"
		}
	}
	goVersion := bi.GoVersion
	if goVersion == "" {
		goVersion = runtime.Version()
	}
	return fmt.Sprintf("strata %s, %s, %s %s/%s", v, src, goVersion, runtime.GOOS, runtime.GOARCH)
}

// runVersion is `strata version`.
func runVersion(args []string, stdout io.Writer) error {
	doc := cmdDoc{name: "version", usage: "strata version [--format text|json]", about: "Prints the module version, the VCS revision the binary was built from, and the Go version."}
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	format := formatText
	fs.Var(&format, "format", formatHelp)
	pos, err := parseFlags(fs, args, doc, false, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(doc, "unexpected arguments %q", pos)
	}
	if format == formatJSON {
		bi, ok := debug.ReadBuildInfo()
		return writeJSON(stdout, versionInfo(stamp{version: version, commit: commit, date: date}, bi, ok))
	}
	_, err = fmt.Fprintln(stdout, buildVersion())
	return err
}

// serveDoc is `strata serve --help`'s text (the flags are serve.go's).
var serveDoc = cmdDoc{name: "serve",
	usage: "strata serve [--listen host:port] [--data-dir DIR] [--node-id N] [--config FILE] [flags]",
	about: "Runs one broker until SIGINT or SIGTERM, then shuts down cleanly. Settings come from\n" +
		"--config (server.properties key names), then the flags, which win over the file."}
