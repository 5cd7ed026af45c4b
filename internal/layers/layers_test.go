// Package layers holds tests of the module's shape: which package may
// import which, where system calls and unsafe live, and how many wall-clock
// reads are left outside the shells that should own them.
package layers

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/stratalog/strata/"

// pkgFile is one non-test Go file of the module, parsed.
type pkgFile struct {
	dir  string // the package, relative to the module root ("engine")
	path string
	file *ast.File
}

// moduleFiles parses every non-test Go file of the module (all build
// tags: a file for another system counts too), outside testdata and
// node_modules.
func moduleFiles(t *testing.T) []pkgFile {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var out []pkgFile
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		out = append(out, pkgFile{dir: filepath.ToSlash(rel), path: path, file: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("found %d Go files under %s: not the module root?", len(out), root)
	}
	return out
}

func imports(f *ast.File) []string {
	var out []string
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		out = append(out, p)
	}
	return out
}

// System calls and unsafe stay in the packages that own the machine: the
// ring, segment files, index mappings, sockets and the file-system seam.
// golang.org/x/sys/unix and unsafe are imported only there; package
// syscall's functions (Getrlimit, Fdatasync, ...) are called only there
// and in the processes (cmd/strata, loadgen: their rlimits, rusage);
// anyone may name its constants and types (syscall.ENOSPC, syscall.SIGTERM).
func TestSyscallsStayLow(t *testing.T) {
	allowed := map[string]bool{"internal/uring": true, "segment": true, "index": true, "netpoll": true, "internal/vfs": true}
	process := map[string]bool{"cmd/strata": true, "loadgen": true}
	funcs := syscallFuncs(t)
	for _, f := range moduleFiles(t) {
		for _, p := range imports(f.file) {
			if (p == "golang.org/x/sys/unix" || p == "unsafe") && !allowed[f.dir] {
				t.Errorf("%s imports %s: system calls belong in internal/uring, segment, index, netpoll or internal/vfs", f.path, p)
			}
		}
		if allowed[f.dir] || process[f.dir] {
			continue
		}
		name := importName(f.file, "syscall")
		if name == "" {
			continue
		}
		ast.Inspect(f.file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && funcs[sel.Sel.Name] {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == name {
					t.Errorf("%s calls syscall.%s: system calls belong in internal/uring, segment, index, netpoll or internal/vfs", f.path, sel.Sel.Name)
				}
			}
			return true
		})
	}
}

// importName is the name f refers to package path by ("" when f does not
// import it).
func importName(f *ast.File, path string) string {
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == path {
			if im.Name != nil {
				return im.Name.Name
			}
			return path[strings.LastIndex(path, "/")+1:]
		}
	}
	return ""
}

// syscallFuncs is the set of package-level functions package syscall
// declares for any system (not its types: syscall.Errno(n) is a
// conversion).
func syscallFuncs(t *testing.T) map[string]bool {
	t.Helper()
	pkg, err := build.Default.Import("syscall", "", build.FindOnly)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(pkg.Dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.IsExported() {
				out[fd.Name.Name] = true
			}
		}
	}
	for _, fn := range []string{"Getrlimit", "Fdatasync", "Syscall"} {
		if !out[fn] {
			t.Fatalf("package syscall in %s declares no %s: not the standard library?", pkg.Dir, fn)
		}
	}
	return out
}

// The lower layers import only what is below them (uring <- segment <-
// engine <- replica <- server; index, record, partitioner, configkeys and kframe
// are leaves; internal/config, the broker's properties, sits beside them).
// Packages not listed here are not checked yet.
func TestLayersImportDownward(t *testing.T) {
	may := map[string][]string{
		"internal/uring":      {"internal/clocks"},
		"internal/clocks":     {},               // the wall clock (Wall, Or, Since): a leaf every shell may import
		"index":               {"internal/vfs"}, // heap-backed indexes on a test file system
		"record":              {},
		"partitioner":         {},
		"netpoll":             {"internal/clocks", "internal/crcsum", "internal/kframe", "internal/ratelog"},
		"controller":          {"internal/clocks"},
		"internal/vfs":        {},
		"internal/kframe":     {"internal/crcsum"}, // Kafka's frames, for every reader and writer of them (and a frame's block sums as it is read)
		"internal/crcsum":     {},                  // CRC-32C of a buffer's blocks as it fills: a leaf
		"internal/ratelog":    {},
		"internal/configkeys": {},
		"internal/kcode":      {},                                                       // the one error-to-Kafka-code table, for server and the coordinators
		"internal/config":     {"internal/configkeys", "internal/sasl", "internal/vfs"}, // not engine or group: cmd/strata fills their settings
		"internal/sasl":       {"internal/kframe"},                                      // the inter-broker client's frames
		"segment":             {"internal/uring", "internal/vfs", "record"},
		"engine":              {"group/assign", "index", "internal/clocks", "internal/configkeys", "internal/crcsum", "internal/uring", "internal/vfs", "partitioner", "record", "segment", "share"}, // group/assign: the embedded consumer groups; share: the embedded share groups; internal/crcsum: a produce request's or a follower's fetch response's block sums
		"batcher":             {"partitioner", "record"},
		"txn":                 {"internal/vfs", "record"},
		"group":               {"group/assign", "internal/clocks", "internal/kcode"},                                     // the group coordinator: not engine or server, which host it
		"replica":             {"engine", "internal/clocks", "internal/crcsum", "internal/kframe", "record"},             // internal/crcsum: a fetch response's block sums
		"metrics":             {},                                                                                        // Prometheus and Kafka's names only; server calls its hooks
		"broker/coordhost":    {},                                                                                        // the coordinators' host sees the cluster through its own interfaces
		"broker/txnhost":      {"broker/coordhost", "controller", "engine", "group", "internal/kframe", "record", "txn"}, // not server: the broker through its own interfaces
		"broker/cluster":      {"auth", "controller", "engine", "internal/sasl", "replica"},                              // the cluster wiring: not server, which calls it
		"broker/grouphost":    {"broker/coordhost", "broker/txnhost", "engine", "group", "record", "txn"},                // not server: the broker through its own interfaces; txnhost for ScanLog
		"broker/sharehost":    {"broker/coordhost", "broker/txnhost", "engine", "record", "share"},                       // not server: the broker through its own interfaces; txnhost for ScanLog
	}
	for _, f := range moduleFiles(t) {
		allowed, checked := may[f.dir]
		if !checked {
			continue
		}
		for _, p := range imports(f.file) {
			dep, ok := strings.CutPrefix(p, module)
			if !ok || dep == f.dir || strings.HasPrefix(dep, f.dir+"/") {
				continue
			}
			if !contains(allowed, dep) {
				t.Errorf("%s imports %s; %s may import only %v", f.path, dep, f.dir, allowed)
			}
		}
	}
}

// Edges issue 19 cut, checked through every path (what go list -deps
// would show), so that widening a package's list in
// TestLayersImportDownward cannot bring one back unnoticed.
func TestCutEdgesStayCut(t *testing.T) {
	cut := []struct{ from, to, why string }{
		{"engine", "batcher", "KeyPartition lives in partitioner, below both"},
		{"txn", "engine", "txn names its producer-id block file itself (TestBlockFileNameIsTheEngines)"},
		{"internal/config", "engine", "cmd/strata fills the engine's settings"},
		{"internal/config", "group", "cmd/strata fills the group coordinator's settings"},
	}
	deps := map[string]map[string]bool{}
	for _, f := range moduleFiles(t) {
		for _, p := range imports(f.file) {
			if dep, ok := strings.CutPrefix(p, module); ok && dep != f.dir {
				if deps[f.dir] == nil {
					deps[f.dir] = map[string]bool{}
				}
				deps[f.dir][dep] = true
			}
		}
	}
	for _, c := range cut {
		if _, ok := deps[c.from]; !ok {
			t.Errorf("%s: no such package with module imports (renamed?)", c.from)
			continue
		}
		// Breadth-first from c.from, remembering how each package was
		// reached so the failure shows the path.
		via := map[string]string{c.from: ""}
		queue := []string{c.from}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			var next []string
			for d := range deps[p] {
				next = append(next, d)
			}
			sort.Strings(next)
			for _, d := range next {
				if _, seen := via[d]; !seen {
					via[d] = p
					queue = append(queue, d)
				}
			}
		}
		if _, ok := via[c.to]; ok {
			path := []string{c.to}
			for p := via[c.to]; p != ""; p = via[p] {
				path = append([]string{p}, path...)
			}
			t.Errorf("%s reaches %s (%s): %s", c.from, c.to, strings.Join(path, " -> "), c.why)
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Wall-clock reads (time.Now, time.Since, time.Until) outside cmd and
// tests, per package: time is an input for state machines and shells get
// a clock (internal/clocks: a constructor given none takes clocks.Or's
// Wall), so only internal/clocks reads it; these counts may only go down
// (a new read in a package past its budget fails here).
func TestWallClockReadsOnlyShrink(t *testing.T) {
	budget := map[string]int{
		"internal/clocks": 2,  // the wall clock's own package: Wall (time.Now) and Since
		"cmd/strata":      -1, // -1: the shell, unbounded
	}
	got := map[string]int{}
	for _, f := range moduleFiles(t) {
		ast.Inspect(f.file, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Until") {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" {
					got[f.dir]++
				}
			}
			return true
		})
	}
	var dirs []string
	for d := range got {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		b, listed := budget[d]
		switch {
		case b < 0:
		case !listed:
			t.Errorf("%s reads the wall clock %d times: take the time as an input or a clock", d, got[d])
		case got[d] > b:
			t.Errorf("%s reads the wall clock %d times, budget %d: take the time as an input or a clock", d, got[d], b)
		}
	}
}
