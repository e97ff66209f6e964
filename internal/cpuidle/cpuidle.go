package cpuidle

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Meter tells whether the processors this process may use have been
// mostly idle since it was last asked (at least MinSample ago; until then
// its last answer stands). It looks at the machine (/proc/stat) and, in a
// container with a CPU quota, at the quota (cgroup v2, or v1 on older
// hosts): the processors are idle when both say so.
type Meter struct {
	read []cpuReader
	at   time.Time
	prev []cpuTimes
	last bool
}

// cpuReader reads cumulative idle and total processor seconds of one
// view of the processors; ok is false where it does not apply.
type cpuReader func() cpuTimes

type cpuTimes struct {
	idle, total float64
	ok          bool
}

const (
	// MinSample is the shortest window: a look sooner repeats the last
	// answer.
	MinSample = 200 * time.Millisecond
	// IdleShare is the share of the processors' time that must have been
	// idle: on two cores, most of one.
	IdleShare = 0.4
)

// Idle reports whether the processors were at least IdleShare idle over
// the window since the last sample. The zero Meter is ready to use; it is
// not safe for concurrent use.
func (m *Meter) Idle() bool {
	if m.read == nil {
		cpuDir, acctDir := cgroupV1Dir("cpu"), cgroupV1Dir("cpuacct")
		m.read = []cpuReader{
			procStat,
			func() cpuTimes { return cgroupCPU("/sys/fs/cgroup", time.Now()) },
			func() cpuTimes { return cgroupV1CPU(cpuDir, acctDir, time.Now()) },
		}
	}
	now := time.Now()
	if !m.at.IsZero() && now.Sub(m.at) < MinSample {
		return m.last
	}
	cur := make([]cpuTimes, len(m.read))
	for i, r := range m.read {
		cur[i] = r()
	}
	// The first sample only starts the window: until a window has passed
	// the answer is no. With nothing to go by, the answer is yes.
	first := m.at.IsZero()
	idle, known := true, false
	for i, t := range cur {
		if !t.ok {
			continue
		}
		known = true
		if first || !m.prev[i].ok {
			idle = false
			continue
		}
		dt, di := t.total-m.prev[i].total, t.idle-m.prev[i].idle
		if dt <= 0 || di < IdleShare*dt {
			idle = false
		}
	}
	m.last = idle || !known
	m.at, m.prev = now, cur
	return m.last
}

// clockTick is Linux's USER_HZ, the unit of /proc/stat.
const clockTick = 100

// procStat reads the machine's idle and total processor time from Linux's
// /proc/stat (not ok elsewhere).
func procStat() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return cpuTimes{}
	}
	var idle, total uint64
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cpuTimes{}
		}
		total += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return cpuTimes{idle: float64(idle) / clockTick, total: float64(total) / clockTick, ok: true}
}

// cgroupCPU reads, from a cgroup v2 folder, the processor time the quota
// allows up to now and how much of it went unused (not ok without a
// quota: cpu.max says "max", or there is no cgroup v2).
func cgroupCPU(dir string, now time.Time) cpuTimes {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
	if err != nil {
		return cpuTimes{}
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "max" {
		return cpuTimes{}
	}
	quota, err1 := strconv.ParseFloat(f[0], 64)
	period, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil || quota <= 0 || period <= 0 {
		return cpuTimes{}
	}
	b, err = os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return cpuTimes{}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			used, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return cpuTimes{}
			}
			return quotaTimes(quota, period, used/1e6, now)
		}
	}
	return cpuTimes{}
}

// cgroupV1Dir is the folder of a cgroup v1 controller: its own mount
// (/sys/fs/cgroup/cpu) or the one it shares (/sys/fs/cgroup/cpu,cpuacct).
func cgroupV1Dir(controller string) string {
	dir := filepath.Join("/sys/fs/cgroup", controller)
	if _, err := os.Stat(dir); err != nil {
		return filepath.Join("/sys/fs/cgroup", "cpu,cpuacct")
	}
	return dir
}

// cgroupV1CPU reads the same from cgroup v1: the quota from cpuDir's
// cpu.cfs_quota_us and cpu.cfs_period_us, the use from acctDir's
// cpuacct.usage (nanoseconds). Not ok without a quota (-1) or without
// cgroup v1.
func cgroupV1CPU(cpuDir, acctDir string, now time.Time) cpuTimes {
	num := func(dir, name string) (float64, bool) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		return v, err == nil
	}
	quota, ok1 := num(cpuDir, "cpu.cfs_quota_us")
	period, ok2 := num(cpuDir, "cpu.cfs_period_us")
	used, ok3 := num(acctDir, "cpuacct.usage")
	if !ok1 || !ok2 || !ok3 || quota <= 0 || period <= 0 {
		return cpuTimes{}
	}
	return quotaTimes(quota, period, used/1e9, now)
}

// quotaTimes is the processor time a quota of quota per period allows up
// to now, and how much of it went unused given used seconds.
func quotaTimes(quota, period, used float64, now time.Time) cpuTimes {
	total := float64(now.UnixMicro()) / 1e6 * quota / period
	return cpuTimes{idle: total - used, total: total, ok: true}
}
