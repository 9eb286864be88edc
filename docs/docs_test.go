// Package docs_test keeps kovn's documentation honest: every relative link resolves, the
// package map in docs/architecture.md names every binary, API kind and top-level package the
// repository has, and the top-level README stays short enough for a newcomer to read.
//
// Run with `go test -count=1 ./docs/` (also part of `make unit`). Standard library only.
package docs_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the module root: `go test` runs in the package directory, docs/.
const repoRoot = ".."

// maxReadme is the most characters (bytes, as `wc -c` counts them) README.md may hold.
const maxReadme = 12000

// markdownFiles returns README.md and every .md file under docs/, relative to repoRoot.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(repoRoot, p)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking docs/: %v", err)
	}
	sort.Strings(files)
	return files
}

// link is one markdown link or image found in a file.
type link struct {
	line   int
	target string
}

var (
	// [text](target) and ![alt](target), with an optional "title" after the target.
	linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// inline code spans, which are not links even when they look like one
	codeSpanRE = regexp.MustCompile("`[^`]*`")
)

// parseMarkdown returns the links of a markdown file (outside fenced code blocks and inline
// code) and the GitHub anchors of its headings.
func parseMarkdown(t *testing.T, path string) (links []link, anchors map[string]bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer f.Close()
	anchors = map[string]bool{}
	seen := map[string]int{}
	inFence := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			title := strings.TrimSpace(strings.TrimLeft(trimmed, "#"))
			slug := githubSlug(title)
			if k := seen[slug]; k > 0 {
				anchors[fmt.Sprintf("%s-%d", slug, k)] = true
			} else {
				anchors[slug] = true
			}
			seen[slug]++
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(line, ""), -1) {
			links = append(links, link{line: n, target: m[1]})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return links, anchors
}

// githubSlug is the anchor GitHub gives a heading: lower case, punctuation dropped, spaces
// turned into hyphens.
func githubSlug(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), unicode.IsMark(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestRelativeLinks checks that every relative link in README.md and docs/**/*.md points to a
// file or directory that exists, relative to the file the link is in. Links to http(s) and
// mailto are not checked; an #anchor (bare, or after a .md target) must name a heading of
// that page.
func TestRelativeLinks(t *testing.T) {
	anchorsOf := map[string]map[string]bool{} // repo-relative .md path -> its anchors
	linksOf := map[string][]link{}
	files := markdownFiles(t)
	for _, file := range files {
		linksOf[file], anchorsOf[file] = parseMarkdown(t, filepath.Join(repoRoot, file))
	}
	checked := 0
	for _, file := range files {
		for _, l := range linksOf[file] {
			target := l.target
			lower := strings.ToLower(target)
			if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") || strings.HasPrefix(lower, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			dest := file // a bare #anchor points into the file itself
			if path != "" {
				if filepath.IsAbs(path) {
					t.Errorf("%s:%d: link %q is absolute; use a path relative to %s", file, l.line, target, file)
					continue
				}
				dest = filepath.Clean(filepath.Join(filepath.Dir(file), path))
				if _, err := os.Stat(filepath.Join(repoRoot, dest)); err != nil {
					t.Errorf("%s:%d: link target %q does not exist (resolved to %s)", file, l.line, target, dest)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			anchors, ok := anchorsOf[dest]
			if !ok {
				if !strings.HasSuffix(dest, ".md") {
					continue // an anchor into a non-markdown file is not checked
				}
				_, anchors = parseMarkdown(t, filepath.Join(repoRoot, dest))
				anchorsOf[dest] = anchors
			}
			if !anchors[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", file, l.line, target, dest, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatalf("no relative links found in %d files: the link parser is broken", len(files))
	}
	t.Logf("%d relative links checked in %d files", checked, len(files))
}

// TestPackageMap checks that docs/architecture.md names what the repository holds. The rules:
//   - every directory under cmd/ as the text "cmd/<name>";
//   - every top-level directory under pkg/ as the text "pkg/<name>";
//   - every API kind in backticks, "`Kind`": the types of each package under api/ whose doc
//     comment carries +kubebuilder:object:root=true and whose name does not end in "List"
//     (api/v1alpha1's kovn.io kinds, the served NetworkAttachmentDefinition, ClusterProperty),
//     and the mcs-api kinds kovn-controller installs and serves (ServiceExport, ServiceImport).
//
// A name matches only whole: "cmd/kovn-cni" is not found in "cmd/kovn-cnix".
func TestPackageMap(t *testing.T) {
	const page = "docs/architecture.md"
	raw, err := os.ReadFile(filepath.Join(repoRoot, page))
	if err != nil {
		t.Fatalf("%v", err)
	}
	text := string(raw)
	contains := func(prefix, name string) bool {
		re := regexp.MustCompile(regexp.QuoteMeta(prefix+name) + `([^A-Za-z0-9_-]|$)`)
		return re.MatchString(text)
	}

	var missing []string
	for _, top := range []string{"cmd", "pkg"} {
		dirs := subdirs(t, filepath.Join(repoRoot, top))
		if len(dirs) == 0 {
			t.Fatalf("no directories under %s/", top)
		}
		for _, d := range dirs {
			if !contains(top+"/", d) {
				missing = append(missing, top+"/"+d)
			}
		}
	}

	kinds := apiKinds(t)
	if len(kinds) < 11 {
		t.Fatalf("found only %d API kinds under api/ (%v): the kind parser is broken", len(kinds), kinds)
	}
	kinds = append(kinds, "ServiceExport", "ServiceImport") // sigs.k8s.io/mcs-api, installed by kovn-controller
	for _, k := range kinds {
		if !strings.Contains(text, "`"+k+"`") {
			missing = append(missing, "kind `"+k+"`")
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s does not name %d item(s) the repository has; add a line for each:\n  %s",
			page, len(missing), strings.Join(missing, "\n  "))
	}
}

// subdirs lists the directories directly under dir.
func subdirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("%v", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// apiKinds parses every Go package under api/ (not generated files, not tests) and returns the
// names of the types marked +kubebuilder:object:root=true that are not lists.
func apiKinds(t *testing.T) []string {
	t.Helper()
	var kinds []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(repoRoot, "api"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, "zz_generated") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				if doc == nil || strings.HasSuffix(ts.Name.Name, "List") {
					continue
				}
				if hasMarker(doc) {
					kinds = append(kinds, ts.Name.Name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("parsing api/: %v", err)
	}
	sort.Strings(kinds)
	return kinds
}

// hasMarker reports whether a doc comment carries the root marker (read from the raw comment
// lines, as controller-gen does).
func hasMarker(doc *ast.CommentGroup) bool {
	for _, c := range doc.List {
		if strings.Contains(c.Text, "+kubebuilder:object:root=true") {
			return true
		}
	}
	return false
}

// TestReadmeSize keeps README.md short: it is the first page a newcomer reads; details go
// to docs/.
func TestReadmeSize(t *testing.T) {
	fi, err := os.Stat(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatalf("%v", err)
	}
	if fi.Size() > maxReadme {
		t.Errorf("README.md is %d characters, more than %d: move the details into a page under docs/ and link it", fi.Size(), maxReadme)
	}
}
