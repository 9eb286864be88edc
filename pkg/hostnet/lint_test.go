package hostnet

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// netlinkDump matches the names of netlink's dump calls (AddrList, RouteListFiltered, ...),
// as functions of the package and as methods of a *netlink.Handle.
var netlinkDump = regexp.MustCompile(`^[A-Z]\w*List(Filtered)?$`)

// TestNetlinkDumpsGoThroughHostnet fails, naming file:line, for every netlink dump in the
// product (non-test .go files under pkg/ and cmd/) made outside this package: those would
// act on a partial list whenever the kernel interrupts the dump.
func TestNetlinkDumpsGoThroughHostnet(t *testing.T) {
	root := repoRoot(t)
	for _, dir := range []string{"pkg", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path == filepath.Join(root, "pkg", "hostnet") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			for _, pos := range rawNetlinkDumps(t, path) {
				rel, _ := filepath.Rel(root, pos.Filename)
				t.Errorf("%s:%d: netlink dump outside pkg/hostnet; call hostnet's wrapper, which retries an interrupted dump", rel, pos.Line)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// rawNetlinkDumps returns where the file at path calls a netlink dump directly. Without
// type information a Handle's methods are recognised by name in files importing netlink.
func rawNetlinkDumps(t *testing.T, path string) []token.Position {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	netlinkName := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/vishvananda/netlink" {
			netlinkName = "netlink"
			if imp.Name != nil {
				netlinkName = imp.Name.Name
			}
		}
	}
	if netlinkName == "" {
		return nil
	}
	otherPkgs := map[string]bool{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := filepath.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		otherPkgs[name] = name != netlinkName
	}
	var found []token.Position
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !netlinkDump.MatchString(sel.Sel.Name) {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && otherPkgs[id.Name] {
			return true // another package's function of that name
		}
		found = append(found, fset.Position(call.Pos()))
		return true
	})
	return found
}

// repoRoot is the directory holding go.mod, above the test's working directory.
func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
