// Package apilist lists the exported API of the library's public packages,
// one declaration a line, sorted, in the spirit of Go's own api/*.txt: the
// listing is kept in the repository (api/), and a test fails when the code
// and the listing disagree, so every change of the public API shows up in
// review as a change of api/.
package apilist

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// Packages returns the import-path-relative directories (under root) of
// every public package: directories with non-test Go files, outside
// internal/, examples/, e2e/, bench/, testdata and cmd/ (commands: package
// main has no API to import).
func Packages(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		switch filepath.Base(rel) {
		case "internal", "examples", "e2e", "bench", "testdata", "api", "cmd":
			return filepath.SkipDir
		}
		if strings.HasPrefix(filepath.Base(rel), ".") && rel != "." {
			return filepath.SkipDir
		}
		matches, _ := filepath.Glob(filepath.Join(path, "*.go"))
		for _, m := range matches {
			if !strings.HasSuffix(m, "_test.go") {
				dirs = append(dirs, filepath.ToSlash(rel))
				break
			}
		}
		return nil
	})
	return dirs, err
}

// List returns the exported declarations of the package in dir, one a
// line: "func Name(args) results", "method (T) Name(…)", "type T struct",
// "field T.F type", "const C", "var V".
func List(dir string) ([]string, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if len(files) > 0 && f.Name.Name != files[0].Name.Name {
			return nil, fmt.Errorf("apilist: %s: packages %s and %s; want one", dir, files[0].Name.Name, f.Name.Name)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("apilist: %s: no Go files", dir)
	}
	d, err := doc.NewFromFiles(fset, files, dir)
	if err != nil {
		return nil, err
	}
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	str := func(n ast.Node) string {
		var b strings.Builder
		_ = printer.Fprint(&b, fset, n)
		return strings.Join(strings.Fields(b.String()), " ")
	}
	values := func(kind string, vs []*doc.Value) {
		for _, v := range vs {
			for _, name := range v.Names {
				if ast.IsExported(name) {
					add("%s %s", kind, name)
				}
			}
		}
	}
	funcs := func(fs []*doc.Func) {
		for _, f := range fs {
			if !ast.IsExported(f.Name) {
				continue
			}
			sig := strings.TrimPrefix(str(f.Decl.Type), "func")
			if f.Recv != "" {
				add("method (%s) %s%s", f.Recv, f.Name, sig)
			} else {
				add("func %s%s", f.Name, sig)
			}
		}
	}
	values("const", d.Consts)
	values("var", d.Vars)
	funcs(d.Funcs)
	for _, t := range d.Types {
		values("const", t.Consts)
		values("var", t.Vars)
		funcs(t.Funcs)
		funcs(t.Methods)
		if !ast.IsExported(t.Name) {
			continue
		}
		for _, spec := range t.Decl.Specs {
			ts := spec.(*ast.TypeSpec)
			switch u := ts.Type.(type) {
			case *ast.StructType:
				add("type %s struct", t.Name)
				for _, f := range u.Fields.List {
					if len(f.Names) == 0 { // embedded
						add("embedded %s.%s", t.Name, str(f.Type))
						continue
					}
					for _, n := range f.Names {
						if ast.IsExported(n.Name) {
							add("field %s.%s %s", t.Name, n.Name, str(f.Type))
						}
					}
				}
			case *ast.InterfaceType:
				add("type %s interface", t.Name)
				for _, m := range u.Methods.List {
					for _, n := range m.Names {
						add("method (%s) %s%s", t.Name, n.Name, strings.TrimPrefix(str(m.Type), "func"))
					}
				}
			default:
				add("type %s %s", t.Name, str(ts.Type))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// Names counts the exported names in a listing: every declaration but
// struct fields and interface methods, which belong to their type.
func Names(lines []string) int {
	n := 0
	for _, l := range lines {
		if !strings.HasPrefix(l, "field ") && !strings.HasPrefix(l, "embedded ") {
			n++
		}
	}
	return n
}
