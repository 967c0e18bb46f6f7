package retry

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportedNamesDocumented keeps the promise that every exported name of
// the library and of retrytest has a doc comment that starts with its name
// (methods and struct fields need one but may start otherwise).
func TestExportedNamesDocumented(t *testing.T) {
	for _, dir := range []string{".", "retrytest"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				checkDecl(t, fset, d)
			}
		}
	}
}

func checkDecl(t *testing.T, fset *token.FileSet, d ast.Decl) {
	t.Helper()
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() || (d.Recv != nil && !exportedRecv(d.Recv)) {
			return
		}
		if d.Recv == nil {
			wantDoc(t, fset, d.Name, d.Doc, true)
		} else {
			wantDoc(t, fset, d.Name, d.Doc, false)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if !s.Name.IsExported() {
					continue
				}
				doc := s.Doc
				if doc == nil {
					doc = d.Doc
				}
				wantDoc(t, fset, s.Name, doc, true)
				if st, ok := s.Type.(*ast.StructType); ok {
					for _, f := range st.Fields.List {
						for _, n := range f.Names {
							if n.IsExported() && f.Doc == nil && f.Comment == nil {
								t.Errorf("%s: field %s.%s has no comment", fset.Position(n.Pos()), s.Name, n)
							}
						}
					}
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
						t.Errorf("%s: %s has no doc comment", fset.Position(n.Pos()), n)
					}
				}
			}
		}
	}
}

func exportedRecv(fl *ast.FieldList) bool {
	typ := fl.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}

func wantDoc(t *testing.T, fset *token.FileSet, name *ast.Ident, doc *ast.CommentGroup, startsWithName bool) {
	t.Helper()
	switch {
	case doc == nil:
		t.Errorf("%s: %s has no doc comment", fset.Position(name.Pos()), name)
	case startsWithName && !strings.HasPrefix(doc.Text(), name.Name+" ") &&
		!strings.HasPrefix(doc.Text(), "A "+name.Name) && !strings.HasPrefix(doc.Text(), "An "+name.Name):
		t.Errorf("%s: the doc comment of %s does not start with its name", fset.Position(name.Pos()), name)
	}
}
