package servicetest

import (
	"sort"
	"strconv"
	"sync"
	"time"
)

// fieldType is the type of a report field as named by describe.
type fieldType uint8

const (
	typeInt fieldType = iota
	typePicklist
	typeString
	typeFloat
	typePercent
	typeDate
)

var typeNames = [...]string{"int", "picklist", "string", "float", "percent", "date"}

func (t fieldType) String() string { return typeNames[t] }

// field describes one field of a report object.
type field struct {
	id          string
	displayName string
	typ         fieldType
	options     []string // picklist only
}

// value is one cell. Which member is meaningful depends on the field type:
// i for int and date (Unix seconds), f for float and percent, s for string
// and picklist.
type value struct {
	null bool
	i    int64
	f    float64
	s    string
	raw  bool // s is written between quotes as it is (WithHostile's bad text)
}

func vInt(i int64) value     { return value{i: i} }
func vFloat(f float64) value { return value{f: f} }
func vStr(s string) value    { return value{s: s} }
func vDate(t int64) value    { return value{i: t} }

var vNull = value{null: true}

// object is a report object: its fields and how to count and generate rows.
type object struct {
	id          string
	displayName string
	fields      []field
	index       map[string]int // field id → position
	keys        [][]byte       // `"fieldId":` per field, for the encoder
	count       func(sn *snapshot) int
	fill        func(sn *snapshot, i int, dst []value)
}

func newObject(id, name string, fields []field,
	count func(*snapshot) int, fill func(*snapshot, int, []value)) *object {
	o := &object{id: id, displayName: name, fields: fields, index: map[string]int{},
		count: count, fill: fill}
	o.keys = make([][]byte, len(fields))
	for i, f := range fields {
		o.index[f.id] = i
		o.keys[i] = append(appendJSONString(nil, f.id), ':')
	}
	return o
}

// objects lists the report objects in the order /objects returns them.
var objects = []*object{courseObject, pathObject, curriculumObject, userObject, progressObject}

var objectsByID = func() map[string]*object {
	m := make(map[string]*object, len(objects))
	for _, o := range objects {
		m[o.id] = o
	}
	return m
}()

// --- hashing -------------------------------------------------------------

// mix is the splitmix64 finaliser.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// rnd is a splitmix64 stream seeded from (seed, salt, i): the randomness of
// one row of one object.
type rnd struct{ s uint64 }

func newRnd(seed, salt uint64, i int) rnd {
	return rnd{s: mix(seed ^ mix(salt^mix(uint64(i))))}
}

func (r *rnd) u64() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a number in [0, n).
func (r *rnd) intn(n int) int { return int(r.u64() % uint64(n)) }

// float returns a number in [0, 1).
func (r *rnd) float() float64 { return float64(r.u64()>>11) / (1 << 53) }

// Salts per object, so that row i of two objects is unrelated.
const (
	saltCourse     = 0xc0c0
	saltPath       = 0xba70
	saltCurriculum = 0xcc11
	saltUser       = 0x05e7
	saltAssign     = 0xa551
	saltProgress   = 0x9704
)

const day = 86400

// anchor is the fixed instant tenant dates are laid out from (assignment,
// creation and publication dates). It does not move with the clock, so a
// later clock only changes progress, never history.
var anchor = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Unix()

// round1 rounds to one decimal.
func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// --- tenant ----------------------------------------------------------------

// tenant is the clock-independent part of the data: everything that is a
// function of the seed and the number of users only.
type tenant struct {
	seed       uint64
	users      int
	offsets    []int32 // offsets[u] = first userCourseProgress row of user u; len users+1
	courses    []course
	assignable []int32 // indices of courses that can be assigned (not Draft)
	strides    []int32 // strides coprime with len(assignable)
}

type course struct {
	id        int64
	title     string
	category  string
	status    string
	published int64 // 0 when never published
	minutes   int64
	passing   float64
}

func newTenant(seed int64, users int) *tenant {
	t := &tenant{seed: uint64(seed), users: users}
	n := min(20+users/100, 400)
	t.courses = make([]course, n)
	for i := range t.courses {
		t.courses[i] = t.makeCourse(i)
		if t.courses[i].status != "Draft" {
			t.assignable = append(t.assignable, int32(i))
		}
	}
	na := len(t.assignable)
	for s := 1; s < na && len(t.strides) < 8; s++ {
		if gcd(s, na) == 1 {
			t.strides = append(t.strides, int32(s))
		}
	}
	t.offsets = make([]int32, users+1)
	for u := range users {
		r := newRnd(t.seed, saltAssign, u)
		t.offsets[u+1] = t.offsets[u] + int32(8+r.intn(9))
	}
	return t
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// snapshot is the tenant seen at one instant of its clock.
type snapshot struct {
	t   *tenant
	now int64 // Unix seconds

	aggOnce sync.Once
	agg     []courseAgg // per course, from userCourseProgress
}

func (t *tenant) at(now time.Time) *snapshot {
	return &snapshot{t: t, now: now.Unix()}
}

// --- course ----------------------------------------------------------------

var (
	courseCategories = []string{"Onboarding", "Product", "Sales Skills", "Compliance", "Leadership", "Customer Success"}
	courseStatuses   = []string{"Draft", "Published", "Archived"}
	coursePrefixes   = []string{"Foundations of", "Advanced", "Mastering", "Introduction to", "Practical"}
	courseTopics     = []string{"Discovery Calls", "Objection Handling", "Negotiation", "Product Demos",
		"Pipeline Management", "Cold Outreach", "Forecasting", "Security Compliance", "Pricing Strategy",
		"Customer Onboarding", "Territory Planning", "Value Selling", "Competitive Positioning",
		"Executive Presence", "Account Planning", "Renewals & Upsell"}
	courseLevels = []string{"", " II", " III", " IV", " V"}
	// Titles that exercise the string encoder: quotes, non-ASCII, a backslash.
	courseSpecial = map[int]string{
		3:  `Negotiation: "Give & Get" Basics`,
		7:  "Café Conversations: Ça Marche",
		12: `Reading CRM Paths like C:\Deals\Open`,
		17: "Überzeugend präsentieren — Grundlagen",
	}
)

func (t *tenant) makeCourse(i int) course {
	r := newRnd(t.seed, saltCourse, i)
	c := course{id: int64(5001 + i)}
	if s, ok := courseSpecial[i]; ok {
		c.title = s
	} else {
		c.title = coursePrefixes[i%len(coursePrefixes)] + " " +
			courseTopics[(i/len(coursePrefixes)+int(t.seed%7))%len(courseTopics)] +
			courseLevels[(i/(len(coursePrefixes)*len(courseTopics)))%len(courseLevels)]
	}
	c.category = courseCategories[r.intn(len(courseCategories))]
	switch i % 10 {
	case 7:
		c.status = "Draft"
	case 9:
		c.status = "Archived"
	default:
		c.status = "Published"
	}
	pub := anchor - int64(30+r.intn(900))*day + int64(r.intn(day))
	if c.status != "Draft" {
		c.published = pub
	}
	c.minutes = int64(15 + 5*r.intn(36))
	c.passing = float64(60 + 5*r.intn(7))
	return c
}

type courseAgg struct {
	enrolled, completed int64
	scoreSum            float64
}

func (sn *snapshot) courseAggs() []courseAgg {
	sn.aggOnce.Do(func() {
		agg := make([]courseAgg, len(sn.t.courses))
		n := int(sn.t.offsets[sn.t.users])
		for i := range n {
			p := sn.progress(i)
			a := &agg[p.course]
			a.enrolled++
			if p.completed != 0 {
				a.completed++
				a.scoreSum += p.score
			}
		}
		sn.agg = agg
	})
	return sn.agg
}

var courseObject = newObject("course", "Courses", []field{
	{id: "courseId", displayName: "Course ID", typ: typeInt},
	{id: "courseTitle", displayName: "Course Title", typ: typeString},
	{id: "category", displayName: "Category", typ: typePicklist, options: courseCategories},
	{id: "status", displayName: "Status", typ: typePicklist, options: courseStatuses},
	{id: "publishedDate", displayName: "Published Date", typ: typeDate},
	{id: "durationMinutes", displayName: "Duration (Minutes)", typ: typeInt},
	{id: "passingScore", displayName: "Passing Score", typ: typePercent},
	{id: "enrolledCount", displayName: "Enrolled", typ: typeInt},
	{id: "completedCount", displayName: "Completed", typ: typeInt},
	{id: "completionRate", displayName: "Completion Rate", typ: typePercent},
	{id: "averageScore", displayName: "Average Score", typ: typeFloat},
}, func(sn *snapshot) int { return len(sn.t.courses) },
	func(sn *snapshot, i int, dst []value) {
		c := &sn.t.courses[i]
		a := sn.courseAggs()[i]
		dst[0] = vInt(c.id)
		dst[1] = vStr(c.title)
		dst[2] = vStr(c.category)
		dst[3] = vStr(c.status)
		dst[4] = vNull
		if c.published != 0 {
			dst[4] = vDate(c.published)
		}
		dst[5] = vInt(c.minutes)
		dst[6] = vFloat(c.passing)
		dst[7] = vInt(a.enrolled)
		dst[8] = vInt(a.completed)
		dst[9], dst[10] = vNull, vNull
		if a.enrolled > 0 {
			dst[9] = vFloat(round1(float64(a.completed) * 100 / float64(a.enrolled)))
		}
		if a.completed > 0 {
			dst[10] = vFloat(round1(a.scoreSum / float64(a.completed)))
		}
	})

// --- path ------------------------------------------------------------------

var (
	pathStatuses = []string{"Active", "Retired", "Draft"}
	pathTitles   = []string{"New Hire Onboarding", "SDR Ramp: First 30 Days", "AE Certification",
		"Manager Coaching Essentials", "Product Launch — Q3", "Security & Compliance Annual",
		`Partner Enablement \ EMEA`, "Customer Success Playbook", "Executive Briefing Prep",
		"Renewal Readiness", "Demo Excellence", "Negotiation Bootcamp"}
)

var pathObject = newObject("path", "Paths (formerly Checklists)", []field{
	{id: "pathId", displayName: "Path ID", typ: typeInt},
	{id: "pathTitle", displayName: "Path Title", typ: typeString},
	{id: "status", displayName: "Status", typ: typePicklist, options: pathStatuses},
	{id: "itemCount", displayName: "Items", typ: typeInt},
	{id: "assignedCount", displayName: "Assigned Users", typ: typeInt},
	{id: "completedCount", displayName: "Completed Users", typ: typeInt},
	{id: "completionPercentage", displayName: "Completion %", typ: typePercent},
	{id: "averageDaysToComplete", displayName: "Average Days to Complete", typ: typeFloat},
	{id: "createdDate", displayName: "Created Date", typ: typeDate},
	{id: "dueDate", displayName: "Due Date", typ: typeDate},
}, func(*snapshot) int { return len(pathTitles) },
	func(sn *snapshot, i int, dst []value) {
		r := newRnd(sn.t.seed, saltPath, i)
		status := pathStatuses[0]
		switch i % 6 {
		case 4:
			status = pathStatuses[1]
		case 5:
			status = pathStatuses[2]
		}
		items := int64(3 + r.intn(18))
		var assigned, completed int64
		if status != "Draft" && sn.t.users > 0 {
			assigned = int64(1 + r.intn(sn.t.users))
			completed = int64(r.float() * float64(assigned+1))
			completed = min(completed, assigned)
		}
		created := anchor - int64(20+r.intn(700))*day + int64(r.intn(day))
		due := created + int64(30+r.intn(120))*day
		avgDays := round1(2 + r.float()*60)
		dst[0] = vInt(int64(101 + i))
		dst[1] = vStr(pathTitles[i])
		dst[2] = vStr(status)
		dst[3] = vInt(items)
		dst[4] = vInt(assigned)
		dst[5] = vInt(completed)
		dst[6], dst[7], dst[9] = vNull, vNull, vNull
		if assigned > 0 {
			dst[6] = vFloat(round1(float64(completed) * 100 / float64(assigned)))
		}
		if completed > 0 {
			dst[7] = vFloat(avgDays)
		}
		dst[8] = vDate(created)
		if i%3 != 2 {
			dst[9] = vDate(due)
		}
	})

// --- curriculum ------------------------------------------------------------

var curriculumTitles = []string{"Sales Foundations", "Enterprise Selling", "Product Mastery 2026",
	"Leadership Track", "Compliance Essentials", "Customer Success Path", "Partner Program",
	"Draft: Field Kickoff 2027"}

var curriculumObject = newObject("curriculum", "Curricula", []field{
	{id: "curriculumTitle", displayName: "Curriculum Title", typ: typeString},
	{id: "courseCount", displayName: "Courses", typ: typeInt},
	{id: "userCount", displayName: "Users", typ: typeInt},
	{id: "startCount", displayName: "Started", typ: typeInt},
	{id: "startPercentage", displayName: "Started %", typ: typePercent},
	{id: "testAverage", displayName: "Test Average", typ: typeFloat},
	{id: "pitchAverage", displayName: "Pitch Average", typ: typeFloat},
}, func(*snapshot) int { return len(curriculumTitles) },
	func(sn *snapshot, i int, dst []value) {
		r := newRnd(sn.t.seed, saltCurriculum, i)
		courses := int64(3 + r.intn(10))
		var users, started int64
		if i != len(curriculumTitles)-1 && sn.t.users > 0 { // the draft has nobody yet
			users = int64(1 + r.intn(sn.t.users))
			started = min(int64(r.float()*float64(users+1)), users)
		}
		test, pitch := round1(55+r.float()*45), round1(1+r.float()*4)
		dst[0] = vStr(curriculumTitles[i])
		dst[1] = vInt(courses)
		dst[2] = vInt(users)
		dst[3] = vInt(started)
		dst[4], dst[5], dst[6] = vNull, vNull, vNull
		if users > 0 {
			dst[4] = vFloat(round1(float64(started) * 100 / float64(users)))
		}
		if started > 0 {
			dst[5], dst[6] = vFloat(test), vFloat(pitch)
		}
	})

// --- user ------------------------------------------------------------------

var (
	firstNames = []string{"José", "Ana", "Zoë", "François", "Mei", "Liam", "Øyvind", "Aisha", "Łukasz", "Priya",
		"Noah", "Sofía", "Kenji", "Olivia", "Mateo", "Chloé", "Björn", "Fatima", "Diego", "Hannah"}
	firstASCII = []string{"jose", "ana", "zoe", "francois", "mei", "liam", "oyvind", "aisha", "lukasz", "priya",
		"noah", "sofia", "kenji", "olivia", "mateo", "chloe", "bjorn", "fatima", "diego", "hannah"}
	lastNames = []string{"Núñez", "Smith", "O'Brien", "García", "Müller", "Kowalski", "Tanaka", "Johansson",
		"Dubois", "Patel", "Nguyen", "Rossi", "Ivanova", "Kim", "Silva", "Hernández", "Brown", "Schröder",
		"Larsen", "Cohen"}
	lastASCII = []string{"nunez", "smith", "obrien", "garcia", "muller", "kowalski", "tanaka", "johansson",
		"dubois", "patel", "nguyen", "rossi", "ivanova", "kim", "silva", "hernandez", "brown", "schroder",
		"larsen", "cohen"}
	fullNames = func() []string {
		s := make([]string, 0, len(firstNames)*len(lastNames))
		for _, f := range firstNames {
			for _, l := range lastNames {
				s = append(s, f+" "+l)
			}
		}
		return s
	}()
	userTeams    = []string{"Enterprise East", "Enterprise West", "Mid-Market", "SMB", "Channel", "Customer Success"}
	userRegions  = []string{"AMER", "EMEA", "APAC", "LATAM"}
	userRoles    = []string{"Learner", "Manager", "Admin"}
	userStatuses = []string{"Active", "Inactive", "Invited"}
)

// userNames returns the first and last name indices of user u. User 0 is
// always José Núñez.
func (t *tenant) userNames(u int) (first, last int) {
	if u == 0 {
		return 0, 0
	}
	r := newRnd(t.seed, saltUser^0xffff, u)
	return r.intn(len(firstNames)), r.intn(len(lastNames))
}

func (t *tenant) userName(u int) string {
	f, l := t.userNames(u)
	return fullNames[f*len(lastNames)+l]
}

var userObject = newObject("user", "Users", []field{
	{id: "userId", displayName: "User ID", typ: typeInt},
	{id: "userName", displayName: "User Name", typ: typeString},
	{id: "email", displayName: "Email", typ: typeString},
	{id: "firstName", displayName: "First Name", typ: typeString},
	{id: "lastName", displayName: "Last Name", typ: typeString},
	{id: "team", displayName: "Team", typ: typePicklist, options: userTeams},
	{id: "region", displayName: "Region", typ: typePicklist, options: userRegions},
	{id: "role", displayName: "Role", typ: typePicklist, options: userRoles},
	{id: "status", displayName: "Status", typ: typePicklist, options: userStatuses},
	{id: "createdDate", displayName: "Created Date", typ: typeDate},
	{id: "lastLoginDate", displayName: "Last Login Date", typ: typeDate},
	{id: "assignedCourses", displayName: "Assigned Courses", typ: typeInt},
}, func(sn *snapshot) int { return sn.t.users },
	func(sn *snapshot, u int, dst []value) {
		t := sn.t
		r := newRnd(t.seed, saltUser, u)
		f, l := t.userNames(u)
		id := int64(10001 + u)
		status := userStatuses[0]
		switch x := r.intn(100); {
		case x < 8:
			status = userStatuses[2]
		case x < 18:
			status = userStatuses[1]
		}
		role := userRoles[0]
		switch x := r.intn(100); {
		case x < 3:
			role = userRoles[2]
		case x < 15:
			role = userRoles[1]
		}
		created := anchor - int64(30+r.intn(1500))*day + int64(r.intn(day))
		login := max(created, sn.now-int64(r.intn(60*day)))
		dst[0] = vInt(id)
		dst[1] = vStr(fullNames[f*len(lastNames)+l])
		dst[2] = vStr(firstASCII[f] + "." + lastASCII[l] + strconv.FormatInt(id, 10) + "@example.com")
		dst[3] = vStr(firstNames[f])
		dst[4] = vStr(lastNames[l])
		dst[5] = vStr(userTeams[r.intn(len(userTeams))])
		dst[6] = vStr(userRegions[r.intn(len(userRegions))])
		dst[7] = vStr(role)
		dst[8] = vStr(status)
		dst[9] = vDate(created)
		dst[10] = vNull
		if status != "Invited" && login <= sn.now {
			dst[10] = vDate(login)
		}
		dst[11] = vInt(int64(t.offsets[u+1] - t.offsets[u]))
	})

// --- userCourseProgress ------------------------------------------------------

var progressStatuses = []string{"Not Started", "In Progress", "Completed", "Overdue"}

// progressRow is one generated userCourseProgress row. Zero dates are null.
type progressRow struct {
	user, course int
	status       string
	progress     float64
	score        float64 // meaningful when completed != 0
	assigned     int64
	due          int64
	completed    int64
	lastActivity int64
	modified     int64 // when any value of the row last changed
	minutes      int64
	attempts     int64
}

// progress generates row i of userCourseProgress. Every random draw is
// made before branching on the clock, so a row's schedule is fixed and
// only its state moves as the clock does.
func (sn *snapshot) progress(i int) progressRow {
	t := sn.t
	// The user whose assignments contain row i.
	u := sort.Search(t.users, func(u int) bool { return int(t.offsets[u+1]) > i })
	k := i - int(t.offsets[u])
	ar := newRnd(t.seed, saltAssign^0x5eed, u)
	na := len(t.assignable)
	base, stride := ar.intn(na), int(t.strides[ar.intn(len(t.strides))])
	c := int(t.assignable[(base+k*stride)%na])

	r := newRnd(t.seed, saltProgress, i)
	assigned := anchor - int64(r.intn(540))*day - int64(r.intn(day))
	due := assigned + int64(14+r.intn(77))*day
	never := r.intn(100) < 12
	start := assigned + int64(r.intn(21))*day + int64(r.intn(day))
	dur := int64(3+r.intn(90)) * day
	score := round1(55 + r.float()*45)
	attempts := int64(1 + r.intn(3))
	idle := int64(r.intn(5 * day))
	effort := 0.8 + r.float()*0.7

	p := progressRow{user: u, course: c, assigned: assigned, due: due}
	minutes := float64(t.courses[c].minutes) * effort
	switch {
	case never || sn.now < start:
		p.status = "Not Started"
		p.modified = assigned
		if sn.now > due {
			p.status = "Overdue"
			p.modified = due
		}
	case sn.now-start >= dur:
		p.status = "Completed"
		p.progress = 100
		p.completed = start + dur
		p.lastActivity = p.completed
		p.modified = p.completed
		p.score = score
		p.attempts = attempts
		p.minutes = int64(minutes)
	default:
		elapsed := sn.now - start
		p.status = "In Progress"
		if sn.now > due {
			p.status = "Overdue"
		}
		p.progress = float64(elapsed*1000/dur) / 10
		p.lastActivity = max(start, sn.now-idle)
		p.modified = sn.now // progress moves with the clock
		p.attempts = 1
		p.minutes = int64(minutes * p.progress / 100)
	}
	return p
}

var progressObject = newObject("userCourseProgress", "User Course Progress", []field{
	{id: "userId", displayName: "User ID", typ: typeInt},
	{id: "userName", displayName: "User Name", typ: typeString},
	{id: "courseId", displayName: "Course ID", typ: typeInt},
	{id: "courseTitle", displayName: "Course Title", typ: typeString},
	{id: "status", displayName: "Status", typ: typePicklist, options: progressStatuses},
	{id: "progressPercentage", displayName: "Progress %", typ: typePercent},
	{id: "score", displayName: "Score", typ: typeFloat},
	{id: "assignedDate", displayName: "Assigned Date", typ: typeDate},
	{id: "dueDate", displayName: "Due Date", typ: typeDate},
	{id: "completedDate", displayName: "Completed Date", typ: typeDate},
	{id: "lastActivityDate", displayName: "Last Activity Date", typ: typeDate},
	{id: "timeSpentMinutes", displayName: "Time Spent (Minutes)", typ: typeInt},
	{id: "attempts", displayName: "Attempts", typ: typeInt},
	{id: "lastModifiedDate", displayName: "Last Modified Date", typ: typeDate},
}, func(sn *snapshot) int { return int(sn.t.offsets[sn.t.users]) },
	func(sn *snapshot, i int, dst []value) {
		p := sn.progress(i)
		c := &sn.t.courses[p.course]
		dst[0] = vInt(int64(10001 + p.user))
		dst[1] = vStr(sn.t.userName(p.user))
		dst[2] = vInt(c.id)
		dst[3] = vStr(c.title)
		dst[4] = vStr(p.status)
		dst[5] = vFloat(p.progress)
		dst[6] = vNull
		if p.completed != 0 {
			dst[6] = vFloat(p.score)
		}
		dst[7] = vDate(p.assigned)
		dst[8] = vDate(p.due)
		dst[9], dst[10] = vNull, vNull
		if p.completed != 0 {
			dst[9] = vDate(p.completed)
		}
		if p.lastActivity != 0 {
			dst[10] = vDate(p.lastActivity)
		}
		dst[11] = vInt(p.minutes)
		dst[12] = vInt(p.attempts)
		dst[13] = vDate(p.modified)
	})
