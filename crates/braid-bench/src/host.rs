//! Readings of this process and machine from /proc for the benchmark reports: CPU time,
//! peak memory, machine load. Linux only; elsewhere they read 0 or "".

/// CPU seconds of this process, all threads (utime + stime from /proc, 1/100 s ticks).
pub fn process_cpu() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = s.rsplit(')').next()?.split_whitespace().collect::<Vec<_>>();
            let ut: f64 = rest.get(11)?.parse().ok()?;
            let st: f64 = rest.get(12)?.parse().ok()?;
            Some((ut + st) / 100.0)
        })
        .unwrap_or(0.0)
}

/// Busy CPU seconds of the whole machine (all cores), from /proc/stat.
pub fn system_busy() -> f64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            let line = s.lines().next()?;
            let v: Vec<f64> = line
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            // user nice system idle iowait irq softirq steal ...
            let total: f64 = v.iter().take(8).sum();
            let idle = v.get(3)? + v.get(4).unwrap_or(&0.0);
            Some((total - idle) / 100.0)
        })
        .unwrap_or(0.0)
}

/// The 1-, 5- and 15-minute load averages.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The 1-minute load average (0 when /proc does not say).
pub fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// Peak resident memory of this process in MB (VmHWM from /proc/self/status).
pub fn peak_rss_mb() -> f64 {
    status_mb("VmHWM:")
}

/// Resident memory of this process now, in MB (VmRSS from /proc/self/status).
pub fn rss_mb() -> f64 {
    status_mb("VmRSS:")
}

/// A size in kB from /proc/self/status, in MB (0 when it does not say).
fn status_mb(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Runs `f` with this thread (and every thread it starts, which inherits the mask)
/// allowed on CPU 0 only, then gives the thread back every CPU it had: a run "on one
/// core". A run started so sees one core in `available_parallelism` (a worker then
/// parses its own share of a file rather than beside a reader thread). Linux only;
/// elsewhere `f` runs unpinned.
pub fn on_one_core<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: cpu_set_t is plain bits; sched_{get,set}affinity(0, ..) read and set
        // the calling thread's mask from a properly sized set.
        unsafe {
            let mut old: libc::cpu_set_t = std::mem::zeroed();
            let size = std::mem::size_of::<libc::cpu_set_t>();
            if libc::sched_getaffinity(0, size, &mut old) == 0 {
                let mut one: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut one);
                if libc::sched_setaffinity(0, size, &one) == 0 {
                    let out = f();
                    libc::sched_setaffinity(0, size, &old);
                    return out;
                }
            }
        }
    }
    f()
}
