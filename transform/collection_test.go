package transform_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/transform"
)

func inferFields(t *testing.T, bodies ...[]byte) []service.Field {
	t.Helper()
	in := transform.NewInferrer("assets")
	for i, b := range bodies {
		if err := in.Page(i+1, b); err != nil {
			t.Fatal(err)
		}
	}
	return in.Fields()
}

func collectionDecoder(t *testing.T, mem memory.Allocator, fields []service.Field, opts ...transform.Option) *transform.Decoder {
	t.Helper()
	s, err := schemas.ForCollection("assets", fields)
	if err != nil {
		t.Fatal(err)
	}
	d, err := transform.NewDecoder(s, append([]transform.Option{transform.WithAllocator(mem)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestInferThenDecode: the fields inferred from varied items are typed as
// the values call for, and decoding the same items with them rejects no
// value and keeps every one (golden record).
func TestInferThenDecode(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	body, err := os.ReadFile(filepath.Join("testdata", "items_varied.json"))
	if err != nil {
		t.Fatal(err)
	}
	fields := inferFields(t, body)
	var got []string
	for _, f := range fields {
		got = append(got, f.ID+":"+f.Type)
	}
	want := []string{"id:string", "name:string", "sizeBytes:int", "rating:float", "isArchived:boolean",
		"createdAt:date", "owner__href:string", "owner__id:string", "tags:json", "stats__views:int",
		"stats__last__at:date", "stats__last__by:json", "externalUrl:string", "owner__extra:int", "kind:string"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("inferred fields:\n got %v\nwant %v", got, want)
	}
	for _, f := range fields {
		if strings.Contains(f.ID, "__") && !slices.Equal(f.Path, strings.Split(f.ID, "__")) {
			t.Errorf("field %s: path %v", f.ID, f.Path)
		}
	}
	d := collectionDecoder(t, mem, fields, transform.WithKeyFields(true, "id"))
	defer d.Release()
	res, err := d.DecodePage(1, body)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Record.Release()
	if len(res.Rejects) != 0 || res.RejectedRows != 0 {
		t.Errorf("rejects: %+v", res.Rejects)
	}
	if res.Info.TotalResults != 4 || res.Info.Rows != 4 || res.Record.NumRows() != 4 {
		t.Errorf("info %+v, rows %d", res.Info, res.Record.NumRows())
	}
	if k := res.Info.Keys; !slices.Equal(k, []string{`"a1"`, `"a2"`, `"a3"`, `"a4"`}) {
		t.Errorf("keys %q", k)
	}
	out := recordJSON(t, res.Record)
	golden := filepath.Join("testdata", "items_varied.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantOut, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(wantOut) {
		t.Errorf("record differs from %s (run with -update to accept):\n%s", golden, out)
	}
}

// TestDecodeListShapes: the same items read the same from the reporting,
// v3 and v4/webhook list shapes, with the count where each puts it.
func TestDecodeListShapes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	items := `[{"id":"x","n":1},{"id":"y","n":2}]`
	bodies := map[string]string{
		"reporting": `{"page":1,"resultsPerPage":2,"totalResults":7,"totalPages":4,"results":` + items + `}`,
		"v3":        `{"meta":{"count":7,"offset":0},"response":{"items":` + items + `}}`,
		"v4":        `{"count":7,"items":` + items + `}`,
		"v3 total":  `{"response":{"items":` + items + `},"meta":{"total":"7"}}`,
	}
	fields := inferFields(t, []byte(bodies["v4"]))
	d := collectionDecoder(t, mem, fields)
	defer d.Release()
	var first string
	for name, b := range bodies {
		res, err := d.DecodePage(1, []byte(b))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := recordJSON(t, res.Record)
		res.Record.Release()
		if res.Info.TotalResults != 7 || res.Info.Rows != 2 {
			t.Errorf("%s: info %+v", name, res.Info)
		}
		if first == "" {
			first = got
		} else if got != first {
			t.Errorf("%s: record %s, want %s", name, got, first)
		}
	}
	for _, bad := range []string{`{"count":1}`, `{"items":[],"results":[]}`, `{"response":{"items":[{}]}`} {
		if _, err := d.DecodePage(1, []byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		} else if err := inferFromBody(bad); err == nil {
			t.Errorf("Inferrer %s: no error", bad)
		}
	}
}

func inferFromBody(b string) error { return transform.NewInferrer("x").Page(1, []byte(b)) }

// TestDecodeMisfitsKeepRows: a value that does not fit its column (or,
// under WithUnknownRejected, is not in the schema) is null in a kept row
// and listed as a reject; a row without its required key is left out,
// and its (empty) key still counted.
func TestDecodeMisfitsKeepRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fields := []service.Field{{ID: "id", Type: "string"}, {ID: "n", Type: "int"}, {ID: "ok", Type: "boolean"},
		{ID: "a__b", Type: "string", Path: []string{"a", "b"}}}
	d := collectionDecoder(t, mem, fields, transform.WithKeyFields(true, "id"), transform.WithUnknownRejected())
	defer d.Release()
	body := `{"items":[{"id":"1","n":"many","ok":"yes","a":{"b":"x"}},{"n":2,"ok":true},{"id":"3","a":[1],"new":{"z":1},"gone":null}]}`
	res, err := d.DecodePage(2, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Record.Release()
	if res.Record.NumRows() != 2 || res.RejectedRows != 1 || res.NulledValues != 4 {
		t.Fatalf("rows %d rejected %d nulled %d; want 2, 1, 4", res.Record.NumRows(), res.RejectedRows, res.NulledValues)
	}
	var got []string
	for _, r := range res.Rejects {
		got = append(got, r.Field+"="+r.RawValue)
		if r.Page != 2 || r.RawRow == "" || r.Reason == "" {
			t.Errorf("reject %+v", r)
		}
	}
	want := []string{`n="many"`, `ok="yes"`, "id=null", "a=[1]", `new={"z":1}`}
	if !slices.Equal(got, want) {
		t.Errorf("rejects %v, want %v", got, want)
	}
	if !slices.Equal(res.Info.Keys, []string{`"1"`, "", `"3"`}) {
		t.Errorf("keys %q", res.Info.Keys)
	}
	if !slices.Equal(res.UnknownFields, []string{"new"}) { // "gone" is null: nothing to keep
		t.Errorf("unknown %v", res.UnknownFields)
	}
	if out := recordJSON(t, res.Record); out != `{"a__b":"x","id":"1","n":null,"ok":null}
{"a__b":null,"id":"3","n":null,"ok":null}
` {
		t.Errorf("record %s", out)
	}
}

// TestDecodeRedactsCredentials: header values and URL credentials never
// reach the batch.
func TestDecodeRedactsCredentials(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	body := []byte(`{"count":1,"items":[{"id":"s1","url":"https://user:pw@hooks.example/in?token=abc&x=1#frag",
		"request":{"headers":[{"name":"Authorization","value":"Bearer zzz"},{"name":"X","value":null}],"url":"https://hooks.example/in?api_key=k"}}]}`)
	fields := inferFields(t, body)
	d := collectionDecoder(t, mem, fields, transform.WithCredentialsRedacted())
	defer d.Release()
	res, err := d.DecodePage(1, body)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Record.Release()
	out := recordJSON(t, res.Record)
	for _, secret := range []string{"pw", "abc", "zzz", "frag", "=k"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q stored: %s", secret, out)
		}
	}
	for _, kept := range []string{"Authorization", "hooks.example", "x=1", "REDACTED"} {
		if !strings.Contains(out, kept) {
			t.Errorf("%q lost: %s", kept, out)
		}
	}
}

// TestJSONColumnValid: what a json column holds is valid JSON, compacted,
// whatever the service's spacing, control characters or bad bytes.
func TestJSONColumnValid(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fields := []service.Field{{ID: "id", Type: "string"}, {ID: "v", Type: "json"}}
	d := collectionDecoder(t, mem, fields)
	defer d.Release()
	body := "{\"items\":[{\"id\":\"1\",\"v\": { \"a\" : [ 1 , 2.5e3 ,\"t\tab\" ] , \"b\":\"\xff\" }},{\"id\":\"2\",\"v\":\"plain\"},{\"id\":\"3\",\"v\":01},{\"id\":\"4\",\"v\":12}]}"
	res, err := d.DecodePage(1, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Record.Release()
	got := map[string]string{}
	for line := range strings.Lines(recordJSON(t, res.Record)) {
		var r struct {
			ID string          `json:"id"`
			V  json.RawMessage `json:"v"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		got[r.ID] = string(r.V)
	}
	want := map[string]string{"1": "{\"a\":[1,2.5e3,\"t\\u0009ab\"],\"b\":\"\uFFFD\"}", "2": `"plain"`, "3": "null", "4": "12"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("json column %v, want %v", got, want)
	}
	if len(res.Rejects) != 1 || res.Rejects[0].Field != "v" || res.RepairedValues != 1 {
		t.Errorf("rejects %+v repaired %d", res.Rejects, res.RepairedValues)
	}
}

// TestKeysAreTheValuesAsHeld: a row's key is its key values as their
// columns hold them, not as sent: 1, "1" and "\u0031" in a text column
// are one key, as are 5, 5.0 and "5" in an int column (as sent they were
// three keys, and an item read twice whose id changed its JSON type was
// stored twice; found by review); "1.0" and "01" are other texts.
func TestKeysAreTheValuesAsHeld(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fields := []service.Field{{ID: "id", Type: service.TypeString}, {ID: "n", Type: service.TypeInt}}
	for _, c := range []struct {
		key  string
		rows string
		want []string
	}{
		{"id", `{"id":1},{"id":"1"},{"id":"\u0031"},{"id":1.0},{"id":"01"}`, []string{`"1"`, `"1"`, `"1"`, `"1.0"`, `"01"`}},
		{"n", `{"n":5},{"n":5.0},{"n":"5"},{"n":" 5 "},{"n":6}`, []string{"5", "5", "5", "5", "6"}},
	} {
		d := collectionDecoder(t, mem, fields, transform.WithKeyFields(true, c.key))
		res, err := d.DecodePage(1, []byte(`{"items":[`+c.rows+`]}`))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Info.Keys, c.want) {
			t.Errorf("keys of %s: %q, want %q", c.key, res.Info.Keys, c.want)
		}
		res.Record.Release()
		d.Release()
	}
}

// TestInferredTypesHoldEveryNumber: the inferrer types a member by what
// the decoder reads without loss: an integer past 64 bits is text (as a
// float it lost its last digits, silently), a number past a float's
// range is text (the float column rejected it), and "+5" beside 1.5 is a
// float (the float column refused its +); decoding then rejects nothing.
func TestInferredTypesHoldEveryNumber(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	body := []byte(`{"items":[{"id":"a","big":18446744073709551615,"huge":1.5,"plus":1.5},` +
		`{"id":"b","big":9007199254740993,"huge":1e309,"plus":"+5"},{"id":"c","big":1,"huge":2,"plus":2}]}`)
	fields := inferFields(t, body)
	types := map[string]string{}
	for _, f := range fields {
		types[f.ID] = f.Type
	}
	if want := map[string]string{"id": "string", "big": "string", "huge": "string", "plus": "float"}; !maps.Equal(types, want) {
		t.Errorf("types %v, want %v", types, want)
	}
	decodesWholly(t, mem, fields, body, `"18446744073709551615"`, `"9007199254740993"`, `"1e309"`, `5`)
}

// decodesWholly decodes body with fields, and fails t if a value is
// rejected or the record lacks one of values (JSON text).
func decodesWholly(t *testing.T, mem memory.Allocator, fields []service.Field, body []byte, values ...string) {
	t.Helper()
	d := collectionDecoder(t, mem, fields)
	defer d.Release()
	res, err := d.DecodePage(1, body)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Record.Release()
	if len(res.Rejects) != 0 {
		t.Errorf("rejects: %+v", res.Rejects)
	}
	out := recordJSON(t, res.Record)
	for _, v := range values {
		if !strings.Contains(out, v) {
			t.Errorf("the record lacks %s:\n%s", v, out)
		}
	}
}

// TestInferAMemberNamedEmpty: an item's member called "" (legal JSON) gets
// a column of its own, empty_member_name, which holds its values (its
// empty id failed the stream's schema: "empty field id"; found by review).
func TestInferAMemberNamedEmpty(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	body := []byte(`{"items":[{"id":"a","":"odd"},{"id":"b","o":{"":1}}]}`)
	decodesWholly(t, mem, inferFields(t, body), body, `"empty_member_name":"odd"`, `"o__":1`)
}

// TestValuesNestedDeep: a value nested past the scanner's 64 levels (a
// page's failure, then its stream's, found by review) is rejected alone
// where it would be stored, its row kept, and skipped where it is not
// (a member the schema lacks), at any depth: 100,000 levels.
func TestValuesNestedDeep(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	nest := func(n int, open, inner, close string) string {
		return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
	}
	body := []byte(`{"items":[{"id":"a","meta":` + nest(70, `{"k":`, `1`, `}`) + `},{"id":"b","meta":{"k":2}}]}`)
	fields := inferFields(t, body)
	d := collectionDecoder(t, mem, fields)
	defer d.Release()
	res, err := d.DecodePage(1, body)
	if err != nil {
		t.Fatal(err)
	}
	// meta flattens to meta__k, a JSON column below the first level.
	if res.Record.NumRows() != 2 || len(res.Rejects) != 1 || res.Rejects[0].Field != "meta__k" || !strings.Contains(res.Rejects[0].Reason, "64 levels") {
		t.Errorf("rows %d, rejects %+v; want 2 rows, meta__k of a rejected for its depth", res.Record.NumRows(), res.Rejects)
	}
	if out := recordJSON(t, res.Record); out != "{\"id\":\"a\",\"meta__k\":null}\n{\"id\":\"b\",\"meta__k\":2}\n" {
		t.Errorf("record:\n%s", out)
	}
	res.Record.Release()

	// A member the schema lacks, nested 100,000 levels, in every shape.
	for _, deep := range []string{nest(100000, `[`, ``, `]`), nest(100000, `{"k":`, `"x"`, `}`), nest(50000, `[{"a":`, `[]`, `}]`)} {
		res, err := d.DecodePage(2, []byte(`{"items":[{"id":"c","zz":`+deep+`},{"id":"d"}]}`))
		if err != nil {
			t.Fatalf("a deep member the schema lacks: %v", err)
		}
		if res.Record.NumRows() != 2 {
			t.Errorf("rows %d, want 2", res.Record.NumRows())
		}
		res.Record.Release()
	}
	// Broken deep down: still a malformed page.
	if _, err := d.DecodePage(3, []byte(`{"items":[{"id":"c","zz":`+nest(100, `[`, ``, `]`)[:150]+`}]}`)); err == nil {
		t.Error("a value cut off deep down: no error")
	}
}

// TestDecodeEmptyUnknownMembersAreNotNamed: a member the schema does not
// know whose value is null or "" holds nothing to keep, so it is neither
// named in UnknownFields nor, under WithUnknownRejected, a Reject: every
// delivery log page of the fake sent "error": "", and each run warned that
// the contract kept a field out and decoded the pages twice to widen for
// it.
func TestDecodeEmptyUnknownMembersAreNotNamed(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	d := collectionDecoder(t, mem, []service.Field{{ID: "id", Type: "string"}}, transform.WithUnknownRejected())
	defer d.Release()
	res, err := d.DecodePage(1, []byte(`{"items":[{"id":"1","error":"","gone":null,"o":{"e":""}},{"id":"2","error":" \"\" ","kept":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Record.Release()
	if !slices.Equal(res.UnknownFields, []string{"error", "kept", "o"}) {
		t.Errorf("unknown %v, want error (a string of quotes), kept and o (an object), not the null and \"\" members", res.UnknownFields)
	}
	var got []string
	for _, r := range res.Rejects {
		got = append(got, r.Field+"="+r.RawValue)
	}
	if want := []string{`o={"e":""}`, `error=" \"\" "`, `kept="x"`}; !slices.Equal(got, want) {
		t.Errorf("rejects %v, want %v", got, want)
	}
}
