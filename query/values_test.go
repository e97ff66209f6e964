package query

import (
	"database/sql"
	"encoding/json"
	"testing"
)

// valueCases are values of every DuckDB type a query of the warehouse can
// return (its own columns' types, what SQL computes from them, and the
// nested types), with the text and the JSON ValueText and ValueJSON write.
// asDuckDB marks text that must equal DuckDB's own (CAST AS VARCHAR).
var valueCases = []struct {
	name, expr, text, json string
	asDuckDB               bool
}{
	{"boolean", "true", "true", "true", true},
	{"tinyint", "-1::TINYINT", "-1", "-1", true},
	{"smallint", "-300::SMALLINT", "-300", "-300", true},
	{"integer", "42::INTEGER", "42", "42", true},
	{"bigint", "(-9223372036854775808)::BIGINT", "-9223372036854775808", "-9223372036854775808", true},
	{"hugeint", "170141183460469231731687303715884105727::HUGEINT", "170141183460469231731687303715884105727", "170141183460469231731687303715884105727", true},
	{"utinyint", "255::UTINYINT", "255", "255", true},
	{"usmallint", "65535::USMALLINT", "65535", "65535", true},
	{"uinteger", "4294967295::UINTEGER", "4294967295", "4294967295", true},
	{"ubigint", "18446744073709551615::UBIGINT", "18446744073709551615", "18446744073709551615", true},
	{"uhugeint", "340282366920938463463374607431768211455::UHUGEINT", "340282366920938463463374607431768211455", "340282366920938463463374607431768211455", true},
	{"bignum", "3::VARINT", "3", "3", true},
	{"float", "1.5::FLOAT", "1.5", "1.5", true},
	{"double", "0.1::DOUBLE", "0.1", "0.1", true},
	{"double nan", "'NaN'::DOUBLE", "NaN", `"NaN"`, false},
	{"decimal", "1.25::DECIMAL(18,3)", "1.25", "1.25", false},
	{"varchar", `'a"b' || chr(10) || 'c'`, "a\"b\nc", `"a\"b\nc"`, true},
	{"enum", "'x'::ENUM('x', 'y')", "x", `"x"`, true},
	{"blob", "'x'::BLOB", "x", `"x"`, true},
	{"blob of any bytes", `'\xAA\x5C a\x00'::BLOB`, `\xAA\x5C a\x00`, `"\\xAA\\x5C a\\x00"`, true}, // two BLOBs never print alike
	{"blob with quotes", `'a''b"c'::BLOB`, `a\x27b\x22c`, `"a\\x27b\\x22c"`, true},
	{"blob list", `['\xBB'::BLOB]`, `["\\xBB"]`, `["\\xBB"]`, false},
	{"bit", "'101'::BIT", "101", `"101"`, true},
	{"date", "DATE '2026-01-02'", "2026-01-02", `"2026-01-02"`, true},
	{"time", "TIME '10:30:00'", "10:30:00", `"10:30:00"`, true},
	{"time midnight", "TIME '00:00:00'", "00:00:00", `"00:00:00"`, true},
	{"time micros", "TIME '10:30:00.1234'", "10:30:00.1234", `"10:30:00.1234"`, true},
	{"timetz", "TIMETZ '10:30:00+05:30'", "10:30:00+05:30", `"10:30:00+05:30"`, true},
	{"timestamp", "TIMESTAMP '2026-01-02 03:04:05.5'", "2026-01-02T03:04:05.5Z", `"2026-01-02T03:04:05.5Z"`, false},
	{"timestamptz", "TIMESTAMPTZ '2026-01-02 03:04:05+01'", "2026-01-02T02:04:05Z", `"2026-01-02T02:04:05Z"`, false},
	{"timestamp_s", "TIMESTAMP_S '2026-01-02 03:04:05'", "2026-01-02T03:04:05Z", `"2026-01-02T03:04:05Z"`, false},
	{"timestamp_ms", "TIMESTAMP_MS '2026-01-02 03:04:05.123'", "2026-01-02T03:04:05.123Z", `"2026-01-02T03:04:05.123Z"`, false},
	{"timestamp_ns", "TIMESTAMP_NS '2026-01-02 03:04:05.123456789'", "2026-01-02T03:04:05.123456789Z", `"2026-01-02T03:04:05.123456789Z"`, false},
	{"interval minutes", "TIMESTAMPTZ '2026-01-01 10:30:00+00' - TIMESTAMPTZ '2026-01-01 09:00:00+00'", "01:30:00", `"01:30:00"`, true},
	{"interval days", "INTERVAL '1 day 2 hours'", "1 day 02:00:00", `"1 day 02:00:00"`, true},
	{"interval months", "INTERVAL 3 MONTH", "3 months", `"3 months"`, true},
	{"interval all", "INTERVAL '1 year 2 months 3 days 04:05:06.789'", "1 year 2 months 3 days 04:05:06.789", `"1 year 2 months 3 days 04:05:06.789"`, true},
	{"interval negative", "-INTERVAL 14 MONTH", "-1 year -2 months", `"-1 year -2 months"`, true},
	{"interval negative micros", "INTERVAL '1 day -1 microsecond'", "1 day -00:00:00.000001", `"1 day -00:00:00.000001"`, true},
	{"interval hours", "INTERVAL 100 HOUR", "100:00:00", `"100:00:00"`, true},
	{"interval zero", "INTERVAL 0 SECOND", "00:00:00", `"00:00:00"`, true},
	{"uuid", "'00000000-0000-0000-0000-000000000001'::UUID", "00000000-0000-0000-0000-000000000001", `"00000000-0000-0000-0000-000000000001"`, true},
	{"uuid random", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::UUID", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", `"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`, true},
	{"json", `'{"a": [1, "x<y"]}'::JSON`, `{"a":[1,"x\u003cy"]}`, `{"a":[1,"x\u003cy"]}`, false},
	{"list", "['a', 'b']", `["a","b"]`, `["a","b"]`, false},
	{"list null", "[1, NULL]", `[1,null]`, `[1,null]`, false},
	{"list of uuid", "['00000000-0000-0000-0000-000000000001'::UUID]", `["00000000-0000-0000-0000-000000000001"]`, `["00000000-0000-0000-0000-000000000001"]`, false},
	{"list of lists of interval", "[[INTERVAL 90 MINUTE], []]", `[["01:30:00"],[]]`, `[["01:30:00"],[]]`, false},
	{"list of timestamptz", "[TIMESTAMPTZ '2026-01-02 00:00:00+00']", `["2026-01-02T00:00:00Z"]`, `["2026-01-02T00:00:00Z"]`, false},
	{"array", "[TIME '01:02:03', TIME '04:05:06']::TIME[2]", `["01:02:03","04:05:06"]`, `["01:02:03","04:05:06"]`, false},
	{"struct", "{'b': 1, 'a': INTERVAL 1 DAY, 'd': DATE '2026-01-02'}", `{"b":1,"a":"1 day","d":"2026-01-02"}`, `{"b":1,"a":"1 day","d":"2026-01-02"}`, false},
	{"struct quoted names", `{'a"b': 1.5::DECIMAL(4,2), 'c d': '00000000-0000-0000-0000-000000000001'::UUID}`, `{"a\"b":1.5,"c d":"00000000-0000-0000-0000-000000000001"}`, `{"a\"b":1.5,"c d":"00000000-0000-0000-0000-000000000001"}`, false},
	{"list of structs", "[{'t': TIME '10:30:00'}]", `[{"t":"10:30:00"}]`, `[{"t":"10:30:00"}]`, false},
	{"map", "MAP {'k': '00000000-0000-0000-0000-000000000001'::UUID, 'j': NULL}", `{"k":"00000000-0000-0000-0000-000000000001","j":null}`, `{"k":"00000000-0000-0000-0000-000000000001","j":null}`, false},
	{"map of nested", "MAP {INTERVAL 1 DAY: [TIME '01:00:00']}", `{"1 day":["01:00:00"]}`, `{"1 day":["01:00:00"]}`, false},
	{"union", "union_value(k := INTERVAL 90 MINUTE)::UNION(k INTERVAL, s VARCHAR)", "01:30:00", `"01:30:00"`, false},
	{"union number", "union_value(n := 7)::UNION(n INTEGER, s VARCHAR)", "7", "7", false},
	{"null", "NULL::INTEGER", "NULL", "null", false},
}

// TestValuesOfEveryType pins query.ValueText and query.ValueJSON, the one
// owner of a DuckDB value as text that sepipe query and the dashboard
// share, over every type (valueCases): INTERVAL, UUID and TIME as DuckDB
// writes them, nested values as JSON with what they hold written by its
// own type, never Go's syntax (found by review: {0 0 5400000000}, 16 raw
// bytes, 0001-01-01T10:30:00Z, map[a:1]).
func TestValuesOfEveryType(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := db.Query("SELECT " + tc.expr + " AS v, CAST(" + tc.expr + " AS VARCHAR) AS duck")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			cts, err := rows.ColumnTypes()
			if err != nil {
				t.Fatal(err)
			}
			var v any
			var duck sql.NullString
			if !rows.Next() {
				t.Fatal(rows.Err())
			}
			if err := rows.Scan(&v, &duck); err != nil {
				t.Fatal(err)
			}
			typ := cts[0].DatabaseTypeName()
			if got := ValueText(v, typ); got != tc.text {
				t.Errorf("ValueText(%#v, %s) = %q, want %q", v, typ, got, tc.text)
			}
			if tc.asDuckDB && duck.String != tc.text {
				t.Errorf("DuckDB writes %s as %q, the case wants %q", tc.expr, duck.String, tc.text)
			}
			got := ValueJSON(v, typ)
			if string(got) != tc.json {
				t.Errorf("ValueJSON(%#v, %s) = %s, want %s", v, typ, got, tc.json)
			}
			if !json.Valid(got) {
				t.Errorf("ValueJSON(%#v, %s) = %s: not JSON", v, typ, got)
			}
		})
	}
}

// TestParseDuckType pins the reading of nested type names, the types of
// the values inside LIST, ARRAY, STRUCT, MAP and UNION values; a name it
// cannot read leaves the values to their Go types.
func TestParseDuckType(t *testing.T) {
	typ := parseDuckType(`STRUCT("a""b" UUID[], "c d" MAP(VARCHAR, TIME WITH TIME ZONE[3]), e DECIMAL(18,3), f ENUM('x)', 'y'))[]`)
	st := typ.elem
	if typ.name != "LIST" || st == nil || st.name != "STRUCT" || len(st.fields) != 4 {
		t.Fatalf("%+v", typ)
	}
	if f := st.field(`a"b`); f.name != "LIST" || f.elem.name != "UUID" {
		t.Errorf(`a"b: %+v`, f)
	}
	if f := st.field("c d"); f.name != "MAP" || f.key.name != "VARCHAR" || f.value.name != "ARRAY" || f.value.elem.name != "TIME WITH TIME ZONE" {
		t.Errorf("c d: %+v", f)
	}
	if f := st.field("e"); f.name != "DECIMAL" {
		t.Errorf("e: %+v", f)
	}
	if f := st.field("f"); f.name != "ENUM" {
		t.Errorf("f: %+v", f)
	}
	for _, bad := range []string{"", "STRUCT(", "MAP(INTEGER)", "INTEGER[", "STRUCT(a INTEGER) x", `STRUCT("a INTEGER)`} {
		if got := parseDuckType(bad); got != unknownType {
			t.Errorf("%q: %+v, want unknownType", bad, got)
		}
	}
}
