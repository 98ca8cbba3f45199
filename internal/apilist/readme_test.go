package apilist_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeSnippetsAreTheirExamples keeps every Go snippet of the README
// the code it was taken from, which the tests compile: each snippet's
// lines, in order, are lines of the file the link before it names (a
// directory stands for its main.go). Left out: blank lines, the import
// block, and a snippet's `func main() {`, which an Example function has
// under its own name.
func TestReadmeSnippetsAreTheirExamples(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)#]+)\)`)
	parts := strings.Split(string(readme), "```go\n")
	if len(parts) < 2 {
		t.Fatal("README.md has no Go snippet")
	}
	for i, part := range parts[1:] {
		snippet, _, _ := strings.Cut(part, "```")
		links := link.FindAllStringSubmatch(parts[i], -1) // the text before this snippet
		if len(links) == 0 {
			t.Errorf("snippet %d: no link before it names the code it comes from", i+1)
			continue
		}
		source := filepath.Join(root, links[len(links)-1][1])
		if fi, err := os.Stat(source); err == nil && fi.IsDir() {
			source = filepath.Join(source, "main.go")
		}
		code, err := os.ReadFile(source)
		if err != nil {
			t.Errorf("snippet %d: %v", i+1, err)
			continue
		}
		if missing := notInOrder(snippetLines(snippet), trimmedLines(string(code))); missing != "" {
			t.Errorf("snippet %d: line %q is not in %s (in this order); want the README to show the code as it is", i+1, missing, source)
		}
	}
}

func snippetLines(snippet string) []string {
	var out []string
	inImports := false
	for _, l := range trimmedLines(snippet) {
		switch {
		case l == "import (":
			inImports = true
		case inImports:
			inImports = l != ")"
		case l == "func main() {":
		default:
			out = append(out, l)
		}
	}
	return out
}

func trimmedLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// notInOrder returns the first of want not found in have after the one
// before it, or "".
func notInOrder(want, have []string) string {
	j := 0
	for _, w := range want {
		for j < len(have) && have[j] != w {
			j++
		}
		if j == len(have) {
			return w
		}
		j++
	}
	return ""
}
