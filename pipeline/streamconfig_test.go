package pipeline_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

func TestStreamConfigValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, stream string
		sc           pipeline.StreamConfig
		field        string // "" when valid
	}{
		{"merge with key", "userCourseProgress", ucpMerge, ""},
		{"merge on a collection", pipeline.StreamAssets, pipeline.StreamConfig{Mode: load.Merge}, ""},
		{"merge without key", "course", pipeline.StreamConfig{Mode: load.Merge}, "PrimaryKey"},
		{"unknown mode", "course", pipeline.StreamConfig{Mode: "upsert"}, "Mode"},
		{"unknown contract", "course", pipeline.StreamConfig{Contract: "melt"}, "Contract"},
		{"collection cursor", pipeline.StreamThemes, pipeline.StreamConfig{Cursor: "updated"}, "Cursor"},
		{"lookback without cursor", "course", pipeline.StreamConfig{Lookback: time.Hour}, "Lookback"},
		{"replace with a cursor", "userCourseProgress", pipeline.StreamConfig{Cursor: "lastModifiedDate"}, "Cursor"},
		{"explicit replace with a cursor", "userCourseProgress", pipeline.StreamConfig{Mode: load.Replace, Cursor: "lastModifiedDate"}, "Cursor"},
		{"append with a cursor", "userCourseProgress", pipeline.StreamConfig{Mode: load.Append, Cursor: "lastModifiedDate", Lookback: time.Hour}, ""},
		{"filter arity", "course", pipeline.StreamConfig{Filters: []extract.Filter{extract.Eq("a", 1), extract.In("b")}}, "Filters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.sc.Validate(tc.stream)
			var se *pipeline.StreamConfigError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.field == "":
			case !errors.As(err, &se) || se.Field != tc.field:
				t.Fatalf("err = %v, want a *StreamConfigError on %s", err, tc.field)
			}
			if tc.field == "Filters" {
				var fe *extract.FilterError
				if se.Filter != 1 || !errors.As(err, &fe) || fe.Part != "values" {
					t.Errorf("filter error %v: want filter 1's values", err)
				}
			}
		})
	}
}
