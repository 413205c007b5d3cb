//! The TypeScript API's defaults: local-llm-rn 1.0.3's, so that an app moving from it gets the
//! same answers for the same calls. They are defined here once and read by the TypeScript layer
//! (`appDefaults()`); the engine and the CLI keep llama.cpp's defaults (the engine's option
//! tables). What local-llm-rn does, traced through its JavaScript, its bridge and its native
//! engine (local-llm-js-core 0.3.0 `index.js`, `cpp/hilum/hilum_llm.cpp`):
//! - sampling: temperature 0.7, top-p 0.9, top-k 40, min-p off, repeat penalty 1.1 over the
//!   last 64 tokens, no frequency or presence penalty;
//! - a context of 512 tokens (llama.cpp's `n_ctx` default, which its engine passes on);
//! - chat completions without `max_tokens` may fill the room the prompt leaves, less a margin
//!   of 64 tokens, at most 3/4 of the context; a raw generation stops after 512 tokens;
//! - a chat that does not fit slides its window (`contextOverflow: 'sliding_window'`);
//! - threads: the performance cores (see [`performance_cores`]);
//! - speculative decoding drafts up to 16 tokens.

/// The defaults of the TypeScript API (see the module documentation for their origin).
#[derive(Clone, Debug, PartialEq, uniffi::Record)]
pub struct AppDefaults {
    /// Softmax temperature.
    pub temperature: f32,
    /// Nucleus sampling mass.
    pub top_p: f32,
    /// Most likely tokens kept.
    pub top_k: u32,
    /// Min-p (0: off).
    pub min_p: f32,
    /// Repetition penalty.
    pub repeat_penalty: f32,
    /// Tokens the penalties look back over.
    pub penalty_last_n: i32,
    /// Context size in tokens.
    pub context_size: u32,
    /// Worker threads ([`performance_cores`]).
    pub threads: u32,
    /// Most tokens drafted per speculative step.
    pub draft_n_max: u32,
    /// Most tokens of a raw generation (`generate`, `stream`).
    pub generate_max_tokens: u32,
    /// A chat answer may take at most this share of the context...
    pub chat_max_share: f64,
    /// ...and the room the prompt leaves less this many tokens (at least 1 token).
    pub chat_margin_tokens: u32,
    /// What a chat that does not fit does (`contextOverflow`).
    pub context_overflow: String,
}

/// The TypeScript API's defaults on this device.
#[uniffi::export]
pub fn app_defaults() -> AppDefaults {
    AppDefaults {
        temperature: 0.7,
        top_p: 0.9,
        top_k: 40,
        min_p: 0.0,
        repeat_penalty: 1.1,
        penalty_last_n: 64,
        context_size: 512,
        threads: performance_cores(),
        draft_n_max: 16,
        generate_max_tokens: 512,
        chat_max_share: 0.75,
        chat_margin_tokens: 64,
        context_overflow: "sliding_window".to_string(),
    }
}

/// The performance cores (local-llm-rn's default thread count): on Linux and Android the cores
/// whose top frequency (`cpufreq/cpuinfo_max_freq`) is above the slowest cluster's, so the
/// big and prime cores of a big.LITTLE phone (every core when all share one top frequency or
/// the files are missing); on Apple platforms `hw.perflevel0.logicalcpu`; elsewhere the
/// engine's default. Never more than the engine's default, never 0.
fn performance_cores() -> u32 {
    let all = u32::try_from(local_llm_engine::session::default_threads())
        .unwrap_or(u32::MAX)
        .max(1);
    let fast = if cfg!(target_vendor = "apple") {
        apple_performance_cores()
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
fn fast_cores(max_freqs: &[u64]) -> Option<u32> {
    let slowest = *max_freqs.iter().min()?;
    let fast = max_freqs.iter().filter(|&&f| f > slowest).count();
    let n = if fast == 0 { max_freqs.len() } else { fast };
    u32::try_from(n).ok()
}

/// `sysctlbyname("hw.perflevel0.logicalcpu")`: the performance cores of Apple silicon.
#[cfg(target_vendor = "apple")]
fn apple_performance_cores() -> Option<u32> {
    let mut value: u32 = 0;
    let mut len = std::mem::size_of::<u32>();
    // SAFETY: the name is NUL-terminated; `value` is a u32 and `len` its size, so the kernel
    // writes at most `len` bytes into it; no new value is set (null, 0).
    let rc = unsafe {
        libc::sysctlbyname(
            c"hw.perflevel0.logicalcpu".as_ptr(),
            (&mut value as *mut u32).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    (rc == 0 && len == std::mem::size_of::<u32>() && value > 0).then_some(value)
}

/// No performance levels off Apple platforms.
#[cfg(not(target_vendor = "apple"))]
fn apple_performance_cores() -> Option<u32> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_cores_leave_out_the_slowest_cluster() {
        // Snapdragon 8 Gen 2: 1 prime (3.19 GHz), 4 big (2.8), 3 little (2.0).
        let sd8g2 = [
            2_016_000, 2_016_000, 2_016_000, 2_803_200, 2_803_200, 2_803_200, 2_803_200, 3_187_200,
        ];
        assert_eq!(fast_cores(&sd8g2), Some(5));
        // Tensor G3: 1 + 4 + 4.
        let g3 = [
            1_704_000, 1_704_000, 1_704_000, 1_704_000, 2_367_000, 2_367_000, 2_367_000, 2_367_000,
            2_910_000,
        ];
        assert_eq!(fast_cores(&g3), Some(5));
        // One cluster (a desktop, a VM): every core.
        assert_eq!(fast_cores(&[3_000_000; 4]), Some(4));
        assert_eq!(fast_cores(&[]), None);
    }

    #[test]
    fn performance_cores_are_between_one_and_the_engine_default() {
        let n = performance_cores();
        assert!(n >= 1);
        assert!(n as usize <= local_llm_engine::session::default_threads().max(1));
    }
}
