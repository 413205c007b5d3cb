//! What the host offers the engine: its memory ([`HostMemory`]) and its performance cores
//! ([`performance_cores`]), read from the operating system.

/// The host's memory as the operating system reports it; a field is `None` where it cannot be
/// read (only Linux and Android expose `/proc/meminfo`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostMemory {
    /// Total physical memory in bytes.
    pub total_bytes: Option<u64>,
    /// Memory available to new allocations without swapping, in bytes.
    pub available_bytes: Option<u64>,
    /// The most a model or context may plan to take: [`USABLE_PERCENT`] of the available
    /// memory, the rest left as headroom (for the OS, other apps, compute buffers). Context
    /// creation refuses a KV cache larger than this, and `canRunModel` judges by it too.
    pub usable_bytes: Option<u64>,
}

/// The share of available memory one plan may take (local-llm-rn's `canRunModel` rule).
pub const USABLE_PERCENT: u64 = 80;

impl HostMemory {
    /// Memory with `total` and `available` bytes (and the usable share of `available`).
    pub fn new(total: Option<u64>, available: Option<u64>) -> Self {
        HostMemory {
            total_bytes: total,
            available_bytes: available,
            usable_bytes: available
                .map(|a| (u128::from(a) * u128::from(USABLE_PERCENT) / 100) as u64),
        }
    }

    /// Read what the operating system reports: `/proc/meminfo` on Linux and Android; on Apple
    /// platforms `hw.memsize` (total) and, on iOS, `os_proc_available_memory` (what this app
    /// may still allocate before the system ends it, the limit local-llm-rn reports too).
    pub fn read() -> Self {
        if cfg!(target_vendor = "apple") {
            return HostMemory::new(apple::total_bytes(), apple::available_bytes());
        }
        let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|rest| rest.trim().strip_suffix("kB"))
                .and_then(|kb| kb.trim().parse::<u64>().ok())
                .map(|kb| kb.saturating_mul(1024))
        };
        HostMemory::new(field("MemTotal"), field("MemAvailable"))
    }
}

/// The performance cores: on Linux and Android the cores whose top frequency
/// (`cpufreq/cpuinfo_max_freq`) is above the slowest cluster's, so the big and prime cores of a
/// big.LITTLE phone (every core when all share one top frequency or the files are missing); on
/// Apple platforms `hw.perflevel0.logicalcpu`; elsewhere every core. Never more than
/// [`super::max_threads`], never 0. (local-llm-rn's default thread count; the engine's own
/// default is every core.)
pub fn performance_cores() -> usize {
    let all = super::max_threads().max(1);
    let fast = if cfg!(target_vendor = "apple") {
        apple::performance_cores()
    } else {
        let max_freqs: Vec<u64> = (0..all)
            .map_while(|cpu| {
                let path = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/cpuinfo_max_freq");
                std::fs::read_to_string(path).ok()?.trim().parse().ok()
            })
            .collect();
        fast_cores(&max_freqs)
    };
    fast.map_or(all, |n| n.clamp(1, all))
}

/// Of cores with these top frequencies, how many are faster than the slowest cluster (all of
/// them when every core has the same top; `None` without frequencies).
fn fast_cores(max_freqs: &[u64]) -> Option<usize> {
    let slowest = *max_freqs.iter().min()?;
    let fast = max_freqs.iter().filter(|&&f| f > slowest).count();
    Some(if fast == 0 { max_freqs.len() } else { fast })
}

/// Queries of Apple's libSystem (stubs returning `None` elsewhere).
mod apple {
    /// `sysctlbyname(name)` as an unsigned number of the size of `T` (u32 or u64).
    #[cfg(target_vendor = "apple")]
    fn sysctl<T: Copy + Default + Into<u64>>(name: &std::ffi::CStr) -> Option<u64> {
        let mut value = T::default();
        let mut len = std::mem::size_of::<T>();
        // SAFETY: the name is NUL-terminated; `value` is a plain integer of `len` bytes, so the
        // kernel writes at most `len` bytes into it; no new value is set (null, 0).
        let rc = unsafe {
            libc::sysctlbyname(
                name.as_ptr(),
                (&mut value as *mut T).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        let value: u64 = value.into();
        (rc == 0 && len == std::mem::size_of::<T>() && value > 0).then_some(value)
    }

    /// `hw.memsize`: the physical memory in bytes.
    #[cfg(target_vendor = "apple")]
    pub(super) fn total_bytes() -> Option<u64> {
        sysctl::<u64>(c"hw.memsize")
    }

    /// `hw.perflevel0.logicalcpu`: the performance cores of Apple silicon.
    #[cfg(target_vendor = "apple")]
    pub(super) fn performance_cores() -> Option<usize> {
        sysctl::<u32>(c"hw.perflevel0.logicalcpu").and_then(|n| usize::try_from(n).ok())
    }

    /// Always `None` off Apple platforms.
    #[cfg(not(target_vendor = "apple"))]
    pub(super) fn total_bytes() -> Option<u64> {
        None
    }

    /// Always `None` off Apple platforms.
    #[cfg(not(target_vendor = "apple"))]
    pub(super) fn performance_cores() -> Option<usize> {
        None
    }

    /// iOS 13+: `os_proc_available_memory()`, the bytes this process may still allocate
    /// (0 when it is not subject to a memory limit, e.g. some simulators: then unknown).
    #[cfg(target_os = "ios")]
    pub(super) fn available_bytes() -> Option<u64> {
        extern "C" {
            fn os_proc_available_memory() -> usize;
        }
        // SAFETY: declared as in <os/proc.h>; it takes no arguments and only reads counters.
        let bytes = unsafe { os_proc_available_memory() };
        (bytes > 0).then_some(bytes as u64)
    }

    /// `None` where no per-process figure exists (macOS and non-Apple platforms).
    #[cfg(not(target_os = "ios"))]
    pub(super) fn available_bytes() -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_cores_leave_out_the_slowest_cluster() {
        // 1 prime (3.19 GHz), 4 big (2.8), 3 little (2.0), as a Snapdragon 8 Gen 2.
        let tri = [
            2_016_000, 2_016_000, 2_016_000, 2_803_200, 2_803_200, 2_803_200, 2_803_200, 3_187_200,
        ];
        assert_eq!(fast_cores(&tri), Some(5));
        // 4 big + 4 little.
        assert_eq!(
            fast_cores(&[
                1_800_000, 1_800_000, 1_800_000, 1_800_000, 2_400_000, 2_400_000, 2_400_000,
                2_400_000
            ]),
            Some(4)
        );
        // One cluster (a desktop, a VM): every core.
        assert_eq!(fast_cores(&[3_000_000; 4]), Some(4));
        assert_eq!(fast_cores(&[]), None);
    }

    #[test]
    fn performance_cores_are_between_one_and_every_core() {
        let n = performance_cores();
        assert!(n >= 1 && n <= super::super::max_threads().max(1));
    }
}
