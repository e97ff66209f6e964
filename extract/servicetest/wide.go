package servicetest

import (
	"fmt"
	"strings"
)

// WithWideObject adds the report object learnerActivityDetail (WideObjectID):
// 64 fields of text, numbers, dates and picklists, every eighth a comment
// of 100 to 400 characters of words; four rows a user, about 2.8 KB of
// JSON a row. A real tenant's report objects have dozens of fields, where the
// usual objects have at most 14 (docs/service-shapes.md).
func WithWideObject() Option { return func(c *config) { c.wide = true } }

// WideObjectID is the report object WithWideObject adds.
const WideObjectID = "learnerActivityDetail"

// WideObjectRows is how many rows the wide object has in a tenant of
// users users.
func WideObjectRows(users int) int { return 4 * users }

const (
	saltWide   = 0x31de
	wideFields = 64
)

var wideWords = strings.Fields(`learner completed module quiz review feedback manager coaching call
	pitch objection pricing discovery demo renewal territory pipeline forecast onboarding
	certification playbook competitor enablement content shared opened viewed rated`)

var wideObject = func() *object {
	fields := []field{
		{id: "activityId", displayName: "Activity ID", typ: typeInt},
		{id: "userId", displayName: "User ID", typ: typeInt},
	}
	for k := len(fields); k < wideFields; k++ {
		f := field{id: fmt.Sprintf("field%02d", k)}
		switch k % 8 {
		case 0:
			f.typ, f.displayName = typeString, fmt.Sprintf("Comment %d", k)
		case 1, 5:
			f.typ, f.displayName = typeString, fmt.Sprintf("Label %d", k)
		case 2:
			f.typ, f.displayName = typeInt, fmt.Sprintf("Count %d", k)
		case 3:
			f.typ, f.displayName = typeFloat, fmt.Sprintf("Score %d", k)
		case 4:
			f.typ, f.displayName = typeDate, fmt.Sprintf("Date %d", k)
		case 6:
			f.typ, f.displayName, f.options = typePicklist, fmt.Sprintf("Stage %d", k), []string{"Open", "Active", "Done", "Dropped"}
		case 7:
			f.typ, f.displayName = typePercent, fmt.Sprintf("Share %d", k)
		}
		fields = append(fields, f)
	}
	return newObject(WideObjectID, "Learner Activity Detail", fields,
		func(sn *snapshot) int { return WideObjectRows(sn.t.users) },
		func(sn *snapshot, i int, dst []value) {
			r := newRnd(sn.t.seed, saltWide, i)
			dst[0] = vInt(int64(i + 1))
			dst[1] = vInt(int64(10001 + i/4))
			for k := 2; k < len(dst); k++ {
				f := &fields[k]
				switch {
				case r.intn(10) == 0:
					dst[k] = vNull
				case f.typ == typeString && k%8 == 0:
					var b strings.Builder
					n := 100 + r.intn(301)
					for b.Len() < n {
						b.WriteString(wideWords[r.intn(len(wideWords))])
						b.WriteByte(' ')
					}
					dst[k] = vStr(b.String()[:n])
				case f.typ == typeString:
					dst[k] = vStr(fmt.Sprintf("%s-%d", wideWords[r.intn(len(wideWords))], r.intn(100000)))
				case f.typ == typeInt:
					dst[k] = vInt(int64(r.intn(1000)))
				case f.typ == typeFloat, f.typ == typePercent:
					dst[k] = vFloat(round1(r.float() * 100))
				case f.typ == typeDate:
					dst[k] = vDate(anchor - int64(r.intn(60*day)))
				case f.typ == typePicklist:
					dst[k] = vStr(f.options[r.intn(len(f.options))])
				}
			}
		})
}()
