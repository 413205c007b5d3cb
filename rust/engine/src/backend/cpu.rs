//! The CPU device: runs every matmul with the quantized dot-product kernels, multi-threaded.

use std::cell::RefCell;

use super::{
    Device, DeviceInfo, DeviceKind, DeviceWeight, MatmulShape, SharedMut, TensorBytes, Threads,
};
use crate::quant::{self, GgmlType};
use crate::{Error, Result};

thread_local! {
    static ACTIVATIONS: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// `out[t*rows + r] = w[r] · x[t]` on the CPU for a weight in any supported type.
pub(crate) fn matmul(
    shape: MatmulShape,
    w: &[u8],
    x: &[f32],
    n_tokens: usize,
    out: &mut [f32],
    threads: &Threads,
) -> Result<()> {
    let MatmulShape { ty, rows, cols } = shape;
    let w_row = ty.row_bytes(cols as u64).ok_or_else(|| {
        Error::Backend(format!(
            "{cols} columns is not a whole number of {ty} blocks"
        ))
    })? as usize;
    let act_ty = quant::vec_dot_type(ty);
    let act_row = act_ty.row_bytes(cols as u64).ok_or_else(|| {
        Error::Backend(format!(
            "{cols} columns is not a whole number of {act_ty} blocks"
        ))
    })? as usize;
    if w.len() != w_row * rows || x.len() != cols * n_tokens || out.len() != rows * n_tokens {
        return Err(Error::Backend(format!(
            "matmul size mismatch: weight {}x{} {ty} ({} bytes), input {} values, output {} values, {n_tokens} tokens",
            rows,
            cols,
            w.len(),
            x.len(),
            out.len()
        )));
    }
    ACTIVATIONS.with(|scratch| -> Result<()> {
        let mut act = scratch.borrow_mut();
        act.resize(act_row * n_tokens, 0);
        for (xt, at) in x.chunks_exact(cols).zip(act.chunks_exact_mut(act_row)) {
            quant::quantize_row(act_ty, xt, at)?;
        }
        let act = &act[..];
        let out_ptr = SharedMut(out.as_mut_ptr());
        threads.for_each_chunk(rows, 16, |range| {
            let act_of = |t: usize| &act[t * act_row..(t + 1) * act_row];
            // SAFETY (both writes): (t, r) is written by exactly one task; t*rows+r < out.len().
            let write =
                |t: usize, r: usize, v: f32| unsafe { *out_ptr.get().add(t * rows + r) = v };
            for r in range {
                let wr = &w[r * w_row..(r + 1) * w_row];
                let mut t = 0;
                while t + 4 <= n_tokens {
                    let acts = [act_of(t), act_of(t + 1), act_of(t + 2), act_of(t + 3)];
                    for (k, v) in quant::vec_dot_x4(ty, cols, wr, acts)
                        .into_iter()
                        .enumerate()
                    {
                        write(t + k, r, v);
                    }
                    t += 4;
                }
                for t in t..n_tokens {
                    write(t, r, quant::vec_dot(ty, cols, wr, act_of(t)));
                }
            }
        });
        Ok(())
    })
}

/// The host CPU device. Always registered; runs every weight type the kernels know.
pub struct CpuDevice;

impl Device for CpuDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: "CPU".to_string(),
            description: format!("{} ({})", cpu_model_name(), std::env::consts::ARCH),
            kind: DeviceKind::Cpu,
            memory_total: mem_info("MemTotal:"),
            memory_free: mem_info("MemAvailable:"),
            features: vec![
                format!("simd={}", quant::simd_level()),
                format!(
                    "threads={}",
                    std::thread::available_parallelism().map_or(1, |n| n.get())
                ),
            ],
        }
    }

    fn supports_matmul(&self, shape: MatmulShape) -> bool {
        shape.ty != GgmlType::Q8_1
            && shape.ty != GgmlType::Q8_K
            && shape.ty.row_bytes(shape.cols as u64).is_some()
    }

    fn place_weight(
        &self,
        shape: MatmulShape,
        data: &TensorBytes,
    ) -> Result<Box<dyn DeviceWeight>> {
        Ok(Box::new(CpuWeight {
            shape,
            data: data.clone(),
        }))
    }
}

/// A weight used in place (memory-mapped or owned bytes) by the CPU.
struct CpuWeight {
    shape: MatmulShape,
    data: TensorBytes,
}

impl DeviceWeight for CpuWeight {
    fn device_name(&self) -> &str {
        "CPU"
    }

    fn matmul(&self, x: &[f32], n_tokens: usize, out: &mut [f32], threads: &Threads) -> Result<()> {
        matmul(self.shape, self.data.as_slice(), x, n_tokens, out, threads)
    }
}

fn cpu_model_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "CPU".to_string())
}

fn mem_info(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
