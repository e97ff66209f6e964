package dashboard

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed panels/*.yaml
var builtin embed.FS

// Kinds of chart a panel may ask for.
const (
	KindNumber = "number" // one row; each column a headline number
	KindLine   = "line"   // X along the bottom, one line per Y column (or per Series value)
	KindBar    = "bar"    // one group of bars per X value, one bar per Y column
	KindTable  = "table"  // the rows as they are
)

// Panel is one chart: what question it answers and the SQL that answers
// it. Err is set when its file could not be read; the panel then shows
// the error in place.
type Panel struct {
	Name     string   `yaml:"name" json:"name"`
	Title    string   `yaml:"title" json:"title"`
	Question string   `yaml:"question" json:"question"`
	Kind     string   `yaml:"kind" json:"kind"`
	X        string   `yaml:"x" json:"x,omitempty"`
	Y        []string `yaml:"y" json:"y,omitempty"`
	Series   string   `yaml:"series" json:"series,omitempty"`
	// Requires names tables the SQL reads that a warehouse may not have
	// yet (a stream's before its first sync): without them the panel
	// says so instead of failing.
	Requires []string `yaml:"requires" json:"requires,omitempty"`
	SQL      string   `yaml:"sql" json:"-"`
	// Source is the file the panel came from ("builtin:..." for the
	// shipped ones).
	Source string `yaml:"-" json:"source"`
	Err    string `yaml:"-" json:"error,omitempty"`
}

var panelName = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// check says what is wrong with a panel definition, naming the field.
func (p *Panel) check() error {
	switch {
	case !panelName.MatchString(p.Name):
		return fmt.Errorf("name %q: want 1 to 64 of a-z, 0-9 and _", p.Name)
	case strings.TrimSpace(p.SQL) == "":
		return errors.New("sql is empty")
	case strings.TrimSpace(p.Title) == "":
		return errors.New("title is empty")
	}
	switch p.Kind {
	case KindNumber, KindTable:
	case KindLine, KindBar:
		if p.X == "" || len(p.Y) == 0 {
			return fmt.Errorf("kind %s needs x and y", p.Kind)
		}
	default:
		return fmt.Errorf("kind %q: want number, line, bar or table", p.Kind)
	}
	switch {
	case p.Series != "" && p.Kind != KindLine:
		return fmt.Errorf("series %q: only a line chart draws a series (a line per value), not kind %s", p.Series, p.Kind)
	case p.Series != "" && len(p.Y) != 1:
		return fmt.Errorf("series %q needs exactly one y (a line per value of the series draws that one column), y has %d: %s",
			p.Series, len(p.Y), strings.Join(p.Y, ", "))
	}
	return nil
}

// parsePanel reads one panel file; unknown keys are errors (a typo in a
// key would otherwise silently drop a setting).
func parsePanel(source string, b []byte) Panel {
	var p Panel
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	err := dec.Decode(&p)
	if err == nil {
		err = p.check()
	}
	p.Source = source
	if err != nil {
		if p.Name == "" || !panelName.MatchString(p.Name) {
			p.Name = strings.TrimSuffix(filepath.Base(source), filepath.Ext(source))
		}
		if p.Title == "" {
			p.Title = p.Name
		}
		p.Err = fmt.Sprintf("panel %s: %v", source, err)
	}
	return p
}

// Panels returns the built-in panels and those of dir (if not empty), in
// file-name order, built-in first. A user panel with a built-in's name
// replaces it; two user files with one name are both kept, each showing
// an error that names the other file. A file that cannot be read or parsed
// is a panel that shows its error. A missing dir is an error; it is read
// anew on every call.
func Panels(dir string) ([]Panel, error) {
	var out []Panel
	ents, _ := fs.ReadDir(builtin, "panels")
	for _, e := range ents {
		b, err := fs.ReadFile(builtin, "panels/"+e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, parsePanel("builtin:"+e.Name(), b))
	}
	if dir == "" {
		return out, nil
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("dashboard panels folder %s: %w", dir, err)
	}
	names := make([]string, 0, len(files))
	for _, f := range files {
		if n := f.Name(); !f.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		path := filepath.Join(dir, n)
		var p Panel
		if b, err := os.ReadFile(path); err != nil {
			p = Panel{Name: strings.TrimSuffix(n, filepath.Ext(n)), Title: n, Source: path, Err: err.Error()}
		} else {
			p = parsePanel(path, b)
		}
		i := slices.IndexFunc(out, func(q Panel) bool { return q.Name == p.Name })
		switch {
		case i >= 0 && strings.HasPrefix(out[i].Source, "builtin:"):
			out[i] = p
		case i >= 0:
			out[i].Err = withErr(out[i].Err, fmt.Sprintf("panel %s: name %q is also the name of %s (names must be unique; rename one)", out[i].Source, p.Name, path))
			p.Err = withErr(p.Err, fmt.Sprintf("panel %s: name %q is also the name of %s (names must be unique; rename one)", path, p.Name, out[i].Source))
			out = append(out, p)
		default:
			out = append(out, p)
		}
	}
	return out, nil
}

// withErr adds msg to a panel's error.
func withErr(err, msg string) string {
	if err == "" {
		return msg
	}
	return err + "; " + msg
}
