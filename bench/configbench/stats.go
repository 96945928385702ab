package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// pct is the q-quantile (0..1) of ds (nearest rank); 0 when empty.
func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// pcts is "p50 / p90 / p99 / max ms (n)".
func pcts(ds []time.Duration) string {
	return fmt.Sprintf("p50 %s / p90 %s / p99 %s / max %s ms (n=%d)", msf(pct(ds, .5)), msf(pct(ds, .9)), msf(pct(ds, .99)), msf(pct(ds, 1)), len(ds))
}

// msf formats d in milliseconds with one decimal (two below 10 ms).
func msf(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 10 {
		return strconv.FormatFloat(ms, 'f', 2, 64)
	}
	return strconv.FormatFloat(ms, 'f', 1, 64)
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// machineCPU is the machine's busy and total CPU time so far (all
// cores), from the "cpu" line of /proc/stat, in clock ticks.
func machineCPU() (busy, total int64) {
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
		if i >= 7 { // guest times are already in user and nice
			break
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		sum += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return sum - idle, sum
}

// busyMeter reports the machine's busy cores over an interval.
type busyMeter struct{ busy, total int64 }

func startBusy() busyMeter {
	b, t := machineCPU()
	return busyMeter{b, t}
}

// cores is the busy share of the interval times the core count.
func (m busyMeter) cores(ncpu int) float64 {
	b, t := machineCPU()
	if t == m.total {
		return 0
	}
	return float64(b-m.busy) / float64(t-m.total) * float64(ncpu)
}

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on Linux).
const clockTicks = 100

// procCPU is a process's user+system CPU time so far, from
// /proc/<pid>/stat (0 when unreadable).
func procCPU(pid string) time.Duration {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14
	k, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	return time.Duration(u+k) * time.Second / clockTicks
}

// cpuGroups are the process groups CPU is reported for, in order.
var cpuGroups = []string{"r1 origin broker", "r1 other brokers", "r1 meta", "r1 bookies", "r2+r3 brokers", "r2+r3 meta", "r2+r3 bookies", "client"}

// sampleGroups is the CPU time used so far by each group.
func (m *mesh) sampleGroups() map[string]time.Duration {
	s := map[string]time.Duration{}
	pid := func(n *node) string { return strconv.Itoa(n.pid) }
	for i, r := range m.regions {
		pre := "r2+r3 "
		if i == 0 {
			pre = "r1 "
		}
		for j, b := range r.brokers {
			g := pre + "brokers"
			if i == 0 {
				g = "r1 other brokers"
				if j == 0 {
					g = "r1 origin broker"
				}
			}
			s[g] += procCPU(pid(b))
		}
		for _, k := range r.bookies {
			s[pre+"bookies"] += procCPU(pid(k))
		}
		s[pre+"meta"] += procCPU(pid(r.meta))
	}
	s["client"] = procCPU("self")
	return s
}

// groupCores is each group's cores over d, comma-separated in
// cpuGroups order.
func groupCores(a, b map[string]time.Duration, d time.Duration) string {
	var parts []string
	for _, g := range cpuGroups {
		parts = append(parts, strconv.FormatFloat((b[g]-a[g]).Seconds()/d.Seconds(), 'f', 2, 64))
	}
	return strings.Join(parts, ", ")
}
