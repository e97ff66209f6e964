package schemas_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
)

var stored = []service.Field{
	{ID: "id", DisplayName: "ID", Type: "int"},
	{ID: "minutes", DisplayName: "Minutes", Type: "int"},
	{ID: "when", DisplayName: "When", Type: "date"},
	{ID: "status", DisplayName: "Status", Type: "picklist", Options: []string{"a", "b"}},
	{ID: "gone", DisplayName: "Gone", Type: "string"},
}

var live = []service.Field{
	{ID: "id", DisplayName: "ID", Type: "int"},
	{ID: "minutes", DisplayName: "Minutes", Type: "float"},
	{ID: "when", DisplayName: "When", Type: "string"},
	{ID: "status", DisplayName: "Status", Type: "picklist", Options: []string{"a", "b", "c"}},
	{ID: "certificateId", DisplayName: "Certificate", Type: "string"},
}

func TestCompare(t *testing.T) {
	d := schemas.Compare("ucp", stored, live)
	want := "~minutes (int -> float), ~when (date -> string), ~status (options [a b] -> [a b c]), +certificateId (string), -gone (string)"
	if d.String() != want {
		t.Errorf("diff = %s\nwant   %s", d, want)
	}
	if !schemas.Compare("ucp", live, live).Empty() {
		t.Error("identical describes differ")
	}
}

func TestResolveContracts(t *testing.T) {
	t.Run("first run takes live", func(t *testing.T) {
		eff, d, err := schemas.Resolve(schemas.Freeze, "o", nil, live)
		if err != nil || !d.Empty() || !reflect.DeepEqual(eff, live) {
			t.Fatalf("%v %v %v", eff, d, err)
		}
	})
	t.Run("evolve", func(t *testing.T) {
		eff, d, err := schemas.Resolve(schemas.Evolve, "o", stored, live)
		if err != nil || d.Empty() {
			t.Fatal(err)
		}
		got := map[string]string{}
		var order []string
		for _, f := range eff {
			got[f.ID] = f.Type
			order = append(order, f.ID)
		}
		wantTypes := map[string]string{"id": "int", "minutes": "float", "when": "string", "status": "picklist", "gone": "string", "certificateId": "string"}
		if !reflect.DeepEqual(got, wantTypes) {
			t.Errorf("types = %v", got)
		}
		if !reflect.DeepEqual(order, []string{"id", "minutes", "when", "status", "gone", "certificateId"}) {
			t.Errorf("order = %v: existing columns keep their place, new ones go last", order)
		}
		if !reflect.DeepEqual(eff[3].Options, []string{"a", "b", "c"}) {
			t.Errorf("options = %v", eff[3].Options)
		}
	})
	t.Run("discard", func(t *testing.T) {
		eff, _, err := schemas.Resolve(schemas.Discard, "o", stored, live)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range eff {
			if f.ID == "certificateId" {
				t.Error("discard kept the new field")
			}
		}
		if len(eff) != len(stored) {
			t.Errorf("discard changed the column count: %d", len(eff))
		}
	})
	t.Run("freeze", func(t *testing.T) {
		_, d, err := schemas.Resolve(schemas.Freeze, "ucp", stored, live)
		var de *schemas.DriftError
		if !errors.As(err, &de) || !errors.Is(err, schemas.ErrSchemaDrift) || de.Diff.Object != "ucp" || d.Empty() {
			t.Fatalf("err = %v", err)
		}
		if want := `object "ucp": schema drift under contract "freeze": ~minutes (int -> float)`; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
			t.Errorf("message = %s", err)
		}
	})
}

func TestWiden(t *testing.T) {
	cases := [][3]string{
		{"int", "int", "int"}, {"int", "float", "float"}, {"float", "int", "float"},
		{"int", "percent", "percent"}, {"float", "percent", "float"},
		{"date", "string", "string"}, {"int", "date", "string"}, {"picklist", "string", "string"},
	}
	for _, c := range cases {
		if got := schemas.Widen(c[0], c[1]); got != c[2] {
			t.Errorf("Widen(%s, %s) = %s, want %s", c[0], c[1], got, c[2])
		}
	}
	if _, err := schemas.ParseContract("melt"); err == nil {
		t.Error("unknown contract accepted")
	}
}
