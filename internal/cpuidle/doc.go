// Package cpuidle tells whether the processors a process may use have
// been mostly idle lately: the machine's, from Linux's /proc/stat, and, in
// a container with a CPU quota, the quota's, from cgroup v2's cpu.max and
// cpu.stat (or, on older hosts, cgroup v1's cpu.cfs_quota_us,
// cpu.cfs_period_us and cpuacct.usage). A sync loads its warehouse while it fetches only in time the
// fetch leaves idle (pipeline's early load). Where neither can be read,
// the processors count as idle.
//
// Imports nothing of sepipe's.
package cpuidle
