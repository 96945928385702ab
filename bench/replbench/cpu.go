package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on Linux).
const clockTicks = 100

// procCPU is a process's user+system CPU time so far, from
// /proc/<pid>/stat (0 when unreadable).
func procCPU(pid string) time.Duration {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: split after its ")".
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14
	k, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	return time.Duration(u+k) * time.Second / clockTicks
}

// machineCPU is the machine's busy and total CPU time so far, from the
// "cpu" line of /proc/stat.
func machineCPU() (busy, total time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	var sum, idle int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 7 { // guest times are already in user and nice
			break
		}
		sum += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return time.Duration(sum-idle) * time.Second / clockTicks, time.Duration(sum) * time.Second / clockTicks
}

// cpuSample is the CPU time used so far by each group of processes.
type cpuSample struct {
	at          time.Time
	groups      map[string]time.Duration // "us-east brokers", "eu-west bookies", …
	self        time.Duration
	busy, total time.Duration
}

func (m *mesh) sampleCPU() cpuSample {
	s := cpuSample{at: time.Now(), groups: map[string]time.Duration{}}
	for _, r := range m.regions {
		for _, b := range r.brokers {
			s.groups[r.name+" brokers"] += procCPU(strconv.Itoa(b.pid))
		}
		for _, k := range r.bookies {
			s.groups[r.name+" bookies"] += procCPU(strconv.Itoa(k.pid))
		}
		s.groups[r.name+" meta"] += procCPU(strconv.Itoa(r.meta.pid))
	}
	s.self = procCPU("self")
	s.busy, s.total = machineCPU()
	return s
}

// cpuUse is CPU use over an interval, in cores.
type cpuUse struct {
	mesh, client, others, idle float64
	detail                     string
}

// cpuReport says, in cores, what each group used between a and b, the
// benchmark process itself, everything else on the machine, and idle.
func (m *mesh) cpuReport(a, b cpuSample) cpuUse {
	wall := b.at.Sub(a.at).Seconds()
	cores := func(d time.Duration) float64 { return d.Seconds() / wall }
	var parts []string
	var mesh time.Duration
	for _, r := range m.regions {
		var rp []string
		for _, role := range []string{"brokers", "bookies", "meta"} {
			k := r.name + " " + role
			d := b.groups[k] - a.groups[k]
			mesh += d
			rp = append(rp, fmt.Sprintf("%s %.2f", role, cores(d)))
		}
		parts = append(parts, r.name+" ("+strings.Join(rp, ", ")+")")
	}
	self := b.self - a.self
	busy, total := b.busy-a.busy, b.total-a.total
	others := busy - mesh - self
	ncpu := total.Seconds() / wall
	u := cpuUse{mesh: cores(mesh), client: cores(self), others: cores(max(others, 0)), idle: cores(total - busy)}
	u.detail = fmt.Sprintf("CPU in cores over %.1f s: mesh %.2f = %s; benchmark client %.2f; other processes %.2f; idle %.2f of %.0f",
		wall, u.mesh, strings.Join(parts, "; "), u.client, u.others, u.idle, ncpu)
	return u
}
