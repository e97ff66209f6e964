package servicetest

import "slices"

// The hostile tenant (WithHostile): answers that are legal JSON but
// unusual, as a real tenant's may be, to test that nothing the service
// sends escapes the output folder, overwrites sepipe's own tables, or
// fails more than the value it is in.

// WithHostile adds report objects whose ids and fields are hostile to a
// naive client: ids that are sepipe's own table names (events,
// _sepipe_runs), that differ from another only by case (User beside user),
// that name another's history view (user_history), that hold glob
// characters, '?', '=' and control characters; display names with
// terminal escape sequences; fields equal but for case (Name, name), with
// a NUL, or called snapshot_date; string values that are not valid UTF-8
// or hold lone surrogate escapes. The usual objects are served as well.
func WithHostile() Option { return func(c *config) { c.hostile = true } }

// HostileObjectIDs lists the ids WithHostile adds, in /objects order.
func HostileObjectIDs() []string {
	ids := make([]string, len(hostileObjects))
	for i, o := range hostileObjects {
		ids[i] = o.id
	}
	return ids
}

// hostileRows is how many rows each hostile object has (row i of object k
// has id i+1; object k has k+3 rows).
func hostileRows(k int) int { return k + 3 }

var hostileFields = []field{
	{id: "id", displayName: "ID", typ: typeInt},
	{id: "Name", displayName: "\x1b[31mName\x1b[0m", typ: typeString},
	{id: "name", displayName: "name (lower case)", typ: typeString},
	{id: "snapshot_date", displayName: "Their own snapshot date", typ: typeString},
	{id: "a\x00b", displayName: "NUL in the id", typ: typeInt},
}

var hostileIDs = []string{"events", "_sepipe_runs", "User", "user_history", "x[1]", "q?y=1", "k=v", "tab\tid"}

var hostileObjects = func() []*object {
	out := make([]*object, len(hostileIDs))
	for k, id := range hostileIDs {
		out[k] = newObject(id, "\x1b]0;pwned\x07"+id+"\r", hostileFields,
			func(*snapshot) int { return hostileRows(k) },
			func(sn *snapshot, i int, dst []value) {
				dst[0] = vInt(int64(i + 1))
				dst[1] = vStr("upper \x1b[2J")
				dst[2] = value{s: "bad \xff\xfe bytes", raw: true} // sent as is: not UTF-8
				if i%2 == 1 {
					dst[2] = value{s: `lone \ud800 surrogate`, raw: true}
				}
				dst[3] = vStr("theirs")
				dst[4] = vInt(int64(k))
			})
	}
	return out
}()

var hostileByID = func() map[string]*object {
	m := map[string]*object{}
	for _, o := range hostileObjects {
		m[o.id] = o
	}
	return m
}()

// objectList is the report objects the tenant lists.
func (s *Service) objectList() []*object {
	if !s.cfg.hostile && s.cfg.wire == nil && !s.cfg.wide {
		return objects
	}
	list := slices.Clone(objects)
	if s.cfg.wide {
		list = append(list, wideObject)
	}
	if s.cfg.hostile {
		list = append(list, hostileObjects...)
	}
	return append(list, s.wireObjectList()...) // WithHostileWire (hostile_wire.go)
}
