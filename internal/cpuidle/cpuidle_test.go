package cpuidle

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCPUIdle: the early load runs in the time the processors were idle
// since the last look, at least MinSample apart, and not before a first
// window has passed; in a container with a CPU quota, the quota must have
// been idle too.
func TestCPUIdle(t *testing.T) {
	var idle, total float64
	host := func() cpuTimes { return cpuTimes{idle: idle, total: total, ok: true} }
	c := Meter{read: []cpuReader{host}}
	if c.Idle() {
		t.Fatal("idle before a window has passed")
	}
	step := func(idleSec, totalSec float64) bool {
		idle, total = idle+idleSec, total+totalSec
		c.at = c.at.Add(-MinSample) // a window has passed
		return c.Idle()
	}
	if !step(0.9, 1) {
		t.Error("90 % idle: not idle")
	}
	if step(0.1, 1) {
		t.Error("10 % idle (the fetch keeps the processors busy): idle")
	}
	idle, total = idle+1, total+1
	if c.Idle() {
		t.Error("a look within MinSample changed the answer")
	}
	if !step(0.5, 1) {
		t.Error("75 % idle over the window since the last sample (1.5 of 2): not idle")
	}
	if step(0, 0) {
		t.Error("no processor time passed: idle")
	}

	// The host is idle, the container's quota is used up: not idle.
	var qIdle, qTotal float64
	quota := func() cpuTimes { return cpuTimes{idle: qIdle, total: qTotal, ok: true} }
	c = Meter{read: []cpuReader{host, quota}}
	c.Idle()
	idle, total, qTotal = idle+0.9, total+1, qTotal+0.5
	c.at = c.at.Add(-MinSample)
	if c.Idle() {
		t.Error("the quota was used up, the host idle: idle")
	}
	idle, total, qIdle, qTotal = idle+0.9, total+1, qIdle+0.4, qTotal+0.5
	c.at = c.at.Add(-MinSample)
	if !c.Idle() {
		t.Error("host and quota both mostly idle: not idle")
	}

	c = Meter{read: []cpuReader{func() cpuTimes { return cpuTimes{} }}}
	if !c.Idle() {
		t.Error("where the processors' times cannot be read, the load runs")
	}
}

// TestCgroupCPU reads a cgroup v2 quota and its use.
func TestCgroupCPU(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Unix(1000, 0)
	if got := cgroupCPU(dir, now); got.ok {
		t.Errorf("no cgroup files: %+v", got)
	}
	write("cpu.max", "max 100000\n")
	write("cpu.stat", "usage_usec 2500000\nuser_usec 2000000\n")
	if got := cgroupCPU(dir, now); got.ok {
		t.Errorf("no quota: %+v", got)
	}
	write("cpu.max", "50000 100000\n") // half a core
	got := cgroupCPU(dir, now)
	if !got.ok || got.total != 500 || got.idle != 497.5 {
		t.Errorf("half a core for 1000 s, 2.5 s used: %+v, want total 500, idle 497.5", got)
	}
	write("cpu.stat", "user_usec 1\n")
	if got := cgroupCPU(dir, now); got.ok {
		t.Errorf("no usage_usec: %+v", got)
	}
}

// TestCgroupV1CPU reads a cgroup v1 quota (cpu.cfs_quota_us over
// cpu.cfs_period_us) and its use (cpuacct.usage, nanoseconds).
func TestCgroupV1CPU(t *testing.T) {
	cpu, acct := t.TempDir(), t.TempDir()
	write := func(dir, name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Unix(1000, 0)
	if got := cgroupV1CPU(cpu, acct, now); got.ok {
		t.Errorf("no cgroup files: %+v", got)
	}
	write(cpu, "cpu.cfs_quota_us", "-1\n")
	write(cpu, "cpu.cfs_period_us", "100000\n")
	write(acct, "cpuacct.usage", "2500000000\n")
	if got := cgroupV1CPU(cpu, acct, now); got.ok {
		t.Errorf("no quota: %+v", got)
	}
	write(cpu, "cpu.cfs_quota_us", "150000\n") // a core and a half
	got := cgroupV1CPU(cpu, acct, now)
	if !got.ok || got.total != 1500 || got.idle != 1497.5 {
		t.Errorf("a core and a half for 1000 s, 2.5 s used: %+v, want total 1500, idle 1497.5", got)
	}
	write(acct, "cpuacct.usage", "lots\n")
	if got := cgroupV1CPU(cpu, acct, now); got.ok {
		t.Errorf("unreadable usage: %+v", got)
	}
}
